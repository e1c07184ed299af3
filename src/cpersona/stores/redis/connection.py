"""Connecting to Redis, and the one edge where redis-py's errors become :class:`RedisUnavailable`.

:func:`connect_redis` gives the engine a client for the embedded server or for an external Redis
(``CPERSONA_REDIS_URL``) and refuses one that cannot serve cpersona: every call on the client has a
deadline (``CPERSONA_REDIS_TIMEOUT_SECS`` on connect and on each reply), a lost connection is retried
once and never forever, and the server must carry the query engine (``search``) and JSON (``ReJSON``),
be Redis 7.2 or later and fsync an append-only file (every write waits for ``WAITAOF``: :mod:`.durable`).

The client speaks RESP2 (pinned: redis-py 8 would default to RESP3), so replies keep their classic
shapes, e.g. ``FT.SEARCH`` gives ``[total, key, fields, key, fields, ...]``. It is built with
``decode_responses=False``: plain replies (``GET``, ``SMEMBERS``, ``SCAN``, ``FT.SEARCH`` fields) come back
as ``bytes`` and callers decode text with ``.decode()``; RedisJSON replies read through ``client.json()``
are parsed into Python objects either way. Bytes were chosen so that no reply can fail to decode.

The client maps redis-py's errors itself, once, as httpx maps its transport's: every command it runs
and every pipeline it executes turns a dropped connection, a missed deadline or a reply in which Redis
refuses to serve now (``MISCONF``, ``OOM``, ``READONLY``, ``LOADING``, ``BUSY``...) into
:class:`~cpersona.RedisUnavailable` (:class:`MappedRedis`), so the adapters built on it call Redis without
wrapping each call. What the client does not run (a pub/sub connection's reads) is wrapped in
:func:`redis_errors` where it is called; :func:`as_unavailable` is the same mapping as a function.
"""

from __future__ import annotations

import json
import logging
import urllib.parse
from typing import TYPE_CHECKING, Any, TypeAlias, TypedDict, cast

import anyio
import orjson
import redis.asyncio
import redis.asyncio.client
import redis.exceptions
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff, NoBackoff

from cpersona.errors import InvalidSetting, RedisUnavailable

if TYPE_CHECKING:
    from types import TracebackType

    from cpersona.settings import Settings

__all__ = [
    "REFUSAL_CODES",
    "REQUIRED_MODULES",
    "MappedRedis",
    "RedisClient",
    "RedisInfo",
    "as_unavailable",
    "close_redis",
    "connect_redis",
    "describe_error",
    "escaped_outage",
    "module_versions",
    "new_client",
    "redact_url",
    "redis_errors",
    "redis_info",
]

RedisClient: TypeAlias = "redis.asyncio.Redis[bytes]"
"""The client type :func:`connect_redis` returns (replies as ``bytes``); use it in annotations."""

log = logging.getLogger("cpersona.redis")

REQUIRED_MODULES = ("search", "ReJSON")
"""Module names (as ``MODULE LIST`` reports them) that cpersona cannot run without."""

# Closing only drops sockets; it gets a short, fixed allowance so a teardown can never hang.
_CLOSE_TIMEOUT_SECS = 2.0
# Connections one client may hold at once. A recall runs several Redis calls in parallel, so 64 concurrent
# recalls want more than this; the pool makes the extra calls wait for a free connection (see new_client).
_MAX_CONNECTIONS = 100

# Errors meaning "Redis did not answer": a refused or dropped connection (including AUTH failures and a
# server still loading its data, both ConnectionError subclasses in redis-py), or a missed deadline.
_UNAVAILABLE = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, TimeoutError)

REFUSAL_CODES = {
    "MISCONF": "REDIS_CANNOT_PERSIST",
    "OOM": "REDIS_OUT_OF_MEMORY",
    "READONLY": "REDIS_READ_ONLY",
    "LOADING": "REDIS_LOADING",
    "BUSY": "REDIS_BUSY",
    "MASTERDOWN": "REDIS_MASTER_DOWN",
    "NOREPLICAS": "REDIS_NO_REPLICAS",
    "CLUSTERDOWN": "REDIS_CLUSTER_DOWN",
    "TRYAGAIN": "REDIS_CLUSTER_DOWN",
    "NOPERM": "REDIS_NO_PERMISSION",
}
"""Error replies, by their first word, in which Redis says it cannot serve now (the server's state, not the
command, is at fault), and the stable code of the :class:`RedisUnavailable` each becomes."""

# The search module's answer when a query outlives its timeout (ON_TIMEOUT FAIL): a missed deadline.
_SEARCH_TIMEOUT = "Timeout limit was reached"


class RedisInfo(TypedDict):
    """What ``/health`` reports about Redis: the server version and the versions of the needed modules."""

    version: str
    modules: dict[str, str]


class redis_errors:
    """Map what :func:`as_unavailable` maps, raised inside the block, to :class:`RedisUnavailable`.

    Works as ``with redis_errors():`` and as ``async with redis_errors():``. Other redis-py errors
    (a ``ResponseError`` from a malformed command, say) are bugs rather than outages and pass through.
    """

    __slots__ = ("_action",)

    def __init__(self, action: str = "redis call failed") -> None:
        self._action = action

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is not None and (mapped := as_unavailable(exc, self._action)) is not None:
            raise mapped from exc

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.__exit__(exc_type, exc, tb)


def as_unavailable(exc: BaseException, action: str = "redis call failed") -> RedisUnavailable | None:
    """``exc`` as a :class:`RedisUnavailable` when it means Redis cannot serve now, else ``None``.

    That is a refused or dropped connection, a missed deadline, or a reply of :data:`REFUSAL_CODES`.
    The caller chains the result to ``exc`` (``raise ... from exc``).
    """
    detail = f"{action}: {describe_error(exc)}"
    code = _refusal_code(exc)
    if code is not None:
        return RedisUnavailable(detail, code=code)
    if isinstance(exc, _UNAVAILABLE) or (
        isinstance(exc, redis.exceptions.ResponseError) and str(exc).startswith(_SEARCH_TIMEOUT)
    ):
        return RedisUnavailable(detail)
    return None


def escaped_outage(exc: BaseException) -> RedisUnavailable | None:
    """A redis-py error that no :func:`redis_errors` block mapped, as :func:`as_unavailable` maps it.

    For the outermost handlers: only redis-py's own errors count, since a bare ``TimeoutError`` that far
    out may come from any deadline, not from Redis.
    """
    if not isinstance(exc, redis.exceptions.RedisError):
        return None
    return as_unavailable(exc, "a redis call outside the adapters failed")


def _refusal_code(exc: BaseException) -> str | None:
    if not isinstance(exc, redis.exceptions.RedisError):
        return None
    # redis-py strips the first word of the replies it has a class for (OOM, READONLY, LOADING...) and
    # keeps it as ``status_code``; the others (MISCONF, BUSY, NOREPLICAS) keep it in their text.
    word = getattr(exc, "status_code", None) or str(exc).partition(" ")[0]
    return REFUSAL_CODES.get(word)


if TYPE_CHECKING:
    _Redis = redis.asyncio.Redis[bytes]
    _Pipeline = redis.asyncio.client.Pipeline[bytes]
else:  # redis-py's classes are not generic at run time; its type stubs' are
    _Redis = redis.asyncio.Redis
    _Pipeline = redis.asyncio.client.Pipeline


class MappedRedis(_Redis):
    """A redis-py client whose commands and pipelines raise :class:`RedisUnavailable` for an outage.

    Everything above it runs through :meth:`execute_command` (the command methods, ``client.json()``,
    ``client.ft()``, scripts and the redis-om models bound to the client) or through a pipeline's
    :meth:`~_MappedPipeline.execute`, so these two are where the mapping happens. redis-py's own retry of a
    dropped connection runs inside them, on its own error types, before anything is mapped.
    """

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        with redis_errors(_failed(args)):
            # The stubs leave it untyped.
            return await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]

    def pipeline(self, transaction: bool = True, shard_hint: str | None = None) -> _MappedPipeline:
        return _MappedPipeline(self.connection_pool, self.response_callbacks, transaction, shard_hint)


class _MappedPipeline(_Pipeline):
    """A pipeline of :class:`MappedRedis`: queuing runs nothing; what runs is mapped."""

    async def execute(self, raise_on_error: bool = True) -> Any:
        with redis_errors("redis transaction failed" if self.is_transaction else "redis pipeline failed"):
            return await super().execute(raise_on_error)

    async def immediate_execute_command(self, *args: Any, **options: Any) -> Any:
        # WATCH, and the reads between a WATCH and its MULTI, run at once rather than being queued.
        with redis_errors(_failed(args)):
            return await super().immediate_execute_command(*args, **options)  # type: ignore[no-untyped-call]


def _failed(args: tuple[Any, ...]) -> str:
    """What a failed command's error says it was doing: ``redis FT.SEARCH failed``."""
    name = args[0] if args else "call"
    return f"redis {name.decode() if isinstance(name, bytes) else name} failed"


def new_client(url: str, *, timeout: float, retries: int = 1, map_errors: bool = True) -> RedisClient:
    """Build a client for ``url`` without touching the network.

    ``timeout`` bounds connecting and every reply. ``retries`` is how many times a call is repeated
    after a dropped connection (never after a timeout: a write that timed out may have been applied,
    and repeating it would multiply the caller's deadline). With ``map_errors`` (the default) the client
    is a :class:`MappedRedis`; without, a plain redis-py client, for the code that watches a server
    process rather than its data and tells redis-py's error types apart. Raises :class:`InvalidSetting`
    for a URL that is not a Redis URL.
    """
    if retries > 0:
        retry = Retry(ExponentialBackoff(cap=0.5, base=0.05), retries, (redis.exceptions.ConnectionError,))
    else:
        retry = Retry(NoBackoff(), 0)
    # RESP2, pinned: redis-py 8 speaks RESP3 by default, which reshapes replies (FT.SEARCH becomes a map)
    # under code that reads the RESP2 arrays. The stubs do not know the argument.
    pinned: dict[str, Any] = {"protocol": 2}
    try:
        # A blocking pool: when every connection is busy a call waits (up to ``timeout``) for one to come
        # back. redis-py's default pool raises MaxConnectionsError instead, which failed recalls outright
        # at 64 concurrent callers.
        pool: redis.asyncio.BlockingConnectionPool[Any] = redis.asyncio.BlockingConnectionPool.from_url(
            url,
            max_connections=_MAX_CONNECTIONS,
            timeout=timeout,
            decode_responses=False,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            retry=retry,
            **pinned,
        )
        # from_pool (the client owns and closes the pool) is missing from the type stubs.
        kind = MappedRedis if map_errors else redis.asyncio.Redis
        return cast("RedisClient", cast("Any", kind).from_pool(pool))
    except ValueError as exc:
        raise InvalidSetting("CPERSONA_REDIS_URL", f"is not a usable Redis URL ({exc})") from None


async def close_redis(client: RedisClient) -> None:
    """Close ``client`` and its connections; bounded, and done even when the caller is being cancelled."""
    with anyio.CancelScope(shield=True), anyio.move_on_after(_CLOSE_TIMEOUT_SECS):
        # The type stubs predate ``aclose`` (``close`` is deprecated in redis-py and warns).
        await cast("Any", client).aclose()


async def connect_redis(settings: Settings, url: str, *, writes: bool = True) -> RedisClient:
    """Connect to the Redis at ``url``, check it answers and carries search and JSON, return the client.

    With ``writes`` (an engine) the Redis must also fsync an append-only file, as every write waits for
    it; a reader that never writes (``trace tail``) leaves that out, so it can tail any Redis.

    Raises :class:`RedisUnavailable` when it does not answer within ``settings.redis_timeout_secs`` or
    lacks a module, and :class:`InvalidSetting` when ``url`` cannot be parsed. The caller owns the
    client: close it with :func:`close_redis` (or ``async with client:``).
    """
    where = redact_url(url)
    client = new_client(url, timeout=settings.redis_timeout_secs)
    try:
        try:
            with anyio.fail_after(settings.redis_timeout_secs):
                await client.ping()
                modules = await module_versions(client)
                persistence = await _persistence(client) if writes else None
        except (*_UNAVAILABLE, redis.exceptions.RedisError, RedisUnavailable) as exc:
            # At connect time any failure (refused, timeout, NOAUTH, MODULE LIST denied) means this
            # Redis cannot be used, so all of them become the one typed error, described by what
            # redis-py raised (the client maps an outage before it gets here).
            cause = exc.__cause__ if isinstance(exc, RedisUnavailable) and exc.__cause__ else exc
            raise RedisUnavailable(f"cannot use Redis at {where}: {describe_error(cause)}") from cause
        missing = [name for name in REQUIRED_MODULES if name not in modules]
        if missing:
            raise RedisUnavailable(
                f"the Redis at {where} lacks the module(s) {', '.join(missing)}: cpersona needs Redis Stack "
                "or Redis 8 with the query engine (modules 'search' and 'ReJSON')"
            )
        if persistence is not None:
            _check_persistence(persistence, where)
            _check_standalone(persistence, where)
    except BaseException:
        await close_redis(client)
        raise
    return client


class _Persistence(TypedDict):
    version: str
    aof: bool
    fsync: str | None
    cluster: bool


async def _persistence(client: RedisClient) -> _Persistence:
    """What decides whether writes can be confirmed on disk. Raises redis-py errors unmapped."""
    server = await client.info("server")
    aof = await client.info("persistence")
    cluster = await client.info("cluster")
    try:
        reply = await client.config_get("appendfsync")
    except redis.exceptions.ResponseError:  # a managed Redis may refuse CONFIG; WAITAOF still tells
        reply = {}
    fsync = reply.get(b"appendfsync", reply.get("appendfsync"))
    return {
        "version": _text(server.get("redis_version", "0")),
        "aof": str(aof.get("aof_enabled", 0)) == "1",
        "fsync": None if fsync is None else _text(fsync),
        "cluster": str(cluster.get("cluster_enabled", 0)) == "1",
    }


def _check_standalone(found: _Persistence, where: str) -> None:
    # Refused here, in one line, rather than as a MOVED reply to the first index the engine creates.
    if found["cluster"]:
        raise RedisUnavailable(
            f"the Redis at {where} runs in cluster mode, which cpersona cannot use: its writes span hash "
            "slots and its searches need every record on the server they ask; use a standalone Redis "
            "(docs/redis-cluster.md says what a cluster would need)"
        )


def _check_persistence(found: _Persistence, where: str) -> None:
    """Refuse a Redis on which no write could be acknowledged (see :mod:`.durable`): every write waits
    for ``WAITAOF``, which needs Redis 7.2 and an append-only file that is fsynced."""
    numbers = tuple(int(part) for part in found["version"].split(".")[:2] if part.isdigit())
    if numbers < (7, 2):
        raise RedisUnavailable(
            f"the Redis at {where} is version {found['version']}: cpersona needs 7.2 or later (WAITAOF)"
        )
    if not found["aof"] or found["fsync"] == "no":
        raise RedisUnavailable(
            f"the Redis at {where} does not fsync an append-only file (appendonly yes, appendfsync "
            "always or everysec): cpersona acknowledges a write only once it is on disk"
        )
    if found["fsync"] == "everysec":
        log.warning(
            "the Redis at %s fsyncs its append-only file once a second (appendfsync everysec): each "
            "write waits for that fsync, up to a second; appendfsync always answers in a millisecond",
            where,
        )


async def module_versions(client: RedisClient) -> dict[str, str]:
    """``MODULE LIST`` as ``{name: "major.minor.patch"}``. Raises redis-py errors unmapped."""
    reply = await cast("Any", client).execute_command("MODULE", "LIST")
    versions: dict[str, str] = {}
    for entry in reply or ():
        fields = _as_fields(entry)
        name = fields.get("name")
        if name is None:
            continue
        versions[_text(name)] = _version(fields.get("ver"))
    return versions


async def redis_info(client: RedisClient) -> RedisInfo:
    """The server version and the versions of the required modules, for ``/health``.

    Bounded by the client's socket timeout; raises :class:`RedisUnavailable` (mapped by the client) when
    Redis does not answer.
    """
    server = await client.info("server")
    modules = await module_versions(client)
    return {
        "version": _text(server.get("redis_version", "unknown")),
        "modules": {name: modules[name] for name in REQUIRED_MODULES if name in modules},
    }


def redact_url(url: str) -> str:
    """``url`` without its password, for messages and logs."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    user = parts.username or ""
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def describe_error(exc: BaseException) -> str:
    """An error as one line of a message: its type, and its text when it has one."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _text(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _as_fields(entry: object) -> dict[str, object]:
    # redis-py parses each MODULE LIST entry into a dict; a raw RESP2 reply is a flat name/value list.
    if isinstance(entry, dict):
        return {_text(k): v for k, v in entry.items()}
    if isinstance(entry, list | tuple):
        return {_text(entry[i]): entry[i + 1] for i in range(0, len(entry) - 1, 2)}
    return {}


def _version(raw: object) -> str:
    # Modules report their version as one integer, major * 10000 + minor * 100 + patch.
    try:
        number = int(_text(raw))
    except ValueError:
        return _text(raw)
    return f"{number // 10_000}.{number // 100 % 100}.{number % 100}"


async def command(client: RedisClient, *args: Any) -> Any:
    """Run a raw command (``FT.SEARCH``, ``FT.CREATE``...): the stubs leave ``execute_command`` untyped."""
    return await cast("Any", client).execute_command(*args)


class _JsonReplies:
    """What redis-py's JSON commands call to parse a reply (``decode``): orjson, and ``json`` for a reply
    orjson refuses (an integer beyond 64 bits), so every value is the one redis-py's default parser (the
    standard ``json`` module) gives.

    That default parse was 40% of the samples of reading 100,000 memories' states (py-spy). redis-py's
    JSON object registers the parser on the client for every JSON command, so each :func:`json_ops`
    passes this one; a plain ``client.json()`` registers the default again until the next, and both give
    the same values.
    """

    @staticmethod
    def decode(reply: str | bytes) -> Any:
        try:
            return orjson.loads(reply)
        except orjson.JSONDecodeError:
            return json.loads(reply)


_JSON_REPLIES = _JsonReplies()


def json_ops(client_or_pipe: object) -> Any:
    """``client.json()`` for RedisJSON calls (``merge``, ``mget``) that the type stubs do not know, its
    replies parsed by orjson (:class:`_JsonReplies`)."""
    return cast("Any", client_or_pipe).json(decoder=_JSON_REPLIES)
