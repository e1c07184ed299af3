"""The raw-journal role: the forensic query over raw journal entries, and the removal of a sealed one.

Consumers: the raw query (:mod:`~cpersona.operations.raw_query`) and deletes
(:mod:`~cpersona.engine.deletes`: a sealed entry). Raw entries are written through
:class:`~cpersona.stores.record_writes.RecordWrites`. The Redis adapter is
:class:`~cpersona.stores.redis.raw_search.RedisRawJournal`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from cpersona.model.raw_query import RawFilter, RawPage

__all__ = ["RawJournalStore"]


@runtime_checkable
class RawJournalStore(Protocol):
    """Raw journal entries read back verbatim, scoped like records."""

    async def raw_query(self, flt: RawFilter) -> RawPage:
        """The entries passing every condition of ``flt`` in the read's scope, oldest first (ties by id),
        the first ``flt.limit`` of them, and how many pass in all. Sealed entries only with
        ``flt.include_sealed``, opened; a query with no word to search is an
        :class:`~cpersona.InvalidRequest` naming ``query``."""
        ...

    async def delete_sealed(self, agent_id: str, record_id: str) -> bool:
        """Delete the raw entry ``record_id`` if it is a sealed entry of ``agent_id``; whether it did."""
        ...
