"""Deleting one record, or all of an agent's data, from every place it reached.

A record lives in its document, its dedup claims and pending mark (one Redis transaction), its vector and
its block vectors; a delete removes each, Redis first, so a failure part way leaves at most vectors
without a document, which recall skips.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cpersona.engine.claims import record_claims
from cpersona.engine.reads import get, record_ref
from cpersona.model.blocks import block_ids
from cpersona.model.fields import KeyText, check
from cpersona.model.records import MemoryRecord, RawRecord
from cpersona.model.results import DeleteResult
from cpersona.model.scope import ReadScope
from cpersona.recall.arms.block import block_filter
from cpersona.stores.protocols import scope_filter

if TYPE_CHECKING:
    from cpersona.engine.lifecycle import Lifecycle
    from cpersona.model.blocks import ParentKind

__all__ = ["delete", "delete_agent_data"]


async def delete(life: Lifecycle, ref: str, agent_id: str) -> DeleteResult:
    b = life.backends
    record = await get(life, ref, agent_id)
    kind, record_id = record_ref(ref)
    claims: list[str] = []
    if isinstance(record, MemoryRecord):
        claims = record_claims(life.keys, record)
    await b.records.delete(kind, record_id, claims)
    if kind != "raw":  # after the record: a crash between leaves mentions of nothing, which reads skip
        await b.records.forget_record_associations(record.scope.agent_id, record.ref)
    if kind != "raw" and b.vectors is not None:
        await b.vectors.delete([record.id])
    if b.builder is not None and b.blocks is not None and not isinstance(record, RawRecord):
        parent: ParentKind = "memory" if isinstance(record, MemoryRecord) else "episode"
        await b.blocks.delete(block_ids(parent, record.id, b.builder.max_per_record))
    return DeleteResult(1)


async def delete_agent_data(life: Lifecycle, agent_id: str) -> DeleteResult:
    b = life.backends
    agent = check(KeyText, agent_id, "agent_id", life.settings)
    deleted = await b.records.delete_agent(agent)
    await b.records.delete_agent_associations(agent)
    if b.vectors is not None:
        await b.vectors.delete_where(scope_filter(ReadScope(agent)))
    if b.blocks is not None:
        await b.blocks.delete_where(block_filter(agent))
    life.recaller.stats.forget(agent)
    return DeleteResult(deleted)
