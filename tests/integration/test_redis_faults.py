"""Redis answers that it cannot serve: each reply class is a 503 with its own stable code, never a 500.

The mapping is checked over redis-py's own reply parser, and every class that can be provoked on a real
embedded Redis is provoked there: OOM (``maxmemory 1``), READONLY and MASTERDOWN (a replica of a master
that is not there), NOREPLICAS (``min-replicas-to-write``), BUSY (a script that loops) and MISCONF (a
snapshot that cannot be renamed into place) and LOADING (a replica slowly loading its master's data).
"""

from __future__ import annotations

import contextlib
import socket
import urllib.parse
from typing import TYPE_CHECKING, Any, cast

import anyio
import httpx
import pytest
import redis.exceptions
from redis._parsers.base import BaseParser

from cpersona.edges.http.app import create_app
from cpersona.edges.http.errors import RequestEdge
from cpersona.errors import RedisUnavailable
from cpersona.settings import Settings
from cpersona.stores.redis.connection import as_unavailable, close_redis, connect_redis, redis_errors
from cpersona.stores.redis.server import EmbeddedRedis

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable
    from contextlib import AbstractAsyncContextManager
    from pathlib import Path

    from starlette.applications import Starlette
    from starlette.types import Receive, Scope, Send

    from cpersona.stores.redis.connection import RedisClient

REPLIES = {
    "MISCONF Errors writing to the AOF file: No space left on device": "REDIS_CANNOT_PERSIST",
    "OOM command not allowed when used memory > 'maxmemory'.": "REDIS_OUT_OF_MEMORY",
    "READONLY You can't write against a read only replica.": "REDIS_READ_ONLY",
    "LOADING Redis is loading the dataset in memory": "REDIS_LOADING",
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.": "REDIS_BUSY",
    "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.": "REDIS_MASTER_DOWN",
    "NOREPLICAS Not enough good replicas to write.": "REDIS_NO_REPLICAS",
    "CLUSTERDOWN The cluster is down": "REDIS_CLUSTER_DOWN",
    "NOPERM User default has no permissions to run the 'ft.search' command": "REDIS_NO_PERMISSION",
}
# Replies that blame the command, not the server: bugs, or answers the callers read (BUSYGROUP, NOGROUP).
NOT_OUTAGES = [
    "ERR syntax error",
    "WRONGTYPE Operation against a key holding the wrong kind of value",
    "BUSYGROUP Consumer Group name already exists",
    "NOGROUP No such key 'stream' or consumer group 'g'",
    "NOSCRIPT No matching script.",
    "BUSYKEY Target key name already exists.",
]


def _parsed(reply: str) -> redis.exceptions.RedisError:
    # redis-py's own reading of an error reply (the stubs leave it untyped).
    parse = cast("Callable[[str], redis.exceptions.RedisError]", BaseParser.parse_error)
    return parse(reply)


@pytest.mark.parametrize(("reply", "code"), sorted(REPLIES.items()))
def test_each_refusal_reply_is_unavailability_with_its_code(reply: str, code: str) -> None:
    with pytest.raises(RedisUnavailable) as caught, redis_errors("writing x"):
        raise _parsed(reply)
    assert caught.value.code == code
    assert caught.value.status == 503
    assert "writing x" in str(caught.value)


@pytest.mark.parametrize("reply", NOT_OUTAGES)
def test_replies_that_blame_the_command_pass_through(reply: str) -> None:
    assert as_unavailable(_parsed(reply)) is None
    with pytest.raises(redis.exceptions.ResponseError), redis_errors():
        raise _parsed(reply)


def test_outages_keep_the_plain_code() -> None:
    for exc in (
        redis.exceptions.ConnectionError("Error 111 connecting"),
        redis.exceptions.TimeoutError("Timeout reading from socket"),
        TimeoutError(),
        redis.exceptions.AuthenticationError("invalid password"),
        redis.exceptions.ResponseError("Timeout limit was reached"),
    ):
        mapped = as_unavailable(exc)
        assert mapped is not None, exc
        assert mapped.code == "BACKEND_UNAVAILABLE"
    assert as_unavailable(ValueError("x")) is None


# ------------------------------------------------------------------------------ on a real Redis


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _raw(client: RedisClient) -> Any:
    return cast("Any", client)


@contextlib.asynccontextmanager
async def _oom(client: RedisClient, redis_dir: Path) -> AsyncIterator[None]:
    await client.config_set("maxmemory", "1")
    try:
        yield
    finally:
        await client.config_set("maxmemory", "0")


@contextlib.asynccontextmanager
async def _replica(client: RedisClient, redis_dir: Path) -> AsyncIterator[None]:
    await _raw(client).execute_command("REPLICAOF", "127.0.0.1", str(_closed_port()))
    try:
        yield
    finally:
        await _raw(client).execute_command("REPLICAOF", "NO", "ONE")


@contextlib.asynccontextmanager
async def _master_down(client: RedisClient, redis_dir: Path) -> AsyncIterator[None]:
    await client.config_set("replica-serve-stale-data", "no")
    try:
        async with _replica(client, redis_dir):
            yield
    finally:
        await client.config_set("replica-serve-stale-data", "yes")


@contextlib.asynccontextmanager
async def _no_replicas(client: RedisClient, redis_dir: Path) -> AsyncIterator[None]:
    await client.config_set("min-replicas-to-write", "1")
    try:
        yield
    finally:
        await client.config_set("min-replicas-to-write", "0")


@contextlib.asynccontextmanager
async def _cannot_persist(client: RedisClient, redis_dir: Path) -> AsyncIterator[None]:
    # A snapshot is written to a temporary file and renamed to dump.rdb; a non-empty directory of that
    # name makes the rename fail (for root too), and a failed snapshot with save points set is MISCONF.
    blocker = redis_dir / "dump.rdb"
    (blocker / "in-the-way").mkdir(parents=True)
    await client.config_set("save", "3600 1")
    try:
        await client.bgsave()
        with anyio.fail_after(30):
            while True:
                info = await client.info("persistence")
                if not info["rdb_bgsave_in_progress"] and info["rdb_last_bgsave_status"] == "err":
                    break
                await anyio.sleep(0.05)
        yield
    finally:
        await client.config_set("save", "")
        (blocker / "in-the-way").rmdir()
        blocker.rmdir()


PROVOKED: dict[str, tuple[Callable[[RedisClient, Path], AbstractAsyncContextManager[None]], str]] = {
    "REDIS_OUT_OF_MEMORY": (_oom, "write"),
    "REDIS_READ_ONLY": (_replica, "write"),
    "REDIS_MASTER_DOWN": (_master_down, "read"),
    "REDIS_NO_REPLICAS": (_no_replicas, "write"),
    "REDIS_CANNOT_PERSIST": (_cannot_persist, "write"),
}


def _settings(data_dir: Path, **overrides: Any) -> Settings:
    return Settings(data_dir=data_dir, redis_timeout_secs=5.0, redis_startup_timeout_secs=30.0).with_(
        **overrides
    )


@contextlib.asynccontextmanager
async def _own_redis(tmp_path: Path) -> AsyncIterator[tuple[EmbeddedRedis, RedisClient]]:
    settings = _settings(tmp_path / "own-redis")
    async with EmbeddedRedis(settings) as server:
        client = await connect_redis(settings, server.url)
        try:
            yield server, client
        finally:
            await close_redis(client)


@pytest.mark.parametrize("code", sorted(PROVOKED))
async def test_provoked_refusal_is_mapped(tmp_path: Path, code: str) -> None:
    provoke, needs = PROVOKED[code]
    async with _own_redis(tmp_path) as (server, client):
        await client.set("k", "v")
        async with provoke(client, server.redis_dir):
            call = client.set("k", "w") if needs == "write" else client.get("k")
            with pytest.raises(RedisUnavailable) as caught:
                await _mapped(call)
            assert caught.value.code == code, caught.value
        assert await client.set("k", "x")


async def _mapped(call: Awaitable[object]) -> None:
    async with redis_errors():
        await call


async def _busy(client: RedisClient) -> bool:
    try:
        await client.get("k")
    except RedisUnavailable as exc:  # the engine's client maps the refusal itself
        return exc.code == "REDIS_BUSY"
    return False


async def test_busy_script_is_mapped(tmp_path: Path) -> None:
    async with _own_redis(tmp_path) as (server, client):
        await client.config_set("busy-reply-threshold", "20")
        looping = await connect_redis(_settings(tmp_path / "own-redis"), server.url)

        async def loop_forever() -> None:
            with contextlib.suppress(redis.exceptions.ResponseError):
                await _raw(looping).eval("while true do end", 0)

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(loop_forever)
                # The script must have started and run past the threshold before others hear BUSY.
                with anyio.fail_after(10):
                    while True:
                        if await _busy(client):
                            break
                        await anyio.sleep(0.02)
                with pytest.raises(RedisUnavailable) as caught:
                    await _mapped(client.get("k"))
                assert caught.value.code == "REDIS_BUSY", caught.value
                await _raw(client).script_kill()
        finally:
            await close_redis(looping)


async def test_loading_is_mapped(tmp_path: Path) -> None:
    # A replica loads the snapshot its master sends and answers LOADING meanwhile; the load is slowed
    # (a millisecond a key) and the replica made to answer between keys. The master listens on TCP
    # (its data dir is too long for a socket path) so that the replica can reach it.
    master_settings = _settings(tmp_path / ("m" * 110))
    replica_settings = _settings(tmp_path / "replica")
    async with EmbeddedRedis(master_settings) as master, EmbeddedRedis(replica_settings) as replica:
        to_master = await connect_redis(master_settings, master.url)
        to_replica = await connect_redis(replica_settings, replica.url)
        try:
            async with to_master.pipeline(transaction=False) as pipe:
                for i in range(1500):
                    pipe.set(f"k{i}", "x" * 100)
                await pipe.execute()
            await to_master.config_set("repl-diskless-sync-delay", "0")
            await to_replica.config_set("key-load-delay", "1000")
            await to_replica.config_set("loading-process-events-interval-bytes", "1024")
            port = urllib.parse.urlsplit(master.url).port
            # Each embedded server has its own data dir's password; the replica needs the master's.
            await to_replica.config_set("masterauth", urllib.parse.urlsplit(master.url).password or "")
            await _raw(to_replica).execute_command("REPLICAOF", "127.0.0.1", str(port))
            codes = await _codes_until_loaded(to_replica)
            assert "REDIS_LOADING" in codes, codes
            await _raw(to_replica).execute_command("REPLICAOF", "NO", "ONE")
        finally:
            await close_redis(to_master)
            await close_redis(to_replica)


async def _codes_until_loaded(client: RedisClient) -> list[str]:
    """The codes of the outages reads meet until the replica holds its master's last key."""
    codes: list[str] = []
    with anyio.fail_after(60):
        while True:
            try:
                async with redis_errors():
                    if await client.get("k1499") is not None:
                        return codes
            except RedisUnavailable as exc:
                codes.append(exc.code)
            await anyio.sleep(0.01)


# ------------------------------------------------------------------------------ over HTTP


def _http_settings(url: str, tmp_path: Path) -> Settings:
    return _settings(
        tmp_path / "data", redis_url=url, qdrant_url=":memory:", embedding_mode="none", redis_timeout_secs=1.0
    )


@pytest.mark.parametrize("code", ["REDIS_OUT_OF_MEMORY", "REDIS_CANNOT_PERSIST", "REDIS_READ_ONLY"])
async def test_http_answers_503_with_the_refusal_code(
    tmp_path: Path,
    code: str,
    serve_asgi: Callable[[Starlette], AbstractAsyncContextManager[httpx.AsyncClient]],
) -> None:
    provoke, _ = PROVOKED[code]
    async with _own_redis(tmp_path) as (server, client):
        app = create_app(_http_settings(server.url, tmp_path), background=False)
        async with serve_asgi(app) as http:
            async with provoke(client, server.redis_dir):
                reply = await http.post("/v1/encode", json={"agent_id": "a", "content": "the office moves"})
            assert reply.status_code == 503, reply.text
            error = reply.json()["error"]
            assert error["code"] == code
            assert str(tmp_path) not in error["message"]
            reply = await http.post("/v1/encode", json={"agent_id": "a", "content": "the office moves"})
            assert reply.status_code == 200, reply.text


async def test_http_message_of_a_gone_redis_names_no_file(
    tmp_path: Path, serve_asgi: Callable[[Starlette], AbstractAsyncContextManager[httpx.AsyncClient]]
) -> None:
    server = EmbeddedRedis(_settings(tmp_path / "own-redis"))
    await server.__aenter__()
    running = True
    try:
        url = server.url
        assert url.startswith("unix://")
        app = create_app(_http_settings(url, tmp_path), background=False)
        async with serve_asgi(app) as http:
            await server.__aexit__(None, None, None)
            running = False
            for request in (
                http.get("/health"),
                http.post("/v1/encode", json={"agent_id": "a", "content": "x"}),
                http.get("/v1/records", params={"agent_id": "a"}),
                http.post("/v1/recall/query", json={"agent_id": "a", "query": "office"}),
                http.get("/v1/introspect/stats", params={"agent_id": "a"}),
            ):
                reply = await request
                assert reply.status_code == 503, reply.text
                error = reply.json()["error"]
                assert error["code"] == "BACKEND_UNAVAILABLE"
                assert "redis" in error["message"]
                assert "redis.sock" not in error["message"], error
                assert str(tmp_path) not in error["message"], error
    finally:
        if running:
            await server.__aexit__(None, None, None)


@pytest.mark.parametrize(
    "raised",
    [
        ExceptionGroup("two arms", [RedisUnavailable("arm a"), RedisUnavailable("arm b")]),
        redis.exceptions.ConnectionError("Error 2 connecting to /srv/data/redis/redis.sock."),
        _parsed("MISCONF Errors writing to the AOF file: No space left on device"),
    ],
    ids=["group-of-outages", "unmapped-connection-error", "unmapped-misconf"],
)
async def test_request_edge_answers_503_for_any_backend_failure(raised: Exception) -> None:
    async def failing(scope: Scope, receive: Receive, send: Send) -> None:
        raise raised

    transport = httpx.ASGITransport(app=RequestEdge(failing))
    async with httpx.AsyncClient(transport=transport, base_url="http://cpersona.test") as http:
        reply = await http.get("/anything")
    assert reply.status_code == 503, reply.text
    assert "/srv/data" not in reply.json()["error"]["message"]


@pytest.mark.parametrize(
    "raised",
    [ExceptionGroup("arms", [RedisUnavailable("arm a"), KeyError("bug")]), TimeoutError()],
    ids=["bug-beside-an-outage", "bare-timeout"],
)
async def test_request_edge_still_answers_500_for_what_is_no_backend_failure(raised: Exception) -> None:
    async def failing(scope: Scope, receive: Receive, send: Send) -> None:
        raise raised

    transport = httpx.ASGITransport(app=RequestEdge(failing))
    async with httpx.AsyncClient(transport=transport, base_url="http://cpersona.test") as http:
        reply = await http.get("/anything")
    assert reply.status_code == 500
