"""A cue query's trace (``trace: true``): each arm's ranked refs with its native scores, the fused
ranking, the activation, and why each returned memory is there. Refs, ranks, scores and arm names only;
never a memory's text (nor the cue's text, which the caller has)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cpersona.model.trace import (
    ArmRowTrace,
    CueQueryArm,
    CueQueryTrace,
    FusedTrace,
    ReturnedTrace,
    SpreadTrace,
)

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from cpersona.operations.activation import Activation
    from cpersona.operations.query.arms import ArmList
    from cpersona.operations.query.fusion import Fused

__all__ = ["query_trace"]


def _arm(arm: ArmList) -> CueQueryArm:
    rows = [
        ArmRowTrace(ref=f"mem:{rid}", rank=rank, raw=raw)
        for rank, (rid, raw) in enumerate(zip(arm.ids, arm.scores, strict=True))
    ]
    return CueQueryArm(status=arm.status, elapsed_ms=round(arm.elapsed_ms, 3), rows=rows, detail=arm.detail)


def _reasons(rid: str, fused: Mapping[str, Fused], activated: Mapping[str, Activation]) -> list[str]:
    reasons = [f"{name}#{rank}" for name, rank in fused[rid].arms] if rid in fused else []
    if rid in activated:
        act = activated[rid]
        reasons.append(f"activation:{act.edge_type}@hop{act.hop}")
    return reasons


def query_trace(
    arms: Sequence[ArmList],
    fused: Sequence[Fused],
    activated: Mapping[str, Activation],
    returned: Sequence[str],
    scores: Mapping[str, float],
) -> CueQueryTrace:
    by_id = {f.id: f for f in fused}
    return CueQueryTrace(
        arms={arm.arm: _arm(arm) for arm in arms},
        fused=[
            FusedTrace(ref=f"mem:{f.id}", rank=rank, rrf=f.rrf, share=f.share) for rank, f in enumerate(fused)
        ],
        activation=[
            SpreadTrace(
                ref=f"mem:{a.record_id}",
                level=a.level,
                hop=a.hop,
                edge_type=a.edge_type,
                path=[f"mem:{p}" for p in a.path],
            )
            for a in sorted(activated.values(), key=lambda a: (-a.level, a.record_id))
        ],
        returned=[
            ReturnedTrace(
                ref=f"mem:{rid}", rank=rank, score=scores[rid], reasons=_reasons(rid, by_id, activated)
            )
            for rank, rid in enumerate(returned)
        ],
    )
