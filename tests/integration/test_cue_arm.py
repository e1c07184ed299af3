"""The cue arm against the real engine: the shared test Redis, Qdrant in-process and the ONNX embedder.

What is checked: the period is ``[start, end)`` in both halves, the vector and keyword halves both feed
the merged list, the merge by reciprocal rank (literal votes, exact ties, first-seen order, the depth
cut), the blank query's newest-in-period listing, episodes only when asked and by their start time,
the whole-query fallback inside a period, keyword-only without a vector, empty periods, errors raised
as themselves and cancellation passed through, ``scope_span``, and that no scope ever gets another
scope's records (a hypothesis property over generated stores and scopes).
"""

from __future__ import annotations

import itertools
import math
import uuid
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from cpersona.errors import RedisUnavailable, VectorStoreUnavailable
from cpersona.model.candidates import ArmRow
from cpersona.model.scope import ReadScope
from cpersona.recall.arms.cue import CUE_MERGE_K, cue_arm, merge_lists, scope_span
from cpersona.stores.redis.connection import close_redis, new_client
from cpersona.stores.redis.store import RedisRecordStore
from scopes import record_st, scope_st, visible

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Sequence

    import cpersona
    from cpersona.model.candidates import ArmResult
    from cpersona.stores.protocols import Vector, VectorFilter, VectorHit, VectorPoint, VectorStore
    from cpersona.stores.redis.connection import RedisClient

DAY = 86_400.0
BASE = 1_740_787_200.0  # 2025-03-01T00:00:00Z
PERIOD = (BASE, BASE + 10 * DAY)
ALL = -1.0  # a cosine floor every hit passes


@pytest.fixture(scope="module")
async def shared_engine(open_test_engine: Callable[..., Any]) -> AsyncIterator[cpersona.Engine]:
    """One engine with the ONNX embedder for the module; each test works under its own agent id."""
    async with open_test_engine("c") as memory:
        yield memory


@pytest.fixture
def agent() -> str:
    return "a" + uuid.uuid4().hex[:8]


async def remember(engine: cpersona.Engine, agent: str, content: str, ts: float, **fields: Any) -> str:
    result = await engine.store(content, agent_id=agent, timestamp=ts, **fields)
    assert result.result == "stored"
    assert result.embedded
    return result.ref


async def embedded(engine: cpersona.Engine, text: str) -> Vector:
    assert engine.backends.embedder is not None
    return await engine.backends.embedder.embed_query(text)


async def cue(
    engine: cpersona.Engine,
    scope: ReadScope | str,
    query: str,
    *,
    vector: Vector | None = None,
    period: tuple[float, float] = PERIOD,
    depth: int = 50,
    floor: float = 0.0,
    search_episodes: bool = False,
    vectors: VectorStore | bool | None = True,
    redis: RedisClient | None = None,
) -> ArmResult:
    return await cue_arm(
        records=engine.backends.records if redis is None else RedisRecordStore(redis, engine.keys),
        vectors=engine.backends.vectors if vectors is True else (vectors or None),
        vector=vector,
        scope=ReadScope(scope) if isinstance(scope, str) else scope,
        query=query,
        period=period,
        depth=depth,
        floor=floor,
        search_episodes=search_episodes,
    )


def refs(result: ArmResult) -> list[str]:
    return [row.ref for row in result.rows]


def vote(*ranks: int) -> float:
    return math.fsum(1 / (CUE_MERGE_K + r) for r in ranks)


# ------------------------------------------------------------------------------------ period bounds


async def test_period_keeps_start_and_drops_end_in_both_halves(
    shared_engine: cpersona.Engine, agent: str
) -> None:
    start, end = PERIOD
    at_start = await remember(shared_engine, agent, "harbour crane inspection at dawn", start)
    inside = await remember(shared_engine, agent, "harbour crane inspection at noon", start + DAY)
    before = await remember(shared_engine, agent, "harbour crane inspection the night before", start - 0.001)
    at_end = await remember(shared_engine, agent, "harbour crane inspection at the deadline", end)
    vector = await embedded(shared_engine, "harbour crane inspection")
    # keyword half alone
    words = await cue(shared_engine, agent, "harbour crane inspection", vector=None)
    assert sorted(refs(words)) == sorted([at_start, inside])
    # vector half alone: a query whose terms match nothing, a floor every hit passes
    near = await cue(shared_engine, agent, "zyxwv", vector=vector, floor=ALL)
    assert sorted(refs(near)) == sorted([at_start, inside])
    # one microsecond wider on either side lets the neighbours in
    wider = await cue(
        shared_engine, agent, "zyxwv", vector=vector, floor=ALL, period=(start - 0.001, end + 1e-6)
    )
    assert sorted(refs(wider)) == sorted([at_start, inside, before, at_end])


async def test_an_empty_period_searches_nothing(shared_engine: cpersona.Engine, agent: str) -> None:
    await remember(shared_engine, agent, "lighthouse logbook entry", BASE)
    vector = await embedded(shared_engine, "lighthouse logbook")
    for period in ((BASE, BASE), (BASE + 1, BASE)):
        result = await cue(
            shared_engine, agent, "lighthouse logbook", vector=vector, floor=ALL, period=period
        )
        assert (result.arm, result.rows, result.status) == ("cue", (), "ok")
    # a well-formed period that holds nothing
    later = (BASE + 30 * DAY, BASE + 31 * DAY)
    assert (
        await cue(shared_engine, agent, "lighthouse logbook", vector=vector, floor=ALL, period=later)
    ).rows == ()
    assert (await cue(shared_engine, agent, "", period=later)).rows == ()
    # depth 0 asks for nothing
    assert (
        await cue(shared_engine, agent, "lighthouse logbook", vector=vector, floor=ALL, depth=0)
    ).rows == ()


async def test_arguments_that_are_bugs_raise(shared_engine: cpersona.Engine, agent: str) -> None:
    with pytest.raises(ValueError, match="finite"):
        await cue(shared_engine, agent, "x", period=(math.nan, BASE))
    with pytest.raises(ValueError, match="finite"):
        await cue(shared_engine, agent, "x", period=(BASE, math.inf))
    with pytest.raises(ValueError, match="depth"):
        await cue(shared_engine, agent, "x", depth=-1)
    with pytest.raises(ValueError, match="merge_k"):
        await cue_arm(
            records=shared_engine.backends.records,
            vectors=None,
            vector=None,
            scope=ReadScope(agent),
            query="x",
            period=PERIOD,
            depth=5,
            floor=0.0,
            search_episodes=False,
            merge_k=0,
        )


# ------------------------------------------------------------------------------ halves and merge


async def test_vector_and_keyword_halves_both_contribute(shared_engine: cpersona.Engine, agent: str) -> None:
    by_meaning = await remember(
        shared_engine, agent, "The keeper repainted the lamp room of the lighthouse", BASE
    )
    by_word = await remember(
        shared_engine, agent, "Invoice 4471 from Zanzibar Freight is overdue", BASE + DAY
    )
    await remember(shared_engine, agent, "Grocery list: apples, bread, oat milk", BASE + 2 * DAY)
    # The vector stands for the first record's text, and a floor of 0.99 lets only that record pass;
    # the keyword query matches only the second record's words.
    vector = await embedded(shared_engine, "The keeper repainted the lamp room of the lighthouse")
    result = await cue(shared_engine, agent, "Zanzibar invoice", vector=vector, floor=0.99)
    # Each is first on its own list (one vote of 1/61); the tie goes to the memory vector list, which
    # the merge visits first, although the keyword row is newer.
    assert [(r.ref, r.rank, r.raw) for r in result.rows] == [(by_meaning, 0, vote(0)), (by_word, 1, vote(0))]
    assert (result.arm, result.status) == ("cue", "ok")
    # without a vector, or without a vector store, only the keyword half runs
    for keyword_only in (
        await cue(shared_engine, agent, "Zanzibar invoice", vector=None, floor=0.99),
        await cue(shared_engine, agent, "Zanzibar invoice", vector=vector, floor=0.99, vectors=False),
    ):
        assert [(r.ref, r.raw) for r in keyword_only.rows] == [(by_word, vote(0))]


async def test_merge_by_hand_on_a_small_store(shared_engine: cpersona.Engine, agent: str) -> None:
    text = "kiwi orchard irrigation schedule for the north slope"
    slope = await remember(shared_engine, agent, text, BASE)
    kiwi = await remember(shared_engine, agent, "kiwi kiwi kiwi", BASE + DAY)
    await remember(shared_engine, agent, "kiwi orchard notes", BASE + 20 * DAY)  # outside the period
    vector = await embedded(shared_engine, text)
    # The halves on their own, read from the real indexes: the vector finds only `slope` above 0.99;
    # BM25 ranks the short record holding the word three times above the long one holding it once.
    words = await shared_engine.backends.records.memory_keyword(ReadScope(agent), "kiwi", 50, period=PERIOD)
    assert refs(words) == [kiwi, slope]
    assert refs(await cue(shared_engine, agent, "zyxwv", vector=vector, floor=0.99)) == [slope]
    # slope: vector rank 0 + keyword rank 1 = 1/61 + 1/62; kiwi: keyword rank 0 = 1/61
    result = await cue(shared_engine, agent, "kiwi", vector=vector, floor=0.99)
    assert [(r.ref, r.rank, r.raw) for r in result.rows] == [(slope, 0, 1 / 61 + 1 / 62), (kiwi, 1, 1 / 61)]
    # the merged list is cut to the depth (each half also searches only that deep)
    assert refs(await cue(shared_engine, agent, "kiwi", vector=vector, floor=0.99, depth=1)) == [slope]


def test_merge_lists_votes_ties_and_depth() -> None:
    def rows(*names: str) -> tuple[ArmRow, ...]:
        return tuple(ArmRow(name, rank, None) for rank, name in enumerate(names))

    merged = merge_lists([rows("a", "b", "c"), rows("c", "d"), rows("b", "a")], merge_k=61, depth=10)
    assert [(r.ref, r.rank) for r in merged] == [("a", 0), ("b", 1), ("c", 2), ("d", 3)]
    # a and b hold ranks {0, 1} on two lists each: an exact tie, kept in first-seen order
    assert merged[0].raw == merged[1].raw == vote(0, 1)
    assert merged[2].raw == vote(2, 0)
    assert merged[3].raw == vote(1)
    # The same ranks summed in another order still tie exactly (fsum), whatever the float rounding of a
    # running sum would do, so the earlier-seen ref wins.
    spread = [rows("x", "y", "z"), rows("z", "x", "y"), rows("y", "z", "x")]
    assert [r.ref for r in merge_lists(spread, merge_k=61, depth=3)] == ["x", "y", "z"]
    assert len({r.raw for r in merge_lists(spread, merge_k=61, depth=3)}) == 1
    assert [r.ref for r in merge_lists(spread, merge_k=61, depth=2)] == ["x", "y"]
    assert merge_lists([], merge_k=61, depth=5) == ()
    # merge_k is the constant of every vote
    assert merge_lists([rows("a")], merge_k=1, depth=1)[0].raw == 1.0


# ------------------------------------------------------------------------------------ blank query


async def test_blank_query_lists_the_newest_in_the_period(shared_engine: cpersona.Engine, agent: str) -> None:
    # inserted out of time order, with neighbours just outside the period
    middle = await remember(shared_engine, agent, "weekly sync notes", BASE + 5 * DAY)
    await remember(shared_engine, agent, "too late for the period", PERIOD[1])
    newest = await remember(shared_engine, agent, "release retro", BASE + 9 * DAY)
    oldest = await remember(shared_engine, agent, "kickoff agenda", BASE)
    await remember(shared_engine, agent, "too early for the period", BASE - 1)
    vector = await embedded(shared_engine, "weekly sync notes")
    for result in (
        await cue(shared_engine, agent, ""),
        await cue(
            shared_engine, agent, "   ", vector=vector, floor=ALL
        ),  # a vector without a question is unused
    ):
        assert [(r.ref, r.raw) for r in result.rows] == [
            (newest, vote(0)),
            (middle, vote(1)),
            (oldest, vote(2)),
        ]
    assert refs(await cue(shared_engine, agent, "", depth=2)) == [newest, middle]


async def test_whole_query_fallback_inside_a_period(shared_engine: cpersona.Engine, agent: str) -> None:
    # "Go" has no term of three characters, so the keyword half falls back to the whole query as a
    # phrase; inside a period it stays in the period and lists by record time, as the blank listing does.
    late = await remember(shared_engine, agent, "Go module proxy notes", BASE + 8 * DAY)
    early = await remember(shared_engine, agent, "learning Go generics", BASE + DAY)
    outside = await remember(shared_engine, agent, "Go vet warnings", BASE + 30 * DAY)
    await remember(shared_engine, agent, "Rust borrow checker", BASE + 2 * DAY)
    result = await cue(shared_engine, agent, "Go")
    assert [(r.ref, r.raw) for r in result.rows] == [(late, vote(0)), (early, vote(1))]
    # without a period the fallback keeps its order by insertion (the ordinary arm, unchanged)
    plain = await shared_engine.backends.records.memory_keyword(ReadScope(agent), "Go", 10)
    assert refs(plain) == [outside, early, late]


# ---------------------------------------------------------------------------------------- episodes


async def test_episodes_only_when_asked_and_by_their_start_time(
    shared_engine: cpersona.Engine, agent: str
) -> None:
    summary = "Sprint planning for the billing migration"
    memory = await remember(shared_engine, agent, "billing migration checklist", BASE + DAY)
    started = await shared_engine.archive_episode(summary, agent_id=agent, start_time=BASE + 2 * DAY)
    assert started.embedded
    # recorded now, with no start time: its time is now, outside the period
    await shared_engine.archive_episode("billing migration retro", agent_id=agent)
    vector = await embedded(shared_engine, summary)

    without = await cue(shared_engine, agent, "billing migration", vector=vector, floor=0.99)
    assert refs(without) == [memory]
    asked = await cue(
        shared_engine, agent, "billing migration", vector=vector, floor=0.99, search_episodes=True
    )
    # The episode that started in the period is first on both episode lists (the other one's time is
    # when it was recorded, outside the period); the memory is first on the memory keyword list only.
    assert [(r.ref, r.raw) for r in asked.rows] == [(started.ref, 1 / 61 + 1 / 61), (memory, 1 / 61)]
    # the blank listing includes the period's newest episodes too
    blank = await cue(shared_engine, agent, "", search_episodes=True)
    assert [(r.ref, r.raw) for r in blank.rows] == [(memory, vote(0)), (started.ref, vote(0))]
    # a period around now finds the episode that has no start time, by the time it was recorded
    now = await cue(shared_engine, agent, "retro", period=(BASE + 30 * DAY, 4e9), search_episodes=True)
    assert len(now.rows) == 1
    assert now.rows[0].ref.startswith("ep:")


async def test_a_source_filter_without_a_channel_never_searches_episodes(
    shared_engine: cpersona.Engine, agent: str
) -> None:
    summary = "Harvest festival planning"
    mem = await remember(shared_engine, agent, "harvest festival stalls", BASE, source={"id": "discord:1"})
    episode = await shared_engine.archive_episode(summary, agent_id=agent, channel="c", start_time=BASE + DAY)
    vector = await embedded(shared_engine, summary)
    sourced = ReadScope(agent, source_id="discord:1")
    # asked for episodes, but episodes carry no source: none of them is searched, by either half
    result = await cue(
        shared_engine, sourced, "harvest festival", vector=vector, floor=ALL, search_episodes=True
    )
    assert refs(result) == [mem]
    # with a channel as well, episodes are searched (CPersona's rule, as in the ordinary arms)
    channelled = ReadScope(agent, channel="c", source_id="discord:1")
    both = await cue(
        shared_engine, channelled, "harvest festival", vector=vector, floor=ALL, search_episodes=True
    )
    assert set(refs(both)) == {mem, episode.ref}


# --------------------------------------------------------------------------------------- isolation


_run = itertools.count()


@hsettings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=st.lists(record_st, min_size=1, max_size=10), reads=st.lists(scope_st, min_size=1, max_size=4))
async def test_no_scope_sees_another_scopes_records(
    shared_engine: cpersona.Engine, records: list[tuple[str, str, str, str]], reads: list[ReadScope]
) -> None:
    # Fresh agent names per example, so examples never see each other's data.
    run = f"cue{next(_run)}-"
    inside = [
        {
            "content": f"ledger note {n}",
            "agent_id": run + agent,
            "project_id": project,
            "channel": channel,
            "source": {"id": source},
            "timestamp": BASE + n * 3600,
        }
        for n, (agent, project, channel, source) in enumerate(records)
    ]
    # every record has a twin in the same scope just past the period's end, which no scope may get
    outside = [{**rec, "content": f"ledger twin {n}", "timestamp": PERIOD[1]} for n, rec in enumerate(inside)]
    stored = await shared_engine.store_batch(inside + outside)
    by_ref = {r.ref: n for n, r in enumerate(stored.results[: len(inside)])}
    vector = await embedded(shared_engine, "ledger note")
    for read in reads:
        scope = ReadScope(run + read.agent_id, read.project_id, read.channel, read.source_id)
        want = {ref for ref, n in by_ref.items() if visible(read, *records[n])}
        for result in (
            await cue(shared_engine, scope, "ledger", vector=vector, floor=ALL, search_episodes=True),
            await cue(shared_engine, scope, "zyxwv", vector=vector, floor=ALL),  # the vector half alone
            await cue(shared_engine, scope, "ledger"),  # the keyword half alone
            await cue(shared_engine, scope, ""),  # the blank listing
        ):
            assert set(refs(result)) == want
            assert len(result.rows) == len(want)
        span = await scope_span(shared_engine.backends.records, scope)
        if want:
            times = [BASE + by_ref[ref] * 3600 for ref in want]
            assert span == (min(times), PERIOD[1])
        else:
            assert span is None


# ------------------------------------------------------------------------------------- scope span


async def test_scope_span(shared_engine: cpersona.Engine, agent: str) -> None:
    assert await scope_span(shared_engine.backends.records, ReadScope(agent)) is None
    # microsecond times survive exactly (the search engine alone would print 12 significant digits)
    oldest, newest = BASE + 0.123457, BASE + 40 * DAY + 0.987654
    await remember(shared_engine, agent, "first", BASE + DAY, source={"id": "slack:1"})
    await remember(shared_engine, agent, "second", newest, source={"id": "discord:2"})
    await remember(shared_engine, agent, "third", oldest, source={"id": "discord:1"})
    await remember(shared_engine, agent, "elsewhere", BASE - DAY, project_id="p")
    await remember(shared_engine, "other" + agent, "another agent", BASE - 9 * DAY)
    await shared_engine.archive_episode(
        "an episode is not a memory", agent_id=agent, start_time=BASE - 5 * DAY
    )
    span = await scope_span(shared_engine.backends.records, ReadScope(agent, project_id=""))
    assert span == (oldest, newest)
    assert await scope_span(shared_engine.backends.records, ReadScope(agent)) == (BASE - DAY, newest)
    # the source filter, exact and by prefix
    assert await scope_span(shared_engine.backends.records, ReadScope(agent, source_id="slack:1")) == (
        BASE + DAY,
        BASE + DAY,
    )
    assert await scope_span(shared_engine.backends.records, ReadScope(agent, source_id="discord:")) == (
        oldest,
        newest,
    )
    assert await scope_span(shared_engine.backends.records, ReadScope(agent, source_id="telegram:1")) is None
    assert await scope_span(shared_engine.backends.records, ReadScope(agent, project_id="q")) == (
        oldest,
        newest,
    )


# ------------------------------------------------------------------------------ failure and cancel


class _FailingVectors:
    """A vector store whose search fails as the real adapters fail (or never answers)."""

    engine_name = "failing"

    def __init__(self, *, hang: bool = False) -> None:
        self.hang = hang

    async def search(
        self, vector: Vector, flt: VectorFilter, limit: int, *, open_tail: bool = False
    ) -> list[VectorHit]:
        if self.hang:
            await anyio.sleep_forever()
        raise VectorStoreUnavailable("vector search failed: connection refused")

    async def upsert(self, points: Sequence[VectorPoint]) -> None:
        raise NotImplementedError

    async def count_all(self) -> int:
        raise NotImplementedError

    async def delete(self, ids: Sequence[str]) -> None:
        raise NotImplementedError

    async def delete_where(self, flt: VectorFilter) -> None:
        raise NotImplementedError

    async def existing(self, ids: Sequence[str]) -> set[str]:
        raise NotImplementedError

    async def vectors(self, ids: Sequence[str]) -> dict[str, Vector]:
        raise NotImplementedError

    async def count(self, flt: VectorFilter) -> int:
        raise NotImplementedError

    async def aclose(self) -> None:
        return None


async def test_a_failing_half_raises_its_own_error(shared_engine: cpersona.Engine, agent: str) -> None:
    await remember(shared_engine, agent, "ferry timetable", BASE)
    vector = await embedded(shared_engine, "ferry timetable")
    with pytest.raises(VectorStoreUnavailable, match="connection refused"):
        await cue(
            shared_engine, agent, "ferry", vector=vector, vectors=_FailingVectors(), search_episodes=True
        )
    # a Redis that is not there: the keyword half's error, typed, not an exception group
    gone = new_client("redis://127.0.0.1:1", timeout=1.0, retries=0)
    try:
        with pytest.raises(RedisUnavailable):
            await cue(shared_engine, agent, "ferry", redis=gone)
        with pytest.raises(RedisUnavailable):
            await scope_span(RedisRecordStore(gone, shared_engine.keys), ReadScope(agent))
    finally:
        await close_redis(gone)


async def test_cancellation_passes_through(shared_engine: cpersona.Engine, agent: str) -> None:
    await remember(shared_engine, agent, "ferry timetable", BASE)
    vector = await embedded(shared_engine, "ferry timetable")
    finished = False
    with anyio.CancelScope() as scope:

        async def cancel_soon() -> None:
            await anyio.sleep(0.05)
            scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(cancel_soon)
            await cue(shared_engine, agent, "ferry", vector=vector, vectors=_FailingVectors(hang=True))
            finished = True
    # the caller's cancellation ended the call: no result came back and no error replaced it
    assert scope.cancelled_caught
    assert not finished
