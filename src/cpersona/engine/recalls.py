"""The recall service: every read that ranks or walks an agent's memories. The recall itself (its trace
published, and sampled at ``CPERSONA_TRACE_SAMPLE``'s rate), reconstruct over one recall, the multimodal
query by cue and the walk of a memory's associations, the timeline and the graph, the raw journal's
query, and the recall gate's calibration.

reconstruct reads only: no record or vector is written; with ``trace`` its trace is published on the
trace channel (the channel is no store), one message per call with the recall's trace inside. A cue query
reads only too; the strengthening of what it returned (``reconsolidate``) is queued as one job and
written by the engine's background task group after the answer, once per ``request_id``.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from typing import TYPE_CHECKING, Any

from cpersona.engine.calibration import calibrate, select_gate
from cpersona.model.cue_query import checked_cue
from cpersona.model.reconstruct_request import MAX_TOP_K
from cpersona.operations.graph import graph
from cpersona.operations.query import QueryPorts, cue_query
from cpersona.operations.query.associate import associate
from cpersona.operations.query.reconsolidation import ReconsolidationJob
from cpersona.operations.raw_query import raw_query
from cpersona.operations.reconstruct import reconstruct
from cpersona.operations.reconstruct.candidates import RecalledRow, RecallView
from cpersona.operations.timeline import timeline
from cpersona.recall.request import recall_request
from cpersona.recall.stages.chain import Retrieved
from cpersona.recall.trace.coverage import coverage

if TYPE_CHECKING:
    import random

    from cpersona.engine.lifecycle import Lifecycle
    from cpersona.model.agent_requests import CalibrateRequest, GateRequest
    from cpersona.model.cue_query import CueQueryRequest
    from cpersona.model.cue_query_associate import AssociateRequest
    from cpersona.model.cue_query_response import AssociateResult, CueQueryResult
    from cpersona.model.graph_request import GraphRequest
    from cpersona.model.graph_response import GraphResult
    from cpersona.model.policy import PolicyOverlay
    from cpersona.model.raw_query import RawQueryRequest, RawQueryResult
    from cpersona.model.recall_query import RecallQuery
    from cpersona.model.reconstruct_request import ReconstructRequest
    from cpersona.model.reconstruct_response import ReconstructResult
    from cpersona.model.timeline_request import TimelineRequest
    from cpersona.model.timeline_response import TimelineResult
    from cpersona.operations.query.reconsolidation import ReconsolidationStats
    from cpersona.recall.request import RecallResult
    from cpersona.stores.cue_store import CueStore

__all__ = ["RecallService"]


class RecallService:
    """Recall, reconstruct, the cue query and its walk, the timeline, the graph and the raw query."""

    def __init__(self, life: Lifecycle, trace_rng: random.Random) -> None:
        self._life = life
        # Picks the untraced recalls traced anyway (CPERSONA_TRACE_SAMPLE).
        self._trace_rng = trace_rng

    @property
    def _cues(self) -> CueStore:
        return self._life.backends.stores.cues

    async def recall(self, query: RecallQuery, *, limit_cap: int | None = None) -> RecallResult:
        """Recall the rows that answer ``query``; publish its trace, and trace it anyway at
        ``CPERSONA_TRACE_SAMPLE``'s rate.

        ``query.limit`` may go up to ``CPERSONA_RECALL_MAX_LIMIT``, or ``limit_cap`` (the HTTP and MCP
        edges cap it at 100); past it the request is refused, not clamped.
        """
        life = self._life
        cap = life.settings.recall_max_limit if limit_cap is None else limit_cap
        req = recall_request(query, life.settings, life.policies, max_limit=cap)
        rate = life.settings.trace_sample
        sampled = not req.trace and rate > 0 and self._trace_rng.random() < rate
        result = await life.recaller.recall(req, want_trace=req.trace or sampled)
        if result.trace is not None:
            life.backends.trace_publisher.offer(req.scope.agent_id, result.trace)
            if sampled:
                # A sampled trace goes to the channel only: the caller's answer is what it asked for.
                result = result.model_copy(update={"trace": None})
        return result

    async def reconstruct(self, req: ReconstructRequest) -> ReconstructResult:
        """Items that quote stored rows, bundled, ordered and given roles, over one recall."""
        life = self._life
        result = await reconstruct(_RecallPort(life), life.backends.records, life.settings, req, coverage)
        if result.trace is not None:
            # One message per reconstruct, its recall nested: a tailer sees the call whole, and a recall
            # it made is never mistaken for one a caller asked for.
            life.backends.trace_publisher.offer(req.agent_id, result.trace)
        return result

    async def query(self, req: CueQueryRequest, request_id: str | None = None) -> CueQueryResult:
        """The memories ``req.cue`` recalls, best first. With ``reconsolidate`` the returned memories are
        strengthened after the answer, once per ``request_id`` (default: a fresh one, so every call
        counts)."""
        checked_cue(req.cue)
        life = self._life
        b = life.backends
        ports = QueryPorts(
            b.records, self._cues, b.vectors, b.embedder, life.settings.recall_arm_timeout_ms / 1000
        )
        now = time.time()
        outcome = await cue_query(ports, req, now=now, curve=life.curve)
        if req.reconsolidate and outcome.returned and b.reconsolidation is not None:
            job = ReconsolidationJob(request_id or str(uuid.uuid4()), outcome.returned, now)
            b.reconsolidation.offer(job)
        return outcome.result

    async def associate(self, record_id: str, req: AssociateRequest) -> AssociateResult:
        """The memories reached from ``record_id`` (``mem:<uuid>`` or a bare UUID) over its associations,
        most activated first."""
        return await associate(self._cues, req, record_id, now=time.time(), curve=self._life.curve)

    async def drain_reconsolidations(self) -> int:
        """Apply every reconsolidation queued so far (for callers without a background task group)."""
        queue = self._life.backends.reconsolidation
        return 0 if queue is None else await queue.drain()

    def reconsolidation_stats(self) -> ReconsolidationStats:
        """Counters of the reconsolidation queue, in memories: applied; repeated (this request id had
        already, or the memory is gone); dropped (the queue was full); failed (Redis did not answer)."""
        queue = self._life.backends.reconsolidation
        assert queue is not None
        return queue.stats()

    async def timeline(self, req: TimelineRequest) -> TimelineResult:
        """The memories whose own ``timestamp`` lies in ``req.range``, oldest first, in UTC buckets."""
        return await timeline(self._life.backends.records, req, time.time(), self._life.curve)

    async def graph(self, req: GraphRequest) -> GraphResult:
        """The memories reached from ``req.center_id`` (default: the scope's newest) over outbound
        associations and declared record relations, breadth-first."""
        return await graph(self._life.backends.records, req, time.time(), self._life.curve)

    async def raw_query(self, req: RawQueryRequest) -> RawQueryResult:
        """The agent's raw journal entries holding every word of ``req.query``, oldest first."""
        return await raw_query(self._life.backends.records, req)

    async def calibrate(self, req: CalibrateRequest) -> dict[str, Any]:
        """Calibrate the agent's gate from its own memories (deterministic), store it and select it."""
        life = self._life
        b, policy = life.backends, life.policies[life.settings.recall_policy]
        return await calibrate(b.records, b.embedder, policy, req.agent_id, req.precision)

    async def select_gate(self, req: GateRequest) -> dict[str, Any]:
        """Choose the agent's gate: ``calibrated`` (needs a calibration) or ``heuristic``."""
        return await select_gate(self._life.backends.records, req.agent_id, req.gate)


@dataclasses.dataclass(frozen=True, slots=True)
class _RecallPort:
    """reconstruct's one recall, on the engine's recaller (operations import nothing of recall)."""

    life: Lifecycle

    async def __call__(
        self, query: RecallQuery, lexical_terms: tuple[str, ...], overlay: PolicyOverlay
    ) -> RecallView:
        life = self.life
        req = recall_request(query, life.settings, life.policies, max_limit=MAX_TOP_K)
        req = dataclasses.replace(req, lexical_terms=lexical_terms)
        result = await life.recaller.recall(req, overlay=overlay)
        return RecallView(
            rows=tuple(RecalledRow(r.ref, r.kind, r.seated, r.timestamp) for r in result.rows),
            trace=result.trace,
            time_cue=result.time_cue,
            best_blocks=_best_blocks(result),
            block_chars=life.policies[req.policy].blocks.max_chars,
        )


def _best_blocks(result: RecallResult) -> dict[str, int]:
    """The block the recall's block arm found nearest the query vector, per record."""
    data: object = result.final
    while not isinstance(data, Retrieved):
        data = getattr(data, "source", None)
        if data is None:
            return {}
    block = data.arms.get("block")
    if block is None:
        return {}
    return {row.ref: row.block_index for row in block.rows if row.block_index is not None}
