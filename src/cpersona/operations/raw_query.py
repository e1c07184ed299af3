"""The forensic raw query (``recall.raw_query``): one validated request, one read of the record store, the
entries verbatim. No decay, no noise, no side effect; the rules it reads by are
:mod:`cpersona.model.raw_query`'s, the search the store's (:mod:`cpersona.stores.redis.raw_search`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cpersona.model.raw_query import RawEntry, RawQueryResult

if TYPE_CHECKING:
    from cpersona.model.raw_query import RawQueryRequest
    from cpersona.stores.protocols import RawJournalStore

__all__ = ["raw_query"]


async def raw_query(records: RawJournalStore, req: RawQueryRequest) -> RawQueryResult:
    page = await records.raw_query(req.resolved())
    return RawQueryResult(
        records=[RawEntry.of(record) for record in page.records],
        total_candidates=page.total,
        sealed_scanned=page.sealed_scanned if req.include_sealed else None,
    )
