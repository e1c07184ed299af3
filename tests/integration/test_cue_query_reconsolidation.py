"""Reconsolidation after a cue query, on the real Redis: written after the answer (never before it
returns), by the engine's background group or a drain, once per request id."""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING

import anyio
import pytest

import cpersona
from cpersona.model.fidelity import RETRIEVAL_BOOST

if TYPE_CHECKING:
    from pathlib import Path

# The background group writes a strengthening soon after the answer; this only stops a test that would hang.
_HANG_GUARD_SECS = 60


def _agent() -> str:
    return "rc-" + uuid.uuid4().hex[:10]


async def _stored(engine: cpersona.Engine, ref: str) -> dict[str, float]:
    found = await engine.backends.stores.cues.stored_fidelity(ref[4:])
    assert found is not None
    return dict(found)


async def test_the_answer_comes_first_and_the_drain_strengthens_once(engine: cpersona.Engine) -> None:
    agent = _agent()
    stored = await engine.store("tea with lemon", agent_id=agent)
    before = await _stored(engine, stored.ref)
    began = time.time()
    result = await engine.query({"text": "tea"}, agent_id=agent, request_id="req-1")
    assert [m.record.ref for m in result.memories] == [stored.ref]
    # Nothing written yet: the strengthening is queued behind the answer.
    assert await _stored(engine, stored.ref) == before
    assert result.memories[0].record.access_count == 0
    assert await engine.drain_reconsolidations() == 1
    after = await _stored(engine, stored.ref)
    assert after["reinforcement_count"] == 1
    assert after["access_count"] == 1
    assert after["stability"] == pytest.approx(1.0 * (1 + RETRIEVAL_BOOST))  # S=1 -> 2.5
    assert after["last_accessed_at"] >= began
    # The same request again (a retry): nothing more.
    await engine.query({"text": "tea"}, agent_id=agent, request_id="req-1")
    assert await engine.drain_reconsolidations() == 1
    assert await _stored(engine, stored.ref) == after
    # Another request strengthens again.
    await engine.query({"text": "tea"}, agent_id=agent, request_id="req-2")
    await engine.drain_reconsolidations()
    again = await _stored(engine, stored.ref)
    assert again["reinforcement_count"] == 2
    assert again["stability"] == pytest.approx(2.5 * (1 + RETRIEVAL_BOOST * 2.5**-0.2))
    stats = engine.reconsolidation_stats()
    assert (stats.applied, stats.repeated, stats.dropped, stats.failed) == (2, 1, 0, 0)


async def test_reconsolidate_false_writes_nothing(engine: cpersona.Engine) -> None:
    agent = _agent()
    stored = await engine.store("coffee black", agent_id=agent)
    before = await _stored(engine, stored.ref)
    await engine.query({"text": "coffee"}, agent_id=agent, reconsolidate=False)
    assert await engine.drain_reconsolidations() == 0
    assert await _stored(engine, stored.ref) == before


async def test_two_requests_at_once_both_count(engine: cpersona.Engine) -> None:
    agent = _agent()
    stored = await engine.store("green tea", agent_id=agent)

    async def one(n: int) -> None:
        await engine.query({"text": "tea"}, agent_id=agent, request_id=f"r{n}")

    async with anyio.create_task_group() as tg:
        for n in range(4):
            tg.start_soon(one, n)
    # Drained concurrently too: the compare-and-set keeps every one of the four.
    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(engine.drain_reconsolidations)
    assert (await _stored(engine, stored.ref))["reinforcement_count"] == 4


async def test_the_background_group_writes_it(
    redis: object, redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    settings = cpersona.Settings(
        data_dir=tmp_path, redis_url=redis_url, key_prefix=key_prefix, embedding_mode="none"
    )
    async with cpersona.open(settings) as memory:
        stored = await memory.store("rooibos", agent_id="bg")
        await memory.query({"text": "rooibos"}, agent_id="bg")
        with anyio.fail_after(_HANG_GUARD_SECS):
            while (await _stored(memory, stored.ref))["reinforcement_count"] < 1:  # noqa: ASYNC110 - polls Redis
                await anyio.sleep(0.01)
