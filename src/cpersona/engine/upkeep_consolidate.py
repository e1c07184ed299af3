"""Consolidation of one agent's episodic memories (Cerememory §6), idempotent (plan:
:mod:`cpersona.operations.lifecycle.consolidation`).

1. **Near-duplicate merge.** Episodic memories with the same text (case and spacing aside), or with
   cosine similarity above 0.92 when the engine embeds, are merged: the best kept (highest current
   fidelity, then the oldest) survives with the typed edges of the others added to its own; the others
   are deleted through the one delete path.
2. **Episodic → semantic.** Every remaining episodic memory at least ``min_age_hours`` old (by its own
   timestamp) and recalled at least ``min_access_count`` times gets a semantic copy — same content,
   scope, time, fidelity and meta-memory, ``metadata._consolidated_from`` naming the original — and the
   original a ``semantic`` edge (weight 1.0) to it. The copy's id is derived from the original's, so a
   copy made before is found and not made again; the copy takes no dedup claim (the original holds it).

Edges are written alone (``set_associations``, never the whole record), so an update that ran since the
read is kept and a memory deleted meanwhile stays deleted.

What is left out, on purpose: the reference deletes an original whose score is under 0.1
(``records_pruned``); deleting is forget's or the decay tick's (opt-in), never a side effect here, so
``records_pruned`` is 0. ``strategy`` is accepted and, as in the reference, changes nothing; there is no
LLM summary (the copy's text is the original's).

A second call with the same arguments finds no duplicates and every copy made: it creates and deletes
nothing. ``dry_run`` counts what a real call would do and writes nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from typing import TYPE_CHECKING

from cpersona.engine.claims import reservation_secs
from cpersona.engine.deletes import delete
from cpersona.engine.disk import check_free_space
from cpersona.engine.reads import agent_memories
from cpersona.engine.vector_writes import abandoned_on_failure, with_vectors
from cpersona.errors import RecordNotFound
from cpersona.model.drafts import CALLER_EMBEDDING
from cpersona.model.fidelity import current_fidelity
from cpersona.model.lifecycle_responses import ConsolidateResult
from cpersona.model.records import Association, MemoryRecord
from cpersona.operations.lifecycle.consolidation import Candidate, copy_id, duplicate_groups, survivor
from cpersona.stores.protocols import InFlightWrite, MemoryWrite

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cpersona.engine.lifecycle import Lifecycle
    from cpersona.model.lifecycle_requests import ConsolidateRequest

__all__ = ["consolidate"]

_ORIGIN = "_consolidated_from"


def _with_edges(record: MemoryRecord, edges: Sequence[Association]) -> MemoryRecord:
    """The record with ``edges`` added to its own (one edge per target and type; its own kept)."""
    have = {(a.target_id, a.type) for a in record.associations}
    added = []
    for edge in edges:
        if (edge.target_id, edge.type) not in have and edge.target_id not in (record.id, record.ref):
            have.add((edge.target_id, edge.type))
            added.append(edge)
    return record if not added else dataclasses.replace(record, associations=(*record.associations, *added))


async def _merge(
    life: Lifecycle, episodic: list[MemoryRecord], now: float, dry_run: bool
) -> list[MemoryRecord]:
    """Merge the near-duplicates; the episodic memories left, in order, and how many went."""
    b = life.backends
    items = [
        Candidate(m.id, m.content, current_fidelity(m.fidelity, m.emotion, now, curve=life.curve), m.seq)
        for m in episodic
    ]
    vectors = (
        await b.embedder.embed([m.content for m in episodic]) if b.embedder is not None and episodic else None
    )
    gone: set[int] = set()
    kept = list(episodic)
    for group in duplicate_groups(items, vectors):
        keep = survivor(items, group)
        others = [episodic[i] for i in group if i != keep]
        gone.update(i for i in group if i != keep)
        if dry_run:
            continue
        merged = _with_edges(episodic[keep], [a for o in others for a in o.associations])
        if merged is not episodic[keep]:
            await b.records.set_associations([(merged.id, merged.associations)])
            kept[keep] = merged
        for other in others:
            with contextlib.suppress(RecordNotFound):  # deleted meanwhile
                await delete(life, other.ref, other.scope.agent_id)
    return [m for i, m in enumerate(kept) if i not in gone]


def _copy(original: MemoryRecord, seq: int, now: float) -> MemoryRecord:
    metadata = {**original.metadata, _ORIGIN: original.ref}
    return dataclasses.replace(
        original,
        id=copy_id(original.id),
        store="semantic",
        seq=seq,
        metadata=metadata,
        associations=(),
        msg_id="",
        created_at=now,
        updated_at=now,
        embedded=False,
        embedding_model="",
        vector_pending=False,
    )


async def _migrate(life: Lifecycle, originals: list[MemoryRecord], now: float) -> int:
    """Write the semantic copies of ``originals`` (none made before) and link each original to its copy."""
    b = life.backends
    if not originals:
        return 0
    first = await b.records.next_seq(len(originals))
    copies = [_copy(m, first + n, now) for n, m in enumerate(originals)]
    # A copy has its original's text, so it keeps a vector the caller sent for it (not the model's). Read
    # before the copies' writes are reserved, so that a failed read leaves no reservation behind.
    sent = [m.id for m in originals if m.embedding_model == CALLER_EMBEDDING]
    kept = await b.vectors.vectors(sent) if sent and b.vectors is not None else {}
    in_flight = [InFlightWrite("memory", c.id) for c in copies]
    await b.records.reserve_writes(in_flight, ttl_secs=reservation_secs(life.settings))
    async with abandoned_on_failure(b, in_flight):
        written = await with_vectors(b, copies, {copy_id(i): v for i, v in kept.items()})
        await b.records.put_memories([MemoryWrite(c) for c in written], queue_blocks=b.builder is not None)
    linked = [
        _with_edges(m, [Association(c.id, "semantic", 1.0, now)])
        for m, c in zip(originals, copies, strict=True)
    ]
    await b.records.set_associations([(m.id, m.associations) for m in linked])
    return len(copies)


async def consolidate(life: Lifecycle, req: ConsolidateRequest) -> ConsolidateResult:
    if not req.dry_run:
        await check_free_space(life.settings)
    now = time.time()
    episodic = [m async for m in agent_memories(life, req.agent_id) if m.store == "episodic"]
    remaining = await _merge(life, episodic, now, req.dry_run)
    compressed = len(episodic) - len(remaining)
    eligible = [
        m
        for m in remaining
        if now - m.timestamp >= req.min_age_hours * 3600 and m.fidelity.access_count >= req.min_access_count
    ]
    made = {c.id for c in await _existing(life, [copy_id(m.id) for m in eligible])}
    to_copy = [m for m in eligible if copy_id(m.id) not in made]
    created = len(to_copy) if req.dry_run else await _migrate(life, to_copy, now)
    return ConsolidateResult(
        records_processed=len(episodic),
        records_migrated=created,
        records_compressed=compressed,
        records_pruned=0,
        semantic_nodes_created=created,
        dry_run=req.dry_run,
    )


async def _existing(life: Lifecycle, ids: Sequence[str]) -> list[MemoryRecord]:
    records = life.backends.records
    found = [await records.get("memory", record_id) for record_id in ids]
    return [r for r in found if isinstance(r, MemoryRecord)]
