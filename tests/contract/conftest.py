"""The role contracts' fixtures: every role of the record store, on every adapter, fresh per test.

``roles`` is parametrised over :data:`ADAPTERS`, each an opener that returns one adapter per role on the
session's Redis under this test's key prefix (the ``redis`` and ``key_prefix`` fixtures of
``tests/conftest.py``, which drop the prefix's keys and indexes afterwards). A Redis Cluster adapter joins
every contract suite with one entry in :data:`ADAPTERS`. ``unreachable`` gives the same roles on a backend
that does not answer, for the outage promises. The role fixtures (``recall_reads``, ``record_writes``...)
are what the suites are written against: each is typed as its protocol alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from cpersona.keys import Keys
from cpersona.stores.redis.connection import close_redis, new_client
from cpersona.stores.redis.store import RedisRoles

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from contract.contract_records import Roles
    from cpersona.stores.association_store import AssociationStore
    from cpersona.stores.fence_store import FenceStore
    from cpersona.stores.field_store import MemoryFieldStore
    from cpersona.stores.memory_reads import MemoryReadStore
    from cpersona.stores.raw_journal_store import RawJournalStore
    from cpersona.stores.recall_reads import RecallReads
    from cpersona.stores.record_reads import RecordReads
    from cpersona.stores.record_writes import RecordWrites
    from cpersona.stores.redis.connection import RedisClient
    from cpersona.stores.store_admin import StoreAdmin
    from cpersona.stores.write_journal import WriteJournal


async def _redis(client: RedisClient, key_prefix: str) -> Roles:
    return RedisRoles.open(client, Keys(key_prefix))


ADAPTERS: dict[str, Callable[[RedisClient, str], Awaitable[Roles]]] = {"redis": _redis}
"""Each adapter's opener: its roles on a connected client under a key prefix (indexes not yet made)."""


@pytest.fixture(params=sorted(ADAPTERS))
async def roles(request: pytest.FixtureRequest, redis: RedisClient, key_prefix: str) -> Roles:
    opened = await ADAPTERS[request.param](redis, key_prefix)
    await opened.admin.ensure_indexes()
    return opened


@pytest.fixture(params=sorted(ADAPTERS))
async def unreachable(request: pytest.FixtureRequest, key_prefix: str) -> AsyncIterator[Roles]:
    """The roles on a client whose server never answers (nothing listens on port 1)."""
    gone = new_client("redis://127.0.0.1:1", timeout=1.0, retries=0)
    try:
        yield await ADAPTERS[request.param](gone, key_prefix)
    finally:
        await close_redis(gone)


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
