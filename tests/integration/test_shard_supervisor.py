"""The embedded vector shards are supervised: a shard whose child process is killed comes back, the
stores made while it was down get their vectors, and readiness says it was down. Real SIGKILLs.

While the shard is down the test holds its WAL directory's lock (the lock the engine's shard takes): the
supervisor's restarts are then refused, so the outage lasts until the test lets go, however fast the
machine restarts a child.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

import cpersona
from cpersona.settings import Settings
from cpersona.stores.redis.shutdown import pid_gone
from cpersona.stores.vectors.edge import EdgeVectorStore
from serving import asked_over_http

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from cpersona.engine.facade import Engine

AGENT = "shard-sup"
_GUARD_SECS = 120  # a hang guard, not a measurement


def _records_shard(memory: Engine) -> EdgeVectorStore:
    store = memory.backends.vectors
    assert isinstance(store, EdgeVectorStore)
    assert store.process_id is not None
    return store


@contextlib.contextmanager
def _directory_fd(path: Path) -> Iterator[int]:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield fd
    finally:
        os.close(fd)


async def _readiness(memory: Engine) -> tuple[int, dict[str, Any]]:
    """``GET /readiness`` answered by the HTTP app over this engine (the state its lifespan would give)."""
    reply = await asked_over_http(memory, "GET", "/readiness")
    return reply.status_code, reply.json()


async def _until(memory: Engine, check: str) -> None:
    with anyio.fail_after(_GUARD_SECS):
        while True:
            if await _holds(memory, check):
                return
            await anyio.sleep(0.05)


async def _until_gone(pid: int) -> None:
    with anyio.fail_after(_GUARD_SECS):
        while True:
            if await anyio.to_thread.run_sync(pid_gone, pid):
                return
            await anyio.sleep(0.01)


async def _holds(memory: Engine, check: str) -> bool:
    if check == "down":
        return (await memory.readiness()).components["vectors.records"] == "down"
    ready = await memory.readiness()
    if not ready.ready:
        return False
    result = await memory.recall("parcel depot", agent_id=AGENT, limit=5)
    stats = await memory.stats(AGENT)
    return result.degraded == () and stats["vector_pending"] == 0


async def test_a_killed_shard_is_restarted_and_its_pending_vectors_finished(tmp_path: Path) -> None:
    async with cpersona.open(data_dir=tmp_path) as memory:
        shard = _records_shard(memory)
        refs = [(await memory.store(f"parcel {n} left the depot", agent_id=AGENT)).ref for n in range(20)]
        ready = await memory.readiness()
        assert ready.ready
        assert ready.components == {
            "redis": "up",
            "vectors.records": "up",
            "vectors.blocks": "up",
            "embedder": "up",
        }
        first = shard.process_id
        assert first is not None
        with _directory_fd(shard.path / "wal") as wal:
            async with anyio.create_task_group() as tg:
                # Blocks until the killed child's lock is released, long before a new child could start.
                tg.start_soon(lambda: anyio.to_thread.run_sync(fcntl.flock, wal, fcntl.LOCK_EX))
                os.kill(first, signal.SIGKILL)
            # The lock is let go when the dying child's files close, a moment before it turns zombie.
            await _until_gone(first)
            await _until(memory, "down")
            status, body = await _readiness(memory)
            assert status == 503, body
            assert (body["status"], body["reason"], body["components"]) == (
                "not_ready",
                "vectors.records unavailable",
                {"redis": "up", "vectors.records": "down", "vectors.blocks": "up", "embedder": "up"},
            )
            # Stores go on while the shard is down: saved, their vectors left pending; recall is degraded.
            during = [await memory.store(f"parcel {n} came back late", agent_id=AGENT) for n in range(5)]
            assert all(stored.vector_pending for stored in during)
            refs += [stored.ref for stored in during]
            assert [d.arm for d in (await memory.recall("parcel", agent_id=AGENT)).degraded]
            # (stats counts vectors too, so it answers 503 until the shard is back)
            assert await memory.backends.stores.redis.scard(memory.keys.vector_pending) == 5
            fcntl.flock(wal, fcntl.LOCK_UN)
        await _until(memory, "recovered")
        second = shard.process_id
        assert second is not None
        assert second != first
        assert not await anyio.to_thread.run_sync(pid_gone, second)
        ids = [ref.partition(":")[2] for ref in refs]
        assert await shard.existing(ids) == set(ids)
        assert (await memory.stats(AGENT))["vectors"] == len(refs)
        status, body = await _readiness(memory)
        assert status == 200, body
        assert body["components"]["vectors.records"] == "up"
    assert await anyio.to_thread.run_sync(pid_gone, second)


async def test_readiness_reports_an_engine_without_vectors(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, embedding_mode="none")
    async with cpersona.open(settings=settings) as memory:
        status, body = await _readiness(memory)
    assert status == 200, body
    assert body == {
        "ok": True,
        "status": "ready",
        "components": {"redis": "up", "vectors.records": "off", "vectors.blocks": "off", "embedder": "off"},
        "mode": "read-write",
    }
