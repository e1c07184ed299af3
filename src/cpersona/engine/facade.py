"""The engine: opens the backends, and runs the write path and the record reads.

A store is crash-safe across the two stores. The record is written to Redis first, in one transaction
with a "vector pending" mark (a member of one set); then its vector goes to Qdrant; then the mark is
cleared. A crash between the steps leaves the mark, and :meth:`Engine.finish_pending` — run at every
start — embeds and writes what is marked. So once a store is acknowledged, the record is in Redis and its
vector reaches Qdrant, whatever happens next.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
import random
import time
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from cpersona.engine.calibration import calibrate, select_gate
from cpersona.engine.workers.blocks import BlockBuilder
from cpersona.errors import EngineClosed, InvalidRequest, InvalidSetting, RecordNotFound
from cpersona.keys import Keys
from cpersona.model.agent_requests import CalibrateRequest, Gate, GateRequest, Precision, ProfileText
from cpersona.model.blocks import ParentKind, block_ids
from cpersona.model.episode_request import EpisodeRequest
from cpersona.model.fields import AgentId, KeyText, check, given, validate
from cpersona.model.memory_request import BatchRequest, StoreRequest
from cpersona.model.raw_request import RawBatchRequest, RawRequest
from cpersona.model.record_queries import ListQuery, RecordKind
from cpersona.model.records import (
    EpisodeRecord,
    Fidelity,
    MemoryRecord,
    ProfileRecord,
    RawRecord,
    new_id,
    parse_ref,
)
from cpersona.model.results import BatchResult, DeleteResult, StoreResult
from cpersona.model.scope import ReadScope
from cpersona.model.update_request import UpdateRequest, updated_record
from cpersona.recall.arms.block import block_filter
from cpersona.recall.policy import load_policies
from cpersona.recall.recaller import Recaller
from cpersona.recall.request import recall_request
from cpersona.recall.trace.publisher import TracePublisher, TraceStats
from cpersona.settings import Settings
from cpersona.stores.embedding.embedders import open_embedder
from cpersona.stores.protocols import Embedder, MemoryWrite, VectorPoint, VectorStore, scope_filter
from cpersona.stores.redis.block_queue import BlockQueue
from cpersona.stores.redis.connection import close_redis, connect_redis, redis_errors, redis_info
from cpersona.stores.redis.datadir import DataDirLock
from cpersona.stores.redis.server import EmbeddedRedis
from cpersona.stores.redis.store import RedisRecordStore
from cpersona.stores.redis.trace_sink import RedisTraceSink
from cpersona.stores.vectors.factory import open_vector_store

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping, Sequence
    from datetime import datetime

    from anyio.abc import TaskStatus

    from cpersona.model.drafts import MemoryDraft, RawDraft
    from cpersona.model.memory_parts import Content, Emotion, MetaBody
    from cpersona.model.recall_query import Order
    from cpersona.model.records import RawSource, RawSpeaker, RawVisibility, SecrecyLevel, StoreKind
    from cpersona.model.time_cue_request import TimeCueBody
    from cpersona.recall.arm_runner import ArmWrapper
    from cpersona.recall.request import RecallResult
    from cpersona.settings import RecallMode
    from cpersona.stores.protocols import RecordStore
    from cpersona.stores.redis.connection import RedisClient

__all__ = ["Engine", "open"]

log = logging.getLogger("cpersona")
_R = TypeVar("_R", MemoryRecord, EpisodeRecord)

AnyRecord = MemoryRecord | EpisodeRecord | RawRecord
_KINDS: Mapping[str, RecordKind] = {"mem": "memory", "ep": "episode", "raw": "raw"}

_PENDING_BATCH = 64
# An index build is a maintenance call that grows with the store (tens of seconds at 100k memories on two
# cores), so it gets its own deadline instead of the per-request qdrant_timeout_secs.
_OPTIMIZE_TIMEOUT_SECS = 3_600.0


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclasses.dataclass(frozen=True, slots=True)
class _Backends:
    redis: RedisClient
    records: RecordStore
    vectors: VectorStore | None
    embedder: Embedder | None
    redis_info: Mapping[str, Any]
    blocks: VectorStore | None = None
    builder: BlockBuilder | None = None
    publisher: TracePublisher | None = None


class Engine:
    """cpersona's engine. Open it with ``async with cpersona.open() as memory:``.

    Every method validates its input and raises :class:`~cpersona.InvalidRequest` naming the field;
    a backend that fails or misses its deadline raises a :class:`~cpersona.BackendUnavailable`.
    """

    def __init__(self, settings: Settings, *, arm_wrapper: ArmWrapper | None = None) -> None:
        self.settings = settings
        # A testing and benchmark seam (see ``open``), fixed for the engine's life.
        self._arm_wrapper = arm_wrapper
        self.keys = Keys(settings.key_prefix)
        self._backends: _Backends | None = None
        self._stack: contextlib.AsyncExitStack | None = None
        self._recaller: Recaller | None = None
        # Decides which untraced recalls are traced anyway (CPERSONA_TRACE_SAMPLE); one per engine, seeded
        # by CPERSONA_TRACE_SAMPLE_SEED when set so a run's sample can be repeated.
        self._trace_rng = random.Random(settings.trace_sample_seed)
        # Policies are read at construction so a broken policy file stops the start before any I/O.
        self.policies = load_policies()
        if settings.recall_policy not in self.policies:
            raise InvalidSetting(
                "CPERSONA_RECALL_POLICY", f"names no policy file: {settings.recall_policy!r}"
            )
        cue_policy = self.policies.get(settings.recall_cue_policy)
        if cue_policy is None or cue_policy.cue is None:
            raise InvalidSetting(
                "CPERSONA_RECALL_CUE_POLICY",
                f"must name a policy file with a [cue] table: {settings.recall_cue_policy!r}",
            )

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> Engine:
        if self._stack is not None:
            raise RuntimeError("the engine is already open")
        stack = contextlib.AsyncExitStack()
        await stack.__aenter__()
        try:
            url = self.settings.redis_url
            if url is None:
                server = await stack.enter_async_context(EmbeddedRedis(self.settings))
                url = server.url
            elif self.settings.embedded_qdrant and self.settings.embedding_mode != "none":
                # The embedded Qdrant shard lives in the data dir too: one engine per data dir.
                await stack.enter_async_context(DataDirLock(self.settings.data_dir))
            client = await connect_redis(self.settings, url)
            stack.push_async_callback(close_redis, client)
            info = await redis_info(client)
            records = RedisRecordStore(client, self.keys)
            await records.ensure_indexes()
            await records.collect_garbage()
            embedder = await open_embedder(self.settings)
            vectors: VectorStore | None = None
            if embedder is not None:
                stack.push_async_callback(embedder.aclose)
                vectors = await open_vector_store(self.settings, "records", embedder.dim)
                stack.push_async_callback(vectors.aclose)
            blocks, builder = await self._open_blocks(stack, client, records, embedder)
            publisher = TracePublisher(
                RedisTraceSink(client, self.keys),
                capacity=self.settings.trace_queue_size,
                timeout_secs=self.settings.redis_timeout_secs,
            )
            # Closed before the client (exit callbacks run last-in, first-out).
            stack.callback(publisher.close)
            self._backends = _Backends(
                client,
                records,
                vectors,
                embedder,
                info,
                blocks,
                builder,
                publisher=publisher,
            )
            self._recaller = Recaller(
                settings=self.settings,
                policies=self.policies,
                records=records,
                vectors=vectors,
                embedder=embedder,
                blocks=blocks,
                arm_wrapper=self._arm_wrapper,
            )
            self._stack = stack
            await self.finish_pending()
        except BaseException:
            self._backends = None
            self._recaller = None
            self._stack = None
            with anyio.CancelScope(shield=True):
                await stack.aclose()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        stack, self._stack, self._backends, self._recaller = self._stack, None, None, None
        if stack is not None:
            with anyio.CancelScope(shield=True):
                await stack.aclose()

    async def _open_blocks(
        self,
        stack: contextlib.AsyncExitStack,
        client: RedisClient,
        records: RecordStore,
        embedder: Embedder | None,
    ) -> tuple[VectorStore | None, BlockBuilder | None]:
        """The block collection and its builder; none without an embedder (no vectors, no blocks)."""
        if embedder is None:
            return None, None
        blocks = await open_vector_store(self.settings, "blocks", embedder.dim, binary_quantized=True)
        stack.push_async_callback(blocks.aclose)
        rules = self.policies[self.settings.recall_policy].blocks
        builder = BlockBuilder(
            records=records,
            queue=BlockQueue(client, self.keys),
            blocks=blocks,
            embedder=embedder,
            max_per_record=rules.max_per_record,
            max_chars=rules.max_chars,
            redis_timeout_secs=self.settings.redis_timeout_secs,
        )
        await builder.ensure_group()
        # Runs before the client closes (exit callbacks run last-in, first-out).
        stack.push_async_callback(builder.release)
        return blocks, builder

    async def run_block_worker(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Build block vectors from the block stream until cancelled (start it in a task group).

        Returns at once when the engine builds no blocks (``embedding_mode="none"``).
        """
        builder = self._b.builder
        if builder is None:
            task_status.started()
            return
        await builder.run(task_status=task_status)

    async def run_trace_publisher(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Publish queued recall traces to Redis until cancelled (start it in a task group)."""
        await self._publisher.run(task_status=task_status)

    async def run_background(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Run every background task of the engine (block worker, trace publisher) until cancelled.

        ``cpersona.open()`` and the HTTP lifespan start this in a task group around their body; it reports
        started once each task has.
        """
        async with anyio.create_task_group() as tg:
            await tg.start(self.run_block_worker)
            await tg.start(self.run_trace_publisher)
            task_status.started()

    async def drain_traces(self) -> int:
        """Publish every trace queued so far, then return how many were taken off the queue."""
        return await self._publisher.drain()

    def trace_stats(self) -> TraceStats:
        """The trace publisher's counters (published, dropped, failed, queued, capacity)."""
        return self._publisher.stats()

    @property
    def _publisher(self) -> TracePublisher:
        publisher = self._b.publisher
        assert publisher is not None
        return publisher

    @property
    def builds_blocks(self) -> bool:
        """Whether stores queue block builds (they do unless ``embedding_mode="none"``)."""
        return self._b.builder is not None

    async def drain_blocks(self) -> int:
        """Build the blocks of every record queued so far, then return how many events were processed."""
        builder = self._b.builder
        return 0 if builder is None else await builder.drain()

    @property
    def _b(self) -> _Backends:
        if self._backends is None:
            raise EngineClosed("the engine is not open; use 'async with cpersona.open(...) as memory:'")
        return self._backends

    @property
    def redis(self) -> RedisClient:
        """The engine's Redis client (for tools and tests that need to look underneath)."""
        return self._b.redis

    @property
    def records(self) -> RecordStore:
        """The engine's record store (for tools and tests that call the store's searches directly)."""
        return self._b.records

    @property
    def vectors(self) -> VectorStore | None:
        return self._b.vectors

    @property
    def blocks(self) -> VectorStore | None:
        """The block-vector collection (``None`` when the engine embeds nothing)."""
        return self._b.blocks

    @property
    def embedder(self) -> Embedder | None:
        return self._b.embedder

    async def health(self) -> dict[str, Any]:
        b = self._b
        async with redis_errors():
            await b.redis.ping()
        return {
            "ok": True,
            "redis": {**b.redis_info, "embedded": self.settings.embedded_redis},
            "vector_engine": None if b.vectors is None else b.vectors.engine_name,
            "embedder": None if b.embedder is None else {"name": b.embedder.name, "dim": b.embedder.dim},
            "traces": self._publisher.stats().to_json(),
        }

    # ------------------------------------------------------------------ recall

    @property
    def recaller(self) -> Recaller:
        """The engine's recall runner (for tools and tests that look underneath)."""
        self._b  # noqa: B018 - raises EngineClosed when closed
        assert self._recaller is not None
        return self._recaller

    async def recall(
        self,
        query: str,
        *,
        agent_id: str,
        limit: int | None = None,
        deep: bool = False,
        mode: RecallMode | None = None,
        project_id: str | None = None,
        channel: str | None = None,
        source_id: str = "",
        exclude_contents: Sequence[str] = (),
        full_content: bool = False,
        order: Order = "best_first",
        policy: str | None = None,
        trace: bool = False,
        time_cue: Mapping[str, Any] | TimeCueBody | None = None,
        limit_cap: int | None = None,
    ) -> RecallResult:
        """Recall the rows that answer ``query`` (the fields of :class:`~cpersona.RecallQuery`).

        ``limit`` (default: the policy's) may go up to ``CPERSONA_RECALL_MAX_LIMIT`` (or ``limit_cap``,
        which the HTTP edge sets to 100); past it the request is refused, not clamped. ``mode`` and
        ``policy`` default to the settings'; a ``time_cue`` picks the cue policy.
        """
        cap = self.settings.recall_max_limit if limit_cap is None else limit_cap
        body = given(
            query=query, agent_id=agent_id, limit=limit, deep=deep, mode=mode, project_id=project_id,
            channel=channel, source_id=source_id, exclude_contents=exclude_contents,
            full_content=full_content, order=order, policy=policy, trace=trace, time_cue=time_cue,
        )  # fmt: skip
        req = recall_request(body, self.settings, self.policies, max_limit=cap)
        rate = self.settings.trace_sample
        sampled = not req.trace and rate > 0 and self._trace_rng.random() < rate
        result = await self.recaller.recall(req, want_trace=req.trace or sampled)
        if result.trace is not None:
            self._publisher.offer(req.scope.agent_id, result.trace)
            if sampled:
                # A sampled trace goes to the channel only: the caller's answer is what it asked for.
                result = dataclasses.replace(result, trace=None)
        return result

    async def calibrate(self, agent_id: str, *, precision: Precision = "balanced") -> dict[str, Any]:
        """Calibrate the agent's gate from its own memories (deterministic), store it and select it."""
        req = validate(CalibrateRequest, {"agent_id": agent_id, "precision": precision}, self.settings)
        policy = self.policies[self.settings.recall_policy]
        b = self._b
        return await calibrate(b.records, b.embedder, policy, req.agent_id, req.precision)

    async def select_gate(self, agent_id: str, gate: Gate) -> dict[str, Any]:
        """Choose the agent's gate: ``calibrated`` (needs a calibration) or ``heuristic``."""
        req = validate(GateRequest, {"agent_id": agent_id, "gate": gate}, self.settings)
        return await select_gate(self._b.records, req.agent_id, req.gate)

    # ------------------------------------------------------------------ memories

    async def store(
        self,
        content: Content | Mapping[str, Any],
        *,
        agent_id: str,
        project_id: str = "",
        channel: str = "",
        source: Mapping[str, Any] | None = None,
        id: str | None = None,
        msg_id: str | None = None,
        timestamp: float | str | datetime | None = None,
        metadata: Any = None,
        context: Mapping[str, Any] | None = None,
        store: StoreKind | None = None,
        emotion: Emotion | Mapping[str, float] | None = None,
        meta: MetaBody | Mapping[str, Any] | None = None,
        associations: Sequence[Mapping[str, Any]] | None = None,
        lock: bool = False,
    ) -> StoreResult:
        """Store one memory (the fields of :class:`~cpersona.StoreRequest`, ``POST /v1/encode``)."""
        body = given(
            content=content, agent_id=agent_id, project_id=project_id, channel=channel, source=source,
            id=id, msg_id=msg_id, timestamp=timestamp, metadata=metadata, context=context, store=store,
            emotion=emotion, meta=meta, associations=associations, lock=lock,
        )  # fmt: skip
        draft = validate(StoreRequest, body, self.settings).draft(self.settings)
        (result,) = await self._store_memories([draft])
        return result

    async def store_batch(self, records: Sequence[Mapping[str, Any] | StoreRequest]) -> BatchResult:
        """Store many memories: all are validated before any is written; one embedding call per chunk."""
        batch = validate(BatchRequest, {"records": records}, self.settings)
        drafts = [r.draft(self.settings, prefix=f"records[{i}].") for i, r in enumerate(batch.records)]
        return BatchResult(tuple(await self._store_memories(drafts)))

    async def _store_memories(self, drafts: Sequence[MemoryDraft]) -> list[StoreResult]:
        b = self._b
        results: list[StoreResult | None] = [None] * len(drafts)
        fresh: list[tuple[int, MemoryDraft, str, list[str]]] = []
        seen_in_batch: dict[str, str] = {}
        for i, draft in enumerate(drafts):
            claims = self._claim_keys(draft)
            existing = await self._existing_claim(claims)
            if existing is None:
                for key in claims:
                    if key in seen_in_batch:
                        existing = (seen_in_batch[key], "duplicate")
                        break
            if existing is not None:
                results[i] = StoreResult(
                    "skipped", f"mem:{existing[0]}", draft.msg_id, skipped_reason=existing[1]
                )
                continue
            record_id = new_id()
            for key in claims:
                seen_in_batch[key] = record_id
            fresh.append((i, draft, record_id, claims))
        if not fresh:
            return [r for r in results if r is not None]

        now = time.time()
        first_seq = await b.records.next_seq(len(fresh))
        records = [
            MemoryRecord(
                id=record_id,
                scope=d.scope,
                source=d.source,
                content=d.content,
                timestamp=d.timestamp,
                seq=first_seq + n,
                msg_id=d.msg_id,
                metadata=d.metadata,
                store=d.store,
                emotion=d.emotion,
                fidelity=Fidelity(last_accessed_at=now, last_decay_tick=now),
                meta=d.meta,
                associations=d.associations,
                created_at=now,
                updated_at=now,
                locked=d.locked,
            )
            for n, (_, d, record_id, _) in enumerate(fresh)
        ]
        records = await self._with_vectors(records)
        writes = [
            MemoryWrite(rec, tuple(claims)) for rec, (_, _, _, claims) in zip(records, fresh, strict=True)
        ]
        await b.records.put_memories(writes, queue_blocks=b.builder is not None)
        for rec, (i, d, _, _) in zip(records, fresh, strict=True):
            results[i] = StoreResult(
                "stored", rec.ref, d.msg_id, embedded=rec.embedded, vector_pending=rec.vector_pending,
                warnings=d.warnings,
            )  # fmt: skip
        return [r for r in results if r is not None]

    def _claim_keys(self, draft: MemoryDraft) -> list[str]:
        scope = draft.scope
        digest = _digest(draft.content)
        keys = []
        if draft.msg_id:
            keys.append(self.keys.msg_id_claim(scope.agent_id, scope.project_id, draft.msg_id))
        keys.append(self.keys.content_claim(scope.agent_id, scope.project_id, scope.channel, digest))
        return keys

    async def _existing_claim(self, claims: Sequence[str]) -> tuple[str, str] | None:
        """The record that already holds a claim, if it still exists (claims of deleted records are stale)."""
        holder = await self._b.records.live_claim(claims)
        if holder is None:
            return None
        reason = "duplicate_id" if ":dedup:msg:" in holder.claim else "duplicate_content"
        return holder.record_id, reason

    async def _upsert_vectors(self, records: Sequence[MemoryRecord | EpisodeRecord]) -> bool:
        """Embed and upsert the records' vectors. False when the embedder or the vector store failed."""
        b = self._b
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

    async def _with_vectors(self, records: Sequence[_R]) -> list[_R]:
        """Write the vectors of records not yet in Redis; return them with their vector state set.

        The vector goes first so that each document is written to Redis once, already saying whether
        its vector exists. Merging that state in afterwards (as a second write) left the superseded
        version's entries in the full-text index until the search module's collector ran, and BM25
        counted them. A failing embedder or vector store does not fail the store: the records are
        written pending and finished later (:meth:`finish_pending`). A crash after the vector and before
        the document leaves a vector without a record, which recall skips (no document, no row).
        """
        b = self._b
        if b.embedder is None:
            return list(records)
        if not await self._upsert_vectors(records):
            return [dataclasses.replace(r, vector_pending=True) for r in records]
        model = b.embedder.name
        return [
            dataclasses.replace(r, embedded=True, embedding_model=model, vector_pending=False)
            for r in records
        ]

    async def _write_vectors(self, records: Sequence[MemoryRecord | EpisodeRecord]) -> set[str]:
        """Finish records already in Redis: upsert, then clear their pending marks. Returns the ids written.

        Only the pending path rewrites a document after its first write (rare: it follows a failure).
        """
        b = self._b
        if b.embedder is None or not await self._upsert_vectors(records):
            return set()
        # Only documents that still exist are marked: a delete may have raced this write.
        missing = await b.records.mark_vectors_written(records, b.embedder.name)
        if missing and b.vectors is not None:
            await b.vectors.delete(missing)
        return {r.id for r in records} - set(missing)

    async def finish_pending(self) -> int:
        """Write the vectors of every record marked pending. Returns how many were finished."""
        b = self._b
        if b.embedder is None or b.vectors is None:
            return 0
        done = 0
        members = await b.records.pending_refs()
        for start in range(0, len(members), _PENDING_BATCH):
            records = await b.records.load_pending(members[start : start + _PENDING_BATCH])
            done += len(await self._write_vectors(records))
        if done:
            log.info("finished %d pending vector write(s)", done)
        return done

    async def optimize(self, *, timeout_secs: float = _OPTIMIZE_TIMEOUT_SECS) -> None:
        """Build the vector indexes now: run each vector store's optimiser, if it has one.

        The embedded Qdrant engine has no background optimiser: its points stay in a segment searched by
        brute force, and its HNSW graph and quantised copy are not built, until
        :meth:`~cpersona.stores.vectors.edge.EdgeVectorStore.optimize` runs. Call this after a bulk import and
        now and then as a maintenance task (``cpersona optimize``). A Qdrant server optimises in the
        background, so its adapter has no ``optimize`` and is left alone. It may take seconds on a large
        store and, with the embedded engine, holds the GIL meanwhile (recalls wait for it).
        """
        b = self._b
        for store in (b.vectors, b.blocks):
            # Duck-typed so that the remote adapter (and qdrant-client) need not be imported to tell them
            # apart: only the embedded adapter defines optimize().
            optimize = getattr(store, "optimize", None)
            if optimize is not None:
                await optimize(timeout_secs=timeout_secs)

    # ------------------------------------------------------------------ episodes, raw, profile

    async def archive_episode(
        self,
        summary: str,
        *,
        agent_id: str,
        project_id: str = "",
        channel: str = "",
        keywords: Sequence[str] | str = (),
        history: Sequence[Mapping[str, Any]] | None = None,
        start_time: float | str | datetime | None = None,
        end_time: float | str | datetime | None = None,
        resolved: bool = False,
    ) -> StoreResult:
        """Archive a session summary (:class:`~cpersona.EpisodeRequest`: keywords, history or start/end)."""
        b = self._b
        body = given(
            summary=summary, agent_id=agent_id, project_id=project_id, channel=channel, keywords=keywords,
            history=history, start_time=start_time, end_time=end_time, resolved=resolved,
        )  # fmt: skip
        d = validate(EpisodeRequest, body, self.settings).draft(self.settings)
        now = time.time()
        seq = await b.records.next_seq()
        rec = EpisodeRecord(
            id=new_id(),
            scope=d.scope,
            summary=d.summary,
            seq=seq,
            keywords=d.keywords,
            start_time=d.start_time,
            end_time=d.end_time,
            resolved=d.resolved,
            created_at=now,
        )
        (rec,) = await self._with_vectors([rec])
        await b.records.put_episode(rec, queue_blocks=b.builder is not None)
        return StoreResult("stored", rec.ref, embedded=rec.embedded, vector_pending=rec.vector_pending)

    async def store_raw(
        self,
        content: Content | Mapping[str, Any],
        *,
        agent_id: str,
        session_id: str,
        source: RawSource,
        speaker: RawSpeaker,
        visibility: RawVisibility,
        secrecy_level: SecrecyLevel,
        project_id: str = "",
        channel: str = "",
        turn_id: str | None = None,
        topic_id: str | None = None,
        metadata: Any = None,
        meta: MetaBody | Mapping[str, Any] | None = None,
    ) -> StoreResult:
        """Append one verbatim journal entry (:class:`~cpersona.RawRequest`, ``POST /v1/encode/raw``)."""
        body = given(
            content=content, agent_id=agent_id, session_id=session_id, source=source, speaker=speaker,
            visibility=visibility, secrecy_level=secrecy_level, project_id=project_id, channel=channel,
            turn_id=turn_id, topic_id=topic_id, metadata=metadata, meta=meta,
        )  # fmt: skip
        draft = validate(RawRequest, body, self.settings).draft(self.settings)
        return (await self._store_raw([draft])).results[0]

    async def store_raw_batch(self, records: Sequence[Mapping[str, Any] | RawRequest]) -> BatchResult:
        """Append many journal entries: all are validated before any is written."""
        batch = validate(RawBatchRequest, {"records": records}, self.settings)
        prefix = len(batch.records) > 1
        return await self._store_raw(
            [
                r.draft(self.settings, prefix=f"records[{i}]." if prefix else "")
                for i, r in enumerate(batch.records)
            ]
        )

    async def _store_raw(self, drafts: Sequence[RawDraft]) -> BatchResult:
        b = self._b
        now = time.time()
        recs = [
            RawRecord(
                id=new_id(),
                scope=d.scope,
                session_id=d.session_id,
                source=d.source,
                speaker=d.speaker,
                visibility=d.visibility,
                secrecy_level=d.secrecy_level,
                content=d.content,
                created_at=now,
                turn_id=d.turn_id,
                topic_id=d.topic_id,
                metadata=d.metadata,
                meta=d.meta,
            )
            for d in drafts
        ]
        await b.records.put_raw(recs)
        return BatchResult(tuple(StoreResult("stored", r.ref) for r in recs))

    async def update_profile(self, agent_id: str, profile: str) -> ProfileRecord:
        b = self._b
        agent = check(AgentId, agent_id, "agent_id", self.settings)
        content = check(ProfileText, profile, "profile", self.settings)
        rec = ProfileRecord(agent, content, time.time())
        await b.records.put_profile(rec)
        return rec

    async def get_profile(self, agent_id: str) -> ProfileRecord | None:
        b = self._b
        agent = check(AgentId, agent_id, "agent_id", self.settings)
        return await b.records.profile(agent)

    # ------------------------------------------------------------------ reads

    def _parse_ref(self, ref: str) -> tuple[RecordKind, str]:
        if not isinstance(ref, str):
            raise InvalidRequest("ref", "must be a string like 'mem:<uuid>'")
        parsed = parse_ref(ref)
        if parsed is None:
            raise InvalidRequest("ref", f"is not a record ref (mem:<uuid>, ep:<uuid> or raw:<uuid>): {ref!r}")
        return _KINDS[parsed.kind], parsed.id

    async def get(self, ref: str, *, agent_id: str) -> AnyRecord:
        """One record by ref, if it belongs to ``agent_id`` (else :class:`~cpersona.RecordNotFound`)."""
        agent = check(KeyText, agent_id, "agent_id", self.settings)
        kind, record_id = self._parse_ref(ref)
        record = await self._b.records.get(kind, record_id)
        if record is None or record.scope.agent_id != agent:
            raise RecordNotFound(str(ref))
        return record

    async def list(
        self,
        kind: RecordKind = "memory",
        *,
        agent_id: str,
        project_id: str | None = None,
        channel: str | None = None,
        source_id: str = "",
        limit: int = 100,
    ) -> list[AnyRecord]:
        """The newest records of one kind in a scope (by insertion order; raw entries by time)."""
        body = given(
            kind=kind, agent_id=agent_id, project_id=project_id, channel=channel, source_id=source_id,
            limit=limit,
        )  # fmt: skip
        req = validate(ListQuery, body, self.settings, strict=True)
        scope = ReadScope(req.agent_id, req.project_id, req.channel, req.source_id)
        return await self._b.records.newest(req.kind, scope, req.limit)

    async def stats(self, agent_id: str | None = None) -> dict[str, Any]:
        """Record counts (for one agent, or all) and how many vector writes are pending."""
        b = self._b
        agent = None if agent_id is None else check(KeyText, agent_id, "agent_id", self.settings)
        counts = await b.records.counts(agent)
        vectors = None
        if b.vectors is not None:
            flt = None if agent_id is None else scope_filter(ReadScope(str(agent_id)))
            vectors = await b.vectors.count(flt) if flt is not None else None
        return {
            "ok": True,
            "memories": counts.memories,
            "episodes": counts.episodes,
            "raw_entries": counts.raw_entries,
            "vector_pending": counts.vector_pending,
            "vectors": vectors,
        }

    # ------------------------------------------------------------------ update and delete

    async def update(
        self,
        ref: str,
        *,
        agent_id: str,
        content: Content | Mapping[str, Any] | None = None,
        metadata: Any = None,
        emotion: Emotion | Mapping[str, float] | None = None,
        meta: MetaBody | Mapping[str, Any] | None = None,
        store: StoreKind | None = None,
        timestamp: float | str | datetime | None = None,
    ) -> MemoryRecord:
        """Replace the given fields of a memory wholesale (:class:`~cpersona.UpdateRequest`).

        A content change re-embeds the memory and moves its dedup claim.
        """
        b = self._b
        body = given(
            agent_id=agent_id, content=content, metadata=metadata, emotion=emotion, meta=meta, store=store,
            timestamp=timestamp,
        )  # fmt: skip
        changes = validate(UpdateRequest, body, self.settings).changes()
        current = await self.get(ref, agent_id=agent_id)
        if not isinstance(current, MemoryRecord):
            raise InvalidRequest("ref", "only memories can be updated")
        if not changes:
            raise InvalidRequest("body", "names no field to update")
        new = updated_record(current, changes, self.settings, now=time.time(), reembed=b.embedder is not None)
        content_changed = new.content != current.content
        (new,) = await self._with_vectors([new])
        old_claim = self.keys.content_claim(
            current.scope.agent_id, current.scope.project_id, current.scope.channel, _digest(current.content)
        )
        new_claim = self.keys.content_claim(
            new.scope.agent_id, new.scope.project_id, new.scope.channel, _digest(new.content)
        )
        moved = (old_claim,), (new_claim,)
        await b.records.replace_memory(
            new,
            drop_claims=moved[0] if content_changed else (),
            add_claims=moved[1] if content_changed else (),
            # Blocks carry the text and the record's time; other fields do not reach them.
            queue_blocks=b.builder is not None and (content_changed or new.timestamp != current.timestamp),
        )
        return new

    async def delete(self, ref: str, *, agent_id: str) -> DeleteResult:
        """Delete one record of ``agent_id`` (its document, dedup claims, pending mark and vector)."""
        b = self._b
        record = await self.get(ref, agent_id=agent_id)
        kind, record_id = self._parse_ref(ref)
        claims: list[str] = []
        if isinstance(record, MemoryRecord):
            scope = record.scope
            claims.append(
                self.keys.content_claim(
                    scope.agent_id, scope.project_id, scope.channel, _digest(record.content)
                )
            )
            if record.msg_id:
                claims.append(self.keys.msg_id_claim(scope.agent_id, scope.project_id, record.msg_id))
        await b.records.delete(kind, record_id, claims)
        if kind != "raw" and b.vectors is not None:
            await b.vectors.delete([record.id])
        if b.builder is not None and b.blocks is not None and not isinstance(record, RawRecord):
            parent: ParentKind = "memory" if isinstance(record, MemoryRecord) else "episode"
            await b.blocks.delete(block_ids(parent, record.id, b.builder.max_per_record))
        return DeleteResult(1)

    async def delete_agent_data(self, agent_id: str) -> DeleteResult:
        """Delete every record, claim, profile and vector of one agent."""
        b = self._b
        agent = check(KeyText, agent_id, "agent_id", self.settings)
        deleted = await b.records.delete_agent(agent)
        if b.vectors is not None:
            await b.vectors.delete_where(scope_filter(ReadScope(agent)))
        if b.blocks is not None:
            await b.blocks.delete_where(block_filter(agent))
        self.recaller.stats.forget(agent)
        return DeleteResult(deleted)


@contextlib.asynccontextmanager
async def open(
    settings: Settings | None = None,
    *,
    background: bool = True,
    arm_wrapper: ArmWrapper | None = None,
    **overrides: Any,
) -> AsyncIterator[Engine]:
    """Open the engine: ``async with cpersona.open() as memory: ...``.

    ``settings`` defaults to :meth:`Settings.from_env`; keyword ``overrides`` replace single settings,
    e.g. ``cpersona.open(data_dir="/tmp/mem", embedding_mode="none")``.

    ``background`` runs the engine's background tasks (:meth:`Engine.run_background`: the block worker
    and the trace publisher) in a task group for as long as the engine is open. The task group ties the
    context to the task that entered it, so code that enters and exits in different tasks
    (pytest-asyncio fixtures, for one) passes ``background=False`` and calls :meth:`Engine.drain_blocks`
    when it wants the blocks built and :meth:`Engine.drain_traces` when it wants traces published.

    ``arm_wrapper`` is a testing and benchmark seam, not for production: it wraps every arm call of every
    recall of this engine (to switch an arm off, slow it down or count it), fixed for the engine's life.
    """
    if settings is None:
        settings = Settings.from_env(**overrides)
    elif overrides:
        settings = settings.with_(**overrides)
    async with Engine(settings, arm_wrapper=arm_wrapper) as engine:
        if not background:
            yield engine
            return
        async with anyio.create_task_group() as tg:
            await tg.start(engine.run_background)
            try:
                yield engine
            finally:
                tg.cancel_scope.cancel()
