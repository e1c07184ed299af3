"""The gate, autocut, the episode penalty, the age prior and the separation threshold, by hand.

Every threshold is worked out from the reference formula in a comment and asserted exactly (or to the
last float bit where a product is involved). The policy is the real ``single-pass-v0`` file.
"""

from __future__ import annotations

import math
from typing import TypedDict, Unpack

import numpy as np
import pytest

from cpersona.embedding_models import in_cosines
from cpersona.model.candidates import ArmResult
from cpersona.recall.policy import load_policies
from cpersona.recall.stages.fusion import Candidate
from cpersona.recall.stages.gate import (
    Decision,
    GateConfig,
    autocut,
    decide,
    episode_penalty,
    gate_config,
    literal_matches,
    min_score,
    prior,
    separation_threshold,
)

POLICY = load_policies()["single-pass-v0"]
GATE = POLICY.gate
AUTOCUT = POLICY.autocut
SCORING = POLICY.score_adjust
K = POLICY.fusion.rrf_k


def cfg(pool: int, *, deep: bool = False, calibrated: float | None = None, blank: bool = False) -> GateConfig:
    return gate_config(pool, GATE, deep=deep, calibrated=calibrated, rrf_k=K, blank_query=blank)


class Scores(TypedDict, total=False):
    """The scores a test sets on a memory candidate; the others keep Candidate's defaults."""

    cosine: float | None
    bm25: float | None
    rrf: float | None
    rsf: float | None
    lexical_only: bool
    single_arm: bool


def mem(ref: str, **scores: Unpack[Scores]) -> Candidate:
    return Candidate(ref=ref, kind="memory", **scores)


PROFILE = Candidate(ref="profile:a", kind="profile")


# ------------------------------------------------------------------------------------------ min_score


@pytest.mark.parametrize(
    ("pool", "expected"),
    [
        (-3, 0.5),
        (0, 0.5),
        # round(0.5 - 0.3 * ln(2)/ln(500), 4) = round(0.5 - 0.3 * 0.111535, 4) = 0.4665
        (1, 0.4665),
        # round(0.5 - 0.3 * ln(6)/ln(500), 4) = round(0.5 - 0.3 * 0.288315, 4) = round(0.4135055, 4)
        (5, 0.4135),
        # round(0.5 - 0.3 * ln(31)/ln(500), 4) = round(0.5 - 0.165770, 4) = 0.3342
        (30, 0.3342),
        # ln(500)/ln(500) = 1: saturated
        (499, 0.2),
        (500, 0.2),
        (100_000, 0.2),
    ],
)
def test_min_score(pool: int, expected: float) -> None:
    assert min_score(pool, GATE) == expected


def test_min_score_matches_the_formula_for_every_small_pool() -> None:
    for pool in range(1, 600):
        want = round(0.5 - 0.3 * min(1.0, math.log(pool + 1) / math.log(500)), 4)
        assert min_score(pool, GATE) == want


def test_deep_halves_the_minimum_and_the_calibrated_gate() -> None:
    shallow, deep = cfg(5, calibrated=0.3), cfg(5, deep=True, calibrated=0.3)
    assert (shallow.heuristic_min, shallow.effective_min, shallow.calibrated) == (0.4135, 0.4135, 0.3)
    assert deep.heuristic_min == 0.4135
    assert deep.effective_min == 0.4135 * 0.5  # 0.20675
    assert deep.calibrated == 0.15
    assert (shallow.origin, cfg(5).origin) == ("calibrated", "heuristic")


# ---------------------------------------------------------------------------------------------- decide


def test_profile_passes_on_pool_size_alone() -> None:
    small = decide(PROFILE, cfg(49), GATE)
    assert (small.signal, small.passed, small.reason, small.score, small.threshold) == (
        "profile",
        False,
        "profile_small_pool",
        None,
        None,
    )
    big = decide(PROFILE, cfg(50), GATE)
    assert (big.passed, big.reason) == (True, None)
    # a blank query does not rescue a profile on a small pool
    assert not decide(PROFILE, cfg(10, blank=True), GATE).passed


def test_rsf_row_is_gated_on_rsf_before_its_cosine() -> None:
    # pool 500: effective minimum 0.2
    passing = decide(mem("mem:1", rsf=0.25, cosine=0.05), cfg(500), GATE)
    assert (passing.signal, passing.score, passing.threshold, passing.passed) == ("rsf", 0.25, 0.2, True)
    # the cosine (0.9) would pass; the rsf (0.19) decides
    failing = decide(mem("mem:1", rsf=0.19, cosine=0.9), cfg(500), GATE)
    assert (failing.signal, failing.passed, failing.reason) == ("rsf", False, "below_gate")
    # the calibrated (cosine) gate does not apply to rsf rows: still 0.2
    assert decide(mem("mem:1", rsf=0.25), cfg(500, calibrated=0.6), GATE).threshold == 0.2


def test_an_informed_row_is_gated_by_its_cosine_or_its_rrf_never_its_relative_score() -> None:
    # informed rows carry rsf (the order) and rrf (for the gate); pool 500: minimum 0.2
    vector = decide(mem("mem:1", rsf=0.05, rrf=1 / 90, cosine=0.3), cfg(500), GATE)
    assert (vector.signal, vector.score, vector.threshold, vector.passed) == ("cosine", 0.3, 0.2, True)
    refused = decide(mem("mem:2", rsf=0.95, rrf=2 / 61, cosine=0.15), cfg(500), GATE)
    assert (refused.signal, refused.passed, refused.reason) == ("cosine", False, "below_gate")
    # a lexical-only row by the rank rule: rank 40 passes (see the rrf tests below), whatever its rsf
    lexical = decide(mem("mem:3", rsf=0.01, rrf=1 / 101, lexical_only=True), cfg(500), GATE)
    assert (lexical.signal, lexical.threshold, lexical.passed) == ("rrf", 0.2 * 3 / 61, True)
    assert not decide(mem("mem:4", rsf=0.9, rrf=1 / 102, lexical_only=True), cfg(500), GATE).passed


def test_cosine_row_against_the_heuristic_minimum() -> None:
    # a vector-found row under rrf carries cosine and rrf: gated on the raw cosine
    at = decide(mem("mem:1", cosine=0.2, rrf=1 / 61), cfg(500), GATE)
    assert (at.signal, at.score, at.threshold, at.passed) == ("cosine", 0.2, 0.2, True)
    below = decide(mem("mem:1", cosine=0.1999, rrf=1 / 61), cfg(500), GATE)
    assert (below.passed, below.reason) == (False, "below_gate")
    # pool 5: 0.4135; deep: 0.20675
    assert not decide(mem("mem:1", cosine=0.41), cfg(5), GATE).passed
    deep = decide(mem("mem:1", cosine=0.21), cfg(5, deep=True), GATE)
    assert (deep.threshold, deep.passed) == (0.20675, True)


def test_a_model_gate_scale_carries_only_the_cosine_threshold_into_its_cosines() -> None:
    scale = (0.7, 0.9)
    scaled = gate_config(5, GATE, deep=False, calibrated=None, rrf_k=K, blank_query=False, scale=scale)
    # pool 5: 0.4135 in policy units -> 0.7 + 0.2 * 0.4135 (0.7827) in the model's cosines
    carried = 0.7 + (0.9 - 0.7) * 0.4135
    assert (scaled.effective_min, scaled.cosine_min) == (0.4135, carried)
    at = decide(mem("mem:1", cosine=carried, rrf=1 / 61), scaled, GATE)
    assert (at.signal, at.threshold, at.passed) == ("cosine", carried, True)
    assert not decide(mem("mem:1", cosine=0.78, rrf=1 / 61), scaled, GATE).passed
    # fused and lexical scores are not cosines: their thresholds do not move
    assert decide(mem("mem:1", rsf=0.5), scaled, GATE).threshold == 0.4135
    lexical = mem("mem:1", rrf=0.03, lexical_only=True)
    assert decide(lexical, scaled, GATE).threshold == decide(lexical, cfg(5), GATE).threshold
    # deep halves the policy number before it is carried
    deep = gate_config(5, GATE, deep=True, calibrated=None, rrf_k=K, blank_query=False, scale=scale)
    assert deep.cosine_min == 0.7 + (0.9 - 0.7) * 0.20675
    # a calibrated threshold is already the store's own cosine
    calibrated = gate_config(5, GATE, deep=False, calibrated=0.8, rrf_k=K, blank_query=False, scale=scale)
    assert decide(mem("mem:1", cosine=0.79, rrf=1 / 61), calibrated, GATE).threshold == 0.8
    # MiniLM's scale, (0, 1), leaves every number exactly the policy's
    assert in_cosines(0.20675, (0.0, 1.0)) == 0.20675
    assert cfg(5, deep=True).cosine_min == cfg(5, deep=True).effective_min


def test_cosine_row_against_the_calibrated_gate() -> None:
    # calibrated 0.35 replaces the heuristic 0.2 for vector-found rows
    row = mem("mem:1", cosine=0.3, rrf=1 / 61)
    decision = decide(row, cfg(500, calibrated=0.35), GATE)
    assert (decision.threshold, decision.passed, decision.reason) == (0.35, False, "below_gate")
    assert decide(row, cfg(500), GATE).passed
    # and a low calibrated value admits what the heuristic refuses (pool 5 -> 0.4135)
    assert decide(row, cfg(5, calibrated=0.25), GATE).passed
    # deep halves it: 0.35 * 0.5 = 0.175
    assert decide(row, cfg(500, deep=True, calibrated=0.35), GATE).threshold == 0.175


def test_lexical_only_rrf_row_threshold_is_min_times_3_over_61() -> None:
    # pool 500: 0.2 * 3 / 61 = 0.00983607; rank r passes iff 1/(61+r) >= 0.6/61, i.e. r <= 40
    threshold = 0.2 * 3 / 61
    rank40 = decide(mem("mem:1", rrf=1 / 101, lexical_only=True), cfg(500), GATE)
    assert (rank40.signal, rank40.threshold, rank40.passed) == ("rrf", threshold, True)
    rank41 = decide(mem("mem:1", rrf=1 / 102, lexical_only=True), cfg(500), GATE)
    assert (rank41.passed, rank41.reason) == (False, "below_gate")
    # pool 30: 0.3342 * 3 / 61 = 0.0164361 > 1/61 = 0.0163934: even a first place fails
    first = decide(mem("mem:1", rrf=1 / 61, lexical_only=True), cfg(30), GATE)
    assert first.threshold == 0.3342 * 3 / 61
    assert not first.passed
    # deep, pool 500: 0.1 * 3 / 61
    assert decide(mem("mem:1", rrf=1 / 200), cfg(500, deep=True), GATE).threshold == 0.1 * 3 / 61


def test_single_arm_row_threshold_is_capped_at_one_over_61() -> None:
    # pool 30: min(0.0164361, 1/61) = 1/61, so the first place passes and the second does not
    first = decide(mem("mem:1", rrf=1 / 61, lexical_only=True, single_arm=True), cfg(30), GATE)
    assert (first.threshold, first.passed) == (1 / 61, True)
    second = decide(mem("mem:2", rrf=1 / 62, lexical_only=True, single_arm=True), cfg(30), GATE)
    assert (second.threshold, second.passed) == (1 / 61, False)
    # the cap only lowers: on pool 500 the threshold stays 0.6/61
    assert decide(mem("mem:1", rrf=1 / 61, single_arm=True), cfg(500), GATE).threshold == 0.2 * 3 / 61


def test_calibration_leaves_lexical_only_rows_on_the_heuristic_rule() -> None:
    # the deliberate deviation: a calibrated gate (floored at 0.05 > 1/61) would refuse every lexical
    # row; ours keeps min * 3/61 for them
    decision = decide(mem("mem:1", rrf=1 / 61, lexical_only=True), cfg(500, calibrated=0.05), GATE)
    assert (decision.threshold, decision.passed) == (0.2 * 3 / 61, True)


def test_unscored_rows_pass_on_a_blank_query_or_a_pool_of_100() -> None:
    row = mem("mem:1", lexical_only=True)
    small = decide(row, cfg(99), GATE)
    assert (small.signal, small.passed, small.reason, small.threshold) == (
        "unscored",
        False,
        "unscored_volume",
        None,
    )
    assert decide(row, cfg(100), GATE).passed
    assert decide(row, cfg(0, blank=True), GATE).passed
    # a cascade vector row carries its cosine and is gated on it
    assert decide(mem("mem:2", cosine=0.6), cfg(99), GATE).signal == "cosine"


# --------------------------------------------------------------------------------------------- autocut


def cos_rows(*values: float) -> list[Candidate]:
    return [mem(f"mem:{i}", cosine=v) for i, v in enumerate(values)]


def test_autocut_cuts_after_the_largest_gap() -> None:
    rows = cos_rows(0.9, 0.85, 0.5, 0.45)
    # gaps 0.05, 0.35, 0.05; 0.35 / 0.9 = 0.389 >= 0.15: keep the first two
    assert autocut(rows, AUTOCUT) == (2, ("mem:2", "mem:3"))


def test_autocut_keeps_all_below_the_gap_ratio() -> None:
    # largest gap 0.1 / 0.8 = 0.125 < 0.15
    assert autocut(cos_rows(0.8, 0.7, 0.65), AUTOCUT) == (None, ())
    # largest gap 0.13 / 0.8 = 0.1625 >= 0.15: cut
    assert autocut(cos_rows(0.8, 0.75, 0.62), AUTOCUT) == (2, ("mem:2",))


def test_autocut_needs_three_rows_and_leaves_the_profile_out() -> None:
    assert autocut(cos_rows(0.9, 0.1), AUTOCUT) == (None, ())
    # the profile is not measured: two scored rows only
    assert autocut([*cos_rows(0.9, 0.1), PROFILE], AUTOCUT) == (None, ())
    # with three scored rows the profile is never dropped
    cut_at, dropped = autocut([*cos_rows(0.9, 0.88, 0.2), PROFILE], AUTOCUT)
    assert (cut_at, dropped) == (2, ("mem:2",))


def test_autocut_is_inert_under_rrf_and_rsf_and_with_unscored_rows() -> None:
    steep = [0.9, 0.85, 0.1]
    rrf_rows = [mem(f"mem:{i}", cosine=v, rrf=1 / (61 + i)) for i, v in enumerate(steep)]
    rsf_rows = [mem(f"mem:{i}", cosine=v, rsf=v) for i, v in enumerate(steep)]
    cascade_rows = [*cos_rows(0.9, 0.85, 0.1), mem("mem:kw", lexical_only=True)]
    for rows in (rrf_rows, rsf_rows, cascade_rows):
        assert autocut(rows, AUTOCUT) == (None, ())
    off = AUTOCUT.model_copy(update={"enabled": False})
    assert autocut(cos_rows(0.9, 0.85, 0.1), off) == (None, ())


# ------------------------------------------------------------------------------------- episode penalty


def test_episode_penalty_factor_and_resort() -> None:
    boundary = 1_000_000.0
    rows = [
        mem("mem:b", rrf=1 / 61, cosine=0.8),  # 100 h before: exp(-1) = 0.368 -> floor 0.5
        mem("mem:a", rrf=1 / 62),  # 10 h before: exp(-0.1) = 0.904837
        Candidate(ref="ep:c", kind="episode", rrf=1 / 63),  # episodes are exempt
        mem("mem:d", rrf=1 / 64),  # after the boundary: untouched
        PROFILE,
    ]
    created = {
        "mem:b": boundary - 100 * 3600,
        "mem:a": boundary - 10 * 3600,
        "ep:c": boundary - 500 * 3600,
        "mem:d": boundary + 60,
    }
    out, factors = episode_penalty(rows, created, boundary, SCORING)
    assert factors == {"mem:b": 0.5, "mem:a": pytest.approx(math.exp(-0.1))}
    got = {r.ref: r for r in out}
    assert got["mem:b"].rrf == 0.5 / 61  # 0.0081967
    assert got["mem:b"].cosine == 0.4
    assert got["mem:a"].rrf == pytest.approx(math.exp(-0.1) / 62)  # 0.0145941
    assert got["ep:c"].rrf == 1 / 63  # 0.0158730
    assert got["mem:d"].rrf == 1 / 64  # 0.0156250
    # re-sorted by the penalised score; the profile (no score) stays last
    assert [r.ref for r in out] == ["ep:c", "mem:d", "mem:a", "mem:b", "profile:a"]
    # the input is left as it was
    assert rows[0].rrf == 1 / 61


def test_episode_penalty_without_a_boundary_changes_nothing() -> None:
    rows = [mem("mem:1", rrf=1 / 62), mem("mem:2", rrf=1 / 61)]
    assert episode_penalty(rows, {"mem:1": 0.0}, None, SCORING) == (tuple(rows), {})


def test_episode_penalty_does_not_resort_a_cascade_list() -> None:
    boundary = 10_000_000.0
    rows = [mem("mem:1", cosine=0.9), mem("mem:2", cosine=0.5)]
    created = {"mem:1": boundary - 200 * 3600, "mem:2": boundary}
    out, factors = episode_penalty(rows, created, boundary, SCORING)
    # mem:1 falls to 0.45, below mem:2, but a list without fused scores keeps its stage order
    assert [r.ref for r in out] == ["mem:1", "mem:2"]
    assert out[0].cosine == 0.45
    assert factors == {"mem:1": 0.5}


# ------------------------------------------------------------------------------------------------ prior


def test_prior_is_off_at_rate_zero() -> None:
    rows = [mem("mem:old", rrf=1 / 61), mem("mem:new", rrf=1 / 62)]
    stamps = {"mem:old": 0.0, "mem:new": 1e9}
    assert SCORING.prior_age_rate == 0.0
    assert prior(rows, stamps, 1e9, SCORING) == (tuple(rows), {})


def test_prior_reorders_only_and_sinks_the_profile() -> None:
    policy = SCORING.model_copy(update={"prior_age_rate": 0.1, "prior_age_floor": 0.3})
    anchor = 5_000_000.0
    rows = [
        PROFILE,
        mem("mem:old", rrf=1 / 61),  # 100 h: 1/(1+10) = 0.0909 -> floor 0.3 -> 0.3/61 = 0.00492
        mem("mem:new", rrf=1 / 62),  # 0 h: 1 -> 1/62 = 0.01613
        mem("mem:mid", rrf=1 / 63),  # 10 h: 1/(1+1) = 0.5 -> 0.5/63 = 0.00794
    ]
    stamps = {"mem:old": anchor - 100 * 3600, "mem:new": anchor, "mem:mid": anchor - 10 * 3600}
    out, weights = prior(rows, stamps, anchor, policy)
    assert [r.ref for r in out] == ["mem:new", "mem:mid", "mem:old", "profile:a"]
    assert weights == {"mem:old": 0.3, "mem:new": 1.0, "mem:mid": 0.5}
    # the scores the gate reads are unchanged, and no row came or went
    assert {r.ref: r.rrf for r in out} == {r.ref: r.rrf for r in rows}
    assert sorted(r.ref for r in out) == sorted(r.ref for r in rows)


def test_prior_gives_an_unknown_age_the_middle_of_the_span() -> None:
    policy = SCORING.model_copy(update={"prior_age_rate": 0.1, "prior_age_floor": 0.0})
    anchor = 5_000_000.0
    rows = [mem("mem:x", rrf=1 / 61), mem("mem:a", rrf=1 / 62), mem("mem:b", rrf=1 / 63)]
    # known ages 0 h and 40 h: the middle is 20 h -> 1/(1+2) = 1/3
    stamps = {"mem:a": anchor, "mem:b": anchor - 40 * 3600}
    _, weights = prior(rows, stamps, anchor, policy)
    assert weights["mem:x"] == pytest.approx(1 / 3)
    assert weights["mem:b"] == pytest.approx(1 / 5)


def test_prior_needs_every_row_fused_the_same_way() -> None:
    policy = SCORING.model_copy(update={"prior_age_rate": 0.1})
    anchor = 5_000_000.0
    mixed = [mem("mem:old", cosine=0.9), mem("mem:new", rrf=1 / 61)]
    stamps = {"mem:old": 0.0, "mem:new": anchor}
    assert prior(mixed, stamps, anchor, policy) == (tuple(mixed), {})
    rsf_rows = [mem("mem:old", rsf=0.9), mem("mem:new", rsf=0.5)]
    out, _ = prior(rsf_rows, stamps, anchor, policy)
    # old: 0.9 * 0.3 = 0.27 < new: 0.5 * 1 = 0.5
    assert [r.ref for r in out] == ["mem:new", "mem:old"]


# ------------------------------------------------------------------------------ separation threshold


def test_separation_threshold_by_hand() -> None:
    null = np.array([0.1, 0.2, 0.3])
    positives = np.array([0.6, 0.7])
    # grid over [0.1, 0.7] in 5 steps: 0.1, 0.25, 0.4, 0.55, 0.7
    # TPR 1, 1, 1, 1, 0.5; FPR 1, 1/3 (only 0.3 >= 0.25), 0, 0, 0
    # beta 1: TPR + (1 - FPR) = 1, 1.667, 2, 2, 1.5 -> 0.4 and 0.55 tie at 2; the first best wins
    assert separation_threshold(null, positives, beta=1.0, candidates=5, floor=0.05) == 0.4
    # the floor applies after the choice
    assert separation_threshold(null, positives, beta=1.0, candidates=5, floor=0.5) == 0.5


def test_separation_threshold_beta_trades_recall_for_precision() -> None:
    null = np.array([0.1, 0.5, 0.5, 0.9])
    positives = np.array([0.5, 0.9])
    # grid 0.1, 0.5, 0.9: TPR 1, 1, 0.5; FPR 1, 0.75, 0.25
    # beta 1: 1, 1.25, 1.25 -> 0.5 (first best); beta 2: 1, 1.5, 2.0 -> 0.9
    assert separation_threshold(null, positives, beta=1.0, candidates=3, floor=0.05) == 0.5
    assert separation_threshold(null, positives, beta=2.0, candidates=3, floor=0.05) == 0.9


# ------------------------------------------------------------------------------------------ literal match

V2_GATE = load_policies()["single-pass-v2"].gate


def test_a_literal_match_passes_whatever_its_score_and_says_why() -> None:
    literal = frozenset({"mem:1"})
    v2 = gate_config(1, V2_GATE, deep=False, calibrated=0.447, rrf_k=K, blank_query=False, literal=literal)
    # ci-bot's memory: cosine .348 under the calibrated .447; the score and threshold stay as they were.
    assert decide(mem("mem:1", cosine=0.348), v2, V2_GATE) == Decision(
        "mem:1", "cosine", 0.348, 0.447, True, "literal_match"
    )
    # A lexical-only row under its rrf threshold, the same.
    assert decide(mem("mem:1", rrf=1 / 61, lexical_only=True), v2, V2_GATE).reason == "literal_match"
    # A row that passes on its score keeps no reason; a row that is no literal match is still refused.
    assert decide(mem("mem:1", cosine=0.9), v2, V2_GATE).reason is None
    assert decide(mem("mem:2", cosine=0.348), v2, V2_GATE).reason == "below_gate"
    # Under a policy without the rule the same set is ignored.
    v1 = gate_config(1, GATE, deep=False, calibrated=0.447, rrf_k=K, blank_query=False, literal=literal)
    assert v1.literal == frozenset()
    assert decide(mem("mem:1", cosine=0.348), v1, GATE).reason == "below_gate"


def test_the_literal_rows_are_each_keyword_arms_first_scored_row() -> None:
    arms = {
        "memory_keyword": ArmResult.ranked("memory_keyword", [("mem:1", 2.0), ("mem:2", 2.0)]),
        "episode_fts": ArmResult.ranked("episode_fts", [("ep:1", 1.0)]),
        "vector_near": ArmResult.ranked("vector_near", [("mem:3", 0.9)]),
    }
    assert literal_matches(arms, lambda ref: True) == {"mem:1", "ep:1"}
    assert literal_matches(arms, lambda ref: ref != "mem:1") == {"ep:1"}
    # The whole-query fallback lists without scores: nothing in it is ranked first.
    listing = {"memory_keyword": ArmResult.ranked("memory_keyword", [("mem:1", None)])}
    assert literal_matches(listing, lambda ref: True) == frozenset()
