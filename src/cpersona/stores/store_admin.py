"""The store-admin role: the record store's lifecycle (its indexes, reachability, repair, the model its
vectors were made with) and the removal of an agent's records.

Consumers: the engine's open (:mod:`~cpersona.engine.lifecycle`: indexes and the search collector),
``/health`` and ``/ready`` (:mod:`~cpersona.engine.reads`, :mod:`~cpersona.engine.readiness`: ping) and
an agent's delete (:mod:`~cpersona.engine.deletes`). The Redis adapter is
:class:`~cpersona.stores.redis.store_admin.RedisStoreAdmin`.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["StoreAdmin"]


@runtime_checkable
class StoreAdmin(Protocol):
    """Indexes, reachability, repair, and an agent's whole removal."""

    async def ensure_indexes(self) -> None:
        """Create the search indexes if missing and bring an older store's documents up to date."""
        ...

    async def collect_garbage(self) -> None:
        """Drop the index entries of superseded document versions now (best effort)."""
        ...

    async def ping(self) -> None:
        """Answer if the store is reachable within its deadline; raise
        :class:`~cpersona.BackendUnavailable` if not."""
        ...

    async def vector_model(self) -> str | None:
        """The model recorded as the maker of the store's vectors (as recorded), ``None`` if none is."""
        ...

    async def record_vector_model(self, identity: str, *, replace: bool = False) -> str | None:
        """Record ``identity`` as the model of the store's vectors, unless one is recorded already (or
        ``replace``); return the one recorded before, ``None`` if none was. Atomic: of two engines
        starting at once, one records and the other reads what it recorded."""
        ...

    async def legacy_vector_model(self) -> str | None:
        """The model an earlier release's records name as their vectors' maker (the first record found
        that names one, a caller's vectors aside); ``None`` when no record has a vector."""
        ...

    async def delete_agent(self, agent_id: str) -> int:
        """Delete every record, claim, profile and calibration of an agent; return the records deleted."""
        ...
