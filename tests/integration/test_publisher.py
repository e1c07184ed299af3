"""The live trace channel: the bounded queue, the publisher task, sampling, and traces end to end.

The end-to-end tests subscribe to the real trace channels on the session's Redis (the test's key prefix
keeps the channels apart from other tests'), run recalls on a real engine (keyword-only: the trace's
shape does not depend on the embedder) and check that exactly the traced recalls arrive, in order, and
equal to the traces the recalls returned. Engines opened in a test body run the publisher task in the
background; engines used across fixture boundaries are opened with ``background=False`` and drained.
What the sink itself promises on every backend is the contract suite's
(tests/contract/test_trace_channels.py).
"""

from __future__ import annotations

import contextlib
import random
from typing import TYPE_CHECKING, Any, cast

import anyio
import orjson
import pytest
from benchmarks.in_process import running

import cpersona
from cpersona import Settings
from cpersona.edges.http.app import create_app
from cpersona.keys import Keys
from cpersona.model.trace import RecallTrace, RecallTraceFailure, ReconstructTrace
from cpersona.recall.trace.publisher import TracePublisher, TraceStats, encode_trace
from cpersona.stores.redis.connection import close_redis, new_client
from cpersona.stores.redis.trace_sink import RedisTraceSink

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from pathlib import Path

    from cpersona.stores.redis.connection import RedisClient

AGENT = "tracer"
_WAIT_SECS = 10.0
_QUIET_SECS = 0.3


@pytest.fixture
def engine_settings(settings: Settings, redis: RedisClient) -> Settings:
    # ``redis`` is requested so that this test's keys and indexes are dropped when it ends.
    return settings.with_(embedding_mode="none")


@contextlib.asynccontextmanager
async def engine_with_memories(settings: Settings, **options: Any) -> AsyncIterator[cpersona.Engine]:
    async with cpersona.open(settings, **options) as memory:
        await memory.store_batch(
            [
                {"content": "The deploy key rotates every Friday", "agent_id": AGENT, "project_id": "ops"},
                {"content": "Staging deploys need a green build", "agent_id": AGENT, "project_id": "ops"},
                {"content": "The cafeteria closes at three", "agent_id": AGENT},
                {"content": "Deploy freezes start in December", "agent_id": "other"},
            ]
        )
        yield memory


class Listener:
    """A subscription to trace channels on the test Redis, collecting the decoded traces."""

    def __init__(self, client: RedisClient) -> None:
        self.pubsub = client.pubsub()

    async def subscribe(self, *, channel: str | None = None, pattern: str | None = None) -> None:
        if channel is not None:
            await self.pubsub.subscribe(channel)
        if pattern is not None:
            await self.pubsub.psubscribe(pattern)
        with anyio.fail_after(_WAIT_SECS):
            while True:
                reply = await self.pubsub.get_message(timeout=1.0)
                if reply is not None and reply["type"] in (
                    b"subscribe",
                    b"psubscribe",
                    "subscribe",
                    "psubscribe",
                ):
                    return

    async def receive(self, n: int) -> list[tuple[str, dict[str, Any]]]:
        """``n`` messages as ``(channel, trace)``, then nothing more for a moment."""
        got: list[tuple[str, dict[str, Any]]] = []
        with anyio.fail_after(_WAIT_SECS):
            while len(got) < n:
                message = await self.pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                if message is not None:
                    got.append((message["channel"].decode(), orjson.loads(message["data"])))
        extra = await self.pubsub.get_message(ignore_subscribe_messages=True, timeout=_QUIET_SECS)
        assert extra is None, extra
        return got

    async def aclose(self) -> None:
        # The type stubs predate aclose (close is deprecated in redis-py and warns).
        await cast("Any", self.pubsub).aclose()


@pytest.fixture
async def listener(redis: RedisClient) -> AsyncIterator[Listener]:
    listening = Listener(redis)
    try:
        yield listening
    finally:
        await listening.aclose()


async def until(condition: Callable[[], bool]) -> None:
    with anyio.fail_after(_WAIT_SECS):
        while True:
            if condition():
                return
            await anyio.sleep(0.02)


def as_published(trace: object) -> object:
    """What a subscriber decodes from a published trace."""
    assert isinstance(trace, RecallTrace | RecallTraceFailure | ReconstructTrace)
    return orjson.loads(encode_trace(trace))


def numbered(n: int) -> RecallTraceFailure:
    """A small trace told apart by its number."""
    return RecallTraceFailure(trace_version=1, error=f"E{n}")


# ------------------------------------------------------------------------------------------ the queue


async def test_a_full_queue_drops_and_counts(redis: RedisClient, key_prefix: str) -> None:
    publisher = TracePublisher(RedisTraceSink(redis, Keys(key_prefix)), capacity=2, timeout_secs=5.0)
    try:
        accepted = [publisher.offer(AGENT, numbered(n)) for n in range(5)]
        assert accepted == [True, True, False, False, False]
        assert publisher.stats() == TraceStats(capacity=2, queued=2, published=0, dropped=3, failed=0)
        assert await publisher.drain() == 2
        assert publisher.stats() == TraceStats(capacity=2, queued=0, published=2, dropped=3, failed=0)
        # Room again once drained.
        assert publisher.offer(AGENT, numbered(5))
    finally:
        publisher.close()
    # A closed publisher refuses (and counts) instead of raising into the recall that offers.
    assert not publisher.offer(AGENT, numbered(6))
    assert publisher.stats().dropped == 4


async def test_the_publisher_survives_redis_errors(key_prefix: str) -> None:
    dead = new_client("redis://127.0.0.1:1/0", timeout=0.5, retries=0)
    publisher = TracePublisher(RedisTraceSink(dead, Keys(key_prefix)), capacity=10, timeout_secs=0.5)
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(publisher.run)
            for n in range(3):
                assert publisher.offer(AGENT, numbered(n))
            await until(lambda: publisher.stats().failed >= 3)
            # Still running: it takes the next one too.
            assert publisher.offer(AGENT, numbered(3))
            await until(lambda: publisher.stats().failed >= 4)
            tg.cancel_scope.cancel()
        assert publisher.stats() == TraceStats(capacity=10, queued=0, published=0, dropped=0, failed=4)
    finally:
        publisher.close()
        await close_redis(dead)


async def test_a_value_json_cannot_hold_is_counted_not_raised(redis: RedisClient, key_prefix: str) -> None:
    publisher = TracePublisher(RedisTraceSink(redis, Keys(key_prefix)), capacity=4, timeout_secs=5.0)
    try:
        # A trace that does not hold what its model declares (built around validation) is refused.
        publisher.offer(AGENT, RecallTraceFailure.model_construct(trace_version=1, error=object()))
        publisher.offer(AGENT, numbered(1))
        assert await publisher.drain() == 2
        assert publisher.stats().failed == 1
        assert publisher.stats().published == 1
    finally:
        publisher.close()


async def test_only_one_publishing_task(redis: RedisClient, key_prefix: str) -> None:
    publisher = TracePublisher(RedisTraceSink(redis, Keys(key_prefix)), capacity=4, timeout_secs=5.0)
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(publisher.run)
            with pytest.raises(RuntimeError, match="already"):
                await publisher.run()
            tg.cancel_scope.cancel()
    finally:
        publisher.close()


# ------------------------------------------------------------------------------------- end to end


async def test_exactly_the_traced_recalls_are_published_in_order(
    engine_settings: Settings, listener: Listener
) -> None:
    keys = Keys(engine_settings.key_prefix)
    await listener.subscribe(channel=keys.trace_channel(AGENT))
    async with engine_with_memories(engine_settings, background=False) as memory:
        traced = []
        for n, question in enumerate(["deploy key", "green build", "cafeteria", "deploy", "friday"]):
            untraced = await memory.recall(question, agent_id=AGENT, limit=3)
            assert untraced.trace is None
            assert "trace" not in untraced.model_dump(mode="json")
            result = await memory.recall(question, agent_id=AGENT, limit=3 + n, trace=True)
            assert result.trace is not None
            assert result.model_dump(mode="json")["trace"] == result.trace.model_dump(mode="json")
            traced.append(result.trace)
        assert await memory.drain_traces() == len(traced)
        received = await listener.receive(len(traced))
        assert memory.trace_stats() == TraceStats(
            capacity=engine_settings.trace_queue_size, queued=0, published=5, dropped=0, failed=0
        )
        health = await memory.health()
        assert health["traces"] == memory.trace_stats().model_dump(mode="json")
    assert [channel for channel, _ in received] == [keys.trace_channel(AGENT)] * len(traced)
    assert [trace for _, trace in received] == [as_published(t) for t in traced]
    assert [trace["request"]["limit"] for _, trace in received] == [3, 4, 5, 6, 7]
    for _, trace in received:
        assert trace["scope"]["agent_id"] == AGENT
        assert {"arms", "gate", "order", "timing_ms"} <= set(trace)


async def test_each_agent_has_its_own_channel(engine_settings: Settings, listener: Listener) -> None:
    keys = Keys(engine_settings.key_prefix)
    await listener.subscribe(pattern=keys.trace_pattern)
    async with engine_with_memories(engine_settings, background=False) as memory:
        mine = await memory.recall("deploy", agent_id=AGENT, trace=True)
        theirs = await memory.recall("deploy", agent_id="other", trace=True)
        await memory.drain_traces()
        received = await listener.receive(2)
    assert received == [
        (keys.trace_channel(AGENT), as_published(mine.trace)),
        (keys.trace_channel("other"), as_published(theirs.trace)),
    ]


async def test_sampling_everything_publishes_every_recall_and_returns_no_trace(
    engine_settings: Settings, listener: Listener
) -> None:
    keys = Keys(engine_settings.key_prefix)
    await listener.subscribe(channel=keys.trace_channel(AGENT))
    sampled = engine_settings.with_(trace_sample=1.0)
    async with engine_with_memories(sampled, background=False) as memory:
        questions = ["deploy key", "green build", "cafeteria"]
        for question in questions:
            result = await memory.recall(question, agent_id=AGENT)
            assert result.trace is None
            assert "trace" not in result.model_dump(mode="json")
        # A request that asks still gets its trace (and it is published once, not twice).
        asked = await memory.recall("deploy", agent_id=AGENT, trace=True)
        assert asked.trace is not None
        assert await memory.drain_traces() == len(questions) + 1
        received = await listener.receive(len(questions) + 1)
    assert received[-1][1] == as_published(asked.trace)
    assert all(trace["scope"]["agent_id"] == AGENT for _, trace in received)


async def test_sampling_nothing_publishes_only_requested_traces(
    engine_settings: Settings, listener: Listener
) -> None:
    keys = Keys(engine_settings.key_prefix)
    await listener.subscribe(pattern=keys.trace_pattern)
    async with engine_with_memories(engine_settings, background=False) as memory:
        assert memory.settings.trace_sample == 0.0
        for question in ["deploy key", "green build", "cafeteria"]:
            await memory.recall(question, agent_id=AGENT)
        assert await memory.drain_traces() == 0
        assert await listener.receive(0) == []
        assert memory.trace_stats().published == 0


async def test_a_sampled_fraction_follows_the_seed(engine_settings: Settings) -> None:
    seeded = engine_settings.with_(trace_sample=0.5, trace_sample_seed=7)
    rng = random.Random(7)
    expected = sum(rng.random() < 0.5 for _ in range(20))
    assert 0 < expected < 20
    async with engine_with_memories(seeded, background=False) as memory:
        for _ in range(20):
            result = await memory.recall("deploy", agent_id=AGENT)
            assert result.trace is None
        assert await memory.drain_traces() == expected


def test_trace_settings_are_checked(tmp_path: Path) -> None:
    from cpersona import InvalidSetting

    env = {"CPERSONA_DATA_DIR": str(tmp_path)}
    ok = Settings.from_env({**env, "CPERSONA_TRACE_SAMPLE": "0.25", "CPERSONA_TRACE_QUEUE_SIZE": "5"})
    assert (ok.trace_sample, ok.trace_queue_size, ok.trace_sample_seed) == (0.25, 5, None)
    for name, value in (("CPERSONA_TRACE_SAMPLE", "1.5"), ("CPERSONA_TRACE_SAMPLE", "-0.1")):
        with pytest.raises(InvalidSetting, match=name):
            Settings.from_env({**env, name: value})
    with pytest.raises(InvalidSetting, match="CPERSONA_TRACE_QUEUE_SIZE"):
        Settings.from_env({**env, "CPERSONA_TRACE_QUEUE_SIZE": "0"})


# ----------------------------------------------------------------------------------- in the background


async def test_open_publishes_in_the_background(engine_settings: Settings, listener: Listener) -> None:
    keys = Keys(engine_settings.key_prefix)
    await listener.subscribe(channel=keys.trace_channel(AGENT))
    async with engine_with_memories(engine_settings) as memory:
        first = await memory.recall("deploy key", agent_id=AGENT, trace=True)
        # No drain: the background task publishes it.
        assert await listener.receive(1) == [(keys.trace_channel(AGENT), as_published(first.trace))]
        # Queued just before the engine closes: the publisher flushes it on its way out.
        last = await memory.recall("green build", agent_id=AGENT, trace=True)
    assert await listener.receive(1) == [(keys.trace_channel(AGENT), as_published(last.trace))]


async def test_the_http_lifespan_publishes_and_reports(engine_settings: Settings, listener: Listener) -> None:
    keys = Keys(engine_settings.key_prefix)
    await listener.subscribe(channel=keys.trace_channel(AGENT))
    app = create_app(engine_settings)
    async with running(app) as (_, state):
        memory = state["engine"]
        await memory.store("Served over HTTP", agent_id=AGENT)
        result = await memory.recall("served", agent_id=AGENT, trace=True)
        assert await listener.receive(1) == [(keys.trace_channel(AGENT), as_published(result.trace))]
        health = await memory.health()
        assert health["traces"]["published"] == 1
        assert health["traces"]["dropped"] == 0
