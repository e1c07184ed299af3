"""The values that flow through a recall: arm lists, candidates and the sets the stages pass along.

Everything here is frozen and holds tuples, so arms, stages and the trace share these objects without
copies: a stage that changes something returns a new set (``dataclasses.replace``) and leaves the one it
was given as it was.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

__all__ = ["ArmName", "ArmResult", "ArmRow", "ArmStatus"]

ArmName = Literal["vector_near", "vector_far", "episode_fts", "memory_keyword", "block", "profile", "cue"]
ArmStatus = Literal["ok", "timeout", "error", "skipped"]


@dataclasses.dataclass(frozen=True, slots=True)
class ArmRow:
    """One row of an arm's ranked list.

    ``ref`` is ``mem:<id>`` or ``ep:<id>``; ``rank`` is 0-based in the arm's own order; ``raw`` is the
    arm's native score (cosine for vector arms, BM25 for keyword arms where higher is better, ``None``
    where the arm has no score, e.g. the whole-query fallback or a recency listing). ``block_index`` is
    the best block of the record, for the block arm. ``cosine`` is set only where ``raw`` is not a cosine
    but a vector list contributed to it (the cue arm's merged vote): the held seats gate on it.
    """

    ref: str
    rank: int
    raw: float | None
    block_index: int | None = None
    cosine: float | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class ArmResult:
    """What one arm contributed: its rows best first, and how it went.

    An arm that failed or ran out of time contributes no rows; ``status`` and ``detail`` say why, and the
    recall reports it as degraded instead of failing.
    """

    arm: ArmName
    rows: tuple[ArmRow, ...] = ()
    status: ArmStatus = "ok"
    detail: str = ""
    elapsed_ms: float = 0.0

    @classmethod
    def ranked(
        cls, arm: ArmName, scored: list[tuple[str, float | None]], elapsed_ms: float = 0.0
    ) -> ArmResult:
        """Build a result from ``(ref, raw)`` pairs already in best-first order."""
        rows = tuple(ArmRow(ref, rank, raw) for rank, (ref, raw) in enumerate(scored))
        return cls(arm, rows, "ok", "", elapsed_ms)
