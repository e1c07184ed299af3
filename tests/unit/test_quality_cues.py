"""The time-cue benchmark's own parts: the cue parser, the scores, the TMD loader and the question sets.

The parser (``benchmarks/quality/cues.py``) is tested on hand-written questions: no data file is
needed, and every expected period is worked out by hand in the test. "Now" is a Sunday, 22 October
2023, 11:17:51 UTC, unless a test says otherwise. The scores of ``cue_bench`` are checked on answers
written by hand, the TMD loader on a tiny folder written by the test; the last tests read the real data
and are skipped when it is not beside the repository. The benchmark run itself is tested in
``test_quality_harness.py``.
"""

from __future__ import annotations

import datetime
import json
import math
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.quality import cue_bench  # noqa: E402
from benchmarks.quality.cues import SAID_AFTER_DAYS, Cue, parse_cue, read_cue  # noqa: E402
from benchmarks.quality.locomo import DEFAULT_DATA  # noqa: E402
from benchmarks.quality.tmd import DEFAULT_TMD, load_tmd, parse_turn_time  # noqa: E402

UTC = datetime.UTC
NOW = datetime.datetime(2023, 10, 22, 11, 17, 51, tzinfo=UTC)  # a Sunday


def _cue(question: str, now: datetime.datetime = NOW) -> Cue:
    cue = read_cue(question, now)
    assert cue is not None, question
    return cue


def _days(cue: Cue) -> tuple[str | None, str]:
    """The period as (first day, last day), both included, for whole-day cues."""
    mapping = cue.time_cue()
    return mapping.get("after"), mapping["before"]


# ------------------------------------------------------------------------------------------- sure


@pytest.mark.parametrize(
    ("question", "first", "last"),
    [
        ("What did we chat about on May 8th?", "2023-05-08", "2023-05-08"),
        ("Tell me what we discussed May eighth.", "2023-05-08", "2023-05-08"),
        ("What painting did Melanie show on October 13, 2023?", "2023-10-13", "2023-10-13"),
        ("Who did Maria have dinner with on 3 June, 2023?", "2023-06-03", "2023-06-03"),
        ("What book did Tim finish on 8th December, 2022?", "2022-12-08", "2022-12-08"),
        ("Where was the picture shared on December 1,2022 taken?", "2022-12-01", "2022-12-01"),
        ("What did John's teammates give him on Aug 15th?", "2023-08-15", "2023-08-15"),
        ("What did Evan suggest on 2023/09/11?", "2023-09-11", "2023-09-11"),
        ("On Thursday July 27th, what did Andrew find rewarding?", "2023-07-27", "2023-07-27"),
        ("How long has John played drums as of 27 March, 2022?", "2022-03-27", "2022-03-27"),
        # An explicit date outranks a relative phrase in the same question.
        ("What did Joanna finish last Friday on 23 January, 2022?", "2022-01-23", "2022-01-23"),
        ("What did Jolene achieve recently on 4 February, 2023?", "2023-02-04", "2023-02-04"),
    ],
)
def test_explicit_dates_are_sure_and_name_their_day(question: str, first: str, last: str) -> None:
    cue = _cue(question)
    assert cue.confidence == "sure"
    assert cue.kind == "date"
    assert cue.named
    assert _days(cue) == (first, last)


@pytest.mark.parametrize(
    ("question", "day"),
    [
        # Slashes and dashes month first, as the sets write their dates ("July 6th, 2023").
        ("What did we talk about on 10/01/2023?", "2023-10-01"),
        ("What did we talk about on 10-01-2023?", "2023-10-01"),
        ("What did we talk about on 3/7/2023?", "2023-03-07"),
        # Dots day first, as the countries that write them do.
        ("What did we talk about on 10.01.2023?", "2023-01-10"),
        ("What did we talk about on 3.7.2023.", "2023-07-03"),
        # A part above 12 can only be the day, in either place and with any separator.
        ("What did we talk about on 13/01/2023?", "2023-01-13"),
        ("What did we talk about on 01.13.2023?", "2023-01-13"),
        ("What did we talk about on 31-12-2022?", "2022-12-31"),
        # Year first is year, month, day with every separator.
        ("What did Evan suggest on 2023.09.11?", "2023-09-11"),
        ("What did Evan suggest on 2023-9-1?", "2023-09-01"),
    ],
)
def test_numeric_dates_name_their_day(question: str, day: str) -> None:
    cue = _cue(question)
    assert (cue.kind, cue.confidence) == ("date", "sure")
    assert _days(cue) == (day, day)
    assert cue.phrase[0].isdigit()


def test_numeric_dates_make_spans_and_anchors_like_written_ones() -> None:
    span = _cue("What did we discuss between 05/08/2023 and 06/09/2023?")
    assert (span.kind, _days(span)) == ("date_span", ("2023-05-08", "2023-06-09"))
    dotted = _cue("What did we discuss from 08.05.2023 to 09.06.2023?")
    assert (dotted.kind, _days(dotted)) == ("date_span", ("2023-05-08", "2023-06-09"))
    anchored = _cue("What did John do the week before 08/03/2023?")
    assert (anchored.kind, _days(anchored)) == ("anchored", ("2023-07-27", "2023-08-03"))


@pytest.mark.parametrize(
    "question",
    [
        # No day both parts could be, a day the month lacks, no four-digit year, a version, a fraction.
        "What did we talk about on 13/13/2023?",
        "What did we talk about on 02/30/2023?",
        "What did we talk about on 10/01/23?",
        "Which release, 1.2.2023.4 or 1.3, fixed it?",
        "Did he eat 3/4 of the pizza?",
    ],
)
def test_numbers_that_make_no_date_are_no_date(question: str) -> None:
    cue = read_cue(question, NOW)
    assert cue is None or cue.kind not in ("date", "date_span", "anchored"), cue


def test_a_date_without_a_year_is_the_latest_one_not_after_now() -> None:
    # 23 October has not come yet on 22 October 2023, so it is last year's.
    assert _days(_cue("What did we discuss on October 23rd?")) == ("2022-10-23", "2022-10-23")
    assert _days(_cue("What did we discuss on October 22nd?")) == ("2023-10-22", "2023-10-22")
    # 29 February: the latest one on or before 1 March 2025 is in 2024.
    leap = datetime.datetime(2025, 3, 1, tzinfo=UTC)
    assert _days(_cue("What did we talk about on February 29th?", leap)) == ("2024-02-29", "2024-02-29")
    # A day the month does not have is no date; the month it names is still read.
    impossible = _cue("What did we talk about on February 30th?")
    assert (impossible.kind, _days(impossible)) == ("month", ("2023-02-01", "2023-02-28"))


@pytest.mark.parametrize(
    ("question", "first", "last"),
    [
        ("What did we chat about between May 8th and June 9th?", "2023-05-08", "2023-06-09"),
        ("What was talked about from May 25th to June 27th?", "2023-05-25", "2023-06-27"),
        ("Tell me what we discussed over June ninth through July third.", "2023-06-09", "2023-07-03"),
        # One year written at the end serves both ends.
        ("Where was John between August 11 and August 15 2022?", "2022-08-11", "2022-08-15"),
        # Across New Year without a year: the span ends at the latest end date and starts before it.
        ("What did we discuss between December 20th and January 5th?", "2022-12-20", "2023-01-05"),
    ],
)
def test_date_spans_are_sure(question: str, first: str, last: str) -> None:
    cue = _cue(question)
    assert (cue.kind, cue.confidence) == ("date_span", "sure")
    assert _days(cue) == (first, last)


@pytest.mark.parametrize(
    ("question", "first", "last"),
    [
        ("What did John do the week before August 3, 2023?", "2023-07-27", "2023-08-03"),
        (
            "What is the name of the puppy she got two weeks before August 11, 2023?",
            "2023-07-28",
            "2023-08-11",
        ),
        ("What was shown on the Sunday before October 25, 2022?", "2022-10-18", "2022-10-25"),
        ("What did Maria do last weekend before April 10, 2023?", "2023-04-03", "2023-04-10"),
        ("What will they do on the Saturday after October 28, 2023?", "2023-10-28", "2023-11-04"),
        ("How many tournaments has Nate won by July 10, 2022?", None, "2022-07-10"),
    ],
)
def test_dates_with_a_before_or_after_are_likely_periods_beside_the_date(
    question: str, first: str | None, last: str
) -> None:
    cue = _cue(question)
    assert (cue.kind, cue.confidence) == ("anchored", "likely")
    assert cue.named
    assert _days(cue) == (first, last)


# ------------------------------------------------------------------------------------------ likely


@pytest.mark.parametrize(
    ("question", "first", "last", "kind"),
    [
        ("What did we discuss in October?", "2023-10-01", "2023-10-31", "month"),
        # November has not begun by 22 October 2023: the latest November is last year's.
        ("What did we discuss in November?", "2022-11-01", "2022-11-30", "month"),
        ("What did Maria start doing in December 2022?", "2022-12-01", "2022-12-31", "month"),
        ("Which classes did Evan join in mid-August 2023?", "2023-08-01", "2023-08-31", "month"),
        ("Where was Calvin in the last week of October 2022?", "2022-10-01", "2022-10-31", "month"),
        (
            "Which country was Tim visiting in the second week of November?",
            "2022-11-01",
            "2022-11-30",
            "month",
        ),
        ("Did they meet between August and November 2022?", "2022-08-01", "2022-11-30", "month_span"),
        ("In what country was Jolene during summer 2022?", "2022-06-01", "2022-08-31", "season"),
        ("What state did Joanna visit in the summer of 2021?", "2021-06-01", "2021-08-31", "season"),
        ("Where were they in winter 2021?", "2021-12-01", "2022-02-28", "season"),
    ],
)
def test_months_and_seasons_are_likely(question: str, first: str, last: str, kind: str) -> None:
    cue = _cue(question)
    assert (cue.kind, cue.confidence) == (kind, "likely")
    assert cue.named
    assert _days(cue) == (first, last)


def test_may_and_june_are_months_only_where_the_words_make_them_months() -> None:
    assert read_cue("May I ask what June said about the dog?", NOW) is None
    assert _days(_cue("What did June say in May?")) == ("2023-05-01", "2023-05-31")


@pytest.mark.parametrize(
    ("question", "first", "last", "kind"),
    [
        ("What did we talk about today?", "2023-10-22", "2023-10-22", "rel_day"),
        ("What did we discuss earlier this morning?", "2023-10-22", "2023-10-22", "rel_day"),
        (
            "What sorts of things did we discuss earlier in the morning?",
            "2023-10-22",
            "2023-10-22",
            "rel_day",
        ),
        ("What did Joanna write yesterday?", "2023-10-21", "2023-10-21", "rel_day"),
        # Now is a Sunday: "last Sunday" is a week back, "last Friday" two days back.
        ("What did we discuss last Sunday?", "2023-10-15", "2023-10-15", "rel_day"),
        ("Last Friday, what did we chat about?", "2023-10-20", "2023-10-20", "rel_day"),
        ("What did we chat about over the last 3 days?", "2023-10-19", "2023-10-22", "rel_day"),
        ("Tell me what we discussed the last three days.", "2023-10-19", "2023-10-22", "rel_day"),
        ("What was talked about over this previous week?", "2023-10-15", "2023-10-22", "rel_week"),
        ("What did Joanna find last week?", "2023-10-15", "2023-10-22", "rel_week"),
        ("What have we covered this week?", "2023-10-16", "2023-10-22", "rel_week"),
        ("What event did John volunteer at last weekend?", "2023-10-14", "2023-10-15", "rel_week"),
        ("What did we talk about this month?", "2023-10-01", "2023-10-22", "rel_month"),
        ("What did we talk about last month?", "2023-09-01", "2023-09-30", "rel_month"),
        ("What did John and Max enjoy last summer?", "2023-06-01", "2023-08-31", "rel_season"),
        ("When did Caroline go to a parade during the summer?", "2023-06-01", "2023-08-31", "rel_season"),
    ],
)
def test_relative_calendar_words_are_likely(question: str, first: str, last: str, kind: str) -> None:
    cue = _cue(question)
    assert (cue.kind, cue.confidence) == (kind, "likely")
    assert not cue.named
    assert _days(cue) == (first, last)


def test_last_season_while_in_it_is_the_one_before() -> None:
    july = datetime.datetime(2023, 7, 10, tzinfo=UTC)
    assert _days(_cue("What did we do last summer?", july)) == ("2022-06-01", "2022-08-31")
    assert _days(_cue("What did we do during the summer?", july)) == ("2023-06-01", "2023-08-31")


@pytest.mark.parametrize(
    ("question", "width_days", "back_days", "kind"),
    [
        ("What did we discuss 108 days ago?", 1, 108, "rel_day"),
        ("Tell me what we talked about 2 weeks ago.", 7, 14, "rel_week"),
        ("What did we discuss 3 months ago?", 30, 90, "rel_month"),
        ("What did we talk about a month ago?", 30, 30, "rel_month"),
    ],
)
def test_n_units_ago_is_the_engines_own_ago_period(
    question: str, width_days: int, back_days: int, kind: str
) -> None:
    cue = _cue(question)
    assert (cue.kind, cue.confidence) == (kind, "likely")
    # One unit long, centred that many units back: the period the engine makes of {"ago": ...}.
    centre = NOW - datetime.timedelta(days=back_days)
    half = datetime.timedelta(days=width_days) / 2
    assert (cue.start, cue.end) == (centre - half, centre + half)
    mapping = cue.time_cue()
    assert mapping == {
        "after": (centre - half).isoformat(),
        "before": (centre + half).isoformat(),
        "confidence": "likely",
    }
    assert mapping["after"].endswith("+00:00")


def test_zero_units_ago_ends_at_now() -> None:
    cue = _cue("What did we discuss 0 days ago?")
    assert (cue.start, cue.end) == (NOW - datetime.timedelta(hours=12), NOW)
    assert cue.recent_only(NOW)


# ------------------------------------------------------------------------------------------- vague


@pytest.mark.parametrize(
    ("question", "first", "last", "kind", "named"),
    [
        ("How many times has Melanie gone to the beach in 2023?", "2023-01-01", "2023-12-31", "year", True),
        ("What charity event did John organize recently in 2024?", "2024-01-01", "2024-12-31", "year", True),
        ("Where did John explore on a road trip last year?", "2022-01-01", "2022-12-31", "rel_year", False),
        ("Where did Caroline move from 4 years ago?", "2019-01-01", "2019-12-31", "rel_year", False),
        ("What did we plan earlier this year?", "2023-01-01", "2023-10-22", "rel_year", False),
        ("Who visited him in the last year?", "2022-10-22", "2023-10-22", "rel_year", False),
        ("What did Melanie paint recently?", "2023-09-22", "2023-10-22", "recent", False),
        ("What has Jolene been focusing on lately?", "2023-09-22", "2023-10-22", "recent", False),
    ],
)
def test_years_and_recently_are_vague(question: str, first: str, last: str, kind: str, named: bool) -> None:
    cue = _cue(question)
    assert (cue.kind, cue.confidence, cue.named) == (kind, "vague", named)
    assert _days(cue) == (first, last)


# ------------------------------------------------------------------------------------------- none


@pytest.mark.parametrize(
    "question",
    [
        "What did we discuss in our sixth session?",
        "Tell me what we talked about in our twenty-first discussion.",
        "What did we discuss 15 sessions ago?",
        "What did we talk about one session ago?",
        "What did we discuss over sessions 6 through 8?",
        "What did we chat about from the first through third sessions?",
        "What did we discuss the session before last?",
        "What did we talk about last discussion?",
        "In the first session, what sport did Matt mention he had recently joined?",
        "What was the animal Maria talked about in the 30th session?",
        "In session 9, what did Audrey say she had just purchased?",
        "What new hobby does Tiffany mention considering in response number 26?",
        "Tell me what we discussed last time.",
        "What is Caroline's favourite book?",
        "How long ago was Caroline's 18th birthday?",
        "What did Evan start painting a few years ago?",
        "What did James enjoy doing on cold winter days?",
        "What are Caroline's plans for the summer?",
        "Which pet did Jolene adopt more recently - Susie or Seraphim?",
        "When did James try the Cyberpunk 2077 game?",
        "What does Kylie suggest Tiffany could try on Janurary 17th?",
        "What did we do on Sunday?",
    ],
)
def test_questions_that_name_no_time_get_no_cue(question: str) -> None:
    assert read_cue(question, NOW) is None
    assert parse_cue(question, NOW) is None


# ------------------------------------------------------------------------------------ the mapping


def test_parse_cue_returns_the_request_mapping_and_widens_forward_for_said_times() -> None:
    question = "What did Maria donate to a shelter in December 2022?"
    assert parse_cue(question, NOW) == {"after": "2022-12-01", "before": "2022-12-31", "confidence": "likely"}
    # Session-stamped data: the end moves SAID_AFTER_DAYS later; the start and the confidence stay.
    widened = parse_cue(question, NOW, said_after_days=SAID_AFTER_DAYS)
    last = datetime.date(2022, 12, 31) + datetime.timedelta(days=SAID_AFTER_DAYS)
    assert widened == {"after": "2022-12-01", "before": last.isoformat(), "confidence": "likely"}
    assert parse_cue("How many tournaments has Nate won by July 10, 2022?", NOW, said_after_days=30) == {
        "before": "2022-08-09",
        "confidence": "likely",
    }


def test_bounds_and_holds_are_half_open() -> None:
    cue = _cue("What did we chat about on May 8th?")
    start, end = cue.bounds()
    assert start == datetime.datetime(2023, 5, 8, tzinfo=UTC).timestamp()
    assert end == datetime.datetime(2023, 5, 9, tzinfo=UTC).timestamp()
    assert cue.holds(start)
    assert cue.holds(end - 1)
    assert not cue.holds(end)
    assert not cue.holds(start - 1)
    open_start = _cue("How many tournaments has Nate won by July 10, 2022?")
    assert open_start.bounds()[0] == float("-inf")
    assert open_start.holds(0.0)


def test_recent_only_is_the_engines_rule_at_the_datas_now() -> None:
    # Today's own period starts at midnight, less than 24 hours before now: the engine would not use it.
    assert _cue("What did we talk about today?").recent_only(NOW)
    assert not _cue("What did Joanna write yesterday?").recent_only(NOW)
    # A period in the future starts after now: also only "recent".
    assert _cue("What did Evan lose on December 26, 2024?").recent_only(NOW)
    assert not _cue("What did we discuss in October?").recent_only(NOW)


def test_now_must_be_aware() -> None:
    with pytest.raises(ValueError, match="aware"):
        read_cue("What did we discuss today?", datetime.datetime(2023, 10, 22))


# ------------------------------------------------------------------------------------ properties

_MONTH_NAMES = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip


@given(
    day=st.dates(min_value=datetime.date(1990, 1, 1), max_value=datetime.date(2035, 12, 31)),
    later=st.integers(min_value=0, max_value=4_000),
    seconds=st.integers(min_value=0, max_value=86_399),
    style=st.sampled_from(
        [
            "{m} {d}, {y}",
            "{d} {m}, {y}",
            "{m} {d}th {y}",
            "{y}-{mm:02}-{dd:02}",
            "{y}.{mm}.{dd}",
            "{mm:02}/{dd:02}/{y}",
            "{mm}-{dd}-{y}",
            "{dd:02}.{mm:02}.{y}",
        ]
    ),
)
def test_a_written_date_is_read_back_as_that_day(
    day: datetime.date, later: int, seconds: int, style: str
) -> None:
    now = datetime.datetime.combine(day, datetime.time(), UTC) + datetime.timedelta(
        days=later, seconds=seconds
    )
    text = style.format(m=_MONTH_NAMES[day.month - 1], d=day.day, y=day.year, mm=day.month, dd=day.day)
    cue = _cue(f"What did we talk about on {text}?", now)
    assert (cue.kind, cue.confidence) == ("date", "sure")
    assert _days(cue) == (day.isoformat(), day.isoformat())
    assert cue.holds(datetime.datetime.combine(day, datetime.time(12), UTC).timestamp())
    # Same words, same now, same answer.
    assert read_cue(f"What did we talk about on {text}?", now) == cue


@given(
    now=st.datetimes(
        min_value=datetime.datetime(2000, 3, 1),
        max_value=datetime.datetime(2030, 12, 31),
        timezones=st.just(UTC),
    ),
    month=st.integers(min_value=1, max_value=12),
    day=st.integers(min_value=1, max_value=28),
)
def test_a_date_without_a_year_lies_within_the_year_before_now(
    now: datetime.datetime, month: int, day: int
) -> None:
    cue = _cue(f"What did we chat about on {_MONTH_NAMES[month - 1]} {day}?", now)
    assert cue.start is not None
    first = cue.start.date()
    assert (first.month, first.day) == (month, day)
    assert first <= now.date()
    assert (now.date() - first).days < 366


@given(
    now=st.datetimes(
        min_value=datetime.datetime(2000, 1, 1),
        max_value=datetime.datetime(2030, 12, 31),
        timezones=st.just(UTC),
    ),
    question=st.sampled_from(
        [
            "What did we talk about in March?",
            "What did we talk about in November?",
            "What did we do last month?",
            "What did we discuss last Tuesday?",
            "What did we discuss 40 days ago?",
            "What did we do last summer?",
            "What did we discuss over the last 5 days?",
            "What happened recently?",
            "What happened 2 weeks ago?",
        ]
    ),
)
def test_past_phrases_start_by_now_and_always_map_to_a_valid_request(
    now: datetime.datetime, question: str
) -> None:
    cue = _cue(question, now)
    start, end = cue.bounds()
    assert start < end
    end_of_today = datetime.datetime.combine(now.date(), datetime.time(), UTC) + datetime.timedelta(days=1)
    assert start <= now.timestamp()
    if cue.kind != "month":
        assert end <= end_of_today.timestamp()
    else:
        # A named month is the whole calendar month, which may be the one now is in.
        assert cue.holds(now.timestamp()) or end <= now.timestamp()
    mapping = cue.time_cue()
    assert set(mapping) == {"after", "before", "confidence"}
    assert mapping["after"] <= mapping["before"]


# ------------------------------------------------------------------------------------- scoring

# 1 / log2(i + 1) for places 1..3.
P1, P2, P3 = 1.0, 1 / math.log2(3), 0.5


def _answer(
    rows: list[list[str]], signals: list[str], time_cue: dict[str, object] | None = None
) -> cue_bench.Answer:
    return cue_bench.Answer(tuple(tuple(r) for r in rows), tuple(signals), 1.0, time_cue, ())


def test_scores_count_every_returned_row_for_ndcg_and_the_first_ten_for_recall_at_10() -> None:
    rows = [[f"x{i}"] for i in range(10)] + [["g1"], ["g2"]]
    answer = _answer(rows, ["rrf"] * 10 + ["block", "cue"])
    values = cue_bench.score(answer, ["g1", "g2", "g3"])
    # Gold at places 11 and 12 of 12 rows; the ideal is min(|G|, |R|) = 3 gold rows at the top.
    ideal = P1 + P2 + P3
    assert values["ndcg_rows"] == pytest.approx((1 / math.log2(12) + 1 / math.log2(13)) / ideal)
    assert values["ndcg@10"] == 0.0
    assert values["recall@10"] == 0.0
    assert values["capped@10"] == 0.0
    assert values["recall_rows"] == pytest.approx(2 / 3)
    assert values["any_rows"] == 1.0
    assert values["mrr_rows"] == pytest.approx(1 / 11)
    assert values["rows"] == 12.0
    assert answer.cue_seats == 1
    assert answer.returned == frozenset((f"x{i}",) for i in range(10))


def test_a_row_standing_for_folded_units_counts_each_once() -> None:
    answer = _answer([["a", "b"], ["a"], ["c"]], ["rrf", "rrf", "cosine"])
    assert answer.ids == ["a", "b", "c"]
    values = cue_bench.score(answer, ["b"])
    # "b" is second of three units; the ideal of one gold unit is 1.
    assert values["ndcg_rows"] == pytest.approx(P2)
    assert values["capped@10"] == 1.0
    assert cue_bench.score(_answer([], []), ["b"])["ndcg_rows"] == 0.0


def test_cue_seats_come_from_the_response_when_it_says() -> None:
    assert _answer([["a"]], ["cue"], {"seated": 2}).cue_seats == 2
    assert _answer([["a"], ["b"]], ["cue", "cue"]).cue_seats == 2


def test_sign_test_by_hand() -> None:
    assert cue_bench._sign_p(0, 0) == 1.0
    # P(X >= 3 | n = 3) = 1/8; P(X >= 8 | n = 13) = (C(13,8)+...+C(13,13)) / 2^13 = 2380 / 8192.
    assert cue_bench._sign_p(3, 0) == pytest.approx(1 / 8)
    assert cue_bench._sign_p(8, 5) == pytest.approx(2380 / 8192)


def _question(qid: str, gold: tuple[str, ...], times: tuple[float, ...]) -> cue_bench.CueQuestion:
    cue = _cue("What did we chat about on May 8th?")
    return cue_bench.CueQuestion(
        "tmd",
        "dates",
        qid,
        "tmd-1",
        "What did we chat about on May 8th?",
        gold,
        times,
        NOW.timestamp(),
        cue,
        cue,
    )


def test_summary_counts_ups_downs_honesty_and_the_verdict() -> None:
    inside = datetime.datetime(2023, 5, 8, 12, tzinfo=UTC).timestamp()
    outside = datetime.datetime(2023, 6, 8, 12, tzinfo=UTC).timestamp()
    period = {"period": ["2023-05-08T00:00:00+00:00", "2023-05-09T00:00:00+00:00"], "seated": 1, "moved": 2}
    plain = ["rrf", "rrf"]
    # q1: the cue lifts the gold row from second to first; extra (one more row) finds nothing new.
    q1 = cue_bench.Outcome(
        _question("q1", ("g",), (inside,)),
        nocue=_answer([["x"], ["g"]], plain),
        cue=_answer([["g"], ["x"], ["y"]], [*plain, "cue"], {**period, "revised": True}),
        extra=_answer([["x"], ["g"], ["z"]], [*plain, "rrf"]),
        ignored=False,
    )
    # q2: the cue changes nothing and its period misses the gold turn.
    same = _answer([["g"], ["x"]], plain)
    unmoved = _answer([["g"], ["x"]], plain, {**period, "seated": 0})
    q2 = cue_bench.Outcome(_question("q2", ("g",), (outside,)), same, unmoved, same, ignored=False)
    s = cue_bench.summarise("t", [q1, q2])
    assert s.n == 2
    assert (s.up, s.down, s.up_extra, s.down_extra) == (1, 0, 1, 0)
    assert s.means["no cue"]["ndcg_rows"] == pytest.approx((P2 + 1.0) / 2)
    assert s.means["cue"]["ndcg_rows"] == pytest.approx(1.0)
    assert s.verdict
    assert (s.holds_read, s.holds_searched, s.searched_known) == (1, 1, 2)
    assert (s.revised, s.moved, s.seated, s.same_rows) == (1, 4, 1, 2)
    # The cue run of q1 returned one row more (its seat): extra matched that, and the cue still won.
    assert s.means["extra"]["rows"] == pytest.approx(2.5)

    # No gain at all: no verdict.
    flat = cue_bench.summarise("flat", [q2])
    assert not flat.verdict
    assert (flat.up, flat.down) == (0, 0)


def test_report_header_names_the_engine_s_embedding_model() -> None:
    info = cue_bench.RunInfo(
        command="python -m benchmarks quality cue",
        quick=False,
        load_start=0.0,
        load_end=0.0,
        started="2026-01-01 00:00 UTC",
        selections=(),
        caches={},
        policy="cued-v0.5",
        skipped={},
        embedding_model="multilingual-e5-small",
    )
    text = cue_bench.render(info, [], "chart.png")
    assert "embedder multilingual-e5-small (cpersona's ONNX build)" in text
    assert "MiniLM" not in text


# ------------------------------------------------------------------------------------------ TMD


def _write_tmd(folder: Path) -> None:
    (folder / "ConversationData").mkdir(parents=True)

    def turn(number: int, dia_id: str, speaker: str, text: str, when: str, **extra: str) -> dict[str, str]:
        return {
            "speaker": speaker,
            "dia_id": dia_id,
            "text": text,
            "date_time": when,
            "response_number": str(number),
            **extra,
        }

    log = {
        "speaker_a": "Ann",
        "speaker_b": "Bo",
        "session_1_date_time": "1:00 AM on 8 May, 2023",
        "session_1": [
            turn(0, "D1:1", "Ann", "hi", "01:00:00 AM on Monday 08 May, 2023"),
            turn(
                1, "D1:2", "Bo", "look", "02:00:00 AM on Monday 08 May, 2023", blip_caption="a photo of a cat"
            ),
        ],
        "session_2_date_time": "3:00 AM on 9 May, 2023",
        "session_2": [turn(2, "D2:1", "Ann", "later", "03:00:00 AM on Tuesday 09 May, 2023")],
    }
    (folder / "ConversationData" / "26.json").write_text(json.dumps(log), encoding="utf-8")
    tests = folder / "TestData"
    (tests / "time_qs").mkdir(parents=True)
    (tests / "content_time_qs").mkdir()
    first = {"questions": ["What did we chat about on May 8th?", "May 8?"], "relevant_docs": [0, 1, 99]}
    second = {"questions": ["What about May 30th?"], "relevant_docs": [42]}
    items = {"file_indexes": [26], "file_26": [first, second]}
    (tests / "time_qs" / "test_dates.json").write_text(json.dumps(items), encoding="utf-8")
    content = {
        "file_indexes": [26],
        "file_26": [{"questions": ["What did Bo show on May 8th?"], "relevant_docs": [1]}],
    }
    (tests / "content_time_qs" / "content_time_qs.json").write_text(json.dumps(content), encoding="utf-8")


def test_tmd_loader_on_a_tiny_folder(tmp_path: Path) -> None:
    _write_tmd(tmp_path)
    data = load_tmd(tmp_path, logs=[26], sets=["content_time_qs", "dates"])
    [conv] = data.conversations
    assert conv.conv_id == "tmd-26"
    assert [t.unit_id for t in conv.turns] == ["0", "1", "2"]
    assert conv.turns[1].content == "Bo: look [image: a photo of a cat]"
    assert conv.turns[1].metadata == {
        "conversation": "tmd-26",
        "session": 1,
        "dia_id": "D1:2",
        "response_number": 1,
    }
    assert conv.turns[0].timestamp == datetime.datetime(2023, 5, 8, 1, tzinfo=UTC).timestamp()
    assert conv.now == datetime.datetime(2023, 5, 9, 3, tzinfo=UTC).timestamp()
    content, dates = conv.questions
    assert (content.set_name, content.gold) == ("content_time_qs", ("1",))
    assert dates.question == "What did we chat about on May 8th?"
    assert dates.paraphrases == ("What did we chat about on May 8th?", "May 8?")
    # Gold id 99 names no turn: dropped and counted; the item whose only gold is unknown is dropped.
    assert dates.gold == ("0", "1")
    assert data.unknown_gold == 2
    assert data.dropped == ("tmd-26:dates:1",)

    selection = cue_bench.tmd_questions(tmp_path, logs=[26], sets=["content_time_qs", "dates"])
    assert [q.qid for q in selection.questions] == ["tmd-26:content_time_qs:0", "tmd-26:dates:0"]
    assert selection.questions[1].gold_times == (conv.turns[0].timestamp, conv.turns[1].timestamp)
    assert selection.counts["dates"] == {"items": 1, "cued": 1, "wordings": 2, "wordings cued": 2}


def test_tmd_loader_refuses_what_it_cannot_read(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="--tmd"):
        load_tmd(tmp_path / "nope")
    _write_tmd(tmp_path)
    with pytest.raises(ValueError, match="unknown TMD log"):
        load_tmd(tmp_path, logs=[27])
    with pytest.raises(ValueError, match="ambiguous"):
        load_tmd(tmp_path, sets=["ambiguous"])


def test_tmd_turn_time_is_utc() -> None:
    expected = datetime.datetime(2023, 5, 8, 13, 56, 4, tzinfo=UTC).timestamp()
    assert parse_turn_time("01:56:04 PM on Monday 08 May, 2023") == expected


needs_tmd = pytest.mark.skipif(
    not (DEFAULT_TMD / "ConversationData").is_dir(), reason=f"TMD data not found at {DEFAULT_TMD}"
)
needs_locomo = pytest.mark.skipif(
    not DEFAULT_DATA.is_file(), reason=f"LoCoMo data not found at {DEFAULT_DATA}"
)


@needs_tmd
def test_tmd_on_the_real_folder() -> None:
    data = load_tmd()
    assert [c.log for c in data.conversations] == [26, 28, 31, 41, 42, 43, 44, 45, 46, 47, 48, 49]
    assert sum(len(c.turns) for c in data.conversations) == 7463
    assert (data.unknown_gold, data.dropped) == (0, ())
    selection = cue_bench.tmd_questions(DEFAULT_TMD, logs=None)
    counts = selection.counts
    # Every wording of the time sets that name a time gets a cue; the session sets get none.
    for name in ("dates", "date_span", "day_span", "earlier_today", "last_named_day", "month", "rel_day"):
        assert counts[name]["cued"] == counts[name]["items"]
        assert counts[name]["wordings cued"] == counts[name]["wordings"]
    for name in ("session", "rel_session", "session_span"):
        assert counts[name].get("cued", 0) == 0
        assert counts[name]["wordings cued"] == 0
    assert counts["content_time_qs"] == {
        "items": 177,
        "cued": 145,
        "no cue": 32,
        "wordings": 177,
        "wordings cued": 145,
    }
    assert len(selection.questions) == 1220


@needs_locomo
def test_locomo_cue_set_is_the_questions_that_name_a_date_month_or_year() -> None:
    selection = cue_bench.locomo_questions(DEFAULT_DATA, conversations=None)
    assert len(selection.questions) == 202
    assert all(q.read.named for q in selection.questions)
    # The period used ends SAID_AFTER_DAYS later than the one read; it starts where it did.
    for q in selection.questions:
        assert q.cue.start == q.read.start
        assert q.cue.end - q.read.end == datetime.timedelta(days=SAID_AFTER_DAYS)
    holds = sum(1 for q in selection.questions if any(q.cue.holds(t) for t in q.gold_times))
    assert holds == 186
