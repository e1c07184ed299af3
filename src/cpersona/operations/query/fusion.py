"""How a cue query's arms become one ranking, and how spreading activation joins it.

Fusion is reciprocal rank fusion: a memory scores ``Σ 1/(60 + rank)`` over the arms that found it
(rank 1-based), so no arm's native scale (unbounded BM25, cosines, emotion cosines, recency) dominates
another's, and a memory several arms agree on rises. The reference instead adds raw BM25 to cosines
(0.6·BM25 + 0.4·cos), where BM25's scale swamps everything else; its emotion cue ranked nothing.

A memory's ``share`` is its fused score over the best one's (the best is 1.0). The leaders (the first
few after filtering) seed spreading activation at their share; a memory activated to level ``a``
gains ``0.3·a`` on top of its share, and one only activation reached scores ``0.8·a`` (the reference's
``0.5·a`` entry plus its ``0.3·a`` bonus).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from cpersona.operations.activation import Activation
    from cpersona.operations.query.arms import ArmList, CueArmName

__all__ = ["ACTIVATION_BONUS", "ACTIVATION_ONLY", "MAX_SEEDS", "RRF_K", "Fused", "final_scores", "fuse"]

RRF_K = 60
MAX_SEEDS = 5
"""How many fused leaders spread activation."""
ACTIVATION_BONUS = 0.3
ACTIVATION_ONLY = 0.8


@dataclasses.dataclass(frozen=True, slots=True)
class Fused:
    """One memory the arms found: its fused score, its share of the best, and the arms (with rank)."""

    id: str
    rrf: float
    share: float
    arms: tuple[tuple[CueArmName, int], ...]


def fuse(arms: Sequence[ArmList], keep: Mapping[str, object]) -> list[Fused]:
    """The memories of ``arms`` that are in ``keep`` (those that passed the filters), best first (ties by
    id), each with its fused score."""
    scores: dict[str, float] = {}
    found_by: dict[str, list[tuple[CueArmName, int]]] = {}
    for arm in arms:
        for rank, rid in enumerate(arm.ids, start=1):
            if rid not in keep:
                continue
            scores[rid] = scores.get(rid, 0.0) + 1.0 / (RRF_K + rank)
            found_by.setdefault(rid, []).append((arm.arm, rank))
    if not scores:
        return []
    best = max(scores.values())
    ranked = sorted(scores, key=lambda rid: (-scores[rid], rid))
    return [Fused(rid, scores[rid], scores[rid] / best, tuple(found_by[rid])) for rid in ranked]


def final_scores(
    fused: Sequence[Fused], activated: Mapping[str, Activation], eligible: Mapping[str, object]
) -> dict[str, float]:
    """Each memory's relevance: its share plus the activation bonus, or the activation-only score for
    an ``eligible`` memory only activation reached."""
    out = {f.id: f.share for f in fused}
    for rid, act in activated.items():
        if rid in out:
            out[rid] += ACTIVATION_BONUS * act.level
        elif rid in eligible:
            out[rid] = ACTIVATION_ONLY * act.level
    return out
