"""Opening one engine's stores: its Redis (the embedded server when no ``CPERSONA_REDIS_URL`` is set), and
on it one adapter per role.

This is where the stores are composed, so that nothing above them names the Redis adapter: the engine
asks :func:`open_stores` and gets :class:`Stores`, whose fields are typed by role (the record store, the
cue reads, keys and limits, the block queue, the trace sink) and a supervised-child handle on the server
(:class:`ServerProcess`).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from cpersona.stores.redis.api_keys import ApiKeyStore, RedisRateLimits
from cpersona.stores.redis.block_queue import RedisBlockQueue
from cpersona.stores.redis.connection import close_redis, connect_redis, redis_info
from cpersona.stores.redis.cue_store import RedisCueStore
from cpersona.stores.redis.sealing import load_sealer
from cpersona.stores.redis.server import EmbeddedRedis
from cpersona.stores.redis.store import RedisRecordStore
from cpersona.stores.redis.supervisor import supervise
from cpersona.stores.redis.trace_sink import RedisTraceSink
from cpersona.stores.supervision import Child

if TYPE_CHECKING:
    import contextlib
    from collections.abc import Mapping

    from anyio.abc import TaskStatus

    from cpersona.keys import Keys
    from cpersona.settings import Settings
    from cpersona.stores.block_queue import BlockQueue
    from cpersona.stores.cue_store import CueStore
    from cpersona.stores.data_dir import DataDirLock
    from cpersona.stores.key_store import KeyStore, RateLimits
    from cpersona.stores.protocols import RecordStore, TraceSink
    from cpersona.stores.redis.connection import RedisClient

__all__ = ["ServerProcess", "Stores", "open_stores"]


class ServerProcess(Child, Protocol):
    """The engine's own redis-server, a child its supervisor restarts; its process id is known while the
    engine is open."""

    @property
    def pid(self) -> int: ...


@dataclasses.dataclass(frozen=True, slots=True)
class Stores:
    """One engine's stores, one adapter per role on its Redis; opened by :func:`open_stores`, closed with
    the exit stack it was given."""

    records: RecordStore
    cues: CueStore
    """The recall operations' reads beyond the record store's (emotion index, time ranges, batches)."""
    api_keys: KeyStore
    rate_limits: RateLimits | None
    """``None`` when ``CPERSONA_RATE_LIMIT_PER_SEC`` is 0 (nothing is limited)."""
    block_queue: BlockQueue
    trace_sink: TraceSink
    info: Mapping[str, Any]
    """The server's version and modules, for ``/health``."""
    server: ServerProcess | None
    """The engine's own redis-server; ``None`` with ``CPERSONA_REDIS_URL``."""
    redis: RedisClient
    """The raw client the adapters share. The engine never uses it; tools, benchmarks and tests look
    underneath with it (at a document, an index, the server's counters)."""

    async def supervise(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Restart the engine's own redis-server each time it dies, until cancelled; with a Redis that is
        not the engine's, report started and return."""
        if self.server is None:
            task_status.started()
            return
        await supervise(self.server, task_status=task_status)


async def open_stores(
    stack: contextlib.AsyncExitStack, settings: Settings, keys: Keys, *, lock: DataDirLock | None
) -> Stores:
    """Start the embedded server (under ``lock``, the data dir's, when the caller holds it) or reach
    ``CPERSONA_REDIS_URL``, connect, bring the indexes and stored documents up to date, and build the role
    adapters; what needs closing is pushed on ``stack``."""
    url = settings.redis_url
    server: EmbeddedRedis | None = None
    if url is None:
        server = await stack.enter_async_context(EmbeddedRedis(settings, lock=lock))
        url = server.url
    client = await connect_redis(settings, url)
    stack.push_async_callback(close_redis, client)
    info = await redis_info(client)
    # The sealer may read, or first write, its key file in the data dir: in a worker thread.
    sealer = await anyio.to_thread.run_sync(load_sealer, settings)
    records = RedisRecordStore(client, keys, sealer)
    await records.ensure_indexes()
    await records.collect_garbage()
    api_keys = ApiKeyStore(client, keys)
    await api_keys.upgrade()
    rate = settings.rate_limit_per_sec
    limits = None if rate == 0 else RedisRateLimits(client, keys, rate=rate, burst=settings.rate_limit_burst)
    return Stores(
        records=records,
        cues=RedisCueStore(client, keys),
        api_keys=api_keys,
        rate_limits=limits,
        block_queue=RedisBlockQueue(client, keys),
        trace_sink=RedisTraceSink(client, keys),
        info=info,
        server=server,
        redis=client,
    )
