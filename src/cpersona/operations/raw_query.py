"""The forensic raw query (``recall.raw_query``): one validated request, one read of the record store, the
entries verbatim. No decay, no noise, no side effect; the rules it reads by are
:mod:`cpersona.model.raw_query`'s, the search the store's (:mod:`cpersona.stores.redis.raw_search`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cpersona.model.fields import validate
from cpersona.model.raw_query import RawEntry, RawQueryRequest, RawQueryResult

if TYPE_CHECKING:
    from collections.abc import Mapping

    from cpersona.settings import Settings
    from cpersona.stores.protocols import RawJournalStore

__all__ = ["raw_query"]


async def raw_query(
    records: RawJournalStore, settings: Settings, body: Mapping[str, object]
) -> RawQueryResult:
    req = validate(RawQueryRequest, body, settings)
    page = await records.raw_query(req.resolved())
    return RawQueryResult(
        records=[RawEntry.of(record) for record in page.records],
        total_candidates=page.total,
        sealed_scanned=page.sealed_scanned if req.include_sealed else None,
    )
