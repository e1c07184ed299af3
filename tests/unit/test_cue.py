"""The time cue's pure core: reading a cue, its periods, the recent-only rule, the bounded move and seats.

Every expected period below was worked out by hand from the rules of seed §2.7 and reference §3.9 and is
written as the ISO strings a response carries, so a reader can check it without running anything.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import TYPE_CHECKING

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic_core import to_jsonable_python

from cpersona import InvalidRequest
from cpersona.model.time_cue import (
    Ago,
    Confidence,
    Move,
    Period,
    TimeCue,
    bounded_move,
    cue_period,
    cue_seats,
    own_period,
    recent_only,
    wider,
)
from cpersona.model.time_cue_request import parse_time_cue

if TYPE_CHECKING:
    from cpersona.model.policy import ByConfidence


def ts(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


NOW = ts("2026-09-10T12:00:00")
SPAN = (ts("2026-01-01T00:00:00"), ts("2026-09-01T00:00:00"))
MARGINS: ByConfidence[float] = {"sure": 0.0, "likely": 0.5, "vague": 1.0}


def cue(**parts: object) -> TimeCue:
    parsed = parse_time_cue({"confidence": "sure", **parts})
    assert parsed is not None
    return parsed


def period(c: TimeCue, confidence: Confidence = "sure", span: tuple[float, float] | None = SPAN) -> list[str]:
    found = cue_period(c, confidence, span, NOW, MARGINS)
    assert found is not None
    ends: list[str] = to_jsonable_python(found)
    return ends


# --------------------------------------------------------------------------------------------- parsing


@pytest.mark.parametrize("raw", [None, {}])
def test_no_cue(raw: object) -> None:
    assert parse_time_cue(raw) is None


def test_a_date_is_utc_midnight_and_a_date_in_before_includes_the_whole_day() -> None:
    c = cue(after="2026-08-01", before="2026-08-31")
    assert c == TimeCue(confidence="sure", after=ts("2026-08-01T00:00:00"), before=ts("2026-09-01T00:00:00"))
    assert c.model_dump(mode="json") == {
        "confidence": "sure",
        "after": "2026-08-01T00:00:00Z",
        "before": "2026-09-01T00:00:00Z",
    }


def test_the_same_date_on_both_ends_is_that_one_day() -> None:
    c = cue(after="2026-08-01", before="2026-08-01")
    assert (c.after, c.before) == (ts("2026-08-01T00:00:00"), ts("2026-08-02T00:00:00"))


def test_timestamps_without_an_offset_are_utc_and_offsets_are_converted() -> None:
    assert cue(after="2026-08-01T10:30:00").after == ts("2026-08-01T10:30:00")
    assert cue(after="2026-08-01 10:30").after == ts("2026-08-01T10:30:00")
    assert cue(after="2026-08-01T10:30:00Z").after == ts("2026-08-01T10:30:00")
    # Nine hours east of UTC: 09:00 in Tokyo is midnight in UTC; a timestamp in before is not widened.
    c = cue(after="2026-08-01T09:00:00+09:00", before="2026-08-02T09:00:00+09:00")
    assert (c.after, c.before) == (ts("2026-08-01T00:00:00"), ts("2026-08-02T00:00:00"))
    assert (
        cue(before="2026-08-01T00:00:00.250").model_dump(mode="json")["before"]
        == "2026-08-01T00:00:00.250000Z"
    )


def test_python_callers_may_pass_dates_and_datetimes() -> None:
    c = cue(after=datetime(2026, 8, 1, 6), before=date(2026, 8, 31))
    assert (c.after, c.before) == (ts("2026-08-01T06:00:00"), ts("2026-09-01T00:00:00"))


def test_relative_cues() -> None:
    assert parse_time_cue({"confidence": "vague", "ago": {"unit": "weeks", "value": 2}}) == TimeCue(
        confidence="vague", ago=Ago(unit="weeks", value=2)
    )
    assert cue(ago="long_ago") == TimeCue(confidence="sure", ago="long_ago")
    assert cue(ago={"unit": "months", "value": 0}).model_dump(mode="json") == {
        "confidence": "sure",
        "ago": {"unit": "months", "value": 0},
    }
    assert cue(ago="long_ago").model_dump(mode="json") == {"confidence": "sure", "ago": "long_ago"}


def test_a_null_part_counts_as_absent() -> None:
    assert cue(after=None, before=None, ago="long_ago") == TimeCue(confidence="sure", ago="long_ago")


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ('{"confidence": "sure", "ago": "long_ago"}', "time_cue"),
        ([("confidence", "sure")], "time_cue"),
        (3, "time_cue"),
        ({1: "sure"}, "time_cue"),
        ({"after": "2026-08-01"}, "time_cue.confidence"),
        ({"confidence": "certain", "after": "2026-08-01"}, "time_cue.confidence"),
        ({"confidence": 1, "after": "2026-08-01"}, "time_cue.confidence"),
        ({"confidence": "sure"}, "time_cue"),
        ({"confidence": "sure", "after": "2026-08-01", "ago": "long_ago"}, "time_cue"),
        ({"confidence": "sure", "before": "2026-08-01", "ago": {"unit": "days", "value": 1}}, "time_cue"),
        ({"confidence": "sure", "ago": "long_ago", "when": "today"}, "time_cue.when"),
        ({"confidence": "sure", "ago": "yesterday"}, "time_cue.ago"),
        ({"confidence": "sure", "ago": 3}, "time_cue.ago"),
        ({"confidence": "sure", "ago": {"value": 1}}, "time_cue.ago.unit"),
        ({"confidence": "sure", "ago": {"unit": "days"}}, "time_cue.ago.value"),
        ({"confidence": "sure", "ago": {"unit": "years", "value": 1}}, "time_cue.ago.unit"),
        ({"confidence": "sure", "ago": {"unit": "days", "value": -1}}, "time_cue.ago.value"),
        ({"confidence": "sure", "ago": {"unit": "days", "value": True}}, "time_cue.ago.value"),
        ({"confidence": "sure", "ago": {"unit": "days", "value": 1.5}}, "time_cue.ago.value"),
        ({"confidence": "sure", "ago": {"unit": "days", "value": "3"}}, "time_cue.ago.value"),
        ({"confidence": "sure", "ago": {"unit": "months", "value": 121_748}}, "time_cue.ago.value"),
        ({"confidence": "sure", "ago": {"unit": "days", "value": 1, "n": 2}}, "time_cue.ago.n"),
        ({"confidence": "sure", "after": 1_785_000_000}, "time_cue.after"),
        ({"confidence": "sure", "after": 1_785_000_000.5}, "time_cue.after"),
        ({"confidence": "sure", "before": True}, "time_cue.before"),
        ({"confidence": "sure", "before": "2026/08/01"}, "time_cue.before"),
        ({"confidence": "sure", "before": "20260801"}, "time_cue.before"),
        ({"confidence": "sure", "after": "2026-02-30"}, "time_cue.after"),
        ({"confidence": "sure", "after": "2026-08-01T25:00"}, "time_cue.after"),
        ({"confidence": "sure", "after": "last tuesday"}, "time_cue.after"),
        ({"confidence": "sure", "after": "2026-08-01T00:00:00" + "0" * 60}, "time_cue.after"),
        ({"confidence": "sure", "after": "2026-08-02", "before": "2026-08-01"}, "time_cue.before"),
        (
            {"confidence": "sure", "after": "2026-08-01T10:00", "before": "2026-08-01T10:00"},
            "time_cue.before",
        ),
        ({"confidence": "sure", "before": "9999-12-31"}, "time_cue.before"),
        ({"confidence": "sure", "after": "0001-01-01T00:00:00+01:00"}, "time_cue.after"),
        # Before 1970, as every other time a caller names.
        ({"confidence": "sure", "after": "0001-01-01"}, "time_cue.after"),
        ({"confidence": "sure", "before": "1969-12-31"}, "time_cue.before"),
        ({"confidence": "sure", "after": "1969-12-31T23:59:59Z"}, "time_cue.after"),
    ],
)
def test_a_cue_that_cannot_be_read_is_refused_naming_the_part(raw: object, field: str) -> None:
    with pytest.raises(InvalidRequest) as err:
        parse_time_cue(raw)
    assert err.value.field == field
    assert err.value.problem


def test_the_field_prefix_is_the_callers() -> None:
    with pytest.raises(InvalidRequest) as err:
        parse_time_cue({"confidence": "sure", "ago": {"unit": "eons", "value": 1}}, field="request.time_cue")
    assert err.value.field == "request.time_cue.ago.unit"


def test_the_largest_ago_is_accepted_and_stays_formattable() -> None:
    c = cue(ago={"unit": "days", "value": 3_652_425})
    assert period(c, "vague")[0] == "0001-01-01T00:00:00Z"


# --------------------------------------------------------------------------------------------- periods


def test_an_absolute_period_and_its_margins() -> None:
    c = cue(after="2026-08-01", before="2026-08-31")
    # 31 days long: likely adds 15.5 days on each side, vague 31 days.
    assert period(c, "sure") == ["2026-08-01T00:00:00Z", "2026-09-01T00:00:00Z"]
    assert period(c, "likely") == ["2026-07-16T12:00:00Z", "2026-09-16T12:00:00Z"]
    assert period(c, "vague") == ["2026-07-01T00:00:00Z", "2026-10-02T00:00:00Z"]


def test_the_margin_follows_the_step_searched_not_the_cue() -> None:
    likely = parse_time_cue({"confidence": "likely", "after": "2026-08-01", "before": "2026-08-31"})
    assert likely is not None
    assert period(likely, "sure") == ["2026-08-01T00:00:00Z", "2026-09-01T00:00:00Z"]
    assert own_period(likely, SPAN, NOW) == Period(
        start=ts("2026-08-01T00:00:00"), end=ts("2026-09-01T00:00:00")
    )


def test_open_ends_are_closed_by_the_oldest_record_and_by_now() -> None:
    assert period(cue(after="2026-08-01")) == ["2026-08-01T00:00:00Z", "2026-09-10T12:00:00Z"]
    assert period(cue(before="2026-03-31")) == ["2026-01-01T00:00:00Z", "2026-04-01T00:00:00Z"]
    # An empty scope has no oldest record: a cue without after has no start, so no period.
    assert cue_period(cue(before="2026-03-31"), "sure", None, NOW, MARGINS) is None
    assert period(cue(after="2026-08-01"), span=None) == ["2026-08-01T00:00:00Z", "2026-09-10T12:00:00Z"]


def test_a_degenerate_period_is_one_second_and_the_margin_widens_that_second() -> None:
    # after lies in the future, so its open end (now) comes first.
    after = ts("2026-10-01T00:00:00")
    c = cue(after="2026-10-01")
    assert own_period(c, SPAN, NOW) == Period(start=after, end=after + 1)
    assert cue_period(c, "likely", SPAN, NOW, MARGINS) == Period(start=after - 0.5, end=after + 1.5)
    assert cue_period(c, "vague", SPAN, NOW, MARGINS) == Period(start=after - 1, end=after + 2)


@pytest.mark.parametrize(
    ("unit", "value", "expected"),
    [
        # centre = now - value x width; [centre - width/2, min(centre + width/2, now)]
        ("days", 0, ["2026-09-10T00:00:00Z", "2026-09-10T12:00:00Z"]),
        ("days", 3, ["2026-09-07T00:00:00Z", "2026-09-08T00:00:00Z"]),
        ("weeks", 1, ["2026-08-31T00:00:00Z", "2026-09-07T00:00:00Z"]),
        ("months", 0, ["2026-08-26T12:00:00Z", "2026-09-10T12:00:00Z"]),
        ("months", 2, ["2026-06-27T12:00:00Z", "2026-07-27T12:00:00Z"]),
    ],
)
def test_ago_periods(unit: str, value: int, expected: list[str]) -> None:
    assert period(cue(ago={"unit": unit, "value": value})) == expected


def test_ago_does_not_depend_on_the_scope() -> None:
    c = cue(ago={"unit": "weeks", "value": 1})
    assert period(c, span=None) == period(c)
    # 7 days long: likely adds 3.5 days on each side (the end may pass now; only the own period stops there).
    assert period(c, "likely") == ["2026-08-27T12:00:00Z", "2026-09-10T12:00:00Z"]
    assert period(cue(ago={"unit": "days", "value": 0}), "vague") == [
        "2026-09-09T12:00:00Z",
        "2026-09-11T00:00:00Z",
    ]


def test_long_ago_is_the_oldest_third_of_the_scope() -> None:
    c = cue(ago="long_ago")
    # The span is 243 days; its first third is 81 days.
    assert period(c) == ["2026-01-01T00:00:00Z", "2026-03-23T00:00:00Z"]
    assert period(c, "vague") == ["2025-10-12T00:00:00Z", "2026-06-12T00:00:00Z"]
    assert cue_period(c, "sure", None, NOW, MARGINS) is None
    one = ts("2026-05-05T05:05:05")
    assert own_period(c, (one, one), NOW) == Period(start=one, end=one + 1)


def test_periods_are_clipped_to_what_a_datetime_can_show() -> None:
    # The widest cue a caller may give, widened by vague's margin past both ends.
    c = cue(after="1970-01-01", before="9999-12-30")
    assert period(c, "vague") == ["0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z"]
    late = cue_period(cue(ago="long_ago"), "sure", (2.6e11, 2.6e11), NOW, MARGINS)
    assert late is not None
    assert to_jsonable_python(late) == ["9999-12-31T23:59:58Z", "9999-12-31T23:59:59Z"]


def test_a_period_holds_its_start_but_not_its_end() -> None:
    p = Period(start=100.0, end=200.0)
    assert (p.contains(99.999), p.contains(100.0), p.contains(199.999), p.contains(200.0)) == (
        False,
        True,
        True,
        False,
    )


def test_the_one_revision_widens_one_step_and_stops_after_vague() -> None:
    assert (wider("sure"), wider("likely"), wider("vague")) == ("likely", "vague", None)


# ----------------------------------------------------------------------------------------- recent-only


@pytest.mark.parametrize(
    ("parts", "ignored"),
    [
        ({"after": "2026-09-09T12:00:00"}, True),  # starts exactly 24 h before now
        ({"after": "2026-09-09T11:59:59"}, False),  # one second earlier
        ({"after": "2026-09-10"}, True),  # today's date
        ({"after": "2026-12-01"}, True),  # the future
        ({"before": "2026-09-10"}, False),  # open start: the oldest record, long before
        ({"ago": {"unit": "days", "value": 0}}, True),  # [now - 12 h, now)
        ({"ago": {"unit": "days", "value": 1}}, False),  # starts 36 h before now
        ({"ago": "long_ago"}, False),
    ],
)
def test_recent_only_at_the_24_hour_boundary(parts: dict[str, object], ignored: bool) -> None:
    # The own period is judged as `sure`: a vague cue for today is still a cue for today.
    c = parse_time_cue({"confidence": "vague", **parts})
    assert c is not None
    assert recent_only(c, SPAN, NOW, 24.0) is ignored


def test_recent_only_is_off_at_zero_hours_and_without_a_period() -> None:
    assert recent_only(cue(after="2026-09-10"), SPAN, NOW, 0.0) is False
    assert recent_only(cue(before="2026-09-10"), None, NOW, 24.0) is False
    # A scope whose whole span lies within the day makes long_ago recent too.
    assert recent_only(cue(ago="long_ago"), (NOW - 3600, NOW), NOW, 24.0) is True


# ---------------------------------------------------------------------------------------- bounded move


REFS = ("a", "b", "c", "d", "e", "f")


def test_rank_zero_rises_exactly_l_and_every_changed_position_is_reported() -> None:
    order, moves = bounded_move(REFS, {"f": 0}, 3)
    assert order == ("a", "b", "f", "c", "d", "e")
    assert moves == (
        Move(ref="f", from_=5, to=2),
        Move(ref="c", from_=2, to=3),
        Move(ref="d", from_=3, to=4),
        Move(ref="e", from_=4, to=5),
    )
    assert moves[0].model_dump(mode="json") == {"row": "f", "from": 5, "to": 2}


def test_a_lower_cue_rank_rises_less() -> None:
    # rank 60, L = 2: the bonus is 122/121, a little over one place.
    assert bounded_move(REFS, {"f": 60}, 2)[0] == ("a", "b", "c", "d", "f", "e")
    # rank 121, L = 2: the bonus is 122/182, under one place, and a row ahead keeps its place.
    assert bounded_move(REFS, {"f": 121}, 2) == (REFS, ())


def test_a_tie_goes_to_the_cue_found_row() -> None:
    # rank 61, L = 2: the bonus is exactly one place, so f ties with e and takes its place.
    assert bounded_move(REFS, {"f": 61}, 2)[0] == ("a", "b", "c", "d", "f", "e")


def test_a_row_near_the_top_stops_at_the_top() -> None:
    order, moves = bounded_move(REFS, {"b": 0}, 3)
    assert order == ("b", "a", "c", "d", "e", "f")
    assert moves == (Move(ref="b", from_=1, to=0), Move(ref="a", from_=0, to=1))


def test_a_tie_between_two_cue_rows_keeps_their_order() -> None:
    # c (rank 122, bonus 1) and e (rank 0, bonus 3) both have key 1; c stood first and stays first.
    order, _ = bounded_move(REFS, {"c": 122, "e": 0}, 3)
    assert order == ("a", "c", "e", "b", "d", "f")


def test_many_lifted_rows_still_rise_at_most_l() -> None:
    # Keys: d 3 - 1 = 2 (ties c and wins), e 4 - 61/62, f 5 - 61/63; e and f cannot pass each other.
    order, _ = bounded_move(REFS, {"d": 0, "e": 1, "f": 2}, 1)
    assert order == ("a", "b", "d", "c", "e", "f")


def test_lift_zero_and_no_cue_rank_change_nothing() -> None:
    assert bounded_move(REFS, {"f": 0}, 0) == (REFS, ())
    assert bounded_move(REFS, {}, 3) == (REFS, ())
    assert bounded_move((), {"x": 0}, 3) == ((), ())
    # Rows the cue ranked that the answer does not hold do not matter here.
    assert bounded_move(REFS, {"zz": 0}, 3) == (REFS, ())


def test_bounded_move_refuses_what_it_cannot_order() -> None:
    with pytest.raises(ValueError, match="lift"):
        bounded_move(REFS, {"a": 0}, -1)
    with pytest.raises(ValueError, match="repeat"):
        bounded_move(("a", "a"), {}, 1)
    with pytest.raises(ValueError, match="rank"):
        bounded_move(REFS, {"a": -1}, 1)


@st.composite
def move_case(draw: st.DrawFn) -> tuple[tuple[str, ...], dict[str, int], int]:
    n = draw(st.integers(min_value=0, max_value=25))
    refs = tuple(f"r{i}" for i in range(n))
    ranked = draw(st.lists(st.sampled_from(refs), unique=True) if refs else st.just([]))
    ranks = draw(st.lists(st.integers(0, 200), min_size=len(ranked), max_size=len(ranked)))
    lift = draw(st.integers(min_value=0, max_value=6))
    return refs, dict(zip(ranked, ranks, strict=True)), lift


@given(move_case())
def test_the_move_is_a_bounded_permutation(case: tuple[tuple[str, ...], dict[str, int], int]) -> None:
    refs, ranks, lift = case
    order, moves = bounded_move(refs, ranks, lift)
    assert sorted(order) == sorted(refs)
    before = {ref: i for i, ref in enumerate(refs)}
    after = {ref: i for i, ref in enumerate(order)}
    for ref in refs:
        assert before[ref] - after[ref] <= lift
        if ref not in ranks:
            assert after[ref] >= before[ref]
    assert [r for r in order if r not in ranks] == [r for r in refs if r not in ranks]
    assert moves == tuple(
        Move(ref=ref, from_=before[ref], to=after[ref]) for ref in order if before[ref] != after[ref]
    )


@given(
    n=st.integers(min_value=1, max_value=30),
    lift=st.integers(min_value=0, max_value=6),
    data=st.data(),
)
def test_a_lone_rank_zero_row_rises_exactly_l(n: int, lift: int, data: st.DataObject) -> None:
    refs = tuple(f"r{i}" for i in range(n + lift))
    p = data.draw(st.integers(min_value=lift, max_value=len(refs) - 1))
    order, _ = bounded_move(refs, {refs[p]: 0}, lift)
    assert order.index(refs[p]) == p - lift


@given(st.lists(st.text(min_size=1, max_size=3), unique=True, max_size=20))
def test_without_cue_ranks_the_order_is_unchanged(refs: list[str]) -> None:
    assert bounded_move(refs, {}, 3) == (tuple(refs), ())


# ----------------------------------------------------------------------------------------------- seats


def test_seat_eligibility() -> None:
    seated = cue_seats(
        ["ret", "refused", "cut", "fresh", "fresh2"],
        returned={"ret"},
        reached={"ret", "refused", "cut"},
        cut_by_count={"cut"},
        seats=3,
        allow_cut=True,
    )
    assert seated == ("cut", "fresh", "fresh2")
    # Before cued-v0.3 a row any ordinary arm reached never takes a seat, even one the count cut.
    assert cue_seats(
        ["ret", "refused", "cut", "fresh", "fresh2"],
        returned={"ret"},
        reached={"ret", "refused", "cut"},
        cut_by_count={"cut"},
        seats=1,
        allow_cut=False,
    ) == ("fresh",)


def free(cue_list: list[str], seats: int) -> tuple[str, ...]:
    return cue_seats(cue_list, returned=(), reached=(), cut_by_count=(), seats=seats, allow_cut=False)


def test_seats_follow_cue_order_and_the_count() -> None:
    assert free(["z", "y", "x"], 2) == ("z", "y")
    assert free(["z", "z", "y"], 2) == ("z", "y")
    assert free(["z"], 0) == ()
    assert free([], 3) == ()
    with pytest.raises(ValueError, match="seats"):
        free(["z"], -1)


def test_a_returned_row_is_never_seated_even_if_also_listed_as_cut() -> None:
    seated = cue_seats(["ret"], returned={"ret"}, reached=(), cut_by_count={"ret"}, seats=3, allow_cut=True)
    assert seated == ()


REF = st.sampled_from([f"m{i}" for i in range(12)])


@given(
    cue_list=st.lists(REF, max_size=12),
    returned=st.sets(REF),
    reached=st.sets(REF),
    cut=st.sets(REF),
    seats=st.integers(min_value=0, max_value=4),
    allow_cut=st.booleans(),
)
def test_seats_take_the_first_eligible_rows(
    cue_list: list[str],
    returned: set[str],
    reached: set[str],
    cut: set[str],
    seats: int,
    allow_cut: bool,
) -> None:
    seated = cue_seats(
        cue_list, returned=returned, reached=reached, cut_by_count=cut, seats=seats, allow_cut=allow_cut
    )

    def eligible(ref: str) -> bool:
        return ref not in returned and (ref not in reached or (allow_cut and ref in cut))

    expected = list(dict.fromkeys(ref for ref in cue_list if eligible(ref)))[:seats]
    assert seated == tuple(expected)
    assert not set(seated) & returned
