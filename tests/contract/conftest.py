"""The role contracts' fixtures: every store role, on every adapter, fresh per test.

``adapter`` is parametrised over :data:`ADAPTERS`, each an :class:`~contract.adapters.Adapter` that opens
one adapter per role on the session's Redis under this test's key prefix (the ``redis`` and ``key_prefix``
fixtures of ``tests/conftest.py``, which drop the prefix's keys and indexes afterwards). A Redis Cluster
adapter joins every contract suite with one entry in :data:`ADAPTERS`. ``unreachable`` gives the record
store's roles on a backend that does not answer, and ``gone`` that backend's client, for the outage
promises. The role fixtures (``recall_reads``, ``record_writes``, ``cues``, ``key_store``...) are what the
suites are written against: each is typed as its protocol alone; a role opened with arguments
(``open_rate_limits``, ``open_block_queue``, ``subscribe``) is a factory. The vector store is no Redis
role: its suite (``test_vector_store.py``) is parametrised the same way over its own adapters, through its
``opener`` fixture.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from contract.adapters import RedisAdapter
from cpersona.stores.redis.connection import close_redis, connect_redis, new_client

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from contract.adapters import Adapter
    from contract.contract_records import Roles
    from cpersona.settings import Settings
    from cpersona.stores.association_store import AssociationStore
    from cpersona.stores.block_queue import BlockQueue
    from cpersona.stores.cue_store import CueStore
    from cpersona.stores.fence_store import FenceStore
    from cpersona.stores.field_store import MemoryFieldStore
    from cpersona.stores.key_store import KeyStore, RateLimits
    from cpersona.stores.memory_reads import MemoryReadStore
    from cpersona.stores.protocols import TraceSink
    from cpersona.stores.raw_journal_store import RawJournalStore
    from cpersona.stores.recall_reads import RecallReads
    from cpersona.stores.record_reads import RecordReads
    from cpersona.stores.record_writes import RecordWrites
    from cpersona.stores.redis.connection import RedisClient
    from cpersona.stores.store_admin import StoreAdmin
    from cpersona.stores.trace_subscription import TraceSubscription
    from cpersona.stores.write_journal import WriteJournal

ADAPTERS: dict[str, Adapter] = {"redis": RedisAdapter()}
"""Each backend's adapter, by the name its contract runs are shown under."""


@pytest.fixture(params=sorted(ADAPTERS))
def adapter(request: pytest.FixtureRequest) -> Adapter:
    return ADAPTERS[request.param]


@pytest.fixture
async def roles(adapter: Adapter, redis: RedisClient, key_prefix: str) -> Roles:
    opened = adapter.roles(redis, key_prefix)
    await opened.admin.ensure_indexes()
    return opened


@pytest.fixture
async def gone() -> AsyncIterator[RedisClient]:
    """A client whose server never answers (nothing listens on port 1)."""
    client = new_client("redis://127.0.0.1:1", timeout=1.0, retries=0)
    try:
        yield client
    finally:
        await close_redis(client)


@pytest.fixture
def unreachable(adapter: Adapter, gone: RedisClient, key_prefix: str) -> Roles:
    """The record store's roles on :func:`gone`."""
    return adapter.roles(gone, key_prefix)


@pytest.fixture
async def other_redis(redis_url: str, settings: Settings, redis: RedisClient) -> AsyncIterator[RedisClient]:
    """A second client of the same backend, as another worker holds (``redis`` cleans the prefix)."""
    client = await connect_redis(settings, redis_url)
    try:
        yield client
    finally:
        await close_redis(client)


@pytest.fixture
def recall_reads(roles: Roles) -> RecallReads:
    return roles.recall_reads


@pytest.fixture
def memory_reads(roles: Roles) -> MemoryReadStore:
    return roles.memory_reads


@pytest.fixture
def record_reads(roles: Roles) -> RecordReads:
    return roles.record_reads


@pytest.fixture
def record_writes(roles: Roles) -> RecordWrites:
    return roles.record_writes


@pytest.fixture
def write_journal(roles: Roles) -> WriteJournal:
    return roles.write_journal


@pytest.fixture
def field_writes(roles: Roles) -> MemoryFieldStore:
    return roles.field_writes


@pytest.fixture
def raw_journal(roles: Roles) -> RawJournalStore:
    return roles.raw_journal


@pytest.fixture
def associations(roles: Roles) -> AssociationStore:
    return roles.associations


@pytest.fixture
def fences(roles: Roles) -> FenceStore:
    return roles.fences


@pytest.fixture
def admin(roles: Roles) -> StoreAdmin:
    return roles.admin


@pytest.fixture
def cues(adapter: Adapter, roles: Roles, redis: RedisClient, key_prefix: str) -> CueStore:
    """The cue store, over the records ``roles`` writes (its searches need their indexes)."""
    return adapter.cues(redis, key_prefix)


@pytest.fixture
def key_store(adapter: Adapter, redis: RedisClient, key_prefix: str) -> KeyStore:
    return adapter.key_store(redis, key_prefix)


@pytest.fixture
def open_rate_limits(adapter: Adapter, redis: RedisClient, key_prefix: str) -> Callable[..., RateLimits]:
    """``open_rate_limits(rate=..., burst=..., client=None)``: the limits on ``redis`` or ``client``."""

    def open_limits(*, rate: float, burst: int, client: RedisClient | None = None) -> RateLimits:
        return adapter.rate_limits(client or redis, key_prefix, rate=rate, burst=burst)

    return open_limits


@pytest.fixture
def open_block_queue(adapter: Adapter, redis: RedisClient, key_prefix: str) -> Callable[[str], BlockQueue]:
    """``open_block_queue(consumer)``: one worker's view of the block queue."""

    def open_queue(consumer: str) -> BlockQueue:
        return adapter.block_queue(redis, key_prefix, consumer=consumer)

    return open_queue


@pytest.fixture
def trace_sink(adapter: Adapter, redis: RedisClient, key_prefix: str) -> TraceSink:
    return adapter.trace_sink(redis, key_prefix)


@pytest.fixture
async def subscribe(
    adapter: Adapter, settings: Settings, redis_url: str
) -> AsyncIterator[Callable[..., Awaitable[TraceSubscription]]]:
    """``await subscribe(*channels, pattern=None)``: a confirmed subscription, closed after the test."""
    opened: list[TraceSubscription] = []

    async def open_subscription(*channels: str, pattern: str | None = None) -> TraceSubscription:
        subscription = await adapter.subscribe_traces(settings, redis_url, channels, pattern)
        opened.append(subscription)
        return subscription

    try:
        yield open_subscription
    finally:
        for subscription in opened:
            await subscription.aclose()
