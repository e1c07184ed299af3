"""The adapters the role contracts run on: one object per backend that opens each role.

A contract suite never names a backend's classes; it asks the adapter of its run for the role it pins.
:class:`RedisAdapter` opens the Redis adapters; a Redis Cluster adapter is one more class here and one more
entry in ``tests/contract/conftest.py``'s ``ADAPTERS``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from cpersona.keys import Keys
from cpersona.stores.redis.api_keys import ApiKeyStore, RedisRateLimits
from cpersona.stores.redis.block_queue import RedisBlockQueue
from cpersona.stores.redis.cue_store import RedisCueStore
from cpersona.stores.redis.store import RedisRoles
from cpersona.stores.redis.trace_sink import RedisTraceSink
from cpersona.stores.redis.trace_subscription import RedisTraceSubscription

if TYPE_CHECKING:
    from contract.contract_records import Roles
    from cpersona.settings import Settings
    from cpersona.stores.block_queue import BlockQueue
    from cpersona.stores.cue_store import CueStore
    from cpersona.stores.key_store import KeyStore, RateLimits
    from cpersona.stores.protocols import TraceSink
    from cpersona.stores.redis.connection import RedisClient
    from cpersona.stores.trace_subscription import TraceSubscription


class Adapter(Protocol):
    """Opens each role of one backend on a connected client, under a key prefix."""

    def roles(self, client: RedisClient, key_prefix: str) -> Roles:
        """The record store's roles (their indexes not yet made)."""
        ...

    def cues(self, client: RedisClient, key_prefix: str) -> CueStore: ...

    def key_store(self, client: RedisClient, key_prefix: str) -> KeyStore: ...

    def rate_limits(self, client: RedisClient, key_prefix: str, *, rate: float, burst: int) -> RateLimits: ...

    def block_queue(self, client: RedisClient, key_prefix: str, *, consumer: str) -> BlockQueue:
        """One worker's view of the block queue, as the consumer ``consumer``."""
        ...

    async def lose_block_queue(self, client: RedisClient, key_prefix: str) -> None:
        """Delete the block queue under its workers, as a flush or a key cleanup would."""
        ...

    def trace_sink(self, client: RedisClient, key_prefix: str) -> TraceSink: ...

    async def subscribe_traces(
        self, settings: Settings, url: str, channels: tuple[str, ...], pattern: str | None
    ) -> TraceSubscription:
        """A subscription of its own connection to ``url``, confirmed when it returns."""
        ...


class RedisAdapter:
    """The Redis adapter of every role."""

    def roles(self, client: RedisClient, key_prefix: str) -> Roles:
        return RedisRoles.open(client, Keys(key_prefix))

    def cues(self, client: RedisClient, key_prefix: str) -> CueStore:
        return RedisCueStore(client, Keys(key_prefix))

    def key_store(self, client: RedisClient, key_prefix: str) -> KeyStore:
        return ApiKeyStore(client, Keys(key_prefix))

    def rate_limits(self, client: RedisClient, key_prefix: str, *, rate: float, burst: int) -> RateLimits:
        return RedisRateLimits(client, Keys(key_prefix), rate=rate, burst=burst)

    def block_queue(self, client: RedisClient, key_prefix: str, *, consumer: str) -> BlockQueue:
        return RedisBlockQueue(client, Keys(key_prefix), consumer=consumer)

    async def lose_block_queue(self, client: RedisClient, key_prefix: str) -> None:
        await client.delete(Keys(key_prefix).block_stream)

    def trace_sink(self, client: RedisClient, key_prefix: str) -> TraceSink:
        return RedisTraceSink(client, Keys(key_prefix))

    async def subscribe_traces(
        self, settings: Settings, url: str, channels: tuple[str, ...], pattern: str | None
    ) -> TraceSubscription:
        return await RedisTraceSubscription.open(settings, url, channels, pattern, action="subscribing")
