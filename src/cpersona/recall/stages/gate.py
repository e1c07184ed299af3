"""The quality gate, autocut, and the two optional re-scorings (episode penalty, age prior).

Pure functions over candidate tuples; the recall graph wraps them as stages.

The gate decides each row by the score it carries, in this order of precedence: the profile row by pool
size alone; an rsf row by its rsf score; a vector-found row by its raw cosine; a lexical-only row by its
rrf score; an unscored row (cascade's lexical rows) by pool size. An ``informed`` row carries its rrf
score besides its relative one and is gated as under rrf: the relative score orders the rows, but it is
a share of the lists' ranges, not a measure in the bar's units (compared with the cosine bar, it refused
26.7 of 34 candidates a LoCoMo question, ``benchmarks/results/quality_jsquad_bigrams.md``). The
thresholds:

* heuristic ``min_score(pool) = round(start - span * min(1, ln(pool+1) / ln(saturation)), 4)``
  (``start`` at pool 0), halved by ``deep``;
* a lexical-only rrf row needs ``min_score * lexical_arms / (k + 1)``; a single-arm row's threshold is
  capped at ``1 / (k + 1)`` so a first-place lexical row can pass;
* a vector-found row's cosine is compared with ``min_score`` carried into the embedder's cosines by its
  model's ``gate_scale`` (``zero + (one - zero) * min_score``; all-MiniLM-L6-v2, the model the policies'
  numbers were written in, is ``(0, 1)``), :attr:`GateConfig.cosine_min`;
* a **calibrated** gate (the agent's ``calibrate`` result) replaces ``min_score`` for vector-found rows
  only. Decision: CPersona applies its calibrated rrf gate to lexical-only rows too, where it is floored
  above any score such a row can reach, so once an agent is calibrated no lexical-only row can pass. We
  calibrate a cosine threshold and keep the heuristic rule for lexical-only rows, so calibration sharpens
  the vector side without switching the keyword side off.

**Literal match** (``[gate] literal_match``, from fused-gate-v2: single-pass-v2, cued-v0.5). A cosine
threshold belongs to one embedder and one language, and on a small store it is high: a row that a keyword
arm ranked first, holding every term that arm searched (its own analysis: stems, phrases, CJK 2-grams;
:meth:`~cpersona.stores.recall_reads.RecallReads.terms_held`), is admitted whatever its fused or vector
score, with the reason ``literal_match``. Only the arm's first row: rows tied with it on score are not
admitted by the rule (on a store where fifty memories hold one word equally it would admit all fifty).
The rule only admits: every row the other rules pass still passes.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Literal

import numpy as np
import numpy.typing as npt

from cpersona.embedding_models import UNSCALED, GateScale, in_cosines

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from cpersona.model.agent_requests import Gate
    from cpersona.model.candidates import ArmResult
    from cpersona.model.policy import AutocutPolicy, GatePolicy, ScoringPolicy
    from cpersona.recall.stages.fusion import Candidate

__all__ = [
    "Decision",
    "GateConfig",
    "autocut",
    "decide",
    "episode_penalty",
    "literal_matches",
    "min_score",
    "prior",
    "separation_threshold",
]

Signal = Literal["rsf", "cosine", "rrf", "profile", "unscored"]
Reason = Literal["below_gate", "profile_small_pool", "unscored_volume", "literal_match"]
# The arms whose first row may be a literal match: the two keyword arms.
KEYWORD_ARMS = ("memory_keyword", "episode_fts")


def min_score(pool: int, policy: GatePolicy) -> float:
    """The heuristic minimum for a scope of ``pool`` memories and episodes."""
    if pool <= 0:
        return policy.start
    grown = min(1.0, math.log(pool + 1) / math.log(policy.saturation))
    return round(policy.start - policy.span * grown, 4)


@dataclasses.dataclass(frozen=True, slots=True)
class GateConfig:
    """What the gate compares against for one recall."""

    pool: int
    heuristic_min: float
    effective_min: float
    calibrated: float | None
    rrf_k: int
    blank_query: bool
    # The rows admitted as literal matches whatever their score (empty unless the policy's rule is on).
    literal: frozenset[str] = frozenset()
    # Where policy units sit in the embedder's cosines (its model's ``EmbeddingModel.gate_scale``).
    scale: GateScale = UNSCALED

    @property
    def cosine_min(self) -> float:
        """The heuristic threshold of a vector-found row's cosine, in the embedder's own cosines."""
        return in_cosines(self.effective_min, self.scale)

    @property
    def origin(self) -> Gate:
        return "calibrated" if self.calibrated is not None else "heuristic"


@dataclasses.dataclass(frozen=True, slots=True)
class Decision:
    ref: str
    signal: Signal
    score: float | None
    threshold: float | None
    passed: bool
    reason: Reason | None = None


def gate_config(
    pool: int,
    policy: GatePolicy,
    *,
    deep: bool,
    calibrated: float | None,
    rrf_k: int,
    blank_query: bool,
    literal: frozenset[str] = frozenset(),
    scale: GateScale = UNSCALED,
) -> GateConfig:
    heuristic = min_score(pool, policy)
    factor = policy.deep_factor if deep else 1.0
    return GateConfig(
        pool=pool,
        heuristic_min=heuristic,
        effective_min=heuristic * factor,
        calibrated=None if calibrated is None else calibrated * factor,
        rrf_k=rrf_k,
        blank_query=blank_query,
        literal=literal if policy.literal_match else frozenset(),
        scale=scale,
    )


def decide(row: Candidate, cfg: GateConfig, policy: GatePolicy) -> Decision:
    """The gate's decision for one row (see the module docstring for the rules)."""
    decision = _decide(row, cfg, policy)
    if not decision.passed and row.ref in cfg.literal:
        return dataclasses.replace(decision, passed=True, reason="literal_match")
    return decision


def literal_matches(arms: Mapping[str, ArmResult], holds_every_term: Callable[[str], bool]) -> frozenset[str]:
    """The first row of each keyword arm, where ``holds_every_term(ref)``: the rows the literal-match
    rule admits (at most one per arm)."""
    found: set[str] = set()
    for name in KEYWORD_ARMS:
        arm = arms.get(name)
        if arm is None or not arm.rows or arm.rows[0].raw is None:
            continue  # a listing without scores (the whole-query fallback) ranks nothing first
        if holds_every_term(arm.rows[0].ref):
            found.add(arm.rows[0].ref)
    return frozenset(found)


def _decide(row: Candidate, cfg: GateConfig, policy: GatePolicy) -> Decision:
    if row.kind == "profile":
        ok = cfg.pool >= policy.profile_min_pool
        return Decision(row.ref, "profile", None, None, ok, None if ok else "profile_small_pool")
    if row.rsf is not None and row.rrf is None:
        return _compare(row.ref, "rsf", row.rsf, cfg.effective_min)
    if row.cosine is not None:
        threshold = cfg.calibrated if cfg.calibrated is not None else cfg.cosine_min
        return _compare(row.ref, "cosine", row.cosine, threshold)
    if row.rrf is not None:
        threshold = cfg.effective_min * policy.lexical_arms / (cfg.rrf_k + 1)
        if row.single_arm:
            threshold = min(threshold, 1.0 / (cfg.rrf_k + 1))
        return _compare(row.ref, "rrf", row.rrf, threshold)
    ok = cfg.blank_query or cfg.pool >= policy.unscored_min_pool
    return Decision(row.ref, "unscored", None, None, ok, None if ok else "unscored_volume")


def _compare(ref: str, signal: Signal, score: float, threshold: float) -> Decision:
    # A float tolerance keeps a score that equals the threshold on paper from failing by rounding.
    ok = score >= threshold - 1e-12
    return Decision(ref, signal, score, threshold, ok, None if ok else "below_gate")


def autocut(rows: Sequence[Candidate], policy: AutocutPolicy) -> tuple[int | None, tuple[str, ...]]:
    """Where autocut cuts (index of the first dropped row, or ``None``) and the refs it drops.

    It acts only when every non-profile row carries a cosine and no fused score (a cascade list made of
    vector rows): under rrf and rsf it is inert. It cuts after the largest gap between consecutive
    scores when that gap is at least ``min_gap_ratio`` of the top score.
    """
    if not policy.enabled:
        return None, ()
    scored = [r for r in rows if r.kind != "profile"]
    if len(scored) < policy.min_results:
        return None, ()
    if any(r.cosine is None or r.fused is not None for r in scored):
        return None, ()
    values = [r.cosine for r in scored if r.cosine is not None]
    gaps = [values[i] - values[i + 1] for i in range(len(values) - 1)]
    top = values[0]
    widest = max(range(len(gaps)), key=lambda i: gaps[i])
    if top <= 0 or gaps[widest] / top < policy.min_gap_ratio:
        return None, ()
    keep = {r.ref for r in scored[: widest + 1]}
    dropped = tuple(r.ref for r in scored if r.ref not in keep)
    return widest + 1, dropped


def episode_penalty(
    rows: Sequence[Candidate],
    created_at: Mapping[str, float],
    boundary: float | None,
    policy: ScoringPolicy,
) -> tuple[tuple[Candidate, ...], dict[str, float]]:
    """Scale memories older than the newest episode by ``max(floor, exp(-rate * hours_before))``.

    Episodes and the profile are exempt. Fused rows are re-sorted (stable) by the penalised score.
    """
    if boundary is None:
        return tuple(rows), {}
    factors: dict[str, float] = {}
    out: list[Candidate] = []
    for row in rows:
        when = created_at.get(row.ref)
        if row.kind != "memory" or when is None or when >= boundary:
            out.append(row)
            continue
        hours = (boundary - when) / 3600.0
        factor = max(policy.episode_decay_floor, math.exp(-policy.episode_decay_rate * hours))
        factors[row.ref] = factor
        out.append(
            dataclasses.replace(
                row,
                cosine=None if row.cosine is None else row.cosine * factor,
                rrf=None if row.rrf is None else row.rrf * factor,
                rsf=None if row.rsf is None else row.rsf * factor,
            )
        )
    if any(r.fused is not None for r in out):
        out = _resort(out, {r.ref: r.fused or 0.0 for r in out})
    return tuple(out), factors


def prior(
    rows: Sequence[Candidate],
    timestamps: Mapping[str, float],
    anchor: float,
    policy: ScoringPolicy,
) -> tuple[tuple[Candidate, ...], dict[str, float]]:
    """Reorder by ``fused * max(floor, 1 / (1 + age_hours * rate))``; never admits or removes a row.

    Runs only when every scored row carries an rrf score, or every one an rsf score. A row of unknown age
    gets the middle of the scope's span. The profile row sinks to the bottom.
    """
    rate = policy.prior_age_rate
    scored = [r for r in rows if r.kind != "profile"]
    if rate <= 0 or not scored:
        return tuple(rows), {}
    if not (all(r.rrf is not None for r in scored) or all(r.rsf is not None for r in scored)):
        return tuple(rows), {}
    known = [timestamps[r.ref] for r in scored if r.ref in timestamps]
    middle = (min(known) + max(known)) / 2 if known else anchor
    weights: dict[str, float] = {}
    keyed: dict[str, float] = {}
    for row in scored:
        age_hours = max(0.0, (anchor - timestamps.get(row.ref, middle)) / 3600.0)
        weight = max(policy.prior_age_floor, 1.0 / (1.0 + age_hours * rate))
        weights[row.ref] = weight
        keyed[row.ref] = (row.fused or 0.0) * weight
    ordered = _resort(scored, keyed)
    return tuple(ordered) + tuple(r for r in rows if r.kind == "profile"), weights


def _resort(rows: Sequence[Candidate], key: Mapping[str, float]) -> list[Candidate]:
    return sorted(rows, key=lambda r: -key.get(r.ref, float("-inf")))


def separation_threshold(
    null: npt.NDArray[np.float64],
    positives: npt.NDArray[np.float64],
    *,
    beta: float,
    candidates: int,
    floor: float,
) -> float:
    """The threshold that best separates positive pairs from random ones: the argmax over evenly spaced
    candidates of ``TPR + beta * (1 - FPR)``, floored. The first best candidate wins a tie."""
    lo = float(min(null.min(initial=1.0), positives.min(initial=1.0)))
    hi = float(max(null.max(initial=-1.0), positives.max(initial=-1.0)))
    grid = np.linspace(lo, hi, candidates)
    tpr = (positives[None, :] >= grid[:, None]).mean(axis=1)
    fpr = (null[None, :] >= grid[:, None]).mean(axis=1)
    objective = tpr + beta * (1.0 - fpr)
    best = float(grid[int(np.argmax(objective))])
    return max(floor, round(best, 6))
