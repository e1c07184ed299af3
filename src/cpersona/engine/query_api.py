"""The recall operations' methods of :class:`~cpersona.Engine` (a base class of it, so the facade stays
one screenful per concept): the multimodal ``recall.query`` (:meth:`QueryMethods.query`) and
``recall.associate`` (:meth:`QueryMethods.associate`). Each turns its typed keywords into one request
body, validated by its model (:class:`~cpersona.CueQueryRequest`, :class:`~cpersona.AssociateRequest`),
and runs it in :mod:`cpersona.operations.query`.

A query reads only; the strengthening of what it returned (``reconsolidate``) is queued as one job and
written by the engine's background task group after the answer, once per ``request_id``.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any

from cpersona.model.cue_query import CueQueryRequest, checked_cue
from cpersona.model.cue_query_associate import AssociateRequest
from cpersona.model.fields import given, validate
from cpersona.operations.query import QueryPorts, cue_query
from cpersona.operations.query.associate import associate
from cpersona.operations.query.reconsolidation import ReconsolidationJob

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from cpersona.engine.lifecycle import Lifecycle
    from cpersona.model.cue_query import RecallCue, RecallModeName
    from cpersona.model.cue_query_response import AssociateResult, CueQueryResult
    from cpersona.model.records import AssociationType, StoreKind
    from cpersona.operations.query.reconsolidation import ReconsolidationStats
    from cpersona.stores.cue_store import CueStore

__all__ = ["QueryMethods"]


class QueryMethods:
    """Multimodal recall by cue, and the walk of a memory's associations."""

    _life: Lifecycle

    @property
    def _cues(self) -> CueStore:
        cues = self._life.backends.cues
        assert cues is not None
        return cues

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
        return await self.query_request(validate(CueQueryRequest, body, self._life.settings), request_id)

    async def query_request(self, req: CueQueryRequest, request_id: str | None = None) -> CueQueryResult:
        """Run a validated :class:`~cpersona.CueQueryRequest` (the HTTP edge's entry)."""
        checked_cue(req.cue)
        life = self._life
        b = life.backends
        ports = QueryPorts(
            b.records, self._cues, b.vectors, b.embedder, life.settings.recall_arm_timeout_ms / 1000
        )
        now = time.time()
        outcome = await cue_query(ports, req, now=now)
        if req.reconsolidate and outcome.returned and b.reconsolidation is not None:
            job = ReconsolidationJob(request_id or str(uuid.uuid4()), outcome.returned, now)
            b.reconsolidation.offer(job)
        return outcome.result

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
        req = validate(AssociateRequest, body, self._life.settings)
        return await self.associate_request(record_id, req)

    async def associate_request(self, record_id: str, req: AssociateRequest) -> AssociateResult:
        """Run a validated :class:`~cpersona.AssociateRequest` from ``record_id`` (the HTTP edge's entry)."""
        return await associate(self._cues, req, record_id, now=time.time())

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
