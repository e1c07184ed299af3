"""Whole-run agreement between two systems' rankings, for the honesty lines of a report.

The harness's own check (``_check_dense`` in :mod:`benchmarks.quality.__main__`) re-ranks a sample of
questions by a plain-Python cosine. :func:`agreement` adds the cheap whole-run comparison: for every
question, are two systems' lists the same, place by place, up to rows of equal cosine (which either
system may order its own way)? Cosines are read from the embedding cache with numpy.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Final

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import numpy.typing as npt

    from benchmarks.quality.embed_cache import EmbeddingCache

__all__ = ["Agreement", "agreement"]

_TIE: Final = 1e-6


@dataclasses.dataclass(frozen=True)
class Agreement:
    """How two systems' lists compared over a run."""

    questions: int
    identical: int
    tie_reordered: int
    differing: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return self.questions > 0 and not self.differing

    def describe(self, left: str, right: str) -> str:
        verdict = "PASS" if self.ok else "FAIL"
        text = f"{verdict}: {left} and {right} return the same list on {self.identical}/{self.questions}"
        if self.tie_reordered:
            text += f", {self.tie_reordered} more differ only inside ties (|Δcos| < {_TIE:g})"
        if self.differing:
            shown = ", ".join(self.differing[:10]) + (" …" if len(self.differing) > 10 else "")
            text += f"; DIFFERENT on {len(self.differing)}: {shown}"
        return text


def agreement(
    questions: Sequence[tuple[str, str, Mapping[str, str]]],
    left: Mapping[str, Sequence[str]],
    right: Mapping[str, Sequence[str]],
    cache: EmbeddingCache,
    *,
    floor: float | None = None,
) -> Agreement:
    """Compare ``left[qid]`` with ``right[qid]`` for each ``(qid, question text, unit id -> content)``.

    With ``floor``, the rows of ``right`` whose cosine is below it are dropped first (``left`` is a system
    that leaves them out, as mem0 does under its threshold).
    """
    identical = tie_reordered = 0
    differing: list[str] = []
    for qid, question, contents in questions:
        a, b = list(left[qid]), list(right[qid])
        if floor is not None and b:
            b = [
                unit
                for unit, cos in zip(b, _cosines(cache, question, contents, b), strict=True)
                if cos >= floor
            ]
        if a == b:
            identical += 1
            continue
        if len(a) != len(b):
            differing.append(qid)
            continue
        cos_a = _cosines(cache, question, contents, a)
        cos_b = _cosines(cache, question, contents, b)
        # Same cosines place by place: the lists differ only in how rows of equal cosine were ordered.
        if float(np.max(np.abs(cos_a - cos_b))) < _TIE:
            tie_reordered += 1
        else:
            differing.append(qid)
    return Agreement(len(questions), identical, tie_reordered, tuple(differing))


def _cosines(
    cache: EmbeddingCache, question: str, contents: Mapping[str, str], units: Sequence[str]
) -> npt.NDArray[np.float64]:
    [query] = cache.lookup([question]).astype(np.float64)
    rows = cache.lookup([contents[u] for u in units]).astype(np.float64)
    cosines: npt.NDArray[np.float64] = rows @ query / (np.linalg.norm(rows, axis=1) * np.linalg.norm(query))
    return cosines
