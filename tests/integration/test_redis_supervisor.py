"""The embedded Redis is supervised: killed under a running engine it comes back with every acknowledged
write, and it never outlives the engine that started it. Real SIGKILLs throughout."""

from __future__ import annotations

import os
import signal
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import httpx
import pytest

import cpersona
from cpersona.errors import RecordNotFound, RedisUnavailable
from cpersona.settings import Settings
from cpersona.stores.redis import server as server_module
from cpersona.stores.redis.connection import close_redis, connect_redis
from cpersona.stores.redis.server import EmbeddedRedis
from cpersona.stores.redis.shutdown import pid_gone
from cpersona.stores.redis.supervisor import MAX_DELAY_SECS, restart_delay, supervise
from serving import free_port, start_serve

if TYPE_CHECKING:
    import subprocess
    from pathlib import Path

    from cpersona.engine.facade import Engine

AGENT = "sup"


def test_restart_delay_starts_at_once_and_is_bounded() -> None:
    delays = [restart_delay(n) for n in range(1, 40)]
    assert delays[0] == 0.0
    assert delays == sorted(delays)
    assert delays[1] > 0
    assert max(delays) == MAX_DELAY_SECS == delays[-1]


async def _redis_pid(memory: Engine) -> int:
    return int((await memory.backends.stores.redis.info("server"))["process_id"])


async def _wait_serving(memory: Engine, ref: str) -> None:
    """Until a read answers again; every failed read meanwhile must be the typed outage (any other error
    propagates). The bound is a hang guard, not a measurement."""
    with anyio.fail_after(60):
        while True:
            try:
                await memory.get(ref, agent_id=AGENT)
                return
            except RedisUnavailable:
                await anyio.sleep(0.05)


async def _gone(pid: int, within_secs: float) -> None:
    with anyio.fail_after(within_secs):
        while True:
            if await anyio.to_thread.run_sync(pid_gone, pid):
                return
            await anyio.sleep(0.02)


async def _kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    await _gone(pid, 10)


async def test_killed_redis_is_restarted_and_loses_nothing_acknowledged(tmp_path: Path) -> None:
    async with cpersona.open(data_dir=tmp_path, embedding_mode="none") as memory:
        refs = [(await memory.store(f"parcel {n} left the depot", agent_id=AGENT)).ref for n in range(200)]
        for round_ in range(2):  # twice in a row: the second restart waits out the backoff
            pid = await _redis_pid(memory)
            await _kill(pid)  # every acknowledged write is on disk already: no fsync asked for here
            await _wait_serving(memory, refs[-1])
            assert await _redis_pid(memory) != pid, round_
            for ref in refs:
                assert (await memory.get(ref, agent_id=AGENT)).ref == ref
            refs.append((await memory.store(f"after restart {round_}", agent_id=AGENT)).ref)
    async with cpersona.open(data_dir=tmp_path, embedding_mode="none", background=False) as memory:
        for ref in refs:
            await memory.get(ref, agent_id=AGENT)
    log = (tmp_path / "redis" / "redis.log").read_text()
    assert log.count("Ready to accept connections") == 4


async def test_supervisor_ends_when_the_owner_stops_the_server(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, redis_startup_timeout_secs=30.0)
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg, EmbeddedRedis(settings) as server:
            pid = server.pid
            await tg.start(supervise, server)
    # The group ended: the supervisor saw the server exit, knew it was asked to, and returned.
    assert await anyio.to_thread.run_sync(pid_gone, pid)
    assert not (tmp_path / "redis" / "redis.pid").exists()
    assert (tmp_path / "redis" / "redis.log").read_text().count("Ready to accept connections") == 1


async def test_supervisor_passes_cancellation_through(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, redis_startup_timeout_secs=30.0)
    async with EmbeddedRedis(settings) as server:
        with anyio.move_on_after(0.5) as scope:
            await supervise(server)
        assert scope.cancelled_caught
        assert not await anyio.to_thread.run_sync(pid_gone, server.pid)


async def test_engine_opened_without_background_tasks_is_not_supervised(tmp_path: Path) -> None:
    async with cpersona.open(data_dir=tmp_path, embedding_mode="none", background=False) as memory:
        await _kill(await _redis_pid(memory))
        with pytest.raises(RedisUnavailable):
            await memory.get("mem:01900000-0000-7000-8000-000000000000", agent_id=AGENT)
        await anyio.sleep(0.5)
        with pytest.raises(RedisUnavailable):
            await memory.get("mem:01900000-0000-7000-8000-000000000000", agent_id=AGENT)


# ------------------------------------------------------------------ a real `cpersona serve`


async def _until_ok(
    client: httpx.AsyncClient, proc: subprocess.Popen[bytes], log: Path, **request: Any
) -> None:
    with anyio.fail_after(120):
        while True:
            if proc.poll() is not None:
                raise AssertionError(
                    f"serve exited with {proc.returncode}:\n{(await anyio.Path(log).read_text())[-3000:]}"
                )
            try:
                reply = await client.request(**request)
                if reply.status_code == 200:
                    return
                assert reply.status_code == 503, reply.text
            except httpx.TransportError:
                pass
            await anyio.sleep(0.1)


def _pid_in(path: Path) -> int:
    return int(path.read_text().strip())


async def test_serve_survives_its_redis_and_takes_it_along_when_killed(tmp_path: Path) -> None:
    data_dir, log, port = tmp_path / "data", tmp_path / "serve.log", free_port()
    pidfile = data_dir / "redis" / "redis.pid"
    proc = start_serve(data_dir, port, log, embedding_mode="none")
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            await _until_ok(client, proc, log, method="GET", url="/health")
            stored = await client.post("/v1/encode", json={"agent_id": AGENT, "content": "the van is blue"})
            assert stored.status_code == 200, stored.text
            ref = stored.json()["ref"]
            first = _pid_in(pidfile)
            await _kill(first)
            await _until_ok(
                client, proc, log, method="GET", url=f"/v1/records/{ref}", params={"agent_id": AGENT}
            )
            second = _pid_in(pidfile)
            assert second != first
            again = await client.post("/v1/encode", json={"agent_id": AGENT, "content": "the van is red"})
            assert again.status_code == 200, again.text
            refs = [ref, again.json()["ref"]]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        # The kernel tells the server its engine is gone; Redis fsyncs its AOF and exits.
        await _gone(second, 30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    assert "Received SIGTERM" in (data_dir / "redis" / "redis.log").read_text()
    async with cpersona.open(data_dir=data_dir, embedding_mode="none", background=False) as memory:
        for acked in refs:
            assert (await memory.get(acked, agent_id=AGENT)).ref == acked
        with pytest.raises(RecordNotFound):
            await memory.get("mem:01900000-0000-7000-8000-000000000000", agent_id=AGENT)


async def _logged(caplog: pytest.LogCaptureFixture, text: str) -> None:
    while True:
        if text in caplog.text:
            return
        await anyio.sleep(0.05)


async def test_a_failed_restart_is_stopped_and_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The first restart meets a server that never answers: it is stopped at the startup deadline and
    # the supervisor tries again after its pause, this time with the real binary.
    hang = tmp_path / "hanging-redis-server"
    hang.write_text("#!/bin/sh\nexec sleep 300\n")
    hang.chmod(0o755)
    real_command = server_module._command
    hanging = {"on": False}

    def command(binary: Path, layout: Any) -> list[str]:
        return [str(hang)] if hanging["on"] else real_command(binary, layout)

    monkeypatch.setattr(server_module, "_command", command)
    settings = Settings(data_dir=tmp_path / "data", redis_startup_timeout_secs=3.0, redis_timeout_secs=1.0)
    with anyio.fail_after(60):
        async with EmbeddedRedis(settings) as server, anyio.create_task_group() as tg:
            await tg.start(supervise, server)
            first = server.pid
            hanging["on"] = True
            await _kill(first)
            await _logged(caplog, "restarting the embedded redis-server failed")
            hanging["on"] = False
            await _logged(caplog, "is serving again")
            assert server.pid != first
            client = await connect_redis(settings, server.url)
            try:
                assert await client.ping()
            finally:
                await close_redis(client)
            tg.cancel_scope.cancel()
    assert "did not answer within 3.0s" in caplog.text
