"""The cue loop of one recall: the cue arm over the cue's period, widened one confidence step and searched
again (the cue arm only) while it finds nothing, within the policy's revisions and the cue time limit.

It runs inside the recall's task group, beside the ordinary arms, so its first search overlaps them and a
revision never re-runs them. The whole loop is bounded by CPERSONA_RECALL_CUE_TIME_LIMIT_MS counted from
the start of the recall: a cue arm still searching at the limit is cancelled and the stop is recorded.
Like any arm, a failed loop is reported as degraded and never fails the recall.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from typing import TYPE_CHECKING, Any

from cpersona.model.candidates import ArmResult
from cpersona.model.time_cue import cue_period, own_period, recent_only, wider
from cpersona.recall.arms.cue import cue_arm, scope_span
from cpersona.recall.stages.chain import ChainRun, Counted, CueFound, Gated, Seated

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from cpersona.model.candidates import ArmRow
    from cpersona.model.time_cue import Confidence, Period
    from cpersona.recall.arm_runner import ArmRunner, Later
    from cpersona.recall.plan import ArmContext, CuePlan, VectorBar
    from cpersona.stores.protocols import RecallReads, Vector, VectorStore

__all__ = ["CueOutcome", "CueStage", "Suspected", "run_cue_loop"]

log = logging.getLogger("cpersona.recall")

_LIMIT_DETAIL = "stopped at the cue time limit (CPERSONA_RECALL_CUE_TIME_LIMIT_MS)"


@dataclasses.dataclass(frozen=True, slots=True)
class CueStage:
    """One search of the loop: the step it searched, its period, how many rows it found, what came next."""

    stage: int
    confidence: Confidence
    period: Period | None
    found: int
    next: str | None


@dataclasses.dataclass(frozen=True, slots=True)
class Suspected:
    """A stage whose period held no candidate, and what the loop did about it."""

    stage: int
    action: str


@dataclasses.dataclass(frozen=True, slots=True)
class CueOutcome:
    """What the loop did: the step and period it ended on, the cue arm's last list (``result``), its
    stages, and why it stopped; or, with ``recent_only``, that the cue was ignored (``ignored`` is the
    cue's own period then)."""

    plan: CuePlan
    confidence: Confidence
    period: Period | None = None
    result: ArmResult | None = None
    revised: bool = False
    stop: str | None = None
    stages: tuple[CueStage, ...] = ()
    suspected: tuple[Suspected, ...] = ()
    recent_only: bool = False
    ignored: Period | None = None

    def found(self, rows: Sequence[ArmRow]) -> CueFound:
        """What the stages after fusion get: ``rows`` (the cue arm's filtered list) and the step's rules."""
        policy, step = self.plan.policy, self.confidence
        return CueFound(
            rows=tuple(rows),
            confidence=step,
            period=self.period,
            lift=policy.lift[step],
            seats=policy.seats[step],
            seat_cut_rows=policy.seat_cut_rows,
        )

    def report(self, run: ChainRun, policy_name: str) -> dict[str, Any]:
        """The response's ``time_cue`` (the trace's account of the loop is ``recall.trace.assemble``'s)."""
        if self.recent_only:
            period = None if self.ignored is None else self.ignored.model_dump(mode="json")
            return {"policy": policy_name, "ignored": "recent_only", "period": period}
        moves = run.last(Counted).moves or run.last(Gated).moves
        return {
            "policy": policy_name,
            "period": None if self.period is None else self.period.model_dump(mode="json"),
            "confidence": self.confidence,
            "revised": self.revised,
            "moved": sum(1 for m in moves if m.to < m.from_),
            "seated": sum(1 for seat in run.last(Seated).seats if seat.kind == "cue"),
        }


@dataclasses.dataclass(frozen=True, slots=True)
class CueSources:
    """What the loop searches with: the stores, and the two values it waits for from the other arms."""

    records: RecallReads
    vectors: VectorStore | None
    query_vector: Later[Vector | None]
    bar: Callable[[], Awaitable[VectorBar]]


async def run_cue_loop(ctx: ArmContext, plan: CuePlan, sources: CueSources, runner: ArmRunner) -> CueOutcome:
    """Run the loop to its end; a failure anywhere in it is the cue arm's error."""
    loop = _Loop(plan, runner, ctx.started)
    try:
        await loop.run(ctx, sources)
    except Exception as exc:
        log.warning("recall arm cue failed: %s", exc)
        loop.result = ArmResult("cue", status="error", detail=f"{type(exc).__name__}: {exc}")
    return loop.outcome()


class _Loop:
    """The loop's record while it runs (inside one task); :meth:`outcome` freezes it."""

    def __init__(self, plan: CuePlan, runner: ArmRunner, started: float) -> None:
        self.plan = plan
        self.runner = runner
        self.started = started
        self.limit_s = plan.limit_ms / 1000
        self.confidence: Confidence = plan.cue.confidence
        self.period: Period | None = None
        self.result: ArmResult | None = None
        self.revised = False
        self.stop: str | None = None
        self.stages: list[CueStage] = []
        self.suspected: list[Suspected] = []
        self.ignored: Period | None = None
        self.recent_only = False

    def outcome(self) -> CueOutcome:
        return CueOutcome(
            plan=self.plan,
            confidence=self.confidence,
            period=self.period,
            result=self.result,
            revised=self.revised,
            stop=self.stop,
            stages=tuple(self.stages),
            suspected=tuple(self.suspected),
            recent_only=self.recent_only,
            ignored=self.ignored,
        )

    async def run(self, ctx: ArmContext, sources: CueSources) -> None:
        cue, policy = self.plan.cue, self.plan.policy
        span = await scope_span(sources.records, ctx.scope)
        now = time.time()
        if recent_only(cue, span, now, policy.recent_only_hours):
            self.recent_only = True
            self.ignored = own_period(cue, span, now)
            return
        bar = await sources.bar()
        vector = await sources.query_vector.wait()
        depth = policy.depth or ctx.depth
        search = functools.partial(
            cue_arm,
            records=sources.records,
            vectors=sources.vectors,
            vector=vector,
            scope=ctx.scope,
            query=ctx.query,
            depth=depth * 2 + 10 if ctx.filtering else depth,
            floor=bar.floor(policy.vector_floor_factor),
            search_episodes=policy.search_episodes and ctx.with_episodes,
            merge_k=policy.merge_k,
        )
        confidence: Confidence | None = cue.confidence
        for stage in range(policy.revisions + 1):
            assert confidence is not None
            period = cue_period(cue, confidence, span, now, policy.margins)
            self.confidence, self.period = confidence, period
            self.result = await self._search(search, period)
            confidence = self._next(stage, confidence, self.result)
            if confidence is None:
                break
            self.revised = True

    def _next(self, stage: int, confidence: Confidence, result: ArmResult) -> Confidence | None:
        """Record the stage; the step to widen to, or ``None`` to stop."""
        step: Confidence | None = None
        if result.status == "timeout" and result.detail == _LIMIT_DETAIL:
            action: str | None = "stop: time limit"
            self.stop = "time_limit"
        elif result.rows or result.status != "ok":
            action = None
        else:
            step = wider(confidence) if stage < self.plan.policy.revisions else None
            if step is None:
                why = "no wider step" if wider(confidence) is None else "no revision left"
                action, self.stop = f"stop: {why}", why.replace(" ", "_")
            elif time.perf_counter() - self.started >= self.limit_s:
                action, self.stop, step = "stop: time limit", "time_limit", None
            else:
                action = f"widen to {step}"
            self.suspected.append(Suspected(stage, action))
        self.stages.append(CueStage(stage, confidence, self.period, len(result.rows), action))
        return step

    async def _search(self, search: Callable[..., Awaitable[ArmResult]], period: Period | None) -> ArmResult:
        """The cue arm over ``period``, under whichever comes first of the arm deadline and the cue time
        limit (counted from the start of the recall)."""
        if period is None:
            # No period to search (an empty scope, or long_ago over a scope with no span).
            return ArmResult("cue")
        remaining = self.limit_s - (time.perf_counter() - self.started)
        arm_s = self.runner.timeout_ms / 1000
        if remaining <= 0:
            return ArmResult("cue", status="timeout", detail=_LIMIT_DETAIL)
        call = functools.partial(search, period=(period.start, period.end))
        late = _LIMIT_DETAIL if remaining <= arm_s else None
        return await self.runner.run("cue", call, within_s=min(remaining, arm_s), late=late)
