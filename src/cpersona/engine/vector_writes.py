"""A record's vector: written before its document, or marked pending and finished later.

A store is crash-safe across the two stores. The record is written to Redis first, in one transaction
with a "vector pending" mark (a member of one set); then its vector goes to Qdrant; then the mark is
cleared. A crash between the steps leaves the mark, and :func:`finish_pending` — run at every start —
embeds and writes what is marked. So once a store is acknowledged, the record is in Redis and its vector
reaches Qdrant, whatever happens next.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, TypeVar

from cpersona.model.records import EpisodeRecord, MemoryRecord
from cpersona.stores.protocols import VectorPoint

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cpersona.engine.backends import Backends

__all__ = ["OPTIMIZE_TIMEOUT_SECS", "finish_pending", "optimize", "with_vectors"]

log = logging.getLogger("cpersona")
_R = TypeVar("_R", MemoryRecord, EpisodeRecord)

_PENDING_BATCH = 64
# An index build is a maintenance call that grows with the store (tens of seconds at 100k memories on two
# cores), so it gets its own deadline instead of the per-request qdrant_timeout_secs.
OPTIMIZE_TIMEOUT_SECS = 3_600.0


async def _upsert_vectors(b: Backends, records: Sequence[MemoryRecord | EpisodeRecord]) -> bool:
    """Embed and upsert the records' vectors. False when the embedder or the vector store failed."""
    if b.embedder is None or b.vectors is None or not records:
        return False
    texts = [r.content if isinstance(r, MemoryRecord) else r.summary for r in records]
    try:
        vectors = await b.embedder.embed(texts)
        points = [
            VectorPoint(
                id=r.id,
                vector=v,
                kind="memory" if isinstance(r, MemoryRecord) else "episode",
                agent_id=r.scope.agent_id,
                project_id=r.scope.project_id,
                channel=r.scope.channel,
                timestamp=r.timestamp,
                seq=r.seq,
                parent=r.id,
            )
            for r, v in zip(records, vectors, strict=True)
        ]
        await b.vectors.upsert(points)
    except Exception as exc:
        log.warning("vector write deferred for %d record(s): %s", len(records), exc)
        return False
    return True


async def with_vectors(b: Backends, records: Sequence[_R]) -> list[_R]:
    """Write the vectors of records not yet in Redis; return them with their vector state set.

    The vector goes first so that each document is written to Redis once, already saying whether
    its vector exists. Merging that state in afterwards (as a second write) left the superseded
    version's entries in the full-text index until the search module's collector ran, and BM25
    counted them. A failing embedder or vector store does not fail the store: the records are
    written pending and finished later (:func:`finish_pending`). A crash after the vector and before
    the document leaves a vector without a record, which recall skips (no document, no row).
    """
    if b.embedder is None:
        return list(records)
    if not await _upsert_vectors(b, records):
        return [dataclasses.replace(r, vector_pending=True) for r in records]
    model = b.embedder.name
    return [
        dataclasses.replace(r, embedded=True, embedding_model=model, vector_pending=False) for r in records
    ]


async def _write_vectors(b: Backends, records: Sequence[MemoryRecord | EpisodeRecord]) -> set[str]:
    """Finish records already in Redis: upsert, then clear their pending marks. Returns the ids written.

    Only the pending path rewrites a document after its first write (rare: it follows a failure).
    """
    if b.embedder is None or not await _upsert_vectors(b, records):
        return set()
    # Only documents that still exist are marked: a delete may have raced this write.
    missing = await b.records.mark_vectors_written(records, b.embedder.name)
    if missing and b.vectors is not None:
        await b.vectors.delete(missing)
    return {r.id for r in records} - set(missing)


async def finish_pending(b: Backends) -> int:
    """Write the vectors of every record marked pending. Returns how many were finished."""
    if b.embedder is None or b.vectors is None:
        return 0
    done = 0
    members = await b.records.pending_refs()
    for start in range(0, len(members), _PENDING_BATCH):
        records = await b.records.load_pending(members[start : start + _PENDING_BATCH])
        done += len(await _write_vectors(b, records))
    if done:
        log.info("finished %d pending vector write(s)", done)
    return done


async def optimize(b: Backends, timeout_secs: float) -> None:
    """Run each vector store's optimiser, if it has one (see :meth:`cpersona.Engine.optimize`)."""
    for store in (b.vectors, b.blocks):
        # Duck-typed so that the remote adapter (and qdrant-client) need not be imported to tell them
        # apart: only the embedded adapter defines optimize().
        optimiser = getattr(store, "optimize", None)
        if optimiser is not None:
            await optimiser(timeout_secs=timeout_secs)
