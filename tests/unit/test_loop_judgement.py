"""The loop's judgement table (``benchmarks/quality/judgement.py``, seed §1.3) over hand-written traces.

What the loop suspected and did is read from a trace's ``stages``, ``suspected`` and ``budget``; the
confirmed code is ``recall_trace_confirm.confirm`` of the same trace; the tabulation and the agreement
count them. No engine runs here: the traces are built by hand with the keys a recall trace v1 carries.
"""

from __future__ import annotations

from typing import Any

from benchmarks.quality.judgement import (
    LEFT_OUT,
    NONE,
    NOT_RUN,
    Judged,
    agreement,
    judge,
    loop_reading,
    render_tables,
    tabulate,
)
from benchmarks.recall_trace_confirm import CANDIDATE_MISS, OK, RANKING_MISS
from hypothesis import given
from hypothesis import strategies as st


def _stage(stage: int, confidence: str, found: int, next_: str | None) -> dict[str, Any]:
    return {
        "stage": stage,
        "searched": "the cue arm",
        "confidence": confidence,
        "found": found,
        "next": next_,
    }


def trace(
    *,
    stages: list[dict[str, Any]] | None = None,
    suspected: list[str] | None = None,
    stop: str | None = None,
    arms: dict[str, list[str]] | None = None,
    returned: list[str] | None = None,
    limit: int = 10,
) -> dict[str, Any]:
    """A trace v1 with the loop's keys and the ones ``confirm`` reads; ``suspected`` are the actions."""
    before = returned or []
    body: dict[str, Any] = {
        "trace_version": 1,
        "arms": {
            name: [{"ref": r, "rank": i, "raw": 0.5} for i, r in enumerate(refs)]
            for name, refs in (arms or {}).items()
        },
        "gate": {"decisions": []},
        "autocut": {"dropped": []},
        "order": {"before_cut": [{"ref": r} for r in before], "limit": limit, "cut_by_count": before[limit:]},
        "reservation": [],
        "stages": [{"stage": 0, "searched": "all arms", "next": None}] if stages is None else stages,
        "suspected": [
            {"stage": i, "code": CANDIDATE_MISS, "reason": "the cue period holds no candidate", "action": a}
            for i, a in enumerate(suspected or [])
        ],
    }
    if stages is not None:
        body["budget"] = {"cue_time_limit_ms": 1000, "stop": stop}
    return body


FOUND = [_stage(0, "sure", 12, None)]
WIDENED_FOUND = [_stage(0, "sure", 0, "widen to likely"), _stage(1, "likely", 4, None)]
WIDENED_EMPTY = [_stage(0, "likely", 0, "widen to vague"), _stage(1, "vague", 0, "stop: no wider step")]


def test_no_cue_and_an_ignored_cue_run_no_loop() -> None:
    assert loop_reading(trace()) == (NOT_RUN, "no cue")
    ignored = trace() | {"cue_ignored": {"reason": "recent_only", "period": None}}
    assert loop_reading(ignored) == (NOT_RUN, "cue ignored: recent_only")


def test_a_period_with_candidates_is_no_suspicion() -> None:
    assert loop_reading(trace(stages=FOUND)) == (NONE, "the period held candidates")
    # A loop cut short by its time limit suspected nothing, but did stop; the trace says which.
    assert loop_reading(trace(stages=FOUND, stop="time_limit")) == (NONE, "stopped: time limit")


def test_what_the_loop_did_after_an_empty_period() -> None:
    widened = trace(stages=WIDENED_FOUND, suspected=["widen to likely"])
    assert loop_reading(widened) == (CANDIDATE_MISS, "widened, then found candidates in the likely period")
    empty = trace(
        stages=WIDENED_EMPTY, suspected=["widen to vague", "stop: no wider step"], stop="no_wider_step"
    )
    assert loop_reading(empty) == (CANDIDATE_MISS, "widened, then stopped: no wider step")
    vague = trace(
        stages=[_stage(0, "vague", 0, "stop: no wider step")],
        suspected=["stop: no wider step"],
        stop="no_wider_step",
    )
    assert loop_reading(vague) == (CANDIDATE_MISS, "stopped: no wider step")
    late = trace(stages=WIDENED_EMPTY[:1], suspected=["widen to vague"], stop="time_limit")
    assert loop_reading(late) == (CANDIDATE_MISS, "widened, then stopped: time limit")


def test_judge_pairs_the_reading_with_the_confirmed_code() -> None:
    hit = trace(stages=FOUND, arms={"vector_near": ["mem:g"]}, returned=["mem:g"])
    assert judge("tmd", "q1", hit, ["mem:g"]) == Judged("tmd", "q1", NONE, "the period held candidates", OK)
    miss = trace(
        stages=WIDENED_FOUND,
        suspected=["widen to likely"],
        arms={"vector_near": ["mem:x"]},
        returned=["mem:x"],
    )
    assert judge("tmd", "q2", miss, ["mem:g"]).confirmed == CANDIDATE_MISS
    cut = trace(stages=FOUND, arms={"vector_near": ["mem:x", "mem:g"]}, returned=["mem:x", "mem:g"], limit=1)
    assert judge("locomo", "q3", cut, ["mem:g"]).confirmed == RANKING_MISS
    left = judge("locomo", "q4", trace(), ["mem:g"], left_out=True)
    assert (left.suspected, left.action) == (NOT_RUN, LEFT_OUT)
    assert judge("tmd", "q5", None, ["mem:g"]).suspected == NOT_RUN


def _j(suspected: str, confirmed: str, action: str = "a") -> Judged:
    return Judged("tmd", "q", suspected, action, confirmed)


def test_tabulation_and_agreement_by_hand() -> None:
    judged = [
        _j(CANDIDATE_MISS, CANDIDATE_MISS),  # suspected and confirmed
        _j(CANDIDATE_MISS, OK),  # false alarm
        _j(NONE, CANDIDATE_MISS),  # unseen
        _j(NONE, OK),  # neither, strictly right
        _j(NONE, RANKING_MISS),  # neither, but something else failed
        _j(NOT_RUN, CANDIDATE_MISS),  # no loop: kept out of the agreement
    ]
    table = tabulate(judged)
    assert list(table) == [(NONE, "a"), (CANDIDATE_MISS, "a"), (NOT_RUN, "a")]
    assert table[(NONE, "a")] == {CANDIDATE_MISS: 1, OK: 1, RANKING_MISS: 1}
    a = agreement(judged)
    assert (a.n, a.both, a.false_alarm, a.unseen, a.neither, a.strict) == (5, 1, 1, 1, 2, 2)
    assert a.matched == 3
    text = "\n".join(render_tables("Total", judged))
    assert "matched what was confirmed: 3 (60%)** of the 5 questions" in text
    assert "| **all** | | 2 (33%) | 3 (50%) | 1 (17%) | 6 |" in text
    assert "never suspected anything would match on 3 (60%)" in text
    assert (
        "of its 2 suspicions, confirmed: 1 (50%); of the 2 confirmed `CANDIDATE_MISS`, suspected: 1 (50%)"
        in text
    )


judgements = st.builds(
    _j,
    st.sampled_from([NONE, CANDIDATE_MISS, NOT_RUN]),
    st.sampled_from([OK, CANDIDATE_MISS, RANKING_MISS, "FILTER_DROP", "UNATTRIBUTED"]),
    st.sampled_from(["a", "b"]),
)


@given(st.lists(judgements, max_size=40))
def test_every_question_is_counted_once(judged: list[Judged]) -> None:
    table = tabulate(judged)
    assert sum(sum(row.values()) for row in table.values()) == len(judged)
    a = agreement(judged)
    assert a.n == sum(1 for j in judged if j.suspected != NOT_RUN)
    assert a.both + a.false_alarm + a.unseen + a.neither == a.n
    assert a.strict <= a.matched <= a.n
