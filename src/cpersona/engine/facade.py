"""The engine's public face, :class:`Engine` and :func:`open`.

An open engine is composed of services (:class:`~cpersona.engine.services.Services`: recall, reads,
writes, associations, upkeep, keys), each taking its validated request model. Each keyword method here
is a shortcut for Python callers: it builds its request model once, so bad input raises
:class:`~cpersona.InvalidRequest` naming the field, and hands it to its service.
"""

from __future__ import annotations

import contextlib
import random
from typing import TYPE_CHECKING, Any, Literal

import anyio

from cpersona.engine import lifecycle, readiness, reads, vector_writes
from cpersona.engine.keywords import UNSET, Unset, given, given_set
from cpersona.engine.lifecycle import Lifecycle, checked_policies
from cpersona.engine.services import Services
from cpersona.errors import EngineClosed
from cpersona.keys import Keys
from cpersona.model.agent_requests import CalibrateRequest, GateRequest
from cpersona.model.api_keys import CreateKeyRequest, KeyId
from cpersona.model.associations import DeclareRequest, TraverseRequest
from cpersona.model.cue_query import CueQueryRequest
from cpersona.model.cue_query_associate import AssociateRequest
from cpersona.model.episode_request import EpisodeRequest
from cpersona.model.fields import check, validate
from cpersona.model.graph_request import GraphRequest
from cpersona.model.lifecycle_requests import (
    ConsolidateRequest,
    DecayForecastRequest,
    DecayTickRequest,
    ExportRequest,
    ForgetRequest,
    ImportRequest,
)
from cpersona.model.memory_request import BatchRequest, StoreRequest
from cpersona.model.raw_query import RawQueryRequest
from cpersona.model.raw_request import RawBatchRequest, RawRequest
from cpersona.model.recall_query import RecallQuery
from cpersona.model.reconstruct_request import ReconstructRequest
from cpersona.model.record_queries import ListQuery
from cpersona.model.timeline_request import TimelineRequest
from cpersona.model.update_request import UpdateRequest
from cpersona.settings import Settings

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping, Sequence
    from datetime import datetime

    from anyio.abc import TaskStatus

    from cpersona.engine.backends import Backends
    from cpersona.engine.reads import AnyRecord
    from cpersona.model.agent_requests import Gate, Precision
    from cpersona.model.api_keys import ApiKey, CreatedKey, KeyListResponse, RevokedKey
    from cpersona.model.association_results import DeclareResult, TraverseResult
    from cpersona.model.associations import AssociationsBody
    from cpersona.model.cue_query import RecallCue, RecallModeName
    from cpersona.model.cue_query_response import AssociateResult, CueQueryResult
    from cpersona.model.entity_match import EntityMatch
    from cpersona.model.graph_response import GraphResult
    from cpersona.model.lifecycle_requests import ConflictRule, ImportStrategy
    from cpersona.model.lifecycle_responses import (
        ConsolidateResult,
        DecayForecastResult,
        DecayTickResult,
        ExportResult,
        ForgetResult,
        ImportResult,
    )
    from cpersona.model.memory_parts import Content, Emotion, EmotionBody, MetaBody
    from cpersona.model.raw_query import RawQueryResult, RawTemporalRange
    from cpersona.model.recall_query import Order
    from cpersona.model.reconstruct_response import ReconstructResult
    from cpersona.model.record_queries import RecordKind
    from cpersona.model.records import (
        AssociationType,
        MemoryRecord,
        ProfileRecord,
        RawSource,
        RawSpeaker,
        RawVisibility,
        SecrecyLevel,
        StoreKind,
    )
    from cpersona.model.results import BatchResult, DeleteResult, StoreResult
    from cpersona.model.scope import ReadScope
    from cpersona.model.time_cue_request import TimeCueBody
    from cpersona.model.timeline_buckets import Granularity
    from cpersona.model.timeline_request import TemporalRange
    from cpersona.model.timeline_response import TimelineResult
    from cpersona.operations.query.reconsolidation import ReconsolidationStats
    from cpersona.recall.arm_runner import ArmWrapper
    from cpersona.recall.request import RecallResult
    from cpersona.recall.trace.publisher import TraceStats
    from cpersona.settings import RecallMode
    from cpersona.stores.protocols import RecordLinks

__all__ = ["Engine", "open"]


class Engine:
    """cpersona's engine. Open it with ``async with cpersona.open() as memory:``.

    Every method validates its input and raises :class:`~cpersona.InvalidRequest` naming the field;
    a backend that fails or misses its deadline raises a :class:`~cpersona.BackendUnavailable`.
    Its services (:attr:`services`) take the request models themselves.
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
        self._services: Services | None = None

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> Engine:
        await self._life.open()
        self._services = Services.of(self._life, self._trace_rng)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._services = None
        await self._life.close()

    @property
    def services(self) -> Services:
        """The engine's services, built when it opens: each public method takes its validated request
        model (``engine.services.recall.recall(RecallQuery(...))``)."""
        if self._services is None:
            raise EngineClosed("the engine is not open; use 'async with cpersona.open(...) as memory:'")
        return self._services

    @property
    def backends(self) -> Backends:
        """What the open engine runs on: its stores, vector collections, embedder, recaller and workers.

        The one seam for tools, benchmarks and tests that look underneath the engine: a role's store
        (``backends.records``, ``backends.stores.cues``), the raw Redis client (``backends.stores.redis``),
        a collection's vectors, the recaller. It is not part of the stable API: its fields follow the
        stores and change with them. Raises :class:`~cpersona.EngineClosed` when the engine is not open.
        """
        return self._life.backends

    async def run_block_worker(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Build block vectors from the block stream until cancelled (start it in a task group); returns
        at once when the engine builds no blocks (``embedding_mode="none"``)."""
        await lifecycle.run_block_worker(self.backends, task_status)

    async def run_trace_publisher(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Publish queued recall traces to Redis until cancelled (start it in a task group)."""
        await self.backends.trace_publisher.run(task_status=task_status)

    async def run_background(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Run every background task (block worker, trace publisher, reconsolidation) until cancelled.
        ``cpersona.open()`` and the HTTP lifespan start it in a task group; it is started once all are."""
        await lifecycle.run_background(self.backends, task_status)

    async def drain_traces(self) -> int:
        """Publish every trace queued so far, then return how many were taken off the queue."""
        return await self.backends.trace_publisher.drain()

    def trace_stats(self) -> TraceStats:
        """The trace publisher's counters (published, dropped, failed, queued, capacity)."""
        return self.backends.trace_publisher.stats()

    @property
    def builds_blocks(self) -> bool:
        """Whether stores queue block builds (they do unless ``embedding_mode="none"``)."""
        return self.backends.builder is not None

    async def drain_blocks(self) -> int:
        """Build the blocks of every record queued so far, then return how many events were processed."""
        return await lifecycle.drain_blocks(self.backends)

    async def health(self) -> dict[str, Any]:
        return await reads.health(self._life)

    async def readiness(self) -> readiness.Readiness:
        """Each component's state and whether the engine can serve now (see :mod:`~.readiness`)."""
        return await readiness.readiness(self._life)

    # ------------------------------------------------------------------ recall

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
        request = validate(RecallQuery, body, self.settings)
        return await self.services.recall.recall(request, limit_cap=limit_cap)

    async def reconstruct(
        self,
        query: str,
        *,
        agent_id: str,
        count: int | None = None,
        top_k: int | None = None,
        max_hops: int | None = None,
        max_evidence: int | None = None,
        budget: int | None = None,
        deep: bool = False,
        project_id: str | None = None,
        channel: str | None = None,
        source_id: str | None = None,
        time_cue: Mapping[str, Any] | TimeCueBody | None = None,
        trace: bool = False,
        mode: Literal["lite", "pro"] | None = None,
        lite: bool = False,
    ) -> ReconstructResult:
        """Reconstruct what the memory holds about ``query`` (the fields of :class:`ReconstructRequest`):
        ``count`` items (default 10) from one recall of ``top_k`` rows (20), each quoting its head record,
        its claims newest first with their roles; ``budget`` characters of quoted text at most. ``mode``
        ``"lite"`` (or ``lite``) or ``"pro"`` holds the whole answer to a cl100k token cap."""
        body = given(
            query=query,
            agent_id=agent_id,
            count=count,
            top_k=top_k,
            max_hops=max_hops,
            max_evidence=max_evidence,
            budget=budget,
            deep=deep,
            project_id=project_id,
            channel=channel,
            source_id=source_id,
            time_cue=time_cue,
            trace=trace,
            mode=mode,
            lite=lite,
        )
        return await self.services.recall.reconstruct(validate(ReconstructRequest, body, self.settings))

    async def query(
        self,
        cue: Mapping[str, Any] | RecallCue,
        *,
        agent_id: str,
        project_id: str | None = None,
        channel: str | None = None,
        stores: Sequence[StoreKind] | None = None,
        limit: int | None = None,
        min_fidelity: float | None = None,
        include_decayed: bool | None = None,
        reconsolidate: bool | None = None,
        activation_depth: int | None = None,
        recall_mode: RecallModeName | None = None,
        trace: bool = False,
        request_id: str | None = None,
    ) -> CueQueryResult:
        """The memories ``cue`` recalls (the fields of :class:`~cpersona.CueQueryRequest`), best first.

        With ``reconsolidate`` (the default) the returned memories are strengthened after the answer,
        once per ``request_id`` (default: a fresh one, so every call counts).
        """
        body = given(
            cue=cue,
            agent_id=agent_id,
            project_id=project_id,
            channel=channel,
            stores=stores,
            limit=limit,
            min_fidelity=min_fidelity,
            include_decayed=include_decayed,
            reconsolidate=reconsolidate,
            activation_depth=activation_depth,
            recall_mode=recall_mode,
            trace=trace,
        )
        request = validate(CueQueryRequest, body, self.settings)
        return await self.services.recall.query(request, request_id)

    async def associate(
        self,
        record_id: str,
        *,
        agent_id: str,
        project_id: str | None = None,
        channel: str | None = None,
        association_types: Sequence[AssociationType] | None = None,
        depth: int | None = None,
        min_weight: float | None = None,
        limit: int | None = None,
    ) -> AssociateResult:
        """The memories reached from ``record_id`` (``mem:<uuid>`` or a bare UUID) over its associations
        (the fields of :class:`~cpersona.AssociateRequest`), most activated first."""
        body = given(
            agent_id=agent_id,
            project_id=project_id,
            channel=channel,
            association_types=association_types,
            depth=depth,
            min_weight=min_weight,
            limit=limit,
        )
        request = validate(AssociateRequest, body, self.settings)
        return await self.services.recall.associate(record_id, request)

    async def drain_reconsolidations(self) -> int:
        """Apply every reconsolidation queued so far (for callers without a background task group)."""
        return await self.services.recall.drain_reconsolidations()

    def reconsolidation_stats(self) -> ReconsolidationStats:
        """Counters of the reconsolidation queue, in memories: applied; repeated (this request id had
        already, or the memory is gone); dropped (the queue was full); failed (Redis did not answer)."""
        return self.services.recall.reconsolidation_stats()

    async def timeline(
        self,
        agent_id: str,
        *,
        range: Mapping[str, Any] | TemporalRange,
        granularity: Granularity | None = None,
        min_fidelity: float | None = None,
        emotion_filter: Mapping[str, float] | EmotionBody | None = None,
        limit: int | None = None,
        project_id: str | None = None,
        channel: str | None = None,
        source_id: str | None = None,
    ) -> TimelineResult:
        """The memories whose own ``timestamp`` lies in ``range`` (``{"start", "end"}``, both included),
        oldest first, in buckets of ``granularity`` (``"hour"`` by default; UTC edges, ISO weeks from
        Monday, calendar months). At most ``limit`` records (default 1000, at most 10000);
        ``truncated`` says when more matched."""
        body = given(
            agent_id=agent_id,
            range=range,
            granularity=granularity,
            min_fidelity=min_fidelity,
            emotion_filter=emotion_filter,
            limit=limit,
            project_id=project_id,
            channel=channel,
            source_id=source_id,
        )
        return await self.services.recall.timeline(validate(TimelineRequest, body, self.settings))

    async def graph(
        self,
        agent_id: str,
        *,
        center_id: str | None = None,
        depth: int | None = None,
        edge_types: Sequence[AssociationType] | None = None,
        include_meta: bool = False,
        limit_nodes: int | None = None,
        project_id: str | None = None,
        channel: str | None = None,
        source_id: str | None = None,
    ) -> GraphResult:
        """The memories reached from ``center_id`` (``mem:<uuid>`` or the bare UUID; default: the scope's
        newest memories) over outbound associations and declared record relations, breadth-first:
        ``depth`` edges (default 2, at most 8), ``limit_nodes`` nodes (default 10, at most 1000), only
        ``edge_types`` if given. ``include_meta`` adds each node's meta-memory and its meta edges. An
        unknown ``center_id`` raises :class:`~cpersona.RecordNotFound`."""
        body = given(
            agent_id=agent_id,
            center_id=center_id,
            depth=depth,
            edge_types=edge_types,
            include_meta=include_meta,
            limit_nodes=limit_nodes,
            project_id=project_id,
            channel=channel,
            source_id=source_id,
        )
        return await self.services.recall.graph(validate(GraphRequest, body, self.settings))

    async def raw_query(
        self,
        query: str | None = None,
        *,
        agent_id: str,
        session_id: str | None = None,
        temporal: Mapping[str, Any] | RawTemporalRange | None = None,
        limit: int | None = None,
        include_private_scratch: bool = False,
        include_sealed: bool = False,
        secrecy_levels: Sequence[SecrecyLevel] | None = None,
        project_id: str | None = None,
        channel: str | None = None,
    ) -> RawQueryResult:
        """The agent's raw journal entries holding every word of ``query`` (all entries without one),
        oldest first: ``limit`` of them (default 10, at most 1000) and ``total_candidates``. ``temporal``
        is ``{"start": ..., "end": ...}``, both included. ``private_scratch`` and ``sealed`` entries only
        when asked; ``secrecy_levels`` defaults to public and sensitive."""
        body = given(
            query=query,
            agent_id=agent_id,
            session_id=session_id,
            temporal=temporal,
            limit=limit,
            include_private_scratch=include_private_scratch,
            include_sealed=include_sealed,
            secrecy_levels=None if secrecy_levels is None else list(secrecy_levels),
            project_id=project_id,
            channel=channel,
        )
        return await self.services.recall.raw_query(validate(RawQueryRequest, body, self.settings))

    async def calibrate(self, agent_id: str, *, precision: Precision = "balanced") -> dict[str, Any]:
        """Calibrate the agent's gate from its own memories (deterministic), store it and select it."""
        request = validate(CalibrateRequest, {"agent_id": agent_id, "precision": precision}, self.settings)
        return await self.services.recall.calibrate(request)

    async def select_gate(self, agent_id: str, gate: Gate) -> dict[str, Any]:
        """Choose the agent's gate: ``calibrated`` (needs a calibration) or ``heuristic``."""
        request = validate(GateRequest, {"agent_id": agent_id, "gate": gate}, self.settings)
        return await self.services.recall.select_gate(request)

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
        return await self.services.writes.store(validate(StoreRequest, body, self.settings))

    async def store_batch(self, records: Sequence[Mapping[str, Any] | StoreRequest]) -> BatchResult:
        """Store many memories: all are validated before any is written; one embedding call per chunk."""
        # Handed on without a name here, so the service can drop the validated models before it writes.
        return await self.services.writes.store_batch(
            validate(BatchRequest, {"records": records}, self.settings)
        )

    async def finish_pending(self) -> int:
        """Write the vectors of every record marked pending. Returns how many were finished."""
        return await self.services.writes.finish_pending()

    async def optimize(self, *, timeout_secs: float = vector_writes.OPTIMIZE_TIMEOUT_SECS) -> None:
        """Build the vector indexes now: run each vector store's optimiser, if it has one.

        The embedded Qdrant engine has no background optimiser: its points stay in a segment searched by
        brute force, and its HNSW graph and quantised copy are not built, until
        :meth:`~cpersona.stores.vectors.edge.EdgeVectorStore.optimize` runs. Call this after a bulk import and
        now and then as a maintenance task (``cpersona optimize``). A Qdrant server optimises in the
        background, so its adapter has no ``optimize`` and is left alone. It may take seconds on a large
        store and, with the embedded engine, holds the GIL meanwhile (recalls wait for it).
        """
        await self.services.writes.optimize(timeout_secs)

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
        return await self.services.writes.archive_episode(validate(EpisodeRequest, body, self.settings))

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
        return await self.services.writes.store_raw(validate(RawRequest, body, self.settings))

    async def store_raw_batch(self, records: Sequence[Mapping[str, Any] | RawRequest]) -> BatchResult:
        """Append many journal entries: all are validated before any is written."""
        batch = validate(RawBatchRequest, {"records": records}, self.settings)
        return await self.services.writes.store_raw_batch(batch)

    async def update_profile(self, agent_id: str, profile: str) -> ProfileRecord:
        return await self.services.writes.update_profile(agent_id, profile)

    async def declare_associations(
        self,
        agent_id: str,
        associations: Mapping[str, Any] | AssociationsBody,
        *,
        anchor_ref: str | None = None,
        retract: bool = False,
        project_id: str | None = None,
        channel: str | None = None,
    ) -> DeclareResult:
        """Declare entities (with aliases) and relations in one scope (an omitted project or channel is
        ``''``); ``anchor_ref``'s record gets the entities as its mentions. ``retract`` removes exactly
        what is named instead (a bare entity without an anchor: the entity and all that hangs from it)."""
        body = given(
            agent_id=agent_id,
            associations=associations,
            anchor_ref=anchor_ref,
            retract=retract,
            project_id=project_id,
            channel=channel,
        )
        return await self.services.associations.declare(validate(DeclareRequest, body, self.settings))

    async def traverse(
        self,
        agent_id: str,
        entity: str,
        *,
        max_hops: int = 1,
        limit: int = 20,
        project_id: str | None = None,
        channel: str | None = None,
        source_id: str = "",
    ) -> TraverseResult:
        """The records reached from ``entity`` (a name or alias) over entity relations in either
        direction, breadth-first: ``max_hops`` 0-5, ``limit`` 1-100, each record once at its fewest hops."""
        body = given(
            agent_id=agent_id,
            entity=entity,
            max_hops=max_hops,
            limit=limit,
            project_id=project_id,
            channel=channel,
            source_id=source_id,
        )
        return await self.services.associations.traverse(validate(TraverseRequest, body, self.settings))

    async def match_entities(self, scope: ReadScope, text: str) -> list[EntityMatch]:
        """The entities ``scope`` sees that ``text`` names: longest first, not overlapping, at most 64."""
        return await self.services.associations.match_entities(scope, text)

    async def record_links(self, scope: ReadScope, refs: Sequence[str]) -> dict[str, RecordLinks]:
        """What is declared about each record (its entities, its record relations) that ``scope`` sees."""
        return await self.services.associations.record_links(scope, refs)

    # ------------------------------------------------------------------ reads

    async def get_profile(self, agent_id: str) -> ProfileRecord | None:
        return await self.services.reads.get_profile(agent_id)

    async def get(self, ref: str, *, agent_id: str) -> AnyRecord:
        """One record by ref, if it belongs to ``agent_id`` (else :class:`~cpersona.RecordNotFound`)."""
        return await self.services.reads.get(ref, agent_id)

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
        # A Python caller's numbers are numbers: no text-to-number as the query string gets.
        return await self.services.reads.list(validate(ListQuery, body, self.settings, strict=True))

    async def stats(self, agent_id: str | None = None) -> dict[str, Any]:
        """Record counts (of one agent, or all), pending vector writes, and CMP's stats (model/cmp_stats)."""
        return await self.services.reads.stats(agent_id)

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
        return await self.services.writes.update(ref, validate(UpdateRequest, body, self.settings))

    async def delete(self, ref: str, *, agent_id: str) -> DeleteResult:
        """Delete one record of ``agent_id`` (its document, dedup claims, pending mark and vector)."""
        return await self.services.writes.delete(ref, agent_id)

    async def delete_agent_data(self, agent_id: str) -> DeleteResult:
        """Delete every record, claim, profile and vector of one agent."""
        return await self.services.writes.delete_agent_data(agent_id)

    # ------------------------------------------------------------------ upkeep

    async def decay_tick(self, agent_id: str, *, tick_duration_seconds: int | None = None) -> DecayTickResult:
        """Sweep the agent's memories: count those decayed below the prune threshold (deleted only with
        ``CPERSONA_DECAY_PRUNE``). ``tick_duration_seconds`` ages every memory that much beyond the wall
        clock (default 0); ageing adds up, so N ticks of d/N equal one tick of d."""
        body = given(agent_id=agent_id, tick_duration_seconds=tick_duration_seconds)
        return await self.services.upkeep.decay_tick(validate(DecayTickRequest, body, self.settings))

    async def decay_forecast(
        self, agent_id: str, record_ids: Sequence[str], forecast_at: float | str | datetime
    ) -> DecayForecastResult:
        """Each memory's fidelity now and at ``forecast_at``, and when it falls below the threshold."""
        body = given(agent_id=agent_id, record_ids=record_ids, forecast_at=forecast_at)
        return await self.services.upkeep.decay_forecast(validate(DecayForecastRequest, body, self.settings))

    async def forget(
        self,
        agent_id: str,
        *,
        confirm: bool,
        record_ids: Sequence[str] | None = None,
        store: StoreKind | None = None,
        temporal_range: Mapping[str, Any] | None = None,
        older_than_seconds: int | None = None,
        cascade: bool = False,
    ) -> ForgetResult:
        """Delete the agent's memories that any selector names (ids, with ``cascade`` their edges'
        targets; a store; a period of their own timestamps; an age). ``confirm`` must be true."""
        body = given(
            agent_id=agent_id,
            confirm=confirm,
            record_ids=record_ids,
            store=store,
            temporal_range=temporal_range,
            older_than_seconds=older_than_seconds,
            cascade=cascade,
        )
        return await self.services.upkeep.forget(validate(ForgetRequest, body, self.settings))

    async def consolidate(
        self,
        agent_id: str,
        *,
        min_age_hours: int = 0,
        min_access_count: int = 0,
        dry_run: bool = False,
        strategy: Literal["full", "incremental", "selective"] = "incremental",
    ) -> ConsolidateResult:
        """Merge near-duplicate episodic memories and give the rest a semantic copy, idempotently."""
        body = given(
            agent_id=agent_id,
            min_age_hours=min_age_hours,
            min_access_count=min_access_count,
            dry_run=dry_run,
            strategy=strategy,
        )
        return await self.services.upkeep.consolidate(validate(ConsolidateRequest, body, self.settings))

    async def export_lines(
        self, agent_id: str, *, stores: Sequence[StoreKind] | None = None, include_raw_journal: bool = False
    ) -> AsyncGenerator[bytes, None]:
        """The agent's archive, one JSON line at a time (header, records, footer with its SHA-256); its
        arguments are checked when the first line is asked for."""
        body = given(agent_id=agent_id, stores=stores, include_raw_journal=include_raw_journal)
        request = validate(ExportRequest, body, self.settings)
        async with contextlib.aclosing(self.services.upkeep.export_lines(request)) as lines:
            async for line in lines:
                yield line

    async def export(
        self,
        agent_id: str,
        *,
        stores: Sequence[StoreKind] | None = None,
        include_raw_journal: bool = False,
        encryption_key: str | None = None,
    ) -> ExportResult:
        """The agent's archive whole, with its checksum and id (:meth:`export_lines` streams it); with
        ``encryption_key``, encrypted (AES-256-GCM under a scrypt-stretched key)."""
        body = given(
            agent_id=agent_id,
            stores=stores,
            include_raw_journal=include_raw_journal,
            encrypt=encryption_key is not None,
            encryption_key=encryption_key,
        )
        return await self.services.upkeep.export(validate(ExportRequest, body, self.settings))

    async def import_archive(
        self,
        agent_id: str,
        archive: bytes | Callable[[], Iterable[bytes]],
        *,
        strategy: ImportStrategy = "merge",
        conflict_resolution: ConflictRule = "keep_newer",
        decryption_key: str | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> ImportResult:
        """Import an archive into ``agent_id``: its bytes (``decryption_key`` opens an encrypted one), or a
        callable giving its lines (called twice: every line and the checksum are checked before anything
        is written). ``progress`` is told how many records each written batch held."""
        rules = given(strategy=strategy, conflict_resolution=conflict_resolution)
        upkeep = self.services.upkeep
        if callable(archive):
            body = {"agent_id": agent_id, "archive_data": b"", **rules}
            return await upkeep.import_lines(validate(ImportRequest, body, self.settings), archive, progress)
        body = given(agent_id=agent_id, archive_data=archive, decryption_key=decryption_key, **rules)
        return await upkeep.import_archive(validate(ImportRequest, body, self.settings), progress)

    # ------------------------------------------------------------------ API keys

    async def create_key(
        self, agents: Sequence[str] = (), *, admin: bool = False, name: str | None = None
    ) -> CreatedKey:
        """A key bound to ``agents`` (or an ``admin`` key for every agent); its token is in the answer
        only, never stored (its SHA-256 is)."""
        body = given(agents=list(agents), admin=admin, name=name)
        return await self.services.keys.create(validate(CreateKeyRequest, body, self.settings))

    async def list_keys(self) -> KeyListResponse:
        """Every key, oldest first, without secrets."""
        return await self.services.keys.list()

    async def revoke_key(self, key_id: str) -> RevokedKey:
        """Revoke a key by its id; the next request with it is refused, on every worker."""
        return await self.services.keys.revoke(check(KeyId, key_id, "key_id", self.settings))

    async def verify_key(self, token: str) -> ApiKey | None:
        """The key ``token`` is, or ``None`` when it is none (unknown, revoked or malformed)."""
        return await self.services.keys.verify(token)

    async def rate_limit(self, key_id: str) -> float:
        """Count one request of the key: 0 when it may go, else the seconds until it may
        (``CPERSONA_RATE_LIMIT_PER_SEC`` and ``..._BURST``; a rate of 0 never limits)."""
        return await self.services.keys.rate_limit(key_id)

    async def admit_key(self, token: str) -> tuple[ApiKey | None, float]:
        """:meth:`verify_key` and :meth:`rate_limit` in one round trip: the key ``token`` is (``None``
        when it is none, and then nothing is counted) and the seconds it must wait (0: it may go)."""
        return await self.services.keys.admit(token)


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
