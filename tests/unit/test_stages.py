"""The typed stage chain: wiring checked when built, each policy's chain built from its names, a
hand-worked run of the single-pass chain over a hand-built ``Retrieved``, the history links,
immutability, seats, the count cut and the cue move on either side of it."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from cpersona.errors import GraphError, InvalidSetting
from cpersona.model.candidates import ArmName, ArmResult, ArmRow
from cpersona.recall.policy import load_policies
from cpersona.recall.stages.chain import (
    AUTOCUT,
    COUNT,
    FUSE,
    GATE,
    SCORE,
    SEATS,
    STAGES,
    Chain,
    Counted,
    CueFound,
    Gated,
    Ranked,
    RecallPlan,
    Retrieved,
    Seated,
    Stage,
    build_chain,
)
from cpersona.recall.stages.gate import gate_config

POLICIES = load_policies()
POLICY = POLICIES["single-pass-v0"]


STAGE_NAMES = ("fuse", "score", "gate", "autocut", "count", "seats")


def default_chain() -> Chain:
    """The single-pass chain, the one these hand-worked runs follow."""
    return build_chain(POLICY)


def plan(*, limit: int = 3, pool: int = 500, blank: bool = False, policy: Any = POLICY) -> RecallPlan:
    return RecallPlan(
        policy=policy,
        mode="rrf",
        limit=limit,
        depth=limit,
        gate=gate_config(
            pool, policy.gate, deep=False, calibrated=None, rrf_k=policy.fusion.rrf_k, blank_query=blank
        ),
        blank_query=blank,
        vector_threshold=0.3,
    )


def arm(name: ArmName, *pairs: tuple[str, float | None]) -> ArmResult:
    return ArmResult.ranked(name, list(pairs))


def block_arm(*refs: str) -> ArmResult:
    rows = tuple(ArmRow(ref, rank, 0.9 - rank / 10, block_index=rank) for rank, ref in enumerate(refs))
    return ArmResult("block", rows)


def retrieved(block: ArmResult | None = None) -> Retrieved:
    arms = {
        "vector_near": arm("vector_near", ("mem:1", 0.62), ("mem:2", 0.41), ("ep:3", 0.18)),
        "episode_fts": arm("episode_fts", ("ep:3", 3.0)),
        "memory_keyword": arm("memory_keyword", ("mem:2", 7.0), ("mem:4", 5.0), ("mem:5", 2.0)),
        "block": block if block is not None else block_arm("mem:1", "mem:5", "ep:3", "mem:9"),
    }
    return Retrieved(
        arms=arms,
        profile_ref="profile:a",
        single_arm_refs=frozenset(),
        created_at={"mem:1": 1.0, "mem:2": 2.0, "ep:3": 3.0, "mem:4": 4.0, "mem:5": 5.0},
        timestamps={"mem:1": 1.0, "mem:2": 2.0, "ep:3": 3.0, "mem:4": 4.0, "mem:5": 5.0},
        episode_boundary=None,
        prior_anchor=10.0,
    )


# ------------------------------------------------------------------------------------------- wiring


def test_chain_refuses_a_wrong_first_input() -> None:
    with pytest.raises(GraphError) as err:
        Chain([SCORE, GATE, AUTOCUT, COUNT, SEATS], takes=Retrieved, gives=Seated)
    assert str(err.value) == "the chain takes Retrieved but score takes Ranked"


def test_chain_refuses_a_mismatched_edge_naming_both_stages() -> None:
    with pytest.raises(GraphError) as err:
        Chain([FUSE, SCORE, COUNT, SEATS], takes=Retrieved, gives=Seated)
    assert str(err.value) == "score gives Ranked but count takes Gated"
    with pytest.raises(GraphError) as err:
        Chain([FUSE, GATE, SCORE, COUNT, SEATS], takes=Retrieved, gives=Seated)
    assert str(err.value) == "gate gives Gated but score takes Ranked"


def test_chain_refuses_a_wrong_output() -> None:
    with pytest.raises(GraphError) as err:
        Chain([FUSE, SCORE, GATE, AUTOCUT, COUNT], takes=Retrieved, gives=Seated)
    assert str(err.value) == "the chain gives Seated but count gives Counted"


def test_chain_refuses_no_stages_and_accepts_the_default() -> None:
    with pytest.raises(GraphError):
        Chain([], takes=Retrieved, gives=Seated)
    chain = default_chain()
    assert [s.name for s in chain.stages] == list(STAGE_NAMES)


def test_each_policy_runs_the_stages_its_file_names_in_order() -> None:
    for name, policy in POLICIES.items():
        chain = build_chain(policy)
        assert tuple(s.name for s in chain.stages) == policy.chain, name
        assert all(s is STAGES[s.name] for s in chain.stages)
    cued = [s.name for s in build_chain(POLICIES["cued-v0"]).stages]
    later = [s.name for s in build_chain(POLICIES["cued-v0.1"]).stages]
    assert cued.index("cue_before_count") == cued.index("count") - 1
    assert later.index("cue_after_count") == later.index("count") + 1
    # The same names give the same checked chain: a recall does not re-check it.
    assert build_chain(POLICIES["cued-v0.2"]) is build_chain(POLICIES["cued-v0.3"])


def test_build_chain_refuses_a_policy_changed_after_loading() -> None:
    # The loader runs this check; a policy assembled in code gets the same refusal.
    broken = POLICY.model_copy(update={"chain": ("fuse", "gate", "score", "count", "seats")})
    with pytest.raises(InvalidSetting) as err:
        build_chain(broken)
    assert err.value.name == "policy file single-pass-v0.toml"
    assert err.value.problem == "chain is mis-wired: gate gives Gated but score takes Ranked"


def test_chain_is_checked_before_anything_runs() -> None:
    calls: list[str] = []

    def spy(data: Ranked, _plan: RecallPlan) -> Ranked:
        calls.append("ran")
        return data

    noisy: Stage[Ranked, Ranked] = Stage("noisy", Ranked, Ranked, spy)
    with pytest.raises(GraphError, match="noisy gives Ranked but count takes Gated"):
        Chain([FUSE, noisy, COUNT, SEATS], takes=Retrieved, gives=Seated)
    assert calls == []


# ------------------------------------------------------------------------------------ the default run


def test_default_chain_by_hand() -> None:
    data = retrieved()
    run = default_chain().run(data, plan(limit=3, pool=500))
    final, timing = run.final, run.timing_ms
    assert isinstance(final, Seated)
    assert set(timing) == set(STAGE_NAMES)

    # Fusion (K = 60):
    #   mem:2 = near r1 + keyword r0 = 1/62 + 1/61 = 0.032522
    #   ep:3  = near r2 + episode r0 = 1/63 + 1/61 = 0.032266
    #   mem:1 = near r0              = 1/61        = 0.016393
    #   mem:4 = keyword r1           = 1/62        = 0.016129
    #   mem:5 = keyword r2           = 1/63        = 0.015873
    #   then the profile, unscored
    ranked = final.source.source.source
    assert isinstance(ranked, Ranked)
    assert [(c.ref, c.rrf) for c in ranked.fused] == [
        ("mem:2", 1 / 62 + 1 / 61),
        ("ep:3", 1 / 63 + 1 / 61),
        ("mem:1", 1 / 61),
        ("mem:4", 1 / 62),
        ("mem:5", 1 / 63),
        ("profile:a", None),
    ]

    # Gate, pool 500 (min 0.2): vector rows on cosine (ep:3's 0.18 fails), lexical rows on rrf >=
    # 0.2*3/61 = 0.00984 (both pass), the profile on pool >= 50 (passes).
    gated = final.source.source
    assert isinstance(gated, Gated)
    decisions = {d.ref: (d.signal, d.score, d.threshold, d.passed) for d in gated.decisions}
    assert decisions == {
        "mem:2": ("cosine", 0.41, 0.2, True),
        "ep:3": ("cosine", 0.18, 0.2, False),
        "mem:1": ("cosine", 0.62, 0.2, True),
        "mem:4": ("rrf", 1 / 62, 0.2 * 3 / 61, True),
        "mem:5": ("rrf", 1 / 63, 0.2 * 3 / 61, True),
        "profile:a": ("profile", None, None, True),
    }
    assert not gated.autocut_fired

    # Count cut at 3
    counted = final.source
    assert counted.before_cut == ("mem:2", "mem:1", "mem:4", "mem:5", "profile:a")
    assert counted.cut_by_count == ("mem:5", "profile:a")
    assert [c.ref for c in final.rows] == ["mem:2", "mem:1", "mem:4"]

    # Block seats: mem:1 is returned; mem:5 (cut by count) and ep:3 (refused by the gate) are seated,
    # mem:9 is past the two seats.
    assert [(s.ref, s.kind, s.row.block_index) for s in final.seats] == [
        ("mem:5", "block", 1),
        ("ep:3", "block", 2),
    ]


def test_the_last_set_links_back_to_every_earlier_one() -> None:
    data = retrieved()
    seen: dict[str, Any] = {}

    def recording(stage: Stage[Any, Any]) -> Stage[Any, Any]:
        def run(inp: Any, p: RecallPlan) -> Any:
            seen[stage.name] = out = stage.run(inp, p)
            return out

        return dataclasses.replace(stage, run=run)

    chain = Chain([recording(s) for s in default_chain().stages], takes=Retrieved, gives=Seated)
    run = chain.run(data, plan())
    final = run.final
    # the run holds the input and each stage's output in order, and finds the last of each type
    assert run.sets == (data, *(seen[stage.name] for stage in chain.stages))
    assert run.last(Seated) is final
    assert run.last(Counted) is seen["count"] is final.source
    assert run.last(Gated) is seen["autocut"] is final.source.source
    assert run.last(Ranked) is seen["score"]
    assert run.last(Retrieved) is data
    assert final is seen["seats"]
    assert final.source is seen["count"]
    assert isinstance(final.source, Counted)
    # autocut did not fire, so it handed the gate's set on unchanged
    assert final.source.source is seen["autocut"] is seen["gate"]
    assert final.source.source.source is seen["score"]
    # the score stage refines the fused set: same source, fusion's rows kept in ``fused``
    assert seen["score"].source is seen["fuse"].source is data
    assert seen["score"].fused == seen["fuse"].rows
    assert final.source.source.source.source is data


def test_nothing_is_mutated_and_every_set_is_frozen() -> None:
    data = retrieved()
    before = copy.deepcopy(data)
    p = plan()
    final = default_chain().run(data, p).final
    again = default_chain().run(data, p).final
    assert data == before
    assert again == final  # a pure function of its input
    sets = [data, final, final.source, final.source.source, final.source.source.source, final.rows[0]]
    for obj in sets:
        field = dataclasses.fields(obj)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, field, None)
    assert isinstance(final.rows, tuple)
    assert isinstance(final.source.source.decisions, tuple)


def test_same_type_stages_return_new_sets() -> None:
    data = retrieved()
    fused = FUSE.run(data, plan())
    scored = SCORE.run(fused, plan())
    assert scored is not fused
    assert fused.rows == scored.rows  # no penalty or prior under this policy


# ------------------------------------------------------------------------------------------- seats


def test_seats_skip_returned_rows_and_stop_at_the_policy_count() -> None:
    final = (
        default_chain().run(retrieved(block_arm("mem:2", "mem:1", "mem:9", "mem:8", "mem:7")), plan()).final
    )
    # mem:2 and mem:1 are returned; two seats: mem:9, mem:8
    assert [s.ref for s in final.seats] == ["mem:9", "mem:8"]
    one = POLICY.model_copy(update={"seats": POLICY.seats.model_copy(update={"block": 1})})
    final = default_chain().run(retrieved(block_arm("mem:9", "mem:8")), plan(policy=one)).final
    assert [s.ref for s in final.seats] == ["mem:9"]
    none = POLICY.model_copy(update={"seats": POLICY.seats.model_copy(update={"block": 0})})
    final = default_chain().run(retrieved(block_arm("mem:9")), plan(policy=none)).final
    assert final.seats == ()


def test_seats_do_not_repeat_a_record() -> None:
    final = default_chain().run(retrieved(block_arm("mem:9", "mem:9", "mem:8")), plan()).final
    assert [s.ref for s in final.seats] == ["mem:9", "mem:8"]


def test_blank_query_gets_no_seats() -> None:
    final = default_chain().run(retrieved(block_arm("mem:9", "mem:8")), plan(blank=True)).final
    assert final.seats == ()


# --------------------------------------------------------------------------------------- count cut


def test_count_cut_records_what_it_cut() -> None:
    final = default_chain().run(retrieved(), plan(limit=1)).final
    assert final.source.before_cut == ("mem:2", "mem:1", "mem:4", "mem:5", "profile:a")
    assert final.source.cut_by_count == ("mem:1", "mem:4", "mem:5", "profile:a")
    assert [r.ref for r in final.rows] == ["mem:2"]
    wide = default_chain().run(retrieved(), plan(limit=10)).final
    assert wide.source.cut_by_count == ()
    assert [r.ref for r in wide.rows] == ["mem:2", "mem:1", "mem:4", "mem:5", "profile:a"]
    zero = default_chain().run(retrieved(), plan(limit=0)).final
    assert zero.rows == ()
    assert zero.source.cut_by_count == zero.source.before_cut


def test_small_pool_gate_and_profile_through_the_chain() -> None:
    # pool 30: min 0.3342; cosine 0.41 and 0.62 pass, lexical rows need 0.3342*3/61 = 0.01644 > 1/62
    # and fail, the profile needs pool 50 and fails
    final = default_chain().run(retrieved(), plan(limit=10, pool=30)).final
    assert [r.ref for r in final.rows] == ["mem:2", "mem:1"]
    reasons = {d.ref: d.reason for d in final.source.source.decisions if not d.passed}
    assert reasons == {
        "ep:3": "below_gate",
        "mem:4": "below_gate",
        "mem:5": "below_gate",
        "profile:a": "profile_small_pool",
    }


def test_autocut_stage_drops_rows_in_a_cascade_list() -> None:
    data = dataclasses.replace(
        retrieved(),
        arms={"vector_near": arm("vector_near", ("mem:1", 0.9), ("mem:2", 0.85), ("mem:3", 0.4))},
        profile_ref=None,
    )
    p = dataclasses.replace(plan(limit=10), mode="cascade")
    final = default_chain().run(data, p).final
    gated = final.source.source
    # gaps 0.05, 0.45; 0.45/0.9 = 0.5 >= 0.15: cut after mem:2
    assert gated.autocut_fired
    assert gated.autocut_dropped == ("mem:3",)
    assert [r.ref for r in final.rows] == ["mem:1", "mem:2"]


# ---------------------------------------------------------------------------------------- the cue move


def cue_found(*refs: str) -> CueFound:
    rows = tuple(ArmRow(ref, rank, 0.9) for rank, ref in enumerate(refs))
    return CueFound(rows=rows, confidence="sure", period=None, lift=3, seats=0, seat_cut_rows=False)


def test_the_cue_move_runs_where_the_chain_lists_it() -> None:
    # Before the cut (mem:2 mem:1 mem:4 | mem:5 profile:a) mem:5 is fourth; the cue arm ranked it first.
    data = dataclasses.replace(retrieved(), cue=cue_found("mem:5"))
    run = build_chain(POLICIES["cued-v0"]).run(data, plan(limit=3))
    before, timing = run.final, run.timing_ms
    assert "cue_before_count" in timing
    assert "cue_after_count" not in timing
    # Moved before the count, it climbs into the answer and pushes the last row out (seed §2.9).
    assert [r.ref for r in before.rows] == ["mem:5", "mem:2", "mem:1"]
    lifted = [(m.ref, m.from_, m.to) for m in before.source.source.moves if m.to < m.from_]
    assert lifted == [("mem:5", 3, 0)]
    run = build_chain(POLICIES["cued-v0.1"]).run(data, plan(limit=3))
    after, timing = run.final, run.timing_ms
    assert "cue_after_count" in timing
    assert "cue_before_count" not in timing
    # Moved after it, only the kept rows can be reordered, and the cut row stays cut.
    assert [r.ref for r in after.rows] == ["mem:2", "mem:1", "mem:4"]
    assert after.source.moves == ()
    assert after.source.cut_by_count == ("mem:5", "profile:a")


def test_a_listed_cue_move_without_a_cue_changes_nothing() -> None:
    data = retrieved()
    plain = default_chain().run(data, plan()).final
    for name in ("cued-v0", "cued-v0.1"):
        cued = build_chain(POLICIES[name]).run(data, plan()).final
        assert cued == plain
