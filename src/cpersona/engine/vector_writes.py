"""A record's vector: written before its document, or marked pending and finished later.

A store is crash-safe across the two stores. Its claims are taken first, with a mark that its write is
in flight; then its vector goes to Qdrant; then its document is written to Redis, in one transaction that
also ends the in-flight mark and, if the vector could not be written, adds a "vector pending" mark. A
store that fails before its document deletes its vectors and gives up its claims
(:func:`abandoned_on_failure`); one that dies leaves its in-flight mark, and :func:`sweep_abandoned` —
run at every start — deletes the vector such a write may have left and frees its claims. Then
:func:`finish_pending` embeds and writes what is marked pending. So once a store is acknowledged, the
record is in Redis and its vector reaches Qdrant; and a vector without a document does not outlive the
next start.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from typing import TYPE_CHECKING, TypeVar

import anyio

from cpersona.model.blocks import block_ids
from cpersona.model.drafts import CALLER_EMBEDDING
from cpersona.model.records import EpisodeRecord, MemoryRecord
from cpersona.stores.protocols import VectorPoint

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Mapping, Sequence

    from cpersona.engine.backends import Backends
    from cpersona.stores.protocols import InFlightWrite, Vector

__all__ = [
    "OPTIMIZE_TIMEOUT_SECS",
    "abandoned_on_failure",
    "finish_pending",
    "optimize",
    "sweep_abandoned",
    "with_vectors",
]

log = logging.getLogger("cpersona")
_R = TypeVar("_R", MemoryRecord, EpisodeRecord)

_PENDING_BATCH = 64
# An index build is a maintenance call that grows with the store (tens of seconds at 100k memories on two
# cores), so it gets its own deadline instead of the per-request qdrant_timeout_secs.
OPTIMIZE_TIMEOUT_SECS = 3_600.0


def _point(r: MemoryRecord | EpisodeRecord, vector: Vector) -> VectorPoint:
    return VectorPoint(
        id=r.id,
        vector=vector,
        kind="memory" if isinstance(r, MemoryRecord) else "episode",
        agent_id=r.scope.agent_id,
        project_id=r.scope.project_id,
        channel=r.scope.channel,
        timestamp=r.timestamp,
        seq=r.seq,
        parent=r.id,
    )


async def _put_vectors(
    b: Backends, records: Sequence[MemoryRecord | EpisodeRecord], given: Mapping[str, Vector]
) -> None:
    """Upsert the records' vectors: a caller's where ``given`` holds one (by record id), the others
    embedded in one call. Raises what the embedder or the vector store raised."""
    # Callers check both first (a store with caller vectors is refused without them).
    assert b.embedder is not None
    assert b.vectors is not None
    texts = [r.content if isinstance(r, MemoryRecord) else r.summary for r in records if r.id not in given]
    made = iter(await b.embedder.embed(texts) if texts else [])
    await b.vectors.upsert([_point(r, given[r.id] if r.id in given else next(made)) for r in records])


async def _upsert_vectors(b: Backends, records: Sequence[MemoryRecord | EpisodeRecord]) -> bool:
    """Embed and upsert the records' vectors. False when the embedder or the vector store failed."""
    if b.embedder is None or b.vectors is None or not records:
        return False
    try:
        await _put_vectors(b, records, {})
    except Exception as exc:
        log.warning("vector write deferred for %d record(s): %s", len(records), exc)
        return False
    return True


async def with_vectors(
    b: Backends, records: Sequence[_R], given: Mapping[str, Vector] | None = None
) -> list[_R]:
    """Write the vectors of records not yet in Redis; return them with their vector state set.

    The vector goes first so that each document is written to Redis once, already saying whether
    its vector exists. Merging that state in afterwards (as a second write) left the superseded
    version's entries in the full-text index until the search module's collector ran, and BM25
    counted them. A failing embedder or vector store does not fail the store: the records are
    written pending and finished later (:func:`finish_pending`). A crash after the vector and before
    the document leaves a vector without a record, which recall skips (no document, no row) until the
    next start sweeps it (:func:`sweep_abandoned`).

    ``given`` holds caller vectors by record id (checked and at unit length); those records are not
    embedded and are labelled :data:`~cpersona.model.drafts.CALLER_EMBEDDING`. Such a write is not left
    pending when it fails: the pending path can only embed the text, which would silently replace the
    caller's vector, and Redis does not keep vectors to finish it from. So the failure is raised, the
    whole write is given up (:func:`abandoned_on_failure`), and the caller can send it again.
    """
    if b.embedder is None:
        return list(records)
    model = b.embedder.name
    if given:
        await _put_vectors(b, records, given)
    elif not await _upsert_vectors(b, records):
        return [dataclasses.replace(r, vector_pending=True) for r in records]
    return [_embedded(r, CALLER_EMBEDDING if r.id in (given or {}) else model) for r in records]


def _embedded(r: _R, model: str) -> _R:
    """``r`` saying its vector is written by ``model``; ``r`` itself when it says so already (a store
    with caller vectors drafts its records that way): a replace costs a record several µs."""
    if r.embedded and r.embedding_model == model and not r.vector_pending:
        return r
    return dataclasses.replace(r, embedded=True, embedding_model=model, vector_pending=False)


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


async def finish_pending(b: Backends, progress: Callable[[int, int], None] | None = None) -> int:
    """Write the vectors of every record marked pending. Returns how many were finished.

    ``progress`` is called after each batch with the records taken so far and the total."""
    if b.embedder is None or b.vectors is None:
        return 0
    done = 0
    members = await b.records.pending_refs()
    for start in range(0, len(members), _PENDING_BATCH):
        records = await b.records.load_pending(members[start : start + _PENDING_BATCH])
        done += len(await _write_vectors(b, records))
        if progress is not None:
            progress(min(start + _PENDING_BATCH, len(members)), len(members))
    if done:
        log.info("finished %d pending vector write(s)", done)
    return done


@contextlib.asynccontextmanager
async def abandoned_on_failure(b: Backends, writes: Sequence[InFlightWrite]) -> AsyncIterator[None]:
    """Give up ``writes`` (begun by ``reserve_writes``) if the block fails or is cancelled."""
    try:
        yield
    except BaseException:
        with anyio.CancelScope(shield=True):
            await _abandon(b, writes)
        raise


async def _abandon(b: Backends, writes: Sequence[InFlightWrite]) -> bool:
    """Free the claims of these writes, delete the vectors they may have left, then drop their marks.

    A delete is marked the same way until its vectors are gone (:mod:`~cpersona.engine.deletes`): its
    document gone, it is given up like a store that never wrote one, and its vectors go.

    A write whose record was written after all (its caller only lost the reply) keeps its claims and
    its vector. Best effort: when a step fails, the marks stay for the next start's sweep and the
    claims lapse.
    """
    try:
        unwritten = await b.records.release_writes(writes)
        if b.vectors is not None and unwritten:
            await b.vectors.delete([w.record_id for w in unwritten])
        if b.builder is not None and b.blocks is not None and unwritten:
            # A store builds no blocks before its document; a delete that failed part way may leave some.
            most = b.builder.max_per_record
            await b.blocks.delete([i for w in unwritten for i in block_ids(w.kind, w.record_id, most)])
        await b.records.forget_writes(unwritten)
    except Exception as exc:
        log.warning("could not give up %d failed write(s), left to the next start: %s", len(writes), exc)
        return False
    return True


async def sweep_abandoned(b: Backends, older_than_secs: float) -> int:
    """Give up the writes begun more than ``older_than_secs`` ago that never wrote their record (their
    store died between its vector and its document), and the deletes that did not get to delete their
    vectors. Returns how many were swept."""
    abandoned = await b.records.abandoned_writes(time.time() - older_than_secs)
    swept = 0
    for start in range(0, len(abandoned), _PENDING_BATCH):
        chunk = abandoned[start : start + _PENDING_BATCH]
        swept += len(chunk) if await _abandon(b, chunk) else 0
    if swept:
        log.info("swept %d write(s) or delete(s) that left vectors without a document", swept)
    return swept


async def optimize(b: Backends, timeout_secs: float) -> None:
    """Run each vector store's optimiser, if it has one (see :meth:`cpersona.Engine.optimize`)."""
    for store in (b.vectors, b.blocks):
        # Duck-typed so that the remote adapter (and qdrant-client) need not be imported to tell them
        # apart: only the embedded adapter defines optimize().
        optimiser = getattr(store, "optimize", None)
        if optimiser is not None:
            await optimiser(timeout_secs=timeout_secs)
