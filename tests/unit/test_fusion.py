"""Fusion by hand: rrf, rsf (with its min-max edge cases), informed and the cascade, each against values
worked out on paper from the reference formulas (K = 60, ranks 0-based)."""

from __future__ import annotations

import pytest

from cpersona.model.candidates import ArmName, ArmResult, ArmRow
from cpersona.recall.stages.fusion import Candidate, cascade, informativeness, informed, minmax, rrf, rsf

K = 60


def arm(name: ArmName, *pairs: tuple[str, float | None]) -> ArmResult:
    return ArmResult.ranked(name, list(pairs))


def refs(rows: tuple[Candidate, ...]) -> list[str]:
    return [r.ref for r in rows]


def by_ref(rows: tuple[Candidate, ...]) -> dict[str, Candidate]:
    return {r.ref: r for r in rows}


# ------------------------------------------------------------------------------------------------ rrf


def test_rrf_first_place_scores_one_over_61() -> None:
    rows = rrf(
        {"vector_near": arm("vector_near", ("mem:1", 0.8), ("mem:2", 0.7))},
        k=K,
        far_weight=1.0,
        profile_ref=None,
    )
    # rank 0 -> 1/(60+0+1) = 1/61; rank 1 -> 1/62
    assert refs(rows) == ["mem:1", "mem:2"]
    assert rows[0].rrf == 1 / 61
    assert rows[1].rrf == 1 / 62
    assert rows[0].rsf is None
    assert rows[0].fused == 1 / 61


def test_rrf_sums_the_votes_of_a_row_on_two_lists() -> None:
    arms = {
        "vector_near": arm("vector_near", ("mem:1", 0.9), ("mem:2", 0.5)),
        "memory_keyword": arm("memory_keyword", ("mem:3", 9.0), ("mem:4", 6.0), ("mem:2", 2.5)),
    }
    rows = by_ref(rrf(arms, k=K, far_weight=1.0, profile_ref=None))
    # mem:2 is rank 1 on near and rank 2 on keyword: 1/62 + 1/63
    assert rows["mem:2"].rrf == pytest.approx(1 / 62 + 1 / 63, abs=1e-15)
    assert rows["mem:2"].votes == (("vector_near", 1 / 62), ("memory_keyword", 1 / 63))
    assert rows["mem:2"].cosine == 0.5
    assert rows["mem:2"].bm25 == 2.5
    assert not rows["mem:2"].lexical_only
    # 1/62 + 1/63 = 0.03200 beats the single first places (1/61 = 0.01639)
    assert refs(rrf(arms, k=K, far_weight=1.0, profile_ref=None)) == ["mem:2", "mem:1", "mem:3", "mem:4"]


def test_rrf_far_list_votes_with_its_weight() -> None:
    arms = {
        "vector_near": arm("vector_near", ("mem:1", 0.9)),
        "vector_far": arm("vector_far", ("mem:9", 0.95), ("mem:1", 0.9)),
    }
    rows = by_ref(rrf(arms, k=K, far_weight=0.5, profile_ref=None))
    # far rank 0 at weight 0.5 -> 0.5/61; mem:1: near 1/61 + far 0.5/62
    assert rows["mem:9"].rrf == 0.5 / 61
    assert rows["mem:1"].rrf == pytest.approx(1 / 61 + 0.5 / 62, abs=1e-15)
    assert rows["mem:9"].cosine == 0.95
    assert not rows["mem:9"].lexical_only
    # weight 0 switches the far list off in effect: its rows score 0
    off = by_ref(rrf(arms, k=K, far_weight=0.0, profile_ref=None))
    assert off["mem:9"].rrf == 0.0


def test_rrf_ties_keep_first_seen_order_near_far_episode_keyword() -> None:
    # Every row is first on its own list (1/61 each). The mapping is built in the reverse order on
    # purpose: the order of the lists, not of the mapping, decides the ties.
    arms = {
        "memory_keyword": arm("memory_keyword", ("mem:kw", 3.0)),
        "episode_fts": arm("episode_fts", ("ep:fts", 4.0)),
        "vector_far": arm("vector_far", ("mem:far", 0.4)),
        "vector_near": arm("vector_near", ("mem:near", 0.6)),
    }
    rows = rrf(arms, k=K, far_weight=1.0, profile_ref=None)
    assert refs(rows) == ["mem:near", "mem:far", "ep:fts", "mem:kw"]
    assert {r.rrf for r in rows} == {1 / 61}


def test_rrf_tie_inside_one_list_keeps_rank_order_of_first_appearance() -> None:
    # mem:a: near rank 1 + keyword rank 0 = 1/62 + 1/61; mem:b: near rank 0 + keyword rank 1 =
    # 1/61 + 1/62. The same sum; mem:b was seen first (on the near list), so it stays first.
    arms = {
        "vector_near": arm("vector_near", ("mem:b", 0.9), ("mem:a", 0.8)),
        "memory_keyword": arm("memory_keyword", ("mem:a", 5.0), ("mem:b", 4.0)),
    }
    rows = rrf(arms, k=K, far_weight=1.0, profile_ref=None)
    assert rows[0].rrf == rows[1].rrf
    assert refs(rows) == ["mem:b", "mem:a"]


def test_rrf_marks_lexical_only_and_single_arm_rows() -> None:
    arms = {
        "vector_near": arm("vector_near", ("mem:v", 0.7)),
        "episode_fts": arm("episode_fts", ("ep:e", 5.0)),
        "memory_keyword": arm("memory_keyword", ("mem:k", 3.0), ("mem:v", 2.0)),
    }
    # mem:v is named as single-arm too, but a vector row is never lexical-only, so never single-arm.
    rows = by_ref(
        rrf(arms, k=K, far_weight=1.0, profile_ref=None, single_arm_refs=frozenset({"mem:k", "mem:v"}))
    )
    assert (rows["mem:v"].lexical_only, rows["mem:v"].single_arm) == (False, False)
    assert (rows["mem:k"].lexical_only, rows["mem:k"].single_arm) == (True, True)
    assert (rows["ep:e"].lexical_only, rows["ep:e"].single_arm) == (True, False)
    assert rows["ep:e"].kind == "episode"
    assert rows["ep:e"].cosine is None
    assert rows["ep:e"].bm25 == 5.0


def test_rrf_appends_the_profile_last_without_a_score() -> None:
    arms = {"memory_keyword": arm("memory_keyword", ("mem:1", 1.0))}
    rows = rrf(arms, k=K, far_weight=1.0, profile_ref="profile:a")
    assert refs(rows) == ["mem:1", "profile:a"]
    profile = rows[-1]
    assert profile.kind == "profile"
    assert (profile.rrf, profile.rsf, profile.cosine, profile.fused) == (None, None, None, None)
    # no arms at all: the profile alone
    assert refs(rrf({}, k=K, far_weight=1.0, profile_ref="profile:a")) == ["profile:a"]


def test_rrf_ignores_the_block_arm_and_empty_lists() -> None:
    arms = {
        "block": arm("block", ("mem:b", 0.99)),
        "episode_fts": ArmResult("episode_fts", status="timeout"),
        "memory_keyword": arm("memory_keyword", ("mem:1", 1.0)),
    }
    rows = rrf(arms, k=K, far_weight=1.0, profile_ref=None)
    assert refs(rows) == ["mem:1"]


# ------------------------------------------------------------------------------------------------ rsf


def test_minmax_edge_cases() -> None:
    assert minmax([]) == []
    assert minmax([None, None]) == [1.0, 1.0]  # all None (whole-query fallback): every row 1.0
    assert minmax([0.4, 0.4, 0.4]) == [1.0, 1.0, 1.0]  # all equal: 1.0
    assert minmax([0.4, None, 0.4]) == [1.0, 0.0, 1.0]  # equal values, a None among them: 0.0
    assert minmax([3.0, None, 1.0]) == [1.0, 0.0, 0.0]  # None among numbers: 0.0
    # (x - 2) / (10 - 2)
    assert minmax([10.0, 6.0, 4.0, 2.0]) == [1.0, 0.5, 0.25, 0.0]


def test_rsf_by_hand() -> None:
    arms = {
        # cosines 0.9, 0.6, 0.3 -> (x - 0.3) / 0.6 -> 1, 0.5, 0
        "vector_near": arm("vector_near", ("mem:1", 0.9), ("mem:2", 0.6), ("ep:3", 0.3)),
        # bm25 12, 4 -> 1, 0
        "memory_keyword": arm("memory_keyword", ("mem:2", 12.0), ("mem:4", 4.0)),
    }
    rows = rsf(arms, far_weight=1.0, profile_ref="profile:a")
    got = by_ref(rows)
    # two active lists: divide by 2
    assert got["mem:1"].rsf == pytest.approx(1.0 / 2)
    assert got["mem:2"].rsf == pytest.approx(0.5 / 2 + 1.0 / 2)  # 0.75
    assert got["ep:3"].rsf == 0.0
    assert got["mem:4"].rsf == 0.0
    assert [name for name, _ in got["mem:2"].votes] == ["vector_near", "memory_keyword"]
    assert [vote for _, vote in got["mem:2"].votes] == pytest.approx([0.25, 0.5])
    # 0.75, 0.5, then the two zeros in first-seen order, then the profile with no score
    assert refs(rows) == ["mem:2", "mem:1", "ep:3", "mem:4", "profile:a"]
    assert rows[-1].rsf is None
    assert got["mem:2"].rrf is None
    assert (got["mem:4"].lexical_only, got["mem:2"].lexical_only) == (True, False)
    assert got["mem:2"].fused == pytest.approx(0.75)


def test_rsf_divides_by_the_active_lists_only() -> None:
    arms = {
        "vector_near": arm("vector_near", ("mem:1", 0.8), ("mem:2", 0.4)),
        "episode_fts": ArmResult("episode_fts"),  # empty: not active
        # all-None list (fallback): every row 1.0
        "memory_keyword": arm("memory_keyword", ("mem:3", None), ("mem:1", None)),
    }
    got = by_ref(rsf(arms, far_weight=1.0, profile_ref=None))
    assert got["mem:1"].rsf == pytest.approx((1.0 + 1.0) / 2)
    assert got["mem:2"].rsf == 0.0
    assert got["mem:3"].rsf == pytest.approx(1.0 / 2)
    # a single list: no division beyond 1
    single = by_ref(rsf({"vector_near": arms["vector_near"]}, far_weight=1.0, profile_ref=None))
    assert single["mem:1"].rsf == 1.0


def test_rsf_far_weight_and_a_none_among_scores() -> None:
    arms = {
        "vector_near": arm("vector_near", ("mem:1", 0.7), ("mem:2", 0.5)),
        "vector_far": arm("vector_far", ("mem:8", 0.6), ("mem:9", 0.2)),
        "memory_keyword": arm("memory_keyword", ("mem:5", 8.0), ("mem:6", None), ("mem:7", 2.0)),
    }
    got = by_ref(rsf(arms, far_weight=0.5, profile_ref=None))
    assert got["mem:8"].rsf == pytest.approx(0.5 * 1.0 / 3)
    assert got["mem:9"].rsf == 0.0
    assert got["mem:1"].rsf == pytest.approx(1.0 / 3)
    assert got["mem:5"].rsf == pytest.approx(1.0 / 3)
    assert got["mem:6"].rsf == 0.0  # None among numbers
    assert got["mem:7"].rsf == 0.0


# -------------------------------------------------------------------------------------------- cascade


def test_cascade_stage_order_threshold_and_fill() -> None:
    arms = {
        # full threshold 0.3: 0.25 is left out even though the arm returned it
        "vector_near": arm("vector_near", ("mem:1", 0.8), ("mem:2", 0.5), ("mem:3", 0.25)),
        "episode_fts": arm("episode_fts", ("ep:1", 4.0)),
        # mem:2 is already in; then fill until 5 non-profile rows: mem:7, mem:8, stop
        "memory_keyword": arm(
            "memory_keyword", ("mem:2", 5.0), ("mem:7", 3.0), ("mem:8", 2.0), ("mem:9", 1.0)
        ),
    }
    rows = cascade(arms, limit=5, vector_threshold=0.3, profile_ref="profile:a")
    assert refs(rows) == ["mem:1", "mem:2", "ep:1", "profile:a", "mem:7", "mem:8"]
    got = by_ref(rows)
    assert [got["mem:1"].cosine, got["mem:2"].cosine] == [0.8, 0.5]
    assert all(r.rrf is None and r.rsf is None for r in rows)  # no fused score
    assert (got["ep:1"].kind, got["ep:1"].lexical_only, got["ep:1"].cosine) == ("episode", True, None)
    assert (got["mem:7"].lexical_only, got["mem:7"].bm25) == (True, 3.0)
    assert got["profile:a"].kind == "profile"


def test_cascade_takes_at_most_limit_from_vector_and_from_episodes() -> None:
    arms = {
        "vector_near": arm("vector_near", ("mem:1", 0.9), ("mem:2", 0.8), ("mem:3", 0.7)),
        "episode_fts": arm("episode_fts", ("ep:1", 3.0), ("ep:2", 2.0), ("ep:3", 1.0)),
        "memory_keyword": arm("memory_keyword", ("mem:4", 3.0)),
    }
    rows = cascade(arms, limit=2, vector_threshold=0.3, profile_ref=None)
    # two vector rows, then the top two episodes (the count cut trims later), no keyword row: full
    assert refs(rows) == ["mem:1", "mem:2", "ep:1", "ep:2"]


def test_cascade_blank_listing_is_keyword_rows_only() -> None:
    arms = {"memory_keyword": arm("memory_keyword", ("mem:5", None), ("mem:4", None), ("mem:3", None))}
    rows = cascade(arms, limit=2, vector_threshold=0.3, profile_ref="profile:a")
    assert refs(rows) == ["profile:a", "mem:5", "mem:4"]
    assert all(r.bm25 is None for r in rows)


def test_arm_rows_are_ranked_in_the_order_given() -> None:
    result = arm("memory_keyword", ("mem:1", 2.0), ("mem:2", None))
    assert result.rows == (ArmRow("mem:1", 0, 2.0), ArmRow("mem:2", 1, None))
    assert result.status == "ok"


# ------------------------------------------------------------------------------------------- informed

# A vector list that cannot read the query: every cosine in one narrow band (MiniLM on Japanese text).
FLAT = [("mem:a", 0.80), ("mem:b", 0.79), ("mem:c", 0.78), ("mem:d", 0.77), ("mem:e", 0.76)]
# A keyword list whose first row stands clear of the rest.
PEAKED = [("mem:e", 20.0), ("mem:d", 6.0), ("mem:c", 5.0), ("mem:b", 4.0), ("mem:a", 4.0)]


def test_a_flat_list_is_barely_informative_and_a_peaked_one_is() -> None:
    flat, top, bulk = informativeness([raw for _, raw in FLAT])
    # (0.80 - median 0.78) / 0.80
    assert (top, bulk) == (0.80, 0.78)
    assert flat == pytest.approx(0.025)
    peaked, top, bulk = informativeness([raw for _, raw in PEAKED])
    # (20 - median 5) / 20
    assert (top, bulk) == (20.0, 5.0)
    assert peaked == pytest.approx(0.75)


def test_informativeness_edge_cases() -> None:
    assert informativeness([]) == (0.0, None, None)
    assert informativeness([None, None]) == (0.0, None, None)
    # one scored row: nothing to be a bulk, so the list found one thing and is trusted fully
    assert informativeness([3.5]) == (1.0, 3.5, 0.0)
    # a top at or below zero says nothing
    assert informativeness([-0.1, -0.2, -0.3])[0] == 0.0
    assert informativeness([0.0, 0.0])[0] == 0.0
    # all equal: no row stands out
    assert informativeness([0.7, 0.7, 0.7])[0] == 0.0


def test_informativeness_is_deterministic_and_order_free() -> None:
    raws = [0.42, 0.9, None, 0.31, 0.5, 0.33]
    first = informativeness(raws)
    assert informativeness(list(reversed(raws))) == first
    assert informativeness(sorted((r for r in raws if r is not None), reverse=True)) == first


def test_informed_follows_the_informative_list_and_reports_the_weights() -> None:
    arms = {"vector_near": arm("vector_near", *FLAT), "memory_keyword": arm("memory_keyword", *PEAKED)}
    rows, weights = informed(arms, k=K, far_weight=0.5, profile_ref=None)
    # the flat list would put mem:a first; the keyword list's clear first row wins
    assert refs(rows)[0] == "mem:e"
    assert [(w.arm, w.top, w.bulk) for w in weights] == [
        ("vector_near", 0.80, 0.78),
        ("memory_keyword", 20.0, 5.0),
    ]
    near, keyword = weights
    # each list's part of the summed informativeness: 0.025 and 0.75 of 0.775
    assert near.weight == pytest.approx(0.025 / 0.775)
    assert keyword.weight == pytest.approx(0.75 / 0.775)
    got = by_ref(rows)
    # a list's top row gets its whole weight, its bottom row nothing (min-max within the list)
    assert dict(got["mem:a"].votes)["vector_near"] == pytest.approx(near.weight)
    assert dict(got["mem:e"].votes)["vector_near"] == 0.0
    assert dict(got["mem:e"].votes)["memory_keyword"] == pytest.approx(keyword.weight)
    # mem:d: near (0.77 - 0.76) / 0.04 = 0.25, keyword (6 - 4) / 16 = 0.125
    assert got["mem:d"].rsf == pytest.approx(near.weight * 0.25 + keyword.weight * 0.125)
    assert all(c.rsf is not None for c in rows)
    # each row also carries its rank-fusion score, for the gate: what rrf gives it, at the same k
    ranked = by_ref(rrf(arms, k=K, far_weight=0.5, profile_ref=None))
    assert {c.ref: (c.rrf, c.single_arm) for c in rows} == {
        ref: (c.rrf, c.single_arm) for ref, c in ranked.items()
    }
    assert got["mem:e"].cosine == 0.76
    assert got["mem:e"].bm25 == 20.0
    # rsf, with equal parts, lets the flat list's noise decide: mem:a and mem:e tie at the top
    assert rsf(arms, far_weight=0.5, profile_ref=None)[0].rsf == pytest.approx(0.5)
    # the same input ranks and weighs the same every time
    assert informed(arms, k=K, far_weight=0.5, profile_ref=None) == (rows, weights)


def test_informed_is_rsf_when_the_lists_are_equally_informative() -> None:
    arms = {
        "vector_near": arm("vector_near", ("mem:1", 0.9), ("mem:2", 0.45), ("mem:3", 0.45)),
        "memory_keyword": arm("memory_keyword", ("mem:3", 10.0), ("mem:1", 5.0), ("mem:2", 5.0)),
    }
    rows, weights = informed(arms, k=K, far_weight=1.0, profile_ref="profile:x")
    assert [w.informative for w in weights] == [0.5, 0.5]
    plain = rsf(arms, far_weight=1.0, profile_ref="profile:x")
    assert refs(rows) == refs(plain)
    assert [c.rsf for c in rows] == pytest.approx([c.rsf for c in plain])
    # every list flat: no list is trusted more than another, so again rsf's equal parts
    flat = {
        "vector_near": arm("vector_near", ("mem:1", 0.7), ("mem:2", 0.7)),
        "memory_keyword": arm("memory_keyword", ("mem:2", 3.0), ("mem:1", 3.0)),
    }
    rows, weights = informed(flat, k=K, far_weight=1.0, profile_ref=None)
    assert [w.weight for w in weights] == [0.5, 0.5]
    assert [c.rsf for c in rows] == pytest.approx(
        [c.rsf for c in rsf(flat, far_weight=1.0, profile_ref=None)]
    )


def test_informed_two_peaked_lists_share_the_ranking() -> None:
    arms = {
        "vector_near": arm("vector_near", ("mem:1", 0.9), ("mem:2", 0.3), ("mem:3", 0.2)),
        "memory_keyword": arm("memory_keyword", ("mem:2", 12.0), ("mem:1", 11.0), ("mem:3", 1.0)),
    }
    rows, weights = informed(arms, k=K, far_weight=1.0, profile_ref="profile:x")
    # near (0.9 - 0.3) / 0.9 is far more informative than keyword (12 - 11) / 12: mem:1 leads
    assert refs(rows) == ["mem:1", "mem:2", "mem:3", "profile:x"]
    assert [w.informative for w in weights] == pytest.approx([(0.9 - 0.3) / 0.9, (12.0 - 11.0) / 12.0])
    assert sum(w.weight for w in weights) == pytest.approx(1.0)


def test_informed_far_list_weight_and_unscored_list() -> None:
    arms = {
        "vector_far": arm("vector_far", ("mem:1", 0.9), ("mem:2", 0.1), ("mem:3", 0.1)),
        # the keyword arm's whole-query fallback carries no scores: fully informative, every row 1.0
        "memory_keyword": arm("memory_keyword", ("mem:3", None), ("mem:2", None)),
    }
    rows, weights = informed(arms, k=K, far_weight=0.5, profile_ref=None)
    far, keyword = weights
    g_far = (0.9 - 0.1) / 0.9
    assert far.weight == pytest.approx(0.5 * g_far / (g_far + 1.0))
    assert (keyword.informative, keyword.top, keyword.bulk) == (1.0, None, None)
    assert keyword.weight == pytest.approx(1.0 / (g_far + 1.0))
    got = by_ref(rows)
    assert dict(got["mem:3"].votes)["memory_keyword"] == pytest.approx(keyword.weight)
    # mem:2 and mem:3 tie; ties keep first-seen order (the far list is read first)
    assert refs(rows) == ["mem:2", "mem:3", "mem:1"]


def test_informed_reads_a_vector_list_through_the_embedders_gate_scale() -> None:
    # e5-like cosines: unrelated texts near .75, the match at .88; the same list in MiniLM-like units
    scale = (0.72, 0.92)
    cosines = [("mem:1", 0.88), ("mem:2", 0.80), ("mem:3", 0.79), ("mem:4", 0.78)]
    keyword = arm("memory_keyword", ("mem:2", 9.0), ("mem:1", 6.0), ("mem:3", 3.0), ("mem:4", 3.0))
    scaled = {"vector_near": arm("vector_near", *cosines), "memory_keyword": keyword}
    _, weights = informed(scaled, k=K, far_weight=1.0, profile_ref=None, scale=scale)
    near, _ = weights
    units = [(ref, (c - 0.72) / 0.2) for ref, c in cosines]
    expected, _, _ = informativeness([c for _, c in units])
    assert near.informative == pytest.approx(expected)  # (0.8 - 0.375) / 0.8, not (0.88 - 0.795) / 0.88
    assert (near.top, near.bulk) == (0.88, 0.795)  # the list's own scores, as the arm gave them
    # the same ranking and weights as the list written in the policies' units, unscaled
    plain = {"vector_near": arm("vector_near", *units), "memory_keyword": keyword}
    rows, plain_weights = informed(plain, k=K, far_weight=1.0, profile_ref=None)
    assert [w.weight for w in weights] == pytest.approx([w.weight for w in plain_weights])
    assert refs(informed(scaled, k=K, far_weight=1.0, profile_ref=None, scale=scale)[0]) == refs(rows)
    # the keyword list is not a cosine: the scale leaves it alone
    assert weights[1].informative == informed(plain, k=K, far_weight=1.0, profile_ref=None)[1][1].informative
