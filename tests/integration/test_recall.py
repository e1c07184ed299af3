"""Recall end to end on a real engine: the shared test Redis, Qdrant in-process, and the real ONNX
embedder where vectors matter (``embedding_mode="none"`` where only the lexical arms are needed).

What is checked: that the arms run concurrently and a failed or late arm degrades the answer instead of
failing it, request validation, ordering, depth reporting, exclusions, the preview cut, the source
filter, the profile row's pool rule, the blank-query listing, ``match_reason`` per gate signal, and that
no recall ever returns another scope's rows (a hypothesis property over generated stores).
"""

from __future__ import annotations

import contextlib
import itertools
import uuid
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

import cpersona
from cpersona import InvalidRequest, Settings
from cpersona.errors import BackendUnavailable
from cpersona.model.scope import ReadScope
from cpersona.recall.arm_runner import ArmRunner, Later
from cpersona.recall.policy import load_policies
from cpersona.recall.request import RecallResult, recall_request
from cpersona.recall.stages.chain import Retrieved
from cpersona.stores.redis.connection import close_redis, new_client
from cpersona.stores.redis.store import RedisRecordStore
from scopes import record_st, scope_st, visible

if TYPE_CHECKING:
    from pathlib import Path

    from cpersona.model.candidates import ArmName, ArmResult
    from cpersona.recall.arm_runner import ArmCall, ArmWrapper

POLICY = {"scoring": "fused-gate-v2", "process": "single-pass-v2"}
V1 = "single-pass-v1"
POLICY_V1 = {"scoring": "fused-gate-v1", "process": V1}
POLICIES = load_policies()

EngineFactory = Callable[..., contextlib.AbstractAsyncContextManager[cpersona.Engine]]


@pytest.fixture
def make_engine(
    redis: object, redis_url: str, key_prefix: str, vector_settings: Settings, tmp_path: Path
) -> EngineFactory:
    """Open an engine on this test's key prefix: ``vectors=True`` for the ONNX embedder and Qdrant
    in-process, else keyword-only; ``arm_wrapper`` wraps its arms. Extra keyword arguments are settings."""

    @contextlib.asynccontextmanager
    async def make(
        *, vectors: bool, arm_wrapper: ArmWrapper | None = None, **overrides: Any
    ) -> AsyncIterator[cpersona.Engine]:
        if vectors:
            base = vector_settings.with_(**overrides)
        else:
            base = Settings(
                data_dir=tmp_path,
                redis_url=redis_url,
                key_prefix=key_prefix,
                embedding_mode="none",
                **overrides,
            )
        async with cpersona.open(base, background=False, arm_wrapper=arm_wrapper) as memory:
            yield memory

    return make


@pytest.fixture(scope="module")
async def shared_engine(open_test_engine: Callable[..., Any]) -> AsyncIterator[cpersona.Engine]:
    """One engine with the ONNX embedder for the module; each test works under its own agent id (the
    ``agent`` fixture)."""
    async with open_test_engine("m") as memory:
        yield memory


@pytest.fixture
def agent() -> str:
    return "a" + uuid.uuid4().hex[:8]


@pytest.fixture
async def keyword_engine(make_engine: EngineFactory) -> AsyncIterator[cpersona.Engine]:
    async with make_engine(vectors=False) as memory:
        yield memory


def checked(result: RecallResult, policy: dict[str, str] = POLICY) -> RecallResult:
    """Every response names its policy (the default one unless said)."""
    assert result.policy == policy
    assert result.model_dump(mode="json")["policy"] == policy
    return result


def contents(result: RecallResult) -> list[str]:
    return [row.content for row in result.rows]


def retrieved_of(result: RecallResult) -> Retrieved:
    data: Any = result.final
    while not isinstance(data, Retrieved):
        data = data.source
    return data


async def fillers(memory: cpersona.Engine, agent: str, n: int) -> None:
    records = [
        {"content": f"Weather log {i}: light rain in the morning, clear skies by noon", "agent_id": agent}
        for i in range(n)
    ]
    await memory.store_batch(records)


# ------------------------------------------------------------------------------------- concurrency


class Rendezvous:
    """An arm wrapper under which each named arm, once started, waits until all of them have started.

    Run together, they all go on at once. Run one after the other, the first would wait for ever: its
    arm's deadline (``recall_arm_timeout_ms``) ends it and the recall reports it degraded. So arms that
    come through with nothing degraded ran concurrently, and no clock is read to tell.
    """

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = frozenset(names)
        self.reset()

    def reset(self) -> None:
        """Start over for the next recall."""
        self.started: set[str] = set()
        self._all_started = anyio.Event()

    def __call__(self, name: ArmName, call: ArmCall) -> ArmCall:
        if name not in self.names:
            return call

        async def joined() -> ArmResult:
            self.started.add(name)
            if self.started == self.names:
                self._all_started.set()
            await self._all_started.wait()
            return await call()

        return joined


async def test_lexical_arms_run_concurrently(make_engine: EngineFactory) -> None:
    together = Rendezvous(("memory_keyword", "episode_fts"))
    async with make_engine(vectors=False, arm_wrapper=together) as memory:
        await _memory_and_episode(memory)
        result = checked(await memory.recall("alpha deploy", agent_id="a"))
    assert together.started == {"memory_keyword", "episode_fts"}
    # the real arms ran behind the wrapper
    assert sorted(r.kind for r in result.rows) == ["episode", "memory"]
    assert result.degraded == ()


async def test_vector_and_keyword_arms_run_concurrently(make_engine: EngineFactory, agent: str) -> None:
    text = "The staging database moved to eu-west-2 after the failover drill"
    together = Rendezvous(("memory_keyword", "vector_near"))
    async with make_engine(vectors=True, arm_wrapper=together) as memory:
        await memory.store(text, agent_id=agent)
        await memory.recall("warm the embedder up", agent_id=agent)
        together.reset()  # the recall checked below, not the warm-up
        result = checked(await memory.recall("staging database failover", agent_id=agent, deep=True))
    assert together.started == {"memory_keyword", "vector_near"}
    arms = retrieved_of(result).arms
    assert [r.ref for r in arms["memory_keyword"].rows] == [r.ref for r in arms["vector_near"].rows]
    assert contents(result) == [text]
    assert result.degraded == ()


# ----------------------------------------------------------------------------------- degraded arms


async def _memory_and_episode(memory: cpersona.Engine) -> None:
    await memory.store("alpha deploy checklist for the payments service", agent_id="a")
    await memory.archive_episode("alpha deploy retrospective: the rollout went fine", agent_id="a")


async def test_a_failing_arm_contributes_nothing_and_is_reported(
    keyword_engine: cpersona.Engine, make_engine: EngineFactory
) -> None:
    await _memory_and_episode(keyword_engine)
    healthy = checked(await keyword_engine.recall("alpha deploy", agent_id="a"))
    assert sorted(r.kind for r in healthy.rows) == ["episode", "memory"]

    def break_keyword(name: ArmName, call: ArmCall) -> ArmCall:
        if name != "memory_keyword":
            return call

        async def broken() -> ArmResult:
            raise RuntimeError("index gone")

        return broken

    # A second engine on the same store (keyword-only: all of it is in Redis), its keyword arm broken.
    async with make_engine(vectors=False, arm_wrapper=break_keyword) as broken_engine:
        result = checked(await broken_engine.recall("alpha deploy", agent_id="a"))
    assert contents(result) == ["[Episode] alpha deploy retrospective: the rollout went fine"]
    assert [(d.arm, d.status, d.detail) for d in result.degraded] == [
        ("memory_keyword", "error", "RuntimeError: index gone")
    ]
    assert result.model_dump(mode="json")["degraded"] == [
        {"arm": "memory_keyword", "status": "error", "detail": "RuntimeError: index gone"}
    ]
    assert retrieved_of(result).arms["memory_keyword"].rows == ()


async def test_a_late_arm_times_out_and_is_reported(make_engine: EngineFactory) -> None:
    def stall_episodes(name: ArmName, call: ArmCall) -> ArmCall:
        if name != "episode_fts":
            return call

        async def stalled() -> ArmResult:
            await anyio.sleep(60)
            return await call()

        return stalled

    async with make_engine(vectors=False, recall_arm_timeout_ms=200.0, arm_wrapper=stall_episodes) as memory:
        await _memory_and_episode(memory)
        result = checked(await memory.recall("alpha deploy", agent_id="a"))
        assert contents(result) == ["alpha deploy checklist for the payments service"]
        assert [(d.arm, d.status, d.detail) for d in result.degraded] == [
            ("episode_fts", "timeout", "no answer within 200 ms")
        ]


async def test_a_failing_vector_arm_leaves_the_keyword_rows(make_engine: EngineFactory, agent: str) -> None:
    def break_near(name: ArmName, call: ArmCall) -> ArmCall:
        async def broken() -> ArmResult:
            raise ConnectionError("qdrant went away")

        return broken if name == "vector_near" else call

    async with make_engine(vectors=True, arm_wrapper=break_near) as engine:
        await engine.store("alpha deploy checklist for the payments service", agent_id=agent)
        # The query was embedded and the row has a vector, so the row is lexical-only but not single-arm:
        # on a pool of 1 it needs min_score(1) * 3/61 = 0.4665 * 3/61 = 0.02294 > 1/61 and is refused
        # under single-pass-v1 ...
        shallow = checked(await engine.recall("alpha deploy checklist", agent_id=agent, policy=V1), POLICY_V1)
        assert shallow.rows == ()
        assert [(d.arm, d.status) for d in shallow.degraded] == [("vector_near", "error")]
        # ... and with deep (0.23325 * 3/61 = 0.01147 <= 1/61) it passes on the keyword arm alone
        result = checked(
            await engine.recall("alpha deploy checklist", agent_id=agent, deep=True, policy=V1), POLICY_V1
        )
        assert [(d.arm, d.status) for d in result.degraded] == [("vector_near", "error")]
        assert [(r.content, r.match_reason and r.match_reason["signal"]) for r in result.rows] == [
            ("alpha deploy checklist for the payments service", "rrf")
        ]
        # The default policy keeps it without deep: the keyword arm ranked it first with every term.
        kept = checked(await engine.recall("alpha deploy checklist", agent_id=agent))
        assert [r.content for r in kept.rows] == ["alpha deploy checklist for the payments service"]


async def test_redis_down_surfaces_as_backend_unavailable(keyword_engine: cpersona.Engine) -> None:
    recaller = keyword_engine.backends.recaller
    live = recaller.records
    # a port nothing listens on (the connection is refused at once)
    dead = new_client("redis://127.0.0.1:1", timeout=1.0, retries=0)
    recaller.records = RedisRecordStore(dead, keyword_engine.keys)
    try:
        with pytest.raises(BackendUnavailable):
            await keyword_engine.recall("anything", agent_id="a")
    finally:
        await close_redis(dead)
        recaller.records = live


# ------------------------------------------------------------------------------ the arm runner, unit


async def test_the_arm_runner_names_a_failure_and_a_late_answer() -> None:
    runner = ArmRunner(timeout_ms=50.0)

    async def broken() -> ArmResult:
        raise RuntimeError("index gone")

    async def stalled() -> ArmResult:
        await anyio.sleep(60)
        raise AssertionError("never reached")

    failed = await runner.run("memory_keyword", broken)
    assert (failed.arm, failed.status, failed.detail, failed.rows) == (
        "memory_keyword",
        "error",
        "RuntimeError: index gone",
        (),
    )
    late = await runner.run("episode_fts", stalled)
    assert (late.status, late.detail) == ("timeout", "no answer within 50 ms")
    # The runner stamps a late arm's time too (the trace reports it); how long it was is the clock's
    # business, not this test's.
    assert late.elapsed_ms > 0.0
    # the cue loop's own deadline and wording
    cut = await runner.run("cue", stalled, within_s=0.01, late="stopped at the limit")
    assert (cut.status, cut.detail) == ("timeout", "stopped at the limit")


async def test_the_arm_runner_applies_its_wrapper_and_never_swallows_cancellation() -> None:
    seen: list[str] = []

    def counting(name: ArmName, call: ArmCall) -> ArmCall:
        seen.append(name)
        return call

    runner = ArmRunner(timeout_ms=10_000.0, wrapper=counting)

    async def stalled() -> ArmResult:
        await anyio.sleep(60)
        raise AssertionError("never reached")

    with anyio.move_on_after(0.05) as outer:
        await runner.run("vector_near", stalled)
        raise AssertionError("the outer cancellation was swallowed")
    assert outer.cancelled_caught
    assert seen == ["vector_near"]


async def test_a_later_value_is_set_once_and_waited_for() -> None:
    cell: Later[int] = Later()
    got: list[int] = []
    with pytest.raises(RuntimeError):
        cell.get()
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: _append(got, cell))
        await anyio.lowlevel.checkpoint()
        assert got == []  # still waiting
        cell.set(7)
    assert got == [7]
    assert cell.get() == 7
    with pytest.raises(RuntimeError):
        cell.set(8)


async def _append(out: list[int], cell: Later[int]) -> None:
    out.append(await cell.wait())


# ----------------------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"agent_id": "a", "query": "x", "limit": -1}, "limit"),
        ({"agent_id": "a", "query": "x", "limit": 101}, "limit"),
        ({"agent_id": "a", "query": "x", "limit": True}, "limit"),
        ({"agent_id": "a", "query": "x", "bogus": 1}, "bogus"),
        ({"agent_id": "a", "query": "x", "mode": "hybrid"}, "mode"),
        ({"agent_id": "a", "query": "x", "policy": "cued-v9"}, "policy"),
        ({"agent_id": "a"}, "query"),
        ({"agent_id": "a", "query": 3}, "query"),
        ({"query": "x"}, "agent_id"),
        ({"agent_id": "a", "query": "x", "order": "worst_first"}, "order"),
        ({"agent_id": "a", "query": "x", "exclude_contents": "one"}, "exclude_contents"),
        ({"agent_id": "a", "query": "x", "deep": "yes"}, "deep"),
    ],
)
def test_request_validation_names_the_field(body: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidRequest) as err:
        recall_request(body, Settings(), POLICIES, max_limit=100)
    assert err.value.field == field


def test_request_defaults() -> None:
    req = recall_request({"agent_id": "a", "query": "x"}, Settings(), POLICIES, max_limit=100)
    assert (req.limit, req.mode, req.policy, req.order, req.deep) == (
        10,
        "informed",
        "single-pass-v2",
        "best_first",
        False,
    )
    assert req.scope == ReadScope("a", None, None, "")
    edge = recall_request({"agent_id": "a", "query": "x", "limit": 100}, Settings(), POLICIES, max_limit=100)
    assert edge.limit == 100


async def test_engine_recall_refuses_a_limit_past_its_cap(keyword_engine: cpersona.Engine) -> None:
    top = keyword_engine.settings.recall_max_limit
    with pytest.raises(InvalidRequest) as err:
        await keyword_engine.recall("x", agent_id="a", limit=top + 1)
    assert err.value.field == "limit"
    with pytest.raises(InvalidRequest) as err:
        await keyword_engine.recall("x", agent_id="a", limit=-1)
    assert err.value.field == "limit"
    checked(await keyword_engine.recall("x", agent_id="a", limit=top))


# --------------------------------------------------------------------------------- order and depth


async def test_best_last_is_the_exact_reverse(keyword_engine: cpersona.Engine) -> None:
    for word in ("first", "second", "third", "fourth"):
        await keyword_engine.store(f"the {word} note about the garden", agent_id="a")
    await keyword_engine.update_profile("a", "likes gardening")
    # deep on a pool of 4: 0.4223 * 0.5 * 3/61 = 0.01038, so keyword ranks 0-3 all pass
    for query in ("", "garden note"):
        best_first = checked(await keyword_engine.recall(query, agent_id="a", deep=True))
        best_last = checked(await keyword_engine.recall(query, agent_id="a", deep=True, order="best_last"))
        assert len(best_first.rows) >= 2
        assert [r.model_dump(mode="json") for r in best_last.rows] == [
            r.model_dump(mode="json") for r in reversed(best_first.rows)
        ]
        assert best_last.model_dump(mode="json")["order"] == "best_last"


async def test_depth_is_reported_only_when_it_differs_from_limit(make_engine: EngineFactory) -> None:
    async with make_engine(vectors=False, recall_depth_floor=20) as memory:
        await memory.store_batch([{"content": f"deploy note {i}", "agent_id": "a"} for i in range(25)])
        deep = checked(await memory.recall("deploy note", agent_id="a", limit=5))
        assert (deep.depth, deep.model_dump(mode="json")["depth"]) == (20, 20)
        # each arm handed fusion 20 candidates, and the answer is still 5 rows at most
        assert len(retrieved_of(deep).arms["memory_keyword"].rows) == 20
        assert len(deep.rows) <= 5
        wide = checked(await memory.recall("deploy note", agent_id="a", limit=25))
        assert wide.depth == 25
        assert "depth" not in wide.model_dump(mode="json")
        # a blank query and the cascade run at depth = limit
        for result in (
            await memory.recall("", agent_id="a", limit=5),
            await memory.recall("deploy note", agent_id="a", limit=5, mode="cascade"),
        ):
            assert checked(result).depth == 5
            assert "depth" not in result.model_dump(mode="json")
    async with make_engine(vectors=False) as memory:
        plain = checked(await memory.recall("deploy note", agent_id="a", limit=5))
        assert plain.depth == 5
        assert "depth" not in plain.model_dump(mode="json")


# ---------------------------------------------------------------------------------------- exclusions


async def test_exclude_contents_rules(keyword_engine: cpersona.Engine) -> None:
    report = "The quarterly report is due on the first Monday of April, send it to finance"
    parking = "Remember that the parking garage closes at nine on Fridays"
    party = "Kim's birthday party is on the fourteenth at the lake house"
    for text in (report, parking, party, "buy milk", "call mom"):
        await keyword_engine.store(text, agent_id="a")
    excludes = [
        report[:40].upper() + "  ",  # 40 chars: a prefix of the row, case and spaces ignored
        "  " + parking + " and take the bus",  # the row is a prefix of this long entry
        "  BUY MILK ",  # short: equal after strip + lower
        "call mo",  # short and not equal: no effect
        party[:31],  # under 32 characters: needs equality, so no effect
    ]
    result = checked(await keyword_engine.recall("", agent_id="a", exclude_contents=excludes))
    assert sorted(contents(result)) == sorted([party, "call mom"])
    nothing = checked(await keyword_engine.recall("", agent_id="a"))
    assert len(nothing.rows) == 5


async def test_exclude_contents_applies_to_the_vector_arm(shared_engine: cpersona.Engine, agent: str) -> None:
    lemon = "I bought fresh lemonade at the summer fair"
    await shared_engine.store(lemon, agent_id=agent)
    await shared_engine.store("Fresh lemonade stand opens at the park on Sunday", agent_id=agent)
    before = checked(await shared_engine.recall("lemonade at the fair", agent_id=agent, deep=True))
    assert lemon in contents(before)
    after = checked(
        await shared_engine.recall(
            "lemonade at the fair", agent_id=agent, deep=True, exclude_contents=[lemon]
        )
    )
    assert lemon not in contents(after)
    lemon_ref = before.rows[contents(before).index(lemon)].ref
    assert lemon_ref in {r.ref for r in retrieved_of(before).arms["vector_near"].rows}
    # dropped from every arm's list before fusion, not only from the answer
    assert all(r.ref != lemon_ref for arm in retrieved_of(after).arms.values() for r in arm.rows)


# --------------------------------------------------------------------------------------- scan window


async def test_vector_arm_searches_the_newest_window_of_the_scope(make_engine: EngineFactory) -> None:
    async with make_engine(vectors=True, max_memories=2) as memory:
        refs = []
        for flavour in ("lemon", "lime", "orange", "grape"):
            refs.append((await memory.store(f"I drank {flavour} lemonade at the fair", agent_id="a")).ref)
        # newer rows of another agent and of an episode do not take places in this agent's memory window
        await memory.store("I drank cherry lemonade at the fair", agent_id="b")
        await memory.archive_episode("we drank lemonade at the fair", agent_id="a")
        result = checked(await memory.recall("lemonade at the fair", agent_id="a", deep=True))
        near = retrieved_of(result).arms["vector_near"]
        memories = [r.ref for r in near.rows if r.ref.startswith("mem:")]
        # only the two newest memories of the scope (orange, grape) are searched; the episode has its
        # own window
        assert sorted(memories) == sorted(refs[2:])
        assert sum(r.ref.startswith("ep:") for r in near.rows) == 1


# ------------------------------------------------------------------------------------------- preview


async def test_preview_cut_and_full_content(keyword_engine: cpersona.Engine) -> None:
    text = "Long design note: " + "the cache keeps hot keys in memory and evicts cold ones; " * 22
    assert len(text) > 1000
    await keyword_engine.store(text, agent_id="a")
    await keyword_engine.store("a short note", agent_id="a")
    cut = checked(await keyword_engine.recall("", agent_id="a"))
    long_row = next(r for r in cut.rows if r.content_len == len(text))
    assert long_row.content == text[:500]
    assert long_row.content_truncated
    as_json = long_row.model_dump(mode="json")
    assert (as_json["content_truncated"], as_json["content_len"]) == (True, len(text))
    short = next(r for r in cut.rows if r.content == "a short note")
    assert not short.content_truncated
    assert "content_truncated" not in short.model_dump(mode="json")
    assert "content_len" not in short.model_dump(mode="json")
    whole = checked(await keyword_engine.recall("", agent_id="a", full_content=True))
    row = next(r for r in whole.rows if r.content_len == len(text))
    assert row.content == text
    assert not row.content_truncated
    assert "content_truncated" not in row.model_dump(mode="json")


async def test_a_record_missing_a_field_the_recall_reads_is_read_whole(
    keyword_engine: cpersona.Engine,
) -> None:
    # A recall reads only the fields it needs, by position in one JSON path; a record without one of
    # them (written by an older engine) must come back the same, not shifted, dropped or failing.
    a = await keyword_engine.store(
        "the lighthouse keeper paints the railings blue", agent_id="a", msg_id="m1"
    )
    b = await keyword_engine.store("the lighthouse keeper feeds the gulls at dawn", agent_id="a", msg_id="m2")
    ep = await keyword_engine.archive_episode("the lighthouse keeper's week in review", agent_id="a")

    async def shown() -> set[tuple[Any, ...]]:
        rows = [
            row
            for query in ("railings", "gulls", "review")
            for row in (await keyword_engine.recall(query, agent_id="a")).rows
        ]
        return {(r.ref, r.content, r.msg_id, r.timestamp, r.source) for r in rows}

    before = await shown()
    assert {ref for ref, *_ in before} == {a.ref, b.ref, ep.ref}
    client = keyword_engine.backends.stores.redis.json()
    # types-redis leaves JSON.DEL's signature unannotated.
    await client.delete(keyword_engine.keys.memory(a.id), "$.msg_id")  # type: ignore[no-untyped-call]
    await client.delete(keyword_engine.keys.episode(ep.id), "$.embedded")  # type: ignore[no-untyped-call]
    after = await shown()
    # The memory without msg_id shows the default, as a whole read of it gives; the rest is unchanged.
    assert after == {(r, c, "" if r == a.ref else m, t, s) for r, c, m, t, s in before}


async def test_preview_of_exactly_500_is_not_cut(keyword_engine: cpersona.Engine) -> None:
    text = ("x" * 9 + " ") * 50
    assert len(text.strip()) == 499
    exact = "y" + text.strip()
    await keyword_engine.store(exact, agent_id="a")
    (row,) = checked(await keyword_engine.recall("", agent_id="a")).rows
    assert (row.content, row.content_truncated, row.content_len) == (exact, False, 500)


# -------------------------------------------------------------------------------------------- source


async def _sourced(memory: cpersona.Engine, agent: str = "a") -> dict[str, str]:
    texts = {
        "discord:1": "standup notes from discord one: ship the release on Thursday",
        "discord:12": "standup notes from discord twelve: the release slips to Friday",
        "slack:1": "standup notes from slack: the release checklist is done",
        "discord": "standup notes from the discord bot: release reminder sent",
    }
    for source, text in texts.items():
        await memory.store(text, agent_id=agent, source={"type": "User", "id": source}, channel="c")
    return texts


async def test_source_filter_exact_and_prefix(keyword_engine: cpersona.Engine) -> None:
    texts = await _sourced(keyword_engine)
    cases = {
        "discord:1": ["discord:1"],  # ends in a digit: exact, so discord:12 is not included
        "discord:": ["discord:1", "discord:12"],  # ends in ':': prefix
        "discord": ["discord"],  # ends in a letter: exact
        "": ["discord:1", "discord:12", "slack:1", "discord"],
    }
    for source_id, sources in cases.items():
        result = checked(await keyword_engine.recall("", agent_id="a", source_id=source_id))
        assert sorted(contents(result)) == sorted(texts[s] for s in sources), source_id
        assert all(r.source is not None and r.source.id in sources for r in result.rows)


async def test_source_filter_on_the_vector_arm_and_episodes(
    shared_engine: cpersona.Engine, agent: str
) -> None:
    texts = await _sourced(shared_engine, agent)
    retro = "[Episode] standup retrospective: the release went out on time"
    await shared_engine.archive_episode(retro.removeprefix("[Episode] "), agent_id=agent, channel="c")
    query = "standup notes about the release"
    everything = checked(await shared_engine.recall(query, agent_id=agent, deep=True))
    # without a source filter the vector arm finds rows of every source, and the episode
    assert set(contents(everything)) == {*texts.values(), retro}
    prefixed = checked(await shared_engine.recall(query, agent_id=agent, deep=True, source_id="discord:"))
    # episodes have no source: a source filter without a channel leaves them out, from every arm
    assert sorted(contents(prefixed)) == sorted([texts["discord:1"], texts["discord:12"]])
    assert not any(r.ref.startswith("ep:") for arm in retrieved_of(prefixed).arms.values() for r in arm.rows)
    with_channel = checked(
        await shared_engine.recall(query, agent_id=agent, deep=True, source_id="discord:", channel="c")
    )
    assert sorted(contents(with_channel)) == sorted([texts["discord:1"], texts["discord:12"], retro])


# ------------------------------------------------------------------------------------------- profile


async def test_profile_row_needs_a_pool_of_50(keyword_engine: cpersona.Engine) -> None:
    for agent, count in (("small", 49), ("big", 50)):
        await keyword_engine.store_batch(
            [{"content": f"note {i} about the {agent} garden", "agent_id": agent} for i in range(count)]
        )
        await keyword_engine.update_profile(agent, f"the {agent} agent likes tomatoes")
    small = checked(await keyword_engine.recall("", agent_id="small"))
    assert [r.kind for r in small.rows] == ["memory"] * 10
    decisions = {d.ref: d for d in small.final.source.source.decisions}
    assert (decisions["profile:small"].passed, decisions["profile:small"].reason) == (
        False,
        "profile_small_pool",
    )
    big = checked(await keyword_engine.recall("", agent_id="big"))
    # blank query (cascade): the profile sits before the keyword rows, then 9 of them fill the limit
    assert big.rows[0].kind == "profile"
    assert big.rows[0].content == "[Profile] the big agent likes tomatoes"
    assert (big.rows[0].ref, big.rows[0].match_reason, big.rows[0].score) == (
        "profile:big",
        {"signal": "profile"},
        None,
    )
    assert [r.kind for r in big.rows[1:]] == ["memory"] * 9
    # under rrf the profile comes after every scored row
    scored = checked(await keyword_engine.recall("garden", agent_id="big"))
    assert scored.rows[-1].kind == "profile"
    assert all(r.kind == "memory" for r in scored.rows[:-1])
    assert not any(
        r.kind == "profile" for r in checked(await keyword_engine.recall("garden", agent_id="small")).rows
    )


# ----------------------------------------------------------------------------------------- blank query


async def test_blank_query_lists_the_newest_memories(keyword_engine: cpersona.Engine) -> None:
    for word in ("one", "two", "three", "four", "five"):
        await keyword_engine.store(f"entry {word}", agent_id="a")
    await keyword_engine.archive_episode("a session summary", agent_id="a")
    for blank in ("", "   "):
        result = checked(await keyword_engine.recall(blank, agent_id="a", limit=3))
        assert contents(result) == ["entry five", "entry four", "entry three"]
        # unscored rows: no score, and the reason says recency; they pass because the query is blank
        # (pool 6 < 100)
        assert all(r.match_reason == {"signal": "recency"} and r.score is None for r in result.rows)
        assert {d.signal for d in result.final.source.source.decisions} == {"unscored"}
    # limit 0 asks for nothing
    assert checked(await keyword_engine.recall("", agent_id="a", limit=0)).rows == ()


# ---------------------------------------------------------------------------------------- match_reason


async def test_match_reason_follows_the_gate_signal(shared_engine: cpersona.Engine, agent: str) -> None:
    fair = "I bought fresh lemonade at the summer fair"
    # the word is there, but the text is about something else: cosine to "lemonade" is far below the
    # vector floor (0.15), so only the keyword arm finds it
    ticket = (
        "The staging database moved to eu-west-2 after the failover drill; replication lag stayed under two "
        "seconds, the connection pool was resized to forty, and the nightly backup job now writes snapshots "
        "to the new bucket. Ticket lemonade."
    )
    await fillers(shared_engine, agent, 35)
    await shared_engine.store(fair, agent_id=agent)
    await shared_engine.store(ticket, agent_id=agent)
    result = checked(await shared_engine.recall("lemonade", agent_id=agent, mode="rrf"))
    arms = retrieved_of(result).arms
    near = {r.ref: r.raw for r in arms["vector_near"].rows}
    keyword = [r.ref for r in arms["memory_keyword"].rows]
    by_content = {r.content: r for r in result.rows}
    assert set(by_content) == {fair, ticket}
    fair_row, ticket_row = by_content[fair], by_content[ticket]
    assert fair_row.ref in near
    assert ticket_row.ref not in near
    # the fair row: near rank 0 and keyword rank 0 -> 2/61, gated on its cosine
    assert keyword == [fair_row.ref, ticket_row.ref]
    assert fair_row.match_reason == {
        "signal": "cosine",
        "score": near[fair_row.ref],
        "cosine": near[fair_row.ref],
        "rrf": 2 / 61,
    }
    assert fair_row.score == 2 / 61
    # the ticket row: keyword rank 1 only -> 1/62, lexical-only, gated on rrf against
    # min_score(37) * 3/61 = 0.3244 * 3/61 = 0.015954 (pool = 35 + 2)
    assert ticket_row.match_reason == {"signal": "rrf", "score": 1 / 62, "rrf": 1 / 62}
    gate = {d.ref: d for d in result.final.source.source.decisions}
    assert ticket_row.ref is not None
    assert gate[ticket_row.ref].threshold == 0.3244 * 3 / 61
    assert result.model_dump(mode="json")["rows"][0]["match_reason"]["signal"] == "cosine"
    # every returned row's reason names the signal the gate used for it
    for row in result.rows:
        assert row.ref is not None
        assert row.match_reason is not None
        assert row.match_reason["signal"] == gate[row.ref].signal
        assert row.match_reason["score"] == gate[row.ref].score


async def test_match_reason_under_rsf_and_cascade(shared_engine: cpersona.Engine, agent: str) -> None:
    await shared_engine.store("I bought fresh lemonade at the summer fair", agent_id=agent)
    rsf = checked(await shared_engine.recall("lemonade at the fair", agent_id=agent, mode="rsf", deep=True))
    assert rsf.rows
    for row in rsf.rows:
        assert row.match_reason is not None
        assert row.match_reason["signal"] == "rsf"
        assert row.match_reason["score"] == row.score
    cascade = checked(await shared_engine.recall("lemonade at the fair", agent_id=agent, mode="cascade"))
    (row,) = cascade.rows
    # found by the vector arm at the full threshold: gated and reported on its cosine
    assert row.match_reason is not None
    assert row.match_reason["signal"] == "cosine"
    assert row.score is None


# -------------------------------------------------------------------------------------------- isolation

_run = itertools.count()
kind_st = st.sampled_from(["memory", "episode"])


@hsettings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    records=st.lists(st.tuples(record_st, kind_st), min_size=1, max_size=8),
    reads=st.lists(scope_st, min_size=1, max_size=3),
)
async def test_recall_never_crosses_a_scope(
    shared_engine: cpersona.Engine,
    records: list[tuple[tuple[str, str, str, str], str]],
    reads: list[ReadScope],
) -> None:
    # fresh agent names per example, so examples never see each other's data
    run = f"r{next(_run)}-"
    refs: list[str] = []
    for n, ((agent, project, channel, source), kind) in enumerate(records):
        if kind == "memory":
            stored = await shared_engine.store(
                f"note {n} on the shared topic",
                agent_id=run + agent,
                project_id=project,
                channel=channel,
                source={"id": source},
            )
        else:
            stored = await shared_engine.archive_episode(
                f"note {n} on the shared topic", agent_id=run + agent, project_id=project, channel=channel
            )
        refs.append(stored.ref)

    def seen(read: ReadScope, n: int) -> bool:
        (agent, project, channel, source), kind = records[n]
        if kind == "memory":
            return visible(read, agent, project, channel, source)
        unsourced = ReadScope(read.agent_id, read.project_id, read.channel)
        return visible(unsourced, agent, project, channel, "") and (not read.source_id or bool(read.channel))

    for read in reads:
        fields: dict[str, Any] = {
            "agent_id": run + read.agent_id,
            "project_id": read.project_id,
            "channel": read.channel,
            "source_id": read.source_id,
            "limit": 100,
        }
        allowed = {f"note {n} on the shared topic" for n in range(len(records)) if seen(read, n)}
        allowed_memories = {
            f"note {n} on the shared topic"
            for n in range(len(records))
            if seen(read, n) and records[n][1] == "memory"
        }
        blank = checked(await shared_engine.recall("", **fields))
        # the blank listing is exactly the visible memories
        assert sorted(contents(blank)) == sorted(allowed_memories)
        asked = checked(await shared_engine.recall("note on the shared topic", deep=True, **fields))
        got = [c.removeprefix("[Episode] ") for c in contents(asked)]
        assert set(got) <= allowed
        # and no arm handed fusion a row outside the scope
        allowed_refs = {refs[n] for n in range(len(records)) if seen(read, n)}
        for result in (blank, asked):
            assert {r.ref for arm in retrieved_of(result).arms.values() for r in arm.rows} <= allowed_refs
