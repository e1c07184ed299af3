"""The engine's public face, :class:`Engine` and :func:`open`. Each method turns its typed keywords into
one request body and hands it to the module of its concept (lifecycle, writes, reads, deletes,
calibration), which validates it and does the work."""

from __future__ import annotations

import contextlib
import random
from typing import TYPE_CHECKING, Any

import anyio

from cpersona.engine import deletes, lifecycle, methods, readiness, reads, vector_writes, writes
from cpersona.engine.calibration import calibrate, select_gate
from cpersona.engine.lifecycle import Lifecycle, checked_policies
from cpersona.keys import Keys
from cpersona.model.agent_requests import CalibrateRequest, GateRequest
from cpersona.model.fields import UNSET, Unset, given, given_set, validate
from cpersona.settings import Settings

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping, Sequence
    from datetime import datetime

    from anyio.abc import TaskStatus

    from cpersona.engine.backends import Backends
    from cpersona.engine.reads import AnyRecord
    from cpersona.model.agent_requests import Gate, Precision
    from cpersona.model.memory_parts import Content, Emotion, MetaBody
    from cpersona.model.memory_request import StoreRequest
    from cpersona.model.raw_request import RawRequest
    from cpersona.model.recall_query import Order
    from cpersona.model.record_queries import RecordKind
    from cpersona.model.records import (
        MemoryRecord,
        ProfileRecord,
        RawSource,
        RawSpeaker,
        RawVisibility,
        SecrecyLevel,
        StoreKind,
    )
    from cpersona.model.results import BatchResult, DeleteResult, StoreResult
    from cpersona.model.time_cue_request import TimeCueBody
    from cpersona.recall.arm_runner import ArmWrapper
    from cpersona.recall.recaller import Recaller
    from cpersona.recall.request import RecallResult
    from cpersona.recall.trace.publisher import TraceStats
    from cpersona.settings import RecallMode
    from cpersona.stores.protocols import Embedder, RecordStore, VectorStore
    from cpersona.stores.redis.connection import RedisClient

__all__ = ["Engine", "open"]


class Engine(methods.OperationMethods):
    """cpersona's engine. Open it with ``async with cpersona.open() as memory:``.

    Every method validates its input and raises :class:`~cpersona.InvalidRequest` naming the field;
    a backend that fails or misses its deadline raises a :class:`~cpersona.BackendUnavailable`.
    """

    def __init__(self, settings: Settings, *, arm_wrapper: ArmWrapper | None = None) -> None:
        self.settings = settings
        self.keys = Keys(settings.key_prefix)
        # Picks the untraced recalls traced anyway (CPERSONA_TRACE_SAMPLE), seeded by ..._SAMPLE_SEED if set.
        self._trace_rng = random.Random(settings.trace_sample_seed)
        # Policies are read at construction so a broken policy file stops the start before any I/O.
        self.policies = checked_policies(settings)
        # ``arm_wrapper`` is a testing and benchmark seam (see ``open``), fixed for the engine's life.
        self._life = Lifecycle(settings, self.keys, self.policies, arm_wrapper)

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> Engine:
        await self._life.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._life.close()

    @property
    def _b(self) -> Backends:
        return self._life.backends

    async def run_block_worker(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Build block vectors from the block stream until cancelled (start it in a task group); returns
        at once when the engine builds no blocks (``embedding_mode="none"``)."""
        await lifecycle.run_block_worker(self._b, task_status)

    async def run_trace_publisher(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Publish queued recall traces to Redis until cancelled (start it in a task group)."""
        await self._b.trace_publisher.run(task_status=task_status)

    async def run_background(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Run every background task (block worker, trace publisher, reconsolidation) until cancelled.
        ``cpersona.open()`` and the HTTP lifespan start it in a task group; it is started once all are."""
        await lifecycle.run_background(self._b, task_status)

    async def drain_traces(self) -> int:
        """Publish every trace queued so far, then return how many were taken off the queue."""
        return await self._b.trace_publisher.drain()

    def trace_stats(self) -> TraceStats:
        """The trace publisher's counters (published, dropped, failed, queued, capacity)."""
        return self._b.trace_publisher.stats()

    @property
    def builds_blocks(self) -> bool:
        """Whether stores queue block builds (they do unless ``embedding_mode="none"``)."""
        return self._b.builder is not None

    async def drain_blocks(self) -> int:
        """Build the blocks of every record queued so far, then return how many events were processed."""
        return await lifecycle.drain_blocks(self._b)

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
        return await reads.health(self._life)

    async def readiness(self) -> readiness.Readiness:
        """Each component's state and whether the engine can serve now (see :mod:`~.readiness`)."""
        return await readiness.readiness(self._life)

    # ------------------------------------------------------------------ recall

    @property
    def recaller(self) -> Recaller:
        """The engine's recall runner (for tools and tests that look underneath)."""
        return self._life.recaller

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
            query=query,
            agent_id=agent_id,
            limit=limit,
            deep=deep,
            mode=mode,
            project_id=project_id,
            channel=channel,
            source_id=source_id,
            exclude_contents=exclude_contents,
            full_content=full_content,
            order=order,
            policy=policy,
            trace=trace,
            time_cue=time_cue,
        )
        return await reads.recall(self._life, self._trace_rng, body, cap)

    async def calibrate(self, agent_id: str, *, precision: Precision = "balanced") -> dict[str, Any]:
        """Calibrate the agent's gate from its own memories (deterministic), store it and select it."""
        req = validate(CalibrateRequest, {"agent_id": agent_id, "precision": precision}, self.settings)
        b, policy = self._b, self.policies[self.settings.recall_policy]
        return await calibrate(b.records, b.embedder, policy, req.agent_id, req.precision)

    async def select_gate(self, agent_id: str, gate: Gate) -> dict[str, Any]:
        """Choose the agent's gate: ``calibrated`` (needs a calibration) or ``heuristic``."""
        req = validate(GateRequest, {"agent_id": agent_id, "gate": gate}, self.settings)
        return await select_gate(self._b.records, req.agent_id, req.gate)

    # ------------------------------------------------------------------ writes

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
        associations: Sequence[Mapping[str, Any]] | Mapping[str, Any] | None = None,
        lock: bool = False,
        embedding: list[float] | None = None,
    ) -> StoreResult:
        """Store one memory (the fields of :class:`~cpersona.StoreRequest`, ``POST /v1/encode``)."""
        body = given(
            content=content,
            agent_id=agent_id,
            project_id=project_id,
            channel=channel,
            source=source,
            id=id,
            msg_id=msg_id,
            timestamp=timestamp,
            metadata=metadata,
            context=context,
            store=store,
            emotion=emotion,
            meta=meta,
            associations=associations,
            lock=lock,
            embedding=embedding,
        )
        return await writes.store(self._life, body)

    async def store_batch(self, records: Sequence[Mapping[str, Any] | StoreRequest]) -> BatchResult:
        """Store many memories: all are validated before any is written; one embedding call per chunk."""
        return await writes.store_batch(self._life, records)

    async def finish_pending(self) -> int:
        """Write the vectors of every record marked pending. Returns how many were finished."""
        return await vector_writes.finish_pending(self._b)

    async def optimize(self, *, timeout_secs: float = vector_writes.OPTIMIZE_TIMEOUT_SECS) -> None:
        """Build the vector indexes now: run each vector store's optimiser, if it has one.

        The embedded Qdrant engine has no background optimiser: its points stay in a segment searched by
        brute force, and its HNSW graph and quantised copy are not built, until
        :meth:`~cpersona.stores.vectors.edge.EdgeVectorStore.optimize` runs. Call this after a bulk import and
        now and then as a maintenance task (``cpersona optimize``). A Qdrant server optimises in the
        background, so its adapter has no ``optimize`` and is left alone. It may take seconds on a large
        store and, with the embedded engine, holds the GIL meanwhile (recalls wait for it).
        """
        await vector_writes.optimize(self._b, timeout_secs)

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
        body = given(
            summary=summary,
            agent_id=agent_id,
            project_id=project_id,
            channel=channel,
            keywords=keywords,
            history=history,
            start_time=start_time,
            end_time=end_time,
            resolved=resolved,
        )
        return await writes.archive_episode(self._life, body)

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
            content=content,
            agent_id=agent_id,
            session_id=session_id,
            source=source,
            speaker=speaker,
            visibility=visibility,
            secrecy_level=secrecy_level,
            project_id=project_id,
            channel=channel,
            turn_id=turn_id,
            topic_id=topic_id,
            metadata=metadata,
            meta=meta,
        )
        return await writes.store_raw(self._life, body)

    async def store_raw_batch(self, records: Sequence[Mapping[str, Any] | RawRequest]) -> BatchResult:
        """Append many journal entries: all are validated before any is written."""
        return await writes.store_raw_batch(self._life, records)

    async def update_profile(self, agent_id: str, profile: str) -> ProfileRecord:
        return await writes.update_profile(self._life, agent_id, profile)

    # ------------------------------------------------------------------ reads

    async def get_profile(self, agent_id: str) -> ProfileRecord | None:
        return await reads.get_profile(self._life, agent_id)

    async def get(self, ref: str, *, agent_id: str) -> AnyRecord:
        """One record by ref, if it belongs to ``agent_id`` (else :class:`~cpersona.RecordNotFound`)."""
        return await reads.read(self._life, ref, agent_id)

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
            kind=kind,
            agent_id=agent_id,
            project_id=project_id,
            channel=channel,
            source_id=source_id,
            limit=limit,
        )
        return await reads.newest(self._life, body)

    async def stats(self, agent_id: str | None = None) -> dict[str, Any]:
        """Record counts (of one agent, or all), pending vector writes, and CMP's stats (model/cmp_stats)."""
        return await reads.stats(self._life, agent_id)

    # ------------------------------------------------------------------ update and delete

    async def update(
        self,
        ref: str,
        *,
        agent_id: str,
        content: Content | Mapping[str, Any] | Unset = UNSET,
        metadata: Any = UNSET,
        emotion: Emotion | Mapping[str, float] | Unset | None = UNSET,
        meta: MetaBody | Mapping[str, Any] | Unset | None = UNSET,
        store: StoreKind | Unset | None = UNSET,
        timestamp: float | str | datetime | Unset | None = UNSET,
    ) -> MemoryRecord:
        """Replace the given fields of a memory wholesale (:class:`~cpersona.UpdateRequest`).

        A content change re-embeds the memory and moves its dedup claim; a field given as ``None`` is
        reset (to no metadata, emotion or meta-memory, the content's store kind, now), one left out kept."""
        body = given_set(
            agent_id=agent_id,
            content=content,
            metadata=metadata,
            emotion=emotion,
            meta=meta,
            store=store,
            timestamp=timestamp,
        )
        return await writes.update(self._life, ref, agent_id, body)

    async def delete(self, ref: str, *, agent_id: str) -> DeleteResult:
        """Delete one record of ``agent_id`` (its document, dedup claims, pending mark and vector)."""
        return await deletes.delete(self._life, ref, agent_id)

    async def delete_agent_data(self, agent_id: str) -> DeleteResult:
        """Delete every record, claim, profile and vector of one agent."""
        return await deletes.delete_agent_data(self._life, agent_id)


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
