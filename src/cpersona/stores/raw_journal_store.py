"""The raw journal's part of the :class:`~cpersona.stores.protocols.RecordStore` protocol (which extends
it): the forensic query, kept apart so each protocol module stays one concept."""

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
