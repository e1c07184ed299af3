"""The Redis adapters of the record roles, one per role over one record space, and their union, the
:class:`~cpersona.stores.protocols.RecordStore` an engine holds.

Each role has its own adapter class (:mod:`.recall_reads`, :mod:`.memory_reads`, :mod:`.record_reads`,
:mod:`.record_writes`, :mod:`.write_journal`, :mod:`.field_writes`, :mod:`.raw_search`,
:mod:`.associations`, :mod:`.fences`, :mod:`.store_admin`), built on the same
:class:`~.record_space.RecordSpace`; :class:`RedisRoles` holds one of each, typed as its role, so each is
checked against its protocol. :class:`RedisRecordStore` adds nothing of its own: each member of the
union is the member of the role that declares it. The client maps redis-py's errors
(:class:`~.connection.MappedRedis`), so no adapter wraps its calls.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from cpersona.stores.association_store import AssociationStore
from cpersona.stores.fence_store import FenceStore
from cpersona.stores.field_store import MemoryFieldStore
from cpersona.stores.memory_reads import MemoryReadStore
from cpersona.stores.raw_journal_store import RawJournalStore
from cpersona.stores.recall_reads import RecallReads
from cpersona.stores.record_reads import RecordReads
from cpersona.stores.record_writes import RecordWrites
from cpersona.stores.redis.associations import RedisAssociations
from cpersona.stores.redis.fences import RedisFences
from cpersona.stores.redis.field_writes import RedisFieldWrites
from cpersona.stores.redis.memory_reads import RedisMemoryReads
from cpersona.stores.redis.raw_search import RedisRawJournal
from cpersona.stores.redis.recall_reads import RedisRecallReads
from cpersona.stores.redis.record_reads import RedisRecordReads
from cpersona.stores.redis.record_space import RecordSpace
from cpersona.stores.redis.record_writes import RedisRecordWrites
from cpersona.stores.redis.store_admin import RedisStoreAdmin
from cpersona.stores.redis.write_journal import RedisWriteJournal
from cpersona.stores.store_admin import StoreAdmin
from cpersona.stores.write_journal import WriteJournal

if TYPE_CHECKING:
    from collections.abc import Mapping

    from cpersona.keys import Keys
    from cpersona.stores.redis.connection import RedisClient
    from cpersona.stores.redis.sealing import Sealer

__all__ = ["ROLES", "RedisRecordStore", "RedisRoles", "role_members"]


@dataclasses.dataclass(frozen=True, slots=True)
class RedisRoles:
    """One Redis adapter per record role, over one record space."""

    recall_reads: RecallReads
    memory_reads: MemoryReadStore
    record_reads: RecordReads
    record_writes: RecordWrites
    write_journal: WriteJournal
    field_writes: MemoryFieldStore
    raw_journal: RawJournalStore
    associations: AssociationStore
    fences: FenceStore
    admin: StoreAdmin

    @classmethod
    def open(cls, client: RedisClient, keys: Keys, sealer: Sealer | None = None) -> RedisRoles:
        """The adapters on ``client`` under ``keys``; nothing is sent to Redis."""
        space = RecordSpace.bind(client, keys, sealer)
        return cls(
            recall_reads=RedisRecallReads(space),
            memory_reads=RedisMemoryReads(space),
            record_reads=RedisRecordReads(space),
            record_writes=RedisRecordWrites(space),
            write_journal=RedisWriteJournal(space),
            field_writes=RedisFieldWrites(space),
            raw_journal=RedisRawJournal(space),
            associations=RedisAssociations(space),
            fences=RedisFences(space),
            admin=RedisStoreAdmin(space),
        )


ROLES: Mapping[str, type] = {
    "recall_reads": RecallReads,
    "memory_reads": MemoryReadStore,
    "record_reads": RecordReads,
    "record_writes": RecordWrites,
    "write_journal": WriteJournal,
    "field_writes": MemoryFieldStore,
    "raw_journal": RawJournalStore,
    "associations": AssociationStore,
    "fences": FenceStore,
    "admin": StoreAdmin,
}
"""The protocol of each field of :class:`RedisRoles`."""


def role_members(protocol: type) -> frozenset[str]:
    """The methods a role protocol declares (each role declares its own; none extends another)."""
    return frozenset(
        name for name, value in vars(protocol).items() if callable(value) and not name.startswith("_")
    )


def _serving() -> dict[str, str]:
    """Each member of the union, and the field of :class:`RedisRoles` whose role declares it."""
    out: dict[str, str] = {}
    for field, protocol in ROLES.items():
        for name in role_members(protocol):
            if name in out:
                raise TypeError(f"{name} is declared by two roles: {out[name]} and {field}")
            out[name] = field
    return out


_SERVING = _serving()


class RedisRecordStore:
    """The :class:`~cpersona.stores.protocols.RecordStore` of one engine in Redis: its roles' adapters.

    A member is looked up on the adapter of the role that declares it, so a call costs one attribute
    lookup more than calling that adapter, and nothing else. An attribute set on the store itself (a
    test standing in for one member) is found before that lookup.
    """

    def __init__(self, client: RedisClient, keys: Keys, sealer: Sealer | None = None) -> None:
        self.roles = RedisRoles.open(client, keys, sealer)

    def __getattr__(self, name: str) -> Any:
        field = _SERVING.get(name)
        if field is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(getattr(self.roles, field), name)
