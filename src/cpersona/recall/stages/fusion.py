"""Fusion: turning the arms' ranked lists into one ordered candidate list.

Four modes, chosen by ``CPERSONA_RECALL_MODE`` or per request:

``rrf``
    Reciprocal rank fusion, ``score = Σ w / (K + r + 1)`` over the lists a row is on (``r`` 0-based,
    ``K`` = 60, ``w`` = 1 except the far list's weight). Ties keep first-seen order, the lists being read
    in the order near, far, episode full text, memory keyword.
``rsf``
    Relative score fusion: each list's raw scores are min-max normalised within this query, weighted,
    summed and divided by the number of non-empty lists.
``informed``
    Relative score fusion that trusts each list only as far as it is informative for this query: each
    list's min-max scores count in proportion to the share of its top score that stands above its bulk
    (its median, :func:`informativeness`), instead of rsf's equal parts. A list whose scores sit in one
    narrow band (an embedder that cannot read the query's language gives unrelated texts nearly equal
    cosines) counts for little; a list whose top stands clear counts for much. Measured from the scores
    alone, so it needs no language detection; a vector list's cosines are first read through the
    embedder's gate scale, since the share assumes unrelated texts score near 0 and some models put them
    near .75. The score is carried as the row's ``rsf`` (the reasons read it as a relative score, on the
    same 0-to-1 scale); each row also carries its ``rrf`` score, by which the gate judges it.
``cascade``
    No fused score: the near list (at the full vector threshold), then episode full text, then the profile
    row, then memory keyword rows until ``limit`` rows are filled. Also the path for a blank query.

The profile row, when the agent has one, is appended after the fused rows with no score.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from typing import TYPE_CHECKING, Literal

from cpersona.embedding_models import UNSCALED, in_policy_units
from cpersona.settings import RecallMode

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from cpersona.embedding_models import GateScale
    from cpersona.model.candidates import ArmResult, ArmRow

__all__ = [
    "ArmWeight",
    "Candidate",
    "FusionMode",
    "cascade",
    "informativeness",
    "informed",
    "rrf",
    "rsf",
]

# The modes are spelled once, where the setting that picks one is declared (the lowest layer to need them).
FusionMode = RecallMode
CandidateKind = Literal["memory", "episode", "profile"]

# The lists that fusion reads, in the order that decides ties.
FUSED_ARMS = ("vector_near", "vector_far", "episode_fts", "memory_keyword")
VECTOR_ARMS = frozenset({"vector_near", "vector_far"})


@dataclasses.dataclass(frozen=True, slots=True)
class Candidate:
    """One row after fusion, with every score a later stage may consult.

    ``cosine`` is set for rows a vector list found (its raw cosine), ``bm25`` for rows a lexical list
    found with a score. ``votes`` holds each list's contribution to the fused score, in list order.
    """

    ref: str
    kind: CandidateKind
    cosine: float | None = None
    bm25: float | None = None
    rrf: float | None = None
    rsf: float | None = None
    votes: tuple[tuple[str, float], ...] = ()
    lexical_only: bool = False
    single_arm: bool = False

    @property
    def fused(self) -> float | None:
        return self.rsf if self.rsf is not None else self.rrf


def kind_of(ref: str) -> CandidateKind:
    if ref.startswith("mem:"):
        return "memory"
    if ref.startswith("ep:"):
        return "episode"
    return "profile"


def _lists(arms: Mapping[str, ArmResult]) -> list[tuple[str, tuple[ArmRow, ...]]]:
    return [(name, arms[name].rows) for name in FUSED_ARMS if name in arms and arms[name].rows]


def rrf(
    arms: Mapping[str, ArmResult],
    *,
    k: int,
    far_weight: float,
    profile_ref: str | None,
    single_arm_refs: frozenset[str] = frozenset(),
) -> tuple[Candidate, ...]:
    """Reciprocal rank fusion of the arm lists (see the module docstring).

    ``single_arm_refs`` are lexical-only rows that count as found by a single arm for the gate: every
    lexical row when the query has no vector, else a row ranked first on a lexical list that has no
    stored vector.
    """
    scores: dict[str, float] = {}
    votes: dict[str, list[tuple[str, float]]] = {}
    cosine: dict[str, float] = {}
    bm25: dict[str, float] = {}
    for name, rows in _lists(arms):
        weight = far_weight if name == "vector_far" else 1.0
        for row in rows:
            contribution = weight / (k + row.rank + 1)
            scores[row.ref] = scores.get(row.ref, 0.0) + contribution
            votes.setdefault(row.ref, []).append((name, contribution))
            _note_raw(name, row, cosine, bm25)
    ordered = sorted(scores, key=lambda ref: -scores[ref])  # stable: ties keep first-seen order
    out = [
        Candidate(
            ref=ref,
            kind=kind_of(ref),
            cosine=cosine.get(ref),
            bm25=bm25.get(ref),
            rrf=scores[ref],
            votes=tuple(votes[ref]),
            lexical_only=ref not in cosine,
            single_arm=ref not in cosine and ref in single_arm_refs,
        )
        for ref in ordered
    ]
    return _with_profile(out, profile_ref)


def rsf(
    arms: Mapping[str, ArmResult],
    *,
    far_weight: float,
    profile_ref: str | None,
) -> tuple[Candidate, ...]:
    """Relative score fusion: per-list min-max within this query, weighted, over the active lists."""
    lists = _lists(arms)
    weights = [far_weight if name == "vector_far" else 1.0 for name, _ in lists]
    return _relative(lists, weights, parts=len(lists), profile_ref=profile_ref)


@dataclasses.dataclass(frozen=True, slots=True)
class ArmWeight:
    """How far ``informed`` fusion trusted one list for this query.

    ``top`` is the list's best raw score, ``bulk`` its median raw score, ``informative`` the share of
    ``top`` that stands above ``bulk`` (0 to 1; for a vector list, of the two read in the policies' cosine
    units through the embedder's gate scale), and ``weight`` the list's share of the fused score: its
    ``informative`` times its own weight (the far list's ``far_weight``, 1 for the others) over the sum of
    every fused list's ``informative``.
    """

    arm: str
    weight: float
    informative: float
    top: float | None
    bulk: float | None


def informativeness(raws: Sequence[float | None]) -> tuple[float, float | None, float | None]:
    """``(informative, top, bulk)`` of one list's raw scores, best first or in any order.

    ``informative = clamp((top - bulk) / top, 0, 1)`` with ``bulk`` the median: how much of the top score
    stands above what the list's typical candidate gets. Both kinds of arm score 0 for "nothing in
    common" (BM25 for no shared term, a cosine for unrelated directions), so the share is comparable
    across lists without a scale. A single scored row has no bulk: it is taken as 0 (the list found one
    thing). No scored row, or a top at or below 0, gives 0. A pure function of the scores.
    """
    present = sorted(v for v in raws if v is not None)
    if not present:
        return 0.0, None, None
    top = present[-1]
    bulk = statistics.median(present) if len(present) > 1 else 0.0
    if top <= 0.0:
        return 0.0, top, bulk
    return min(1.0, max(0.0, (top - bulk) / top)), top, bulk


def informed(
    arms: Mapping[str, ArmResult],
    *,
    k: int,
    far_weight: float,
    profile_ref: str | None,
    single_arm_refs: frozenset[str] = frozenset(),
    scale: GateScale = UNSCALED,
) -> tuple[tuple[Candidate, ...], tuple[ArmWeight, ...]]:
    """Informed relative score fusion (see the module docstring); also each list's weight, list order.

    ``score = Σ share * informative * minmax(raw) / Σ informative`` over the non-empty lists: rsf with each
    list's equal part replaced by its part of the summed informativeness, so with equally informative
    lists it is exactly rsf. When no list is informative at all (every one flat) it falls back to rsf's
    equal parts. A list without raw scores (the keyword arm's whole-query fallback) is taken as fully
    informative, its rows counting as rsf counts them. A vector list's informativeness is measured on its
    cosines read through ``scale``, the embedder's gate scale (min-max, an affine reading, is the same
    either way). Each row also carries what :func:`rrf` gives it (``rrf``, ``single_arm``; ``k``,
    ``single_arm_refs`` as there), which the gate reads. Ties keep first-seen order, lists in fusion's
    order.
    """
    lists = _lists(arms)
    weights: list[ArmWeight] = []
    measured = [_informativeness(name, rows, scale) for name, rows in lists]
    total = math.fsum(g for g, _, _ in measured)
    for (name, _), (informative, top, bulk) in zip(lists, measured, strict=True):
        share = far_weight if name == "vector_far" else 1.0
        weight = share * (informative / total if total > 0.0 else 1.0 / len(lists))
        weights.append(ArmWeight(name, weight, informative, top, bulk))
    fused = _relative(lists, [w.weight for w in weights], parts=1, profile_ref=profile_ref)
    ranked = rrf(arms, k=k, far_weight=far_weight, profile_ref=profile_ref, single_arm_refs=single_arm_refs)
    by_rank = {row.ref: row for row in ranked}
    fused = tuple(
        dataclasses.replace(row, rrf=by_rank[row.ref].rrf, single_arm=by_rank[row.ref].single_arm)
        for row in fused
    )
    return fused, tuple(weights)


def _informativeness(
    name: str, rows: Sequence[ArmRow], scale: GateScale
) -> tuple[float, float | None, float | None]:
    """:func:`informativeness` of one list, with its raw ``top`` and ``bulk``; a list without raw scores
    counts as fully informative."""
    raws = [row.raw for row in rows]
    informative, top, bulk = informativeness(raws)
    if top is None:
        return 1.0, top, bulk
    if name in VECTOR_ARMS:
        informative, _, _ = informativeness([None if r is None else in_policy_units(r, scale) for r in raws])
    return informative, top, bulk


def _relative(
    lists: Sequence[tuple[str, tuple[ArmRow, ...]]],
    weights: Sequence[float],
    *,
    parts: int,
    profile_ref: str | None,
) -> tuple[Candidate, ...]:
    """The tally shared by rsf and informed: ``score = Σ weight * minmax(raw) / parts`` over the lists.

    ``weights`` holds one weight per list, in list order. rsf passes the number of non-empty lists as
    ``parts``; informed passes 1, its weights already being shares (dividing by 1 changes no bit). The
    score is carried as the row's ``rsf``; ties keep first-seen order, lists in fusion's order.
    """
    scores: dict[str, float] = {}
    votes: dict[str, list[tuple[str, float]]] = {}
    cosine: dict[str, float] = {}
    bm25: dict[str, float] = {}
    for (name, rows), weight in zip(lists, weights, strict=True):
        normalised = minmax([row.raw for row in rows])
        for row, norm in zip(rows, normalised, strict=True):
            contribution = weight * norm / parts
            scores[row.ref] = scores.get(row.ref, 0.0) + contribution
            votes.setdefault(row.ref, []).append((name, contribution))
            _note_raw(name, row, cosine, bm25)
    ordered = sorted(scores, key=lambda ref: -scores[ref])  # stable: ties keep first-seen order
    out = [
        Candidate(
            ref=ref,
            kind=kind_of(ref),
            cosine=cosine.get(ref),
            bm25=bm25.get(ref),
            rsf=scores[ref],
            votes=tuple(votes[ref]),
            lexical_only=ref not in cosine,
        )
        for ref in ordered
    ]
    return _with_profile(out, profile_ref)


def minmax(values: Sequence[float | None]) -> list[float]:
    """Min-max normalise one list: all ``None`` (no scores) or all equal give 1.0; a ``None`` among
    numbers gives 0.0."""
    present = [v for v in values if v is not None]
    if not present:
        return [1.0] * len(values)
    lo, hi = min(present), max(present)
    if hi == lo:
        return [1.0 if v is not None else 0.0 for v in values]
    return [0.0 if v is None else (v - lo) / (hi - lo) for v in values]


def cascade(
    arms: Mapping[str, ArmResult],
    *,
    limit: int,
    vector_threshold: float,
    profile_ref: str | None,
) -> tuple[Candidate, ...]:
    """The legacy stage-ordered list (see the module docstring); rows carry no fused score."""
    out: list[Candidate] = []
    seen: set[str] = set()
    _cascade_near(arms.get("vector_near"), out, seen, limit, vector_threshold)
    _cascade_episodes(arms.get("episode_fts"), out, seen, limit)
    if profile_ref is not None:
        out.append(Candidate(ref=profile_ref, kind="profile"))
    _cascade_keyword(arms.get("memory_keyword"), out, seen, limit)
    return tuple(out)


def _cascade_near(
    near: ArmResult | None, out: list[Candidate], seen: set[str], limit: int, threshold: float
) -> None:
    """Near-vector rows at or above the threshold, up to ``limit``."""
    if near is None:
        return
    for row in near.rows:
        if len(out) >= limit:
            break
        if row.raw is not None and row.raw >= threshold and row.ref not in seen:
            out.append(Candidate(ref=row.ref, kind=kind_of(row.ref), cosine=row.raw))
            seen.add(row.ref)


def _cascade_episodes(episodes: ArmResult | None, out: list[Candidate], seen: set[str], limit: int) -> None:
    """The first ``limit`` episode full-text rows not already listed (this arm's cut is its own)."""
    if episodes is None:
        return
    for row in episodes.rows[:limit]:
        if row.ref not in seen:
            out.append(Candidate(ref=row.ref, kind="episode", bm25=row.raw, lexical_only=True))
            seen.add(row.ref)


def _cascade_keyword(keyword: ArmResult | None, out: list[Candidate], seen: set[str], limit: int) -> None:
    """Memory keyword rows until the list holds ``limit`` rows besides the profile."""
    if keyword is None:
        return
    for row in keyword.rows:
        if sum(1 for c in out if c.kind != "profile") >= limit:
            break
        if row.ref not in seen:
            out.append(Candidate(ref=row.ref, kind="memory", bm25=row.raw, lexical_only=True))
            seen.add(row.ref)


def _note_raw(name: str, row: ArmRow, cosine: dict[str, float], bm25: dict[str, float]) -> None:
    if row.raw is None:
        return
    if name in VECTOR_ARMS:
        # A row on both vector lists keeps its best cosine (they are the same vector, so equal).
        cosine[row.ref] = max(cosine.get(row.ref, row.raw), row.raw)
    elif row.ref not in bm25:
        bm25[row.ref] = row.raw


def _with_profile(rows: list[Candidate], profile_ref: str | None) -> tuple[Candidate, ...]:
    if profile_ref is not None:
        rows.append(Candidate(ref=profile_ref, kind="profile"))
    return tuple(rows)
