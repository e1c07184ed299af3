"""Reaching the engines' store from a command that runs no engine of its own: ``cpersona keys``,
``cpersona trace tail``, the trace stream of ``GET /v1/traces/stream`` and ``cpersona serve``'s banner.

The store is the Redis the engines use: ``CPERSONA_REDIS_URL``, or, when that is unset, the embedded
server a running engine started for the data dir, found through the ``redis/redis.url`` file
:class:`~cpersona.stores.redis.server.EmbeddedRedis` writes (and removes when it stops cleanly). What
these commands do there goes through a role: the keys-and-limits role (:mod:`~cpersona.stores.key_store`)
and the trace-subscription role (:mod:`~cpersona.stores.trace_subscription`).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import anyio

from cpersona.errors import RedisUnavailable
from cpersona.keys import Keys
from cpersona.stores.redis.api_keys import ApiKeyStore
from cpersona.stores.redis.connection import close_redis, connect_redis, redact_url
from cpersona.stores.redis.datadir import ServerLayout, read_text
from cpersona.stores.redis.server import EmbeddedRedis
from cpersona.stores.redis.trace_subscription import RedisTraceSubscription

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from cpersona.settings import Settings
    from cpersona.stores.key_store import KeyStore
    from cpersona.stores.redis.connection import RedisClient
    from cpersona.stores.trace_subscription import TraceSubscription

__all__ = ["embedded_redis_log", "key_store", "running_redis_url", "shown_redis_address", "subscribe_traces"]


async def running_redis_url(settings: Settings) -> str:
    """The Redis the engines of ``settings`` use: ``CPERSONA_REDIS_URL``, else the embedded server running
    on the data dir.

    Raises :class:`RedisUnavailable` when neither is there: starting a Redis here would take the data dir
    from the engine that owns it, and would carry no traces anyway.
    """
    if settings.redis_url is not None:
        return settings.redis_url
    url_file = anyio.Path(settings.data_dir) / "redis" / "redis.url"
    try:
        url = (await url_file.read_text()).strip()
    except FileNotFoundError:
        url = ""
    if not url:
        raise RedisUnavailable(
            f"no cpersona Redis is running for the data dir {settings.data_dir} (no {url_file}): start an "
            "engine there (cpersona serve), or set CPERSONA_REDIS_URL to the Redis your engines use"
        )
    return url


def shown_redis_address(settings: Settings) -> str:
    """Where the engines' Redis is, fit to print (no password): ``embedded <url>`` for the data dir's."""
    if settings.redis_url is not None:
        return redact_url(settings.redis_url)
    root = settings.data_dir.expanduser().resolve()
    found = read_text(ServerLayout(root, root / "redis").url_file)
    return "embedded " + (redact_url(found) if found else "(address unknown)")


def embedded_redis_log(settings: Settings) -> Path | None:
    """The log file of the data dir's embedded Redis, or ``None`` when the engines use another Redis."""
    if settings.redis_url is not None:
        return None
    root = settings.data_dir.expanduser().resolve()
    return ServerLayout(root, root / "redis").logfile


@contextlib.asynccontextmanager
async def key_store(settings: Settings) -> AsyncIterator[KeyStore]:
    """The API keys of the engines of ``settings``: on their Redis if one runs, else on the embedded one
    started here for the moment (which is how the first admin key is made)."""
    try:
        url = await running_redis_url(settings)
        client = await connect_redis(settings, url)
    except RedisUnavailable:
        if settings.redis_url is not None:
            raise
        client = None
    keys = Keys(settings.key_prefix)
    if client is not None:
        try:
            yield await _opened_keys(client, keys)
        finally:
            await close_redis(client)
        return
    async with EmbeddedRedis(settings) as server:
        client = await connect_redis(settings, server.url)
        try:
            yield await _opened_keys(client, keys)
        finally:
            await close_redis(client)


async def _opened_keys(client: RedisClient, keys: Keys) -> ApiKeyStore:
    store = ApiKeyStore(client, keys)
    await store.upgrade()  # keys an earlier engine stored as strings, before redis-om reads them
    return store


async def subscribe_traces(
    settings: Settings, channels: tuple[str, ...], pattern: str | None = None, *, action: str
) -> TraceSubscription:
    """A subscription to ``channels`` (and to ``pattern``) on the engines' Redis, confirmed when it
    returns; ``action`` names the attempt in the :class:`RedisUnavailable` raised when it fails."""
    url = await running_redis_url(settings)
    return await RedisTraceSubscription.open(settings, url, channels, pattern, action=action)
