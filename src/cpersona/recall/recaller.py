"""One recall as an async task graph, in five typed steps.

::

    plan      resolve the policy, the depth and what each arm fetches             (``plan``)
    fan-out   one task group: every arm under its own deadline, the profile and   (``fanout``,
              calibration reads, and the cue loop beside them                      ``cue_loop``)
    retrieve  hydrate the rows once (JSON.MGET), source and exclusion filters     (``retrieve``)
    chain     fuse → score → gate → autocut → count → cue move → seats            (``stages.chain``)
    render    rows best first, then the held seats                                (``render``)

The stage chain is pure and type-checked; the fan-out and the retrieval do the I/O around it. This module
only runs the steps in order and assembles the result (and, when asked, its trace).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import TYPE_CHECKING

from cpersona.embedding_models import UNSCALED
from cpersona.model.policy import NO_OVERLAY
from cpersona.model.trace import TRACE_VERSION, RecallTrace, RecallTraceFailure
from cpersona.recall.arm_runner import ArmRunner
from cpersona.recall.arms.vector import ScopeStatsCache
from cpersona.recall.fanout import Backends, fan_out
from cpersona.recall.plan import plan_recall, stage_plan
from cpersona.recall.render import render
from cpersona.recall.request import Degraded, RecallResult
from cpersona.recall.retrieve import retrieve
from cpersona.recall.stages.chain import Chain, build_chain
from cpersona.recall.stages.gate import literal_matches
from cpersona.recall.trace.assemble import build_trace
from cpersona.recall.trace.coverage import parts_covered

if TYPE_CHECKING:
    from collections.abc import Mapping

    from cpersona.model.policy import PolicyOverlay
    from cpersona.recall.arm_runner import ArmWrapper
    from cpersona.recall.fanout import FanOut
    from cpersona.recall.plan import ArmContext
    from cpersona.recall.policy import Policy
    from cpersona.recall.request import RecallRequest
    from cpersona.recall.stages.chain import ChainRun, RecallPlan, Retrieved, Seated
    from cpersona.settings import Settings
    from cpersona.stores.protocols import Embedder, HydratedRecord, RecallReads, VectorStore

__all__ = ["Recaller"]

log = logging.getLogger("cpersona.recall")


class Recaller:
    """Runs recalls for one engine. Holds the backends and per-engine caches, nothing global.

    ``arm_wrapper`` wraps every arm call of every recall (a testing and benchmark seam: switch an arm off,
    slow it down, count it); it is fixed for the recaller's life.
    """

    def __init__(
        self,
        *,
        settings: Settings,
        policies: Mapping[str, Policy],
        records: RecallReads,
        vectors: VectorStore | None,
        embedder: Embedder | None,
        chain: Chain | None = None,
        blocks: VectorStore | None = None,
        arm_wrapper: ArmWrapper | None = None,
    ) -> None:
        self.settings = settings
        self.policies = policies
        self.records = records
        self.vectors = vectors
        self.embedder = embedder
        self.blocks = blocks
        # A chain given here overrides every policy's; by default each recall runs the one its policy names.
        self.chain = chain
        self.stats = ScopeStatsCache()
        self._runner = ArmRunner.of(settings, arm_wrapper)

    async def recall(
        self, req: RecallRequest, *, want_trace: bool | None = None, overlay: PolicyOverlay = NO_OVERLAY
    ) -> RecallResult:
        """Run one recall. A trace is built when ``want_trace`` is true (default: when the request asks
        for one); it goes into the response only if the request asked. ``want_trace=False`` builds none,
        and a request that asked then gets ``trace: null``. ``overlay`` is applied over the request's
        policy (an operation's own recall: reconstruct's held seats)."""
        started = time.perf_counter()
        ctx = plan_recall(req, self.policies, self.settings, started=started, overlay=overlay)
        fan = await fan_out(ctx, self._backends(), self._runner)
        retrieved, docs = await retrieve(ctx, fan, self.records)
        bar = fan.vector.bar
        plan = stage_plan(
            ctx,
            pool=fan.vector.stats.pool,
            calibrated=fan.calibrated,
            vector_threshold=ctx.policy.vector.min_similarity if bar is None else bar.floor(),
            has_vector=fan.vector.vector is not None,
            parts_covered=_parts(ctx, docs),
            literal=_literal(ctx, retrieved, docs, self.records),
            scale=UNSCALED if self.embedder is None else self.embedder.gate_scale,
        )
        # Built per recall (its wiring is cached), so a policy added to the engine at run time is served.
        run = (self.chain or build_chain(ctx.policy)).run(retrieved, plan)
        final: Seated = run.final
        rows = render(final, docs, fan.profile, retrieved.cue, req, ctx.policy)
        degraded = _degraded(fan)
        time_cue = None if fan.cue is None else fan.cue.report(run, req.policy)
        done = time.perf_counter()
        result = RecallResult(
            rows=rows,
            policy={"scoring": ctx.policy.scoring, "process": ctx.policy.name},
            limit=req.limit,
            depth=ctx.depth,
            mode=req.mode,
            order=req.order,
            degraded=degraded,
            trace_requested=req.trace,
            time_cue=time_cue,
        ).with_run(
            final,
            {
                "retrieve": (fan.retrieved_at - started) * 1000,
                **run.timing_ms,
                "total": (done - started) * 1000,
            },
        )
        if not (req.trace if want_trace is None else want_trace):
            return result
        return self._traced(result, _TraceInputs(ctx, run, plan, docs, fan))

    def _backends(self) -> Backends:
        # Read at each recall: a test may point the recaller at another record store between two recalls.
        return Backends(self.records, self.vectors, self.embedder, self.blocks, self.stats)

    def _traced(self, result: RecallResult, inputs: _TraceInputs) -> RecallResult:
        trace = self._trace(result, inputs)
        # The trace's own cost joins the recall's times; ``total`` stays the recall without it.
        cost: Mapping[str, float] = trace.timing_ms if isinstance(trace, RecallTrace) else {}
        timing = {**result.timing_ms, **{k: cost[k] for k in ("trace", "coverage") if k in cost}}
        return result.model_copy(update={"trace": trace}).with_run(result.final, timing)

    def _trace(self, result: RecallResult, inputs: _TraceInputs) -> RecallTrace | RecallTraceFailure:
        """The trace of a finished recall. A failure to build it never fails the recall: the trace
        then names the error instead (the rows are already final)."""
        ctx = inputs.ctx
        try:
            return build_trace(
                ctx.req,
                result,
                run=inputs.run,
                cue=inputs.fan.cue,
                policy=ctx.policy,
                gate=inputs.plan.gate,
                settings=self.settings,
                scan_window=ctx.window,
                embedding_model=None if self.embedder is None else self.embedder.name,
                docs=inputs.docs,
                profile=inputs.fan.profile,
            )
        except Exception as exc:
            log.exception("building the recall trace failed")
            return RecallTraceFailure(trace_version=TRACE_VERSION, error=type(exc).__name__)


@dataclasses.dataclass(frozen=True, slots=True)
class _TraceInputs:
    """What the trace of one recall reads besides its result."""

    ctx: ArmContext
    run: ChainRun
    plan: RecallPlan
    docs: Mapping[str, HydratedRecord]
    fan: FanOut


def _parts(ctx: ArmContext, docs: Mapping[str, HydratedRecord]) -> dict[str, int] | None:
    """The question parts each record holds, read only when keyword seats will be filled."""
    if ctx.policy.seats.keyword <= 0:
        return None
    return parts_covered(ctx.query, ((ref, d.text) for ref, d in docs.items() if d.text is not None))


def _literal(
    ctx: ArmContext, retrieved: Retrieved, docs: Mapping[str, HydratedRecord], records: RecallReads
) -> frozenset[str]:
    """The rows the gate admits as literal matches, read only under a policy whose rule is on."""
    if not ctx.policy.gate.literal_match or ctx.blank:
        return frozenset()

    def holds_every_term(ref: str) -> bool:
        doc = docs.get(ref)
        if doc is None or doc.text is None:
            return False
        held, searched = records.terms_held(ctx.query, doc.text)
        return searched > 0 and held == searched

    return literal_matches(retrieved.arms, holds_every_term)


def _degraded(fan: FanOut) -> tuple[Degraded, ...]:
    """The arms that failed or were late, in the order they finished; a failed embedding first."""
    degraded = tuple(
        Degraded(arm=r.arm, status=r.status, detail=r.detail) for r in fan.arms.values() if r.status != "ok"
    )
    if fan.vector.embed_error is not None:
        degraded = (Degraded(arm="embedding", status="error", detail=fan.vector.embed_error), *degraded)
    return degraded
