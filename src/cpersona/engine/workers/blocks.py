"""The block builder: builds block vectors off the write path.

A store queues a block event in the transaction that writes the record (see
:class:`~cpersona.stores.block_queue.BlockQueue`). Workers take batches of events, split each
record (:func:`~cpersona.model.blocks.split_blocks`), embed the blocks (one call per batch), upsert
them and then acknowledge the events. A record that is a single block reuses its record's vector (read
from the record collection by id) instead of embedding the same text again, so a store whose vectors
the caller sent costs no embedding at all. Rebuilding a record rewrites the same point ids, so any event
may be processed twice. Each batch passes the engine's write guard (the free-space floor) before it
embeds: under the floor the batch stays pending and the worker retries with its growing pause.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import time
import uuid
from typing import TYPE_CHECKING

import anyio

from cpersona.errors import BackendUnavailable
from cpersona.model.blocks import block_id, block_ids, split_blocks
from cpersona.model.drafts import CALLER_EMBEDDING
from cpersona.stores.block_queue import QueueLost, event_order
from cpersona.stores.protocols import VectorPoint

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from anyio.abc import TaskStatus

    from cpersona.model.blocks import ParentKind
    from cpersona.stores.block_queue import BlockEvent, BlockQueue
    from cpersona.stores.protocols import BlockParent, Embedder, RecordReads, Vector, VectorStore

__all__ = ["BlockBuilder"]

log = logging.getLogger("cpersona.blocks")

_MAX_DELIVERIES = 10
"""An event delivered this many times without being acknowledged is dropped (and logged), so one record
that cannot be built never stalls the queue behind it. A claim and the read after it both count, so
this allows about five failed attempts."""


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclasses.dataclass(frozen=True, slots=True)
class _Job:
    ref: str
    kind: ParentKind
    record_id: str
    parent: BlockParent
    digest: str
    pieces: tuple[tuple[int, str], ...]  # (block index, text to embed), blank blocks left out


class BlockBuilder:
    """Consumes the block stream for one engine. Every Redis and Qdrant call has the adapters' deadline.

    ``run`` is the long-running worker; ``drain`` processes what the stream holds now and returns.
    Both may run at once (and on many engines): an event processed twice rewrites the same points.
    """

    def __init__(
        self,
        *,
        records: RecordReads,
        queue: BlockQueue,
        blocks: VectorStore,
        embedder: Embedder,
        max_per_record: int,
        max_chars: int,
        redis_timeout_secs: float,
        claim_idle_secs: float = 60.0,
        guard: Callable[[], Awaitable[None]] | None = None,
        record_vectors: VectorStore | None = None,
    ) -> None:
        self.records = records
        self.record_vectors = record_vectors
        self.reused = 0
        """How many blocks took their record's vector instead of an embedding, since the start."""
        self.queue = queue
        self.blocks = blocks
        self.embedder = embedder
        self.max_per_record = max_per_record
        self.max_chars = max_chars
        self.claim_idle_ms = int(claim_idle_secs * 1000)
        self.claim_every = claim_idle_secs
        self.guard = guard
        # A blocking read must return before the client's socket deadline fires.
        self.block_ms = max(1, int(min(2.0, redis_timeout_secs / 2) * 1000))

    async def ensure_group(self) -> None:
        await self.queue.ensure_group()

    # ---------------------------------------------------------------------------------- entry points

    async def drain(self) -> int:
        """Build blocks for every event in the stream now, including those pending at other consumers
        (they may be dead); return how many events were processed. Errors propagate."""
        done = 0
        await self.queue.ensure_group()
        last = await self.queue.last_id()
        if last is None:
            return 0
        await self.queue.claim(min_idle_ms=0)
        while True:
            events = await self._read_pending()
            if not events:
                events = await self.queue.read(">")
                if not events:
                    return done
            done += await self._process(events)
            if any(event_order(event.entry_id) > last for event in events):
                return done  # later writes are the running worker's business, not this call's

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Consume the stream until cancelled. Failures are logged and retried with a growing pause;
        an event stays pending until its blocks are written."""
        task_status.started()
        failures = 0
        next_claim = 0.0
        regroup = False
        while True:
            try:
                if regroup:
                    await self.queue.ensure_group()
                    regroup = False
                if time.monotonic() >= next_claim:
                    await self.queue.claim(min_idle_ms=self.claim_idle_ms)
                    next_claim = time.monotonic() + self.claim_every
                await self._step()
                failures = 0
            except Exception as exc:
                failures += 1
                pause = min(30.0, 0.25 * 2**failures)
                regroup = self._report(exc, pause)
                await anyio.sleep(pause)

    async def _step(self) -> None:
        events = await self._read_pending()
        if not events:
            events = await self.queue.read(">", block_ms=self.block_ms)
        if events:
            await self._process(events)

    @staticmethod
    def _report(exc: Exception, pause: float) -> bool:
        """Log a failed round; whether the consumer group must be created again."""
        if isinstance(exc, QueueLost):
            log.warning("block worker: %s; recreating the consumer group", exc)
            return True
        if isinstance(exc, BackendUnavailable):
            log.warning("block worker: %s; retrying in %.1f s", exc, pause)
        else:
            log.exception("block worker failed; retrying in %.1f s", pause)
        return False

    async def release(self) -> None:
        """Leave the consumer group if nothing is pending here. Bounded, shielded, and never raises."""
        await self.queue.release(self.block_ms / 1000 + 1)

    # ------------------------------------------------------------------------------------- internals

    async def _read_pending(self) -> list[BlockEvent]:
        """This consumer's pending events (claimed, or left by a failed attempt), minus those that have
        failed too often, which are dropped here."""
        while True:
            events = await self.queue.read("0")
            if not events:
                return []
            kept = await self._drop_exhausted(events)
            if kept:
                return kept

    async def _drop_exhausted(self, events: list[BlockEvent]) -> list[BlockEvent]:
        tries = await self.queue.deliveries(events)
        exhausted = [event for event in events if tries.get(event.entry_id, 0) > _MAX_DELIVERIES]
        if not exhausted:
            return events
        for event in exhausted:
            log.error("giving up on the blocks of %s after %d attempts", event.key, _MAX_DELIVERIES)
        await self.queue.finish([event.entry_id for event in exhausted])
        gone = {event.entry_id for event in exhausted}
        return [event for event in events if event.entry_id not in gone]

    async def _process(self, events: Sequence[BlockEvent]) -> int:
        """Build the blocks of the records these events name, then acknowledge the events."""
        for event in events:
            if event.key is not None and event.ref is None:
                log.warning("cannot build blocks for %s: not a memory or episode key", event.key)
        if self.guard is not None:
            await self.guard()
        refs = list(dict.fromkeys(event.ref for event in events if event.ref is not None))
        jobs = await self._load(refs)
        points: list[VectorPoint] = []
        stale: list[str] = []
        for job, vectors in zip(jobs, await self._vectors(jobs), strict=True):
            kept = set()
            for (index, _), vector in zip(job.pieces, vectors, strict=True):
                kept.add(index)
                points.append(self._point(job, index, vector))
            stale.extend(
                block_id(job.kind, job.record_id, i) for i in range(self.max_per_record) if i not in kept
            )
        if stale:
            await self.blocks.delete(stale)
        if points:
            await self.blocks.upsert(points)
        requeue = await self._settle(jobs)
        await self.queue.finish([event.entry_id for event in events], requeue=requeue)
        return len(events)

    async def _vectors(self, jobs: Sequence[_Job]) -> list[list[Vector]]:
        """Each job's block vectors, in the order of its pieces. A record that is one block (the block
        is its whole stripped text) takes its record's vector, read from the record collection, when
        that vector is of this text (see :meth:`_reusable`); the other blocks are embedded in one call.
        """
        reuse = [job.record_id for job in jobs if self._reusable(job)]
        found = await self.record_vectors.vectors(reuse) if reuse and self.record_vectors is not None else {}
        self.reused += len(found)
        texts = [text for job in jobs if job.record_id not in found for _, text in job.pieces]
        made = iter(await self.embedder.embed(texts) if texts else [])
        return [
            [found[job.record_id]] if job.record_id in found else [next(made) for _ in job.pieces]
            for job in jobs
        ]

    def _reusable(self, job: _Job) -> bool:
        """Whether ``job``'s one block may take its record's vector: the record collection holds that
        vector for this very text (the document says embedded, not pending), made by this embedder or
        sent by the caller. A vector of another model is left alone: the block collection is searched
        with this model's query vectors."""
        if self.record_vectors is None or len(job.pieces) != 1:
            return False
        source = job.parent.vector_model
        return job.pieces[0][1] == job.parent.text.strip() and source in (
            self.embedder.name,
            CALLER_EMBEDDING,
        )

    @staticmethod
    def _point(job: _Job, index: int, vector: Vector) -> VectorPoint:
        parent = job.parent
        return VectorPoint(
            id=block_id(job.kind, job.record_id, index),
            vector=vector,
            kind="block",
            agent_id=parent.agent_id,
            project_id=parent.project_id,
            channel=parent.channel,
            timestamp=parent.timestamp,
            seq=parent.seq,
            parent=job.record_id,
            block_index=index,
        )

    async def _load(self, refs: Sequence[str]) -> list[_Job]:
        jobs = []
        for ref, parent in zip(refs, await self.records.block_parents(refs), strict=True):
            if parent is None:
                continue  # deleted since (its delete removed the blocks), or unreadable (logged)
            try:
                jobs.append(self._job(ref, parent))
            except ValueError as exc:
                log.warning("cannot build blocks for %s: %s", ref, exc)
        return jobs

    def _job(self, ref: str, parent: BlockParent) -> _Job:
        text = parent.text
        spans = split_blocks(text, max_chars=self.max_chars)[: self.max_per_record]
        pieces = tuple((index, piece) for index, (s, e) in enumerate(spans) if (piece := text[s:e].strip()))
        return _Job(
            ref=ref,
            kind=parent.kind,
            record_id=str(uuid.UUID(parent.record_id)),
            parent=parent,
            digest=_digest(text),
            pieces=pieces,
        )

    async def _settle(self, jobs: Sequence[_Job]) -> list[str]:
        """Re-read the records just built. One deleted meanwhile loses the blocks just written (its
        delete may have run before the upsert); one whose text changed is queued again, so the last
        build always reflects the last text whichever worker finishes first."""
        if not jobs:
            return []
        now = await self.records.block_texts([job.ref for job in jobs])
        orphaned: list[str] = []
        requeue: list[str] = []
        for job, text in zip(jobs, now, strict=True):
            if text is None:
                orphaned.extend(block_ids(job.kind, job.record_id, self.max_per_record))
            elif _digest(text) != job.digest:
                requeue.append(job.ref)
        if orphaned:
            await self.blocks.delete(orphaned)
        return requeue
