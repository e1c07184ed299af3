"""A write is acknowledged only once it is on disk: a redis-server killed with SIGKILL right after the last
acknowledgement comes back with every acknowledged record. The kills are real and the test asks Redis for
no fsync of its own (no WAITAOF, no BGREWRITEAOF)."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
from typing import TYPE_CHECKING, Any, cast

import anyio
import anyio.to_thread
import httpx
import pytest

import cpersona
from cpersona.edges.http.app import create_app
from cpersona.errors import RedisUnavailable
from cpersona.settings import Settings
from cpersona.stores.redis import connection
from cpersona.stores.redis.binaries import module_files, redis_binary
from cpersona.stores.redis.connection import close_redis, connect_redis
from cpersona.stores.redis.durable import NOT_DURABLE
from cpersona.stores.redis.server import EmbeddedRedis
from cpersona.stores.redis.shutdown import pid_gone
from serving import free_port, start_serve, wait_healthy

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable
    from contextlib import AbstractAsyncContextManager
    from pathlib import Path

    from starlette.applications import Starlette

    from cpersona.engine.facade import Engine

AGENT = "dur"
# Written just before the last stores so that the disk is busy while they are acknowledged: an fsync of
# this much takes tens of milliseconds, the window in which a server that fsyncs in the background
# (appendfsync everysec) holds new writes back in memory and answers them all the same.
_BALLAST_BYTES = 32 << 20
_ROUNDS = 3


async def _redis_pid(memory: Engine) -> int:
    return int((await memory.backends.stores.redis.info("server"))["process_id"])


async def _busy_disk(memory: Engine) -> None:
    """Leave a large write for the disk to absorb; with a background fsync, wait until it is running."""
    # A background fsync follows a write at once only when the last fsync is a second old, and the one
    # after the last stores comes within a second of them: after two quiet seconds the ballast's is next.
    raw = cast("Any", memory.backends.stores.redis)
    # Each round adds the ballast to the AOF again; a rewrite it set off would change the timing.
    await raw.config_set("auto-aof-rewrite-percentage", 0)
    await anyio.sleep(2.1)
    await raw.set("ballast", b"x" * _BALLAST_BYTES)
    # A server that fsyncs before it answers never shows one pending, and goes on after the wait.
    with anyio.move_on_after(0.3):
        while True:
            if int((await memory.backends.stores.redis.info("persistence")).get("aof_pending_bio_fsync", 0)):
                return


async def _wait_serving(memory: Engine, ref: str) -> None:
    with anyio.fail_after(60):
        while True:
            try:
                await memory.get(ref, agent_id=AGENT)
                return
            except RedisUnavailable:
                await anyio.sleep(0.05)


def _kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)


async def _gone(pid: int) -> None:
    with anyio.fail_after(10):
        while True:
            if await anyio.to_thread.run_sync(pid_gone, pid):
                return
            await anyio.sleep(0.02)


async def _store_tail(memory: Engine, tail: str, round_: int) -> list[str]:
    """The last stores before the kill, few and quick so that they fit inside the fsync."""
    if tail == "single":
        return [(await memory.store(f"last parcel {round_}.{n}", agent_id=AGENT)).ref for n in range(2)]
    batch = [{"agent_id": AGENT, "content": f"last crate {round_}.{n}"} for n in range(10)]
    return [r.ref for r in (await memory.store_batch(batch)).results]


async def _missing(memory: Engine, refs: list[str]) -> list[str]:
    missing = []
    for ref in refs:
        try:
            await memory.get(ref, agent_id=AGENT)
        except cpersona.RecordNotFound:
            missing.append(ref)
    return missing


@pytest.mark.slow
@pytest.mark.parametrize("tail", ["single", "batch"])
async def test_a_kill_right_after_the_acknowledgement_loses_nothing(tmp_path: Path, tail: str) -> None:
    async with cpersona.open(data_dir=tmp_path, embedding_mode="none") as memory:
        refs = [(await memory.store(f"parcel {n} left", agent_id=AGENT)).ref for n in range(20)]
        for b in range(3):
            batch = [{"agent_id": AGENT, "content": f"crate {b}.{n} left"} for n in range(100)]
            refs += [r.ref for r in (await memory.store_batch(batch)).results]
        # Three kills: a background fsync is short, and a tail acknowledged after it ends is on disk even
        # with appendfsync everysec; one of three lands inside it nearly always (11 of 12 single rounds).
        for round_ in range(_ROUNDS):
            pid = await _redis_pid(memory)
            await _busy_disk(memory)
            refs += await _store_tail(memory, tail, round_)
            _kill(pid)  # no await between the last acknowledgement and the kill
            await _gone(pid)
            await _wait_serving(memory, refs[0])  # the supervisor restarts it; it replays its AOF
            missing = await _missing(memory, refs)
            assert not missing, f"round {round_}: {len(missing)} of {len(refs)} acknowledged records lost"


# ------------------------------------------------------------------ a write Redis does not confirm on disk


async def _all_writes(memory: Engine) -> list[Callable[[], Awaitable[object]]]:
    stored = await memory.store("the van left at noon", agent_id=AGENT)
    return [
        lambda: memory.store("the van came back", agent_id=AGENT),
        lambda: memory.store_batch([{"agent_id": AGENT, "content": "a crate of pears"}]),
        lambda: memory.update(stored.ref, agent_id=AGENT, content="the van left at one"),
        lambda: memory.archive_episode("a day of deliveries", agent_id=AGENT),
        lambda: memory.store_raw(
            "driver: on my way",
            agent_id=AGENT,
            session_id="s",
            source="conversation",
            speaker="user",
            visibility="normal",
            secrecy_level="public",
        ),
        lambda: memory.delete(stored.ref, agent_id=AGENT),
    ]


_NOT_CONFIRMED = [
    # appendfsync no: WAITAOF answers 0 once its own wait (half the reply deadline: 500 ms) is up.
    (("appendfsync", "no"), "no fsync within 500 ms"),
    # appendonly no: WAITAOF refuses at once.
    (("appendonly", "no"), "Redis answered"),
]


@pytest.mark.parametrize(("setting", "why"), _NOT_CONFIRMED)
async def test_a_write_not_confirmed_on_disk_fails_as_unavailable(
    tmp_path: Path, setting: tuple[str, str], why: str
) -> None:
    # A server that stops fsyncing or drops its AOF under a running engine: every kind of write fails,
    # typed, and ended by the WAITAOF's own answer (not by the client's socket deadline, not a hang).
    settings = Settings(data_dir=tmp_path, embedding_mode="none", redis_timeout_secs=1.0)
    async with cpersona.open(settings, background=False) as memory:
        writes = await _all_writes(memory)
        await cast("Any", memory.backends.stores.redis).config_set(*setting)
        for write in writes:
            with anyio.fail_after(60), pytest.raises(RedisUnavailable) as caught:  # a hang guard only
                await write()
            assert caught.value.code == NOT_DURABLE
            assert caught.value.status == 503
            assert "on disk" in str(caught.value)
            assert why in str(caught.value)


async def test_http_answers_503_for_a_write_not_confirmed_on_disk(
    tmp_path: Path, serve_asgi: Callable[[Starlette], AbstractAsyncContextManager[httpx.AsyncClient]]
) -> None:
    settings = Settings(data_dir=tmp_path / "redis-home", redis_timeout_secs=1.0)
    async with EmbeddedRedis(settings) as server:
        client = await connect_redis(settings, server.url)
        try:
            engine = settings.with_(data_dir=tmp_path / "data", redis_url=server.url, embedding_mode="none")
            async with serve_asgi(create_app(engine, background=False)) as http:
                body = {"agent_id": AGENT, "content": "the office moves"}
                await cast("Any", client).config_set("appendfsync", "no")
                reply = await http.post("/v1/encode", json=body)
                assert reply.status_code == 503, reply.text
                assert reply.json()["error"]["code"] == NOT_DURABLE
                assert str(tmp_path) not in reply.json()["error"]["message"]
                assert "not acknowledged; retry it" in reply.json()["error"]["message"]
                await cast("Any", client).config_set("appendfsync", "always")
                reply = await http.post("/v1/encode", json={**body, "content": "the office moved"})
                assert reply.status_code == 200, reply.text
        finally:
            await close_redis(client)


# ------------------------------------------------------------------ a Redis of its own (CPERSONA_REDIS_URL)


@contextlib.asynccontextmanager
async def _plain_redis(tmp_path: Path, *options: str) -> AsyncIterator[str]:
    """A redis-server with search and JSON, started with ``options``; yields its URL."""
    sock = tmp_path / "own.sock"
    modules = [
        arg for path in await anyio.to_thread.run_sync(module_files) for arg in ("--loadmodule", str(path))
    ]
    binary = await anyio.to_thread.run_sync(redis_binary)
    process = await anyio.open_process(
        [
            str(binary),
            "--port",
            "0",
            "--unixsocket",
            str(sock),
            "--save",
            "",
            "--dir",
            str(tmp_path),
            "--logfile",
            str(tmp_path / "own.log"),
            *modules,
            *options,
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with anyio.fail_after(30):
            while True:
                if await anyio.Path(sock).exists():
                    break
                await anyio.sleep(0.05)
        yield f"unix://{sock}"
    finally:
        process.terminate()
        with anyio.fail_after(20):
            await process.wait()
        await process.aclose()


_NO_FSYNC = [("--appendonly", "no"), ("--appendonly", "yes", "--appendfsync", "no")]


@pytest.mark.parametrize("options", _NO_FSYNC, ids=["off", "no-fsync"])
async def test_a_redis_that_does_not_fsync_an_aof_is_refused_at_open(
    tmp_path: Path, options: tuple[str, ...]
) -> None:
    async with _plain_redis(tmp_path, *options) as url:
        with pytest.raises(RedisUnavailable, match="does not fsync an append-only file"):
            await connect_redis(Settings(redis_timeout_secs=2.0), url)
        # A reader that never writes (trace tail) may still use it.
        reader = await connect_redis(Settings(redis_timeout_secs=2.0), url, writes=False)
        await connection.close_redis(reader)


def test_a_redis_older_than_7_2_is_refused() -> None:
    # No such server ships with the project, so the check is run on what connect_redis reads.
    found = {"version": "7.0.15", "aof": True, "fsync": "always"}
    with pytest.raises(RedisUnavailable, match=r"is version 7\.0\.15: cpersona needs 7\.2 or later"):
        connection._check_persistence(cast("Any", found), "redis://old.example")
    connection._check_persistence(cast("Any", {**found, "version": "7.2.4"}), "redis://new.example")


async def test_a_redis_that_fsyncs_once_a_second_is_used_and_each_write_waits_for_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with _plain_redis(tmp_path, "--appendonly", "yes", "--appendfsync", "everysec") as url:
        caplog.set_level(logging.WARNING, "cpersona.redis")
        client = await connect_redis(Settings(redis_timeout_secs=5.0), url)
        await close_redis(client)
        assert "appendfsync everysec" in caplog.text
        settings = Settings(data_dir=tmp_path / "data", redis_url=url, embedding_mode="none")
        async with cpersona.open(settings, background=False) as memory:
            # Each store's WAITAOF waits for the next fsync (up to a second), then answers 1.
            refs = [(await memory.store(f"box {n}", agent_id=AGENT)).ref for n in range(3)]
            for ref in refs:
                await memory.get(ref, agent_id=AGENT)


# ------------------------------------------------------------------ vectors: a real `cpersona serve` killed


@pytest.mark.slow
async def test_a_killed_serve_keeps_the_vector_of_every_acknowledged_store(
    tmp_path: Path, model_dir: Path
) -> None:
    # The vector is written (and flushed) before the document, so a 200 means both are on disk: after a
    # SIGKILL of the whole server right after the last 200, every record has its vector, none pending.
    data_dir, log, port = tmp_path / "data", tmp_path / "serve.log", free_port()
    (model_dir / "models").mkdir(exist_ok=True)
    data_dir.mkdir()
    (data_dir / "models").symlink_to(model_dir / "models")  # the session's built model, not a new one
    proc = start_serve(data_dir, port, log, embedding_mode="onnx")
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            await wait_healthy(client, proc, log)
            ids = []
            for n in range(12):
                body = {"agent_id": AGENT, "content": f"the courier dropped parcel {n} at the door"}
                reply = await client.post("/v1/encode", json=body)
                assert reply.status_code == 200, reply.text
                assert reply.json()["embedded"] is True
                ids.append(reply.json()["ref"].removeprefix("mem:"))
            batch = [{"agent_id": AGENT, "content": f"crate {n} of pears came in"} for n in range(20)]
            reply = await client.post("/v1/encode/batch", json={"records": batch})
            assert reply.status_code == 200, reply.text
            ids += [r["ref"].removeprefix("mem:") for r in reply.json()["results"]]
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    # Read before any start-up repair runs (no embedder, no sweep of vectors): nothing was deferred.
    async with cpersona.open(data_dir=data_dir, embedding_mode="none", background=False) as memory:
        assert (await memory.stats(AGENT))["vector_pending"] == 0
    settings = Settings(data_dir=data_dir, embedding_mode="onnx")
    async with cpersona.open(settings, background=False) as memory:
        assert memory.backends.vectors is not None
        assert len(await memory.backends.vectors.existing(ids)) == len(ids)
        stats = await memory.stats(AGENT)
        assert (stats["memories"], stats["vectors"], stats["vector_pending"]) == (len(ids), len(ids), 0)
