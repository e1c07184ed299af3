"""recall.timeline: UTC bucket edges (property tests over the bucket functions), and the operation on the
real Redis: every record in range is in exactly one bucket and none outside it, the range includes both
ends, the filters, the cap that says it cut, and the caller's scope only."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cpersona
from cpersona import InvalidRequest
from cpersona.model.scope import ReadScope
from cpersona.model.timeline_buckets import GRANULARITIES, Granularity, bucket_end, bucket_start
from cpersona.model.timeline_response import TimelineResult, timeline_json
from cpersona.operations.timeline import emotion_cosine, widened

if TYPE_CHECKING:
    import httpx

_counter = itertools.count()
# 2026-03-16 is a Monday.
MONDAY = datetime(2026, 3, 16, tzinfo=UTC).timestamp()
DAY = 86_400.0


def agent() -> str:
    return f"tl-{next(_counter)}"


def at(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def parsed(text: str) -> float:
    return at(text)


# -------------------------------------------------------------------------------------- bucket edges

_moments = st.floats(0, 253_402_214_400.0 - 40 * DAY, allow_nan=False)  # up to late 9999


@given(ts=_moments, granularity=st.sampled_from(GRANULARITIES))
def test_a_moment_lies_in_its_bucket_and_buckets_are_contiguous(ts: float, granularity: Granularity) -> None:
    start = bucket_start(ts, granularity)
    end = bucket_end(start, granularity)
    assert start <= ts < end
    assert bucket_start(start, granularity) == start
    # The next bucket starts where this one ends: no gap, no overlap.
    assert bucket_start(end, granularity) == end
    assert bucket_start(end - 1e-3 if end - start > 1 else start, granularity) == start


@given(ts=_moments)
def test_weeks_start_on_monday_and_months_on_the_first(ts: float) -> None:
    week = datetime.fromtimestamp(bucket_start(ts, "week"), UTC)
    assert (week.weekday(), week.hour, week.minute, week.second) == (0, 0, 0, 0)
    month = datetime.fromtimestamp(bucket_start(ts, "month"), UTC)
    nxt = datetime.fromtimestamp(bucket_end(bucket_start(ts, "month"), "month"), UTC)
    assert (month.day, month.hour, month.minute) == (1, 0, 0)
    assert (nxt.day, nxt.hour) == (1, 0)
    assert (nxt.year * 12 + nxt.month) - (month.year * 12 + month.month) == 1


def test_hand_computed_edges() -> None:
    thursday_noon = MONDAY + 3 * DAY + 12 * 3600
    assert bucket_start(thursday_noon, "week") == MONDAY  # not the epoch's Thursday
    assert bucket_start(at("2026-02-28T23:59:59Z"), "month") == at("2026-02-01T00:00:00Z")
    assert bucket_end(at("2026-02-01T00:00:00Z"), "month") == at("2026-03-01T00:00:00Z")
    assert bucket_end(at("2024-02-01T00:00:00Z"), "month") - at("2024-02-01T00:00:00Z") == 29 * DAY
    assert bucket_end(at("2026-12-01T00:00:00Z"), "month") == at("2027-01-01T00:00:00Z")
    assert bucket_start(at("2026-03-29T01:30:00Z"), "hour") == at("2026-03-29T01:00:00Z")  # a DST night in EU
    assert bucket_start(59.999, "minute") == 0.0


def test_emotion_cosine_reads_the_eight_axes_only() -> None:
    joy = cpersona.EmotionVector(joy=1.0, intensity=1.0, valence=1.0)
    assert emotion_cosine(joy, cpersona.EmotionVector(joy=0.2)) == pytest.approx(1.0)
    assert emotion_cosine(joy, cpersona.EmotionVector(fear=1.0)) == 0.0
    assert emotion_cosine(joy, cpersona.EmotionVector(intensity=1.0)) == 0.0


# -------------------------------------------------------------------------------------- the operation


def _texts(result: TimelineResult) -> list[str]:
    return [
        bytes(m.rendered_content["blocks"][0]["data"]).decode() for b in result.buckets for m in b.memories
    ]


def _memories(result: TimelineResult) -> list[tuple[str, str, str]]:
    return [(b.start, b.end, m.record["ref"]) for b in result.buckets for m in b.memories]


async def test_buckets_are_hand_computed_and_the_range_includes_both_ends(engine: cpersona.Engine) -> None:
    who = agent()
    stamps = {
        "before": "2026-03-15T23:59:59Z",
        "at start": "2026-03-16T00:00:00Z",
        "monday noon": "2026-03-16T12:00:00Z",
        "sunday night": "2026-03-22T23:59:59Z",
        "next monday": "2026-03-23T00:00:00Z",
        "at end": "2026-03-31T10:00:00Z",
        "after": "2026-03-31T10:00:01Z",
    }
    refs = {
        name: (await engine.store(f"event {name}", agent_id=who, timestamp=ts)).ref
        for name, ts in stamps.items()
    }
    result = await engine.timeline(
        who, range={"start": "2026-03-16T00:00:00Z", "end": "2026-03-31T10:00:00Z"}, granularity="week"
    )
    assert [(b.start, b.end, b.count) for b in result.buckets] == [
        ("2026-03-16T00:00:00.000000Z", "2026-03-23T00:00:00.000000Z", 3),
        ("2026-03-23T00:00:00.000000Z", "2026-03-30T00:00:00.000000Z", 1),
        ("2026-03-30T00:00:00.000000Z", "2026-04-06T00:00:00.000000Z", 1),
    ]
    assert [m[2] for m in _memories(result)] == [
        refs[n] for n in ("at start", "monday noon", "sunday night", "next monday", "at end")
    ]
    assert (result.count, result.truncated, result.total_in_range) == (5, False, 5)
    first = result.buckets[0].memories[0]
    assert first.record["id"] == refs["at start"].removeprefix("mem:")
    assert first.record["created_at"] == "2026-03-16T00:00:00.000000Z"  # the memory's own time
    assert bytes(first.rendered_content["blocks"][0]["data"]).decode() == "event at start"
    assert first.relevance_score == first.record["fidelity"]["score"]
    assert first.activation_path is None
    months = await engine.timeline(
        who, range={"start": "2026-03-01T00:00:00Z", "end": "2026-04-30T00:00:00Z"}, granularity="month"
    )
    assert [(b.start, b.count) for b in months.buckets] == [("2026-03-01T00:00:00.000000Z", 7)]
    # The edges' fast body is the model's own JSON, key for key and in order.
    for laid_out in (result, months):
        body = timeline_json(laid_out)
        assert orjson.dumps(body) == orjson.dumps(laid_out.model_dump(mode="json"))


async def test_a_record_stored_at_the_end_is_in_range(engine: cpersona.Engine) -> None:
    # The JSON store reads this number back one unit of its last place higher than it was written.
    who = agent()
    ts = at("2026-01-26T00:00:00Z") + 1.6008014254912268
    ref = (await engine.store("at the very end", agent_id=who, timestamp=ts)).ref
    result = await engine.timeline(who, range={"start": ts - 1, "end": ts}, granularity="minute")
    assert [m[2] for m in _memories(result)] == [ref]
    assert (await engine.timeline(who, range={"start": ts, "end": ts + 1})).count == 1


async def test_default_granularity_is_the_hour(engine: cpersona.Engine) -> None:
    who = agent()
    await engine.store("one", agent_id=who, timestamp="2026-03-16T10:15:00Z")
    await engine.store("two", agent_id=who, timestamp="2026-03-16T10:45:00Z")
    await engine.store("three", agent_id=who, timestamp="2026-03-16T11:00:00Z")
    result = await engine.timeline(
        who, range={"start": "2026-03-16T00:00:00Z", "end": "2026-03-17T00:00:00Z"}
    )
    assert result.granularity == "hour"
    assert [(b.start, b.count) for b in result.buckets] == [
        ("2026-03-16T10:00:00.000000Z", 2),
        ("2026-03-16T11:00:00.000000Z", 1),
    ]


async def test_a_cut_is_said_and_nothing_is_cut_silently(engine: cpersona.Engine) -> None:
    who = agent()
    for i in range(5):
        await engine.store(f"note {i}", agent_id=who, timestamp=MONDAY + i * 60)
    window = {"start": MONDAY, "end": MONDAY + DAY}
    cut = await engine.timeline(who, range=window, granularity="day", limit=3)
    assert (cut.count, cut.truncated, cut.total_in_range) == (3, True, 5)
    assert _texts(cut) == [
        "note 0",
        "note 1",
        "note 2",
    ]
    whole = await engine.timeline(who, range=window, granularity="day", limit=5)
    assert (whole.count, whole.truncated) == (5, False)


async def test_a_cut_under_a_filter_is_said_too(engine: cpersona.Engine) -> None:
    who = agent()
    for i in range(4):
        await engine.store(f"glad {i}", agent_id=who, timestamp=MONDAY + i, emotion="joy")
        await engine.store(f"afraid {i}", agent_id=who, timestamp=MONDAY + i + 0.5, emotion="fear")
    window = {"start": MONDAY, "end": MONDAY + DAY}
    cut = await engine.timeline(who, range=window, emotion_filter={"joy": 1.0}, limit=3)
    assert (_texts(cut), cut.truncated, cut.total_in_range) == (["glad 0", "glad 1", "glad 2"], True, 8)
    whole = await engine.timeline(who, range=window, emotion_filter={"joy": 1.0}, limit=4)
    assert (whole.count, whole.truncated) == (4, False)


async def test_filters_fidelity_and_emotion(engine: cpersona.Engine) -> None:
    who = agent()
    await engine.store("a happy day", agent_id=who, timestamp=MONDAY, emotion="joy")
    await engine.store("a scary night", agent_id=who, timestamp=MONDAY + 60, emotion="fear")
    await engine.store("a plain note", agent_id=who, timestamp=MONDAY + 120)
    window = {"start": MONDAY, "end": MONDAY + DAY}
    happy = await engine.timeline(who, range=window, emotion_filter={"joy": 0.5, "trust": 0.1})
    assert _texts(happy) == ["a happy day"]
    assert (happy.count, happy.total_in_range) == (1, 3)
    everyone = await engine.timeline(who, range=window, min_fidelity=0.0)
    assert everyone.count == 3
    faithful = await engine.timeline(who, range=window, min_fidelity=1.0)
    # Fidelity is read now: the plain note has decayed a little since it was stored, while an intense
    # emotion (intensity 1) keeps the other two at 1.
    assert _texts(faithful) == ["a happy day", "a scary night"]


async def test_bad_requests_name_the_field(engine: cpersona.Engine) -> None:
    who = agent()
    cases = [
        ({"range": {"start": MONDAY + 1, "end": MONDAY}}, "range"),
        ({"range": {"start": MONDAY}}, "range.end"),
        ({"range": {"start": MONDAY, "end": MONDAY}, "emotion_filter": {"intensity": 1.0}}, "emotion_filter"),
        ({"range": {"start": MONDAY, "end": MONDAY}, "granularity": "year"}, "granularity"),
        ({"range": {"start": MONDAY, "end": MONDAY}, "limit": 0}, "limit"),
        ({"range": {"start": MONDAY, "end": MONDAY}, "limit": 10_001}, "limit"),
        ({"range": {"start": MONDAY, "end": MONDAY}, "min_fidelity": 1.5}, "min_fidelity"),
    ]
    for kwargs, field in cases:
        with pytest.raises(InvalidRequest) as caught:
            await engine.timeline(who, **kwargs)  # type: ignore[arg-type]
        assert caught.value.field == field, kwargs


async def test_only_the_callers_scope(engine: cpersona.Engine) -> None:
    who, other = agent(), agent()
    mine = (await engine.store("mine", agent_id=who, timestamp=MONDAY)).ref
    pooled = (await engine.store("pooled", agent_id=who, timestamp=MONDAY + 1)).ref
    in_p = (await engine.store("in p", agent_id=who, project_id="p", timestamp=MONDAY + 2)).ref
    await engine.store("in q", agent_id=who, project_id="q", timestamp=MONDAY + 3)
    await engine.store("theirs", agent_id=other, timestamp=MONDAY + 4)
    window = {"start": MONDAY, "end": MONDAY + DAY}
    seen = await engine.timeline(who, range=window, project_id="p")
    assert [m[2] for m in _memories(seen)] == [mine, pooled, in_p]
    assert seen.total_in_range == 3
    pool_only = await engine.timeline(who, range=window, project_id="")
    assert [m[2] for m in _memories(pool_only)] == [mine, pooled]
    theirs = await engine.timeline(other, range=window)
    assert theirs.count == 1
    assert _memories(theirs)[0][2] not in (mine, pooled, in_p)


_offsets = st.lists(st.floats(0, 40 * DAY, allow_nan=False), min_size=1, max_size=25)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    offsets=_offsets,
    granularity=st.sampled_from(GRANULARITIES),
    window=st.tuples(st.floats(-DAY, 41 * DAY), st.floats(0, 42 * DAY)).map(sorted),
)
async def test_every_record_in_range_is_in_exactly_one_bucket(
    engine: cpersona.Engine, offsets: list[float], granularity: Granularity, window: list[float]
) -> None:
    who = agent()
    base = at("2026-01-26T00:00:00Z")
    stamps: dict[str, float] = {}
    for i, offset in enumerate(offsets):
        ref = (await engine.store(f"record {i}", agent_id=who, timestamp=base + offset)).ref
        stamps[ref] = (await engine.get(ref, agent_id=who)).timestamp  # type: ignore[union-attr]
    start, end = base + window[0], base + window[1]
    low, high = widened(start, end)
    result = await engine.timeline(who, range={"start": start, "end": end}, granularity=granularity)
    placed = [(b, m.record["ref"]) for b in result.buckets for m in b.memories]
    refs = [ref for _, ref in placed]
    assert len(refs) == len(set(refs))  # at most one bucket each
    assert set(refs) == {ref for ref, ts in stamps.items() if low <= ts <= high}  # all in range, none out
    previous_end = None
    for bucket in result.buckets:
        lo, hi = parsed(bucket.start), parsed(bucket.end)
        assert bucket.count == len(bucket.memories) > 0
        assert bucket_start(lo, granularity) == lo
        assert bucket_end(lo, granularity) == hi
        assert previous_end is None or previous_end <= lo  # ascending, never overlapping
        previous_end = hi
        for memory in bucket.memories:
            assert lo <= stamps[memory.record["ref"]] < hi
    assert not result.truncated
    assert result.count == len(refs)


# -------------------------------------------------------------------------------------- over HTTP


async def test_the_route_answers_and_refuses_by_field(client: httpx.AsyncClient) -> None:
    who = agent()
    for i, ts in enumerate(("2026-03-16T09:00:00Z", "2026-03-17T09:00:00Z")):
        stored = await client.post(
            "/v1/encode", json={"content": f"day {i}", "agent_id": who, "timestamp": ts}
        )
        assert stored.status_code == 200, stored.text
    answer = await client.post(
        "/v1/recall/timeline",
        json={
            "agent_id": who,
            "range": {"start": "2026-03-16T00:00:00Z", "end": "2026-03-19T23:59:59Z"},
            "granularity": "day",
            "header": {"protocol": "cmp"},
        },
    )
    assert answer.status_code == 200, answer.text
    body = TimelineResult.model_validate(answer.json())
    assert [(b.start, b.count) for b in body.buckets] == [
        ("2026-03-16T00:00:00.000000Z", 1),
        ("2026-03-17T00:00:00.000000Z", 1),
    ]
    refused = await client.post(
        "/v1/recall/timeline",
        json={"agent_id": who, "range": {"start": "2026-03-20T00:00:00Z", "end": "2026-03-19T00:00:00Z"}},
    )
    assert refused.status_code == 400
    assert refused.json()["error"]["field"] == "range"


_scope = st.tuples(
    st.sampled_from(["a", "b"]), st.sampled_from(["", "p", "q"]), st.sampled_from(["", "c", "d"])
)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    writes=st.lists(
        st.tuples(_scope, st.sampled_from(["x", "discord:1", "discord:2"])), min_size=1, max_size=10
    ),
    reader=st.tuples(
        st.sampled_from(["a", "b"]),
        st.sampled_from([None, "", "p"]),
        st.sampled_from([None, "", "c"]),
        st.sampled_from(["", "discord:", "x"]),
    ),
)
async def test_a_timeline_is_exactly_what_the_scope_sees(
    engine: cpersona.Engine,
    writes: list[tuple[tuple[str, str, str], str]],
    reader: tuple[str, str | None, str | None, str],
) -> None:
    run = f"s{next(_counter)}-"
    where: dict[str, tuple[cpersona.Scope, cpersona.Source]] = {}
    for i, ((who, project, channel), source) in enumerate(writes):
        ref = (
            await engine.store(
                f"scoped {i}",
                agent_id=run + who,
                project_id=project,
                channel=channel,
                source={"id": source},
                timestamp=MONDAY + i,
            )
        ).ref
        where[ref] = (cpersona.Scope(run + who, project, channel), cpersona.Source(id=source))
    reads, in_project, in_channel, by_source = reader
    scope = ReadScope(run + reads, in_project, in_channel, by_source)
    result = await engine.timeline(
        run + reads,
        range={"start": MONDAY, "end": MONDAY + DAY},
        project_id=in_project,
        channel=in_channel,
        source_id=by_source,
    )
    assert [m[2] for m in _memories(result)] == [ref for ref, (s, src) in where.items() if scope.sees(s, src)]
