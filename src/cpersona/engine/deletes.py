"""Deleting one record, or all of an agent's data, from every place it reached.

A record lives in its document, its dedup claims and pending mark (one Redis transaction), its vector and
its block vectors; a delete removes each, Redis first. It is marked in flight (as a store is, see
:mod:`~cpersona.engine.vector_writes`) until its vectors are gone, so a failure part way leaves vectors
without a document, which recall skips, only until the next start's sweep deletes them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cpersona.engine.claims import record_claims, reservation_secs
from cpersona.engine.reads import get, record_ref
from cpersona.model.blocks import ParentKind, block_ids
from cpersona.model.fields import KeyText, check
from cpersona.model.records import MemoryRecord, RawRecord
from cpersona.model.results import DeleteResult
from cpersona.model.scope import ReadScope
from cpersona.recall.arms.block import block_filter
from cpersona.stores.protocols import InFlightWrite, scope_filter

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cpersona.engine.backends import Backends
    from cpersona.engine.lifecycle import Lifecycle

__all__ = ["delete", "delete_agent_data", "delete_memories"]


async def delete(life: Lifecycle, ref: str, agent_id: str) -> DeleteResult:
    b = life.backends
    kind, record_id = record_ref(ref)
    # A sealed raw entry is read by no GET, but erasing it by its ref is never refused to its agent.
    if kind == "raw" and await b.records.delete_sealed(
        check(KeyText, agent_id, "agent_id", life.settings), record_id
    ):
        return DeleteResult(1)
    record = await get(life, ref, agent_id)
    claims = record_claims(life.keys, record) if isinstance(record, MemoryRecord) else []
    if isinstance(record, RawRecord):
        await b.records.delete(kind, record_id, claims)
        return DeleteResult(1)
    parent: ParentKind = "memory" if isinstance(record, MemoryRecord) else "episode"
    deleting = [InFlightWrite(parent, record.id)] if b.vectors is not None else []
    await b.records.reserve_writes(deleting, ttl_secs=reservation_secs(life.settings))
    await b.records.delete(kind, record_id, claims)
    # After the record: a crash between leaves mentions of nothing, which reads skip.
    await b.records.forget_record_associations(record.scope.agent_id, record.ref)
    await _delete_vectors(b, parent, [record.id])
    await b.records.forget_writes(deleting)
    return DeleteResult(1)


async def delete_memories(life: Lifecycle, records: Sequence[MemoryRecord]) -> int:
    """Delete memories as :func:`delete` deletes one, each step once for them all: one reservation, one
    Redis transaction, one vector delete per store; return how many were still there to delete.

    A forget of many memories is this, a page at a time: one by one, each memory waited on four disk
    syncs and two vector-store round trips of its own.
    """
    if not records:
        return 0
    b = life.backends
    deleting = [InFlightWrite("memory", r.id) for r in records] if b.vectors is not None else []
    await b.records.reserve_writes(deleting, ttl_secs=reservation_secs(life.settings))
    deleted = await b.records.delete_many("memory", [(r.id, record_claims(life.keys, r)) for r in records])
    for record in records:
        await b.records.forget_record_associations(record.scope.agent_id, record.ref)
    await _delete_vectors(b, "memory", [r.id for r in records])
    await b.records.forget_writes(deleting)
    return deleted


async def _delete_vectors(b: Backends, parent: ParentKind, record_ids: Sequence[str]) -> None:
    if b.vectors is not None:
        await b.vectors.delete(record_ids)
    if b.builder is not None and b.blocks is not None:
        per_record = b.builder.max_per_record
        await b.blocks.delete([block for rid in record_ids for block in block_ids(parent, rid, per_record)])


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
