"""The plan of one recall: what it resolved from the request, the policy and the settings before any I/O,
and the stage plan it builds once the arms have answered."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from cpersona.embedding_models import UNSCALED, GateScale, in_cosines
from cpersona.recall.stages.chain import RecallPlan
from cpersona.recall.stages.gate import gate_config

if TYPE_CHECKING:
    from collections.abc import Mapping

    from cpersona.model.policy import PolicyOverlay
    from cpersona.model.scope import ReadScope
    from cpersona.model.time_cue import TimeCue
    from cpersona.recall.policy import CuePolicy, Policy
    from cpersona.recall.request import RecallRequest
    from cpersona.recall.stages.fusion import FusionMode
    from cpersona.settings import Settings

__all__ = ["ArmContext", "CuePlan", "VectorBar", "plan_recall", "stage_plan"]


@dataclasses.dataclass(frozen=True, slots=True)
class VectorBar:
    """The cosine the vector arms measure their floors from: the agent's calibrated threshold (a cosine of
    its own store's vectors), else the policy's ``[vector] min_similarity``, written in all-MiniLM-L6-v2's
    cosines and carried into the embedder's by its gate ``scale``."""

    calibrated: float | None
    minimum: float
    scale: GateScale = UNSCALED

    def floor(self, factor: float = 1.0) -> float:
        """The bar lowered by ``factor`` (a policy's ``rrf_threshold_factor``, say), before it is carried:
        half of .3 is .15 in MiniLM's cosines, whatever that is in another model's."""
        if self.calibrated is not None:
            return self.calibrated * factor
        return in_cosines(self.minimum * factor, self.scale)


@dataclasses.dataclass(frozen=True, slots=True)
class CuePlan:
    """A time cue the policy takes, with the policy's rules for it and the loop's time limit."""

    cue: TimeCue
    policy: CuePolicy
    limit_ms: float


@dataclasses.dataclass(frozen=True, slots=True)
class ArmContext:
    """What every arm of one recall is given, fixed before the first one starts.

    ``depth`` is how many rows each fused arm keeps, ``fetch`` how many it asks for (deeper when a source
    filter or exclusions drop rows after the search), ``window`` the vector arms' scan window. ``started``
    is the recall's start (``time.perf_counter``), from which the cue loop's time limit is counted.
    """

    req: RecallRequest
    policy: Policy
    depth: int
    fetch: int
    window: int
    blank: bool
    filtering: bool
    with_episodes: bool
    cue: CuePlan | None
    arm_timeout_ms: float
    started: float

    @property
    def scope(self) -> ReadScope:
        return self.req.scope

    @property
    def query(self) -> str:
        return self.req.query

    @property
    def mode(self) -> FusionMode:
        return self.req.mode

    @property
    def reach(self) -> int:
        return self.policy.vector.reach


def plan_recall(
    req: RecallRequest,
    policies: Mapping[str, Policy],
    settings: Settings,
    *,
    started: float,
    overlay: PolicyOverlay,
) -> ArmContext:
    """Resolve the policy (with ``overlay`` applied over it), the depth and what the arms fetch."""
    policy = overlay.over(policies[req.policy])
    depth = req.limit
    if req.mode != "cascade" and not req.blank:
        floor = settings.recall_depth_floor
        depth = max(req.limit, policy.depth.floor if floor is None else floor)
        depth = min(policy.depth.max, depth + policy.depth.places)
    filtering = bool(req.scope.source_id or req.exclude_contents)
    cue = None
    if req.time_cue is not None and policy.cue is not None:
        cue = CuePlan(req.time_cue, policy.cue, settings.recall_cue_time_limit_ms)
    return ArmContext(
        req=req,
        policy=policy,
        depth=depth,
        fetch=depth * 2 + 10 if filtering else depth,
        window=settings.max_memories or policy.vector.scan_window,
        blank=req.blank,
        filtering=filtering,
        with_episodes=not req.scope.source_id or bool(req.scope.channel),
        cue=cue,
        arm_timeout_ms=settings.recall_arm_timeout_ms,
        started=started,
    )


def stage_plan(
    ctx: ArmContext,
    *,
    pool: int,
    calibrated: float | None,
    vector_threshold: float,
    has_vector: bool = True,
    parts_covered: Mapping[str, int] | None = None,
    literal: frozenset[str] = frozenset(),
    scale: GateScale = UNSCALED,
) -> RecallPlan:
    """What the stages consult: the context's choices and the gate the scope's pool and calibration set
    (``literal``: the rows the policy's literal-match rule admits, ``stages.gate.literal_matches``;
    ``scale``: the embedder's model's gate scale)."""
    policy = ctx.policy
    gate = gate_config(
        pool,
        policy.gate,
        deep=ctx.req.deep,
        calibrated=calibrated,
        rrf_k=policy.fusion.rrf_k,
        blank_query=ctx.blank,
        literal=literal,
        scale=scale,
    )
    return RecallPlan(
        policy=policy,
        mode=ctx.mode,
        limit=ctx.req.limit,
        depth=ctx.depth,
        gate=gate,
        blank_query=ctx.blank,
        vector_threshold=vector_threshold,
        has_vector=has_vector,
        parts_covered={} if parts_covered is None else parts_covered,
    )
