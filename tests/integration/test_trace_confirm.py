"""The trace confirmation tool (``benchmarks/recall_trace_confirm.py``, reference §5) and the seed's
§1.4 readiness checks as tests.

First every branch of ``confirm`` on hand-built traces, and the command over a JSON-lines file. Then
the readiness checks on a real engine (the shared test Redis, Qdrant in-process, the ONNX embedder):
switching off the keyword arm turns a lexical-only gold into ``CANDIDATE_MISS``; forcing the gate's
minimum to 0.99 turns a returned gold into ``FILTER_DROP``; enabling the episode penalty on a store
with an episode after each session raises the count of ``RANKING_MISS`` over a small question set.

The engine checks run under test copies of the shipped policy with the block seats off: a block seat
returns a record whatever fusion, the gate and the count cut did with it, so with seats on a check
could be masked by a seat rather than answer what it asks.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from typing import TYPE_CHECKING, Any

import pytest
from benchmarks.recall_trace_confirm import (
    AGENT_MISUSE,
    CANDIDATE_MISS,
    FILTER_DROP,
    RANKING_MISS,
    RECONSTRUCTION_LOSS,
    UNATTRIBUTED,
    confirm,
    count_codes,
    main,
)

from traced import trace_json

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from pathlib import Path

    import cpersona
    from cpersona.model.candidates import ArmResult
    from cpersona.recall.arm_runner import ArmCall
    from cpersona.recall.policy import Policy

# ---------------------------------------------------------------------------------- hand-built traces


def make_trace(
    *,
    arms: dict[str, list[str]] | None = None,
    decisions: list[tuple[str, bool]] | None = None,
    dropped: list[str] | None = None,
    before_cut: list[str] | None = None,
    limit: int = 2,
    reservation: list[str] | None = None,
) -> dict[str, Any]:
    """A trace v1 with only the fields ``confirm`` reads; ``cut_by_count`` is derived from the order."""
    before = before_cut or []
    return {
        "trace_version": 1,
        "arms": {
            name: [{"ref": ref, "rank": i, "raw": None} for i, ref in enumerate(refs)]
            for name, refs in (arms or {}).items()
        },
        "gate": {
            "decisions": [
                {"ref": ref, "signal": "cosine", "score": 0.5, "threshold": 0.4, "passed": ok}
                | ({} if ok else {"reason": "below_min"})
                for ref, ok in (decisions or [])
            ]
        },
        "autocut": {"fired": bool(dropped), "kept": len(before), "dropped": dropped or []},
        "order": {"before_cut": [{"ref": r} for r in before], "limit": limit, "cut_by_count": before[limit:]},
        "reservation": [{"ref": r, "kind": "block"} for r in reservation or []],
    }


RETURNED = make_trace(
    arms={"vector_near": ["mem:g", "mem:x"]},
    decisions=[("mem:g", True), ("mem:x", True)],
    before_cut=["mem:g", "mem:x"],
)


def test_no_gold_is_unattributed() -> None:
    assert confirm(RETURNED, []) == UNATTRIBUTED


def test_candidate_miss_over_every_arm() -> None:
    assert confirm(RETURNED, ["mem:other"]) == CANDIDATE_MISS
    # an arm that only feeds seats still counts as reaching the gold
    for arm in ("block", "cue", "cue_stage_1"):
        trace = make_trace(arms={"vector_near": ["mem:x"], arm: ["mem:g"]})
        assert confirm(trace, ["mem:g"]) != CANDIDATE_MISS


def test_filter_drop_by_the_gate() -> None:
    trace = make_trace(arms={"memory_keyword": ["mem:g"]}, decisions=[("mem:g", False)])
    assert confirm(trace, ["mem:g"]) == FILTER_DROP
    # one of two golds passed and was not dropped (nor returned): not a gate drop
    trace = make_trace(
        arms={"memory_keyword": ["mem:g", "mem:h"]},
        decisions=[("mem:g", False), ("mem:h", True)],
    )
    assert confirm(trace, ["mem:g", "mem:h"]) == UNATTRIBUTED


def test_filter_drop_by_autocut() -> None:
    trace = make_trace(
        arms={"vector_near": ["mem:x", "mem:g", "mem:h"]},
        decisions=[("mem:x", True), ("mem:g", True), ("mem:h", False)],
        dropped=["mem:g"],
        before_cut=["mem:x"],
    )
    assert confirm(trace, ["mem:g", "mem:h"]) == FILTER_DROP
    # a passing gold that autocut kept but the count cut removed is a ranking miss
    trace = make_trace(
        arms={"vector_near": ["mem:x", "mem:y", "mem:g", "mem:h"]},
        decisions=[("mem:x", True), ("mem:y", True), ("mem:g", True), ("mem:h", True)],
        dropped=["mem:g"],
        before_cut=["mem:x", "mem:y", "mem:h"],
    )
    assert confirm(trace, ["mem:g", "mem:h"]) == RANKING_MISS


def test_ranking_miss_by_the_count_cut() -> None:
    trace = make_trace(
        arms={"vector_near": ["mem:x", "mem:y", "mem:g"]},
        decisions=[("mem:x", True), ("mem:y", True), ("mem:g", True)],
        before_cut=["mem:x", "mem:y", "mem:g"],
        limit=2,
    )
    assert confirm(trace, ["mem:g"]) == RANKING_MISS
    # the profile row is named "profile" in the order
    trace = make_trace(
        arms={"vector_near": ["mem:x", "mem:y"], "profile": ["profile"]},
        decisions=[("mem:x", True), ("mem:y", True), ("profile", True)],
        before_cut=["mem:x", "mem:y", "profile"],
        limit=2,
    )
    assert confirm(trace, ["profile"]) == RANKING_MISS


@pytest.mark.parametrize("arm", ["block", "cue", "cue_stage_2"])
def test_ranking_miss_below_the_seats(arm: str) -> None:
    trace = make_trace(
        arms={"vector_near": ["mem:x"], arm: ["mem:s", "mem:g"]},
        decisions=[("mem:x", True)],
        before_cut=["mem:x"],
        reservation=["mem:s"],
    )
    assert confirm(trace, ["mem:g"]) == RANKING_MISS
    # a gold the seat did hold is returned
    assert confirm(trace, ["mem:s"]) is None


def test_unattributed_when_nothing_explains_it() -> None:
    # reached by a fused arm, never decided, not in the order
    trace = make_trace(arms={"vector_near": ["mem:g"]}, before_cut=[])
    assert confirm(trace, ["mem:g"]) == UNATTRIBUTED


def test_returned_with_reader_evidence() -> None:
    shown = "The deploy key\n  rotates   every Friday."
    quotes = ["rotates every Friday"]
    assert confirm(RETURNED, ["mem:g"], shown_text=shown, quotes=quotes) is None
    assert confirm(RETURNED, ["mem:g"], shown_text=shown, quotes=quotes, correct=True) is None
    assert confirm(RETURNED, ["mem:g"], shown_text=shown, quotes=quotes, correct=False) == AGENT_MISUSE
    # quotes are compared with whitespace collapsed on both sides
    assert confirm(RETURNED, ["mem:g"], shown_text=shown, quotes=["  deploy\tkey rotates "]) is None
    # no quote found in the shown text: lost in reconstruction, whatever the answer
    for correct in (None, True, False):
        code = confirm(RETURNED, ["mem:g"], shown_text=shown, quotes=["every Monday"], correct=correct)
        assert code == RECONSTRUCTION_LOSS
    assert confirm(RETURNED, ["mem:g"], shown_text=shown, quotes=[]) == RECONSTRUCTION_LOSS


def test_returned_without_reader_evidence() -> None:
    assert confirm(RETURNED, ["mem:g"]) is None
    assert confirm(RETURNED, ["mem:g"], correct=True) is None
    assert confirm(RETURNED, ["mem:g"], correct=False) == UNATTRIBUTED
    # only one half of the evidence is no evidence
    assert confirm(RETURNED, ["mem:g"], shown_text="anything", correct=False) == UNATTRIBUTED
    assert confirm(RETURNED, ["mem:g"], quotes=["x"], correct=False) == UNATTRIBUTED
    # returned through the count cut's kept part only: beyond the limit is not returned
    assert confirm(RETURNED, ["mem:x"]) is None


def test_command_counts_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines: list[dict[str, Any]] = [
        {"trace": RETURNED, "gold": ["mem:g"]},
        {"trace": RETURNED, "gold": ["mem:nowhere"]},
        {"trace": RETURNED, "gold": []},
        {"trace": RETURNED, "gold": ["mem:g"], "shown_text": "abc", "quotes": ["zzz"]},
        {"trace": RETURNED, "gold": ["mem:g"], "shown_text": "abc", "quotes": ["b"], "correct": False},
    ]
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n\n", encoding="utf-8")
    assert main([str(path), "--json"]) == 0
    counts = json.loads(capsys.readouterr().out)
    assert counts == count_codes(lines)
    assert counts["OK"] == 1
    assert counts[CANDIDATE_MISS] == 1
    assert counts[UNATTRIBUTED] == 1
    assert counts[RECONSTRUCTION_LOSS] == 1
    assert counts[AGENT_MISUSE] == 1
    assert counts[FILTER_DROP] == counts[RANKING_MISS] == 0
    assert main([str(path)]) == 0
    text = capsys.readouterr().out
    assert "CANDIDATE_MISS" in text
    assert "OK" in text
    assert "total" in text


# --------------------------------------------------------------------------------- real engine checks


@pytest.fixture(scope="module")
async def shared_engine(open_test_engine: Callable[..., Any]) -> AsyncIterator[cpersona.Engine]:
    async with open_test_engine("tc") as memory:
        yield memory


def add_policy(engine: cpersona.Engine, name: str, **changes: Any) -> str:
    """Register a copy of the engine's policy with the block seats and the gate's literal-match rule off
    (a drop here comes from the threshold alone; the rule has its own tests) and ``changes`` (section name
    to a dict of fields) applied; returns its name."""
    base: Policy = engine.policies[engine.settings.recall_policy]
    sections: dict[str, Any] = {
        "seats": base.seats.model_copy(update={"block": 0}),
        "gate": base.gate.model_copy(update={"literal_match": False}),
    }
    for section, fields in changes.items():
        sections[section] = sections.get(section, getattr(base, section)).model_copy(update=fields)
    engine.policies[name] = base.model_copy(update={"name": name, **sections})
    return name


def agent_id() -> str:
    return "c" + uuid.uuid4().hex[:8]


def arm_refs(trace: dict[str, Any], arm: str) -> set[str]:
    return {row["ref"] for row in trace["arms"].get(arm, [])}


def returned(result: Any) -> list[str]:
    return ["profile" if row.kind == "profile" else row.ref for row in result.rows]


class KeywordSwitch:
    """An arm wrapper, given to an engine when it opens, that empties the keyword arm's list while ``off``
    (the test flips it between two recalls of its own engine; nothing else shares that engine)."""

    def __init__(self) -> None:
        self.off = False

    def __call__(self, name: str, call: ArmCall) -> ArmCall:
        if name != "memory_keyword":
            return call

        async def switched() -> ArmResult:
            result = await call()
            return dataclasses.replace(result, rows=()) if self.off else result

        return switched


async def test_disabling_the_keyword_arm_is_a_candidate_miss(open_test_engine: Callable[..., Any]) -> None:
    switch = KeywordSwitch()
    async with open_test_engine("tck", arm_wrapper=switch) as engine:
        await _keyword_only_gold_turns_into_a_candidate_miss(engine, switch)


async def _keyword_only_gold_turns_into_a_candidate_miss(
    engine: cpersona.Engine, switch: KeywordSwitch
) -> None:
    agent = agent_id()
    policy = add_policy(engine, "confirm-no-seats")
    # Near-identical codes the keyword index reads as other words (no separator in ``ZX_4471`` or
    # ``ZX4471``), so the vector arm ranks them above the gold's longer sentence.
    fillers = ["ZX_4471", "ZX4471", "ZX_4471 order code", "ZX4471 order code", "zx_4417", "ZX44710"]
    gold_text = "Gardening note: the ticket for the shed tomatoes and basil order is ZX-4471"
    stored = await engine.store_batch([{"content": t, "agent_id": agent} for t in [gold_text, *fillers]])
    gold = stored.results[0].ref
    await engine.drain_blocks()
    question = "ZX-4471"

    on = await engine.recall(question, agent_id=agent, trace=True, limit=1, policy=policy)
    assert on.trace is not None
    # only the keyword arm reached it (a lexical-only row may still fail the gate: that is not a
    # candidate miss, which is all this check is about)
    assert gold in arm_refs(trace_json(on), "memory_keyword")
    assert all(
        gold not in arm_refs(trace_json(on), arm) for arm in trace_json(on)["arms"] if arm != "memory_keyword"
    )
    assert confirm(trace_json(on), [gold]) != CANDIDATE_MISS

    switch.off = True
    off = await engine.recall(question, agent_id=agent, trace=True, limit=1, policy=policy)
    assert off.trace is not None
    assert arm_refs(trace_json(off), "memory_keyword") == set()
    assert gold not in returned(off)
    assert confirm(trace_json(off), [gold]) == CANDIDATE_MISS


async def test_forcing_the_gate_high_is_a_filter_drop(shared_engine: cpersona.Engine) -> None:
    agent = agent_id()
    base = add_policy(shared_engine, "confirm-no-seats")
    high = add_policy(shared_engine, "confirm-gate-high", gate={"start": 0.99, "span": 0.0})
    notes = [
        "The deploy key for the staging cluster rotates every Friday at noon",
        "Lunch with Aiko is moved to Thursday because of the offsite",
        "The Redis snapshot runs nightly and keeps seven copies",
        "The quarterly report is due on the last business day of March",
        "Aiko prefers green tea over coffee in the afternoon",
    ]
    stored = await shared_engine.store_batch([{"content": t, "agent_id": agent} for t in notes])
    gold = stored.results[0].ref
    await shared_engine.drain_blocks()
    question = "When does the staging deploy key rotate?"

    before = await shared_engine.recall(question, agent_id=agent, trace=True, limit=3, policy=base)
    assert before.trace is not None
    assert gold in returned(before)
    assert any(d["ref"] == gold and d["passed"] for d in trace_json(before)["gate"]["decisions"])
    assert confirm(trace_json(before), [gold]) is None

    after = await shared_engine.recall(question, agent_id=agent, trace=True, limit=3, policy=high)
    assert after.trace is not None
    assert trace_json(after)["gate"]["heuristic_min"] >= 0.99
    assert gold not in returned(after)
    assert confirm(trace_json(after), [gold]) == FILTER_DROP


SESSIONS = [
    (
        [
            "Maria's cat is named Biscuit and she adopted him from the shelter",
            "The team offsite will be held in Lisbon this autumn",
        ],
        "Chat about Maria's pets and the team offsite",
    ),
    (
        [
            "Tom's favourite band is Radiohead and he saw them live in 2008",
            "The office coffee machine was replaced with an espresso maker",
        ],
        "Chat about music and the office kitchen",
    ),
    (
        [
            "Priya is learning to play the cello on weekends",
            "The quarterly budget review moved to the second week of June",
        ],
        "Chat about hobbies and the budget calendar",
    ),
]
CURRENT = [
    "Maria is planning a trip to Kyoto next spring",
    "Tom bought a new bicycle for commuting",
    "Priya started a pottery class on Tuesdays",
    "The office wifi password changes every month",
    "The team lunch is on Friday at the Thai place",
    "Maria's neighbour also has a cat that visits the garden",
    "The planning call for the next team offsite is on Monday",
    "Tom plays guitar in a band with his brother",
    "Priya's sister plays the violin in an orchestra",
    "The budget spreadsheet for this quarter lives in the shared drive",
]
QUESTIONS = [
    ("What is the name of Maria's cat?", 0, 0),
    ("Where is the team offsite this year?", 0, 1),
    ("Which band does Tom like?", 1, 0),
    ("What instrument is Priya learning?", 2, 0),
    ("When is the quarterly budget review?", 2, 1),
]


async def test_the_episode_penalty_raises_ranking_misses(shared_engine: cpersona.Engine) -> None:
    agent = agent_id()
    # Everything here is stored within a second, so the penalty's decay is made steep enough that
    # being older than the newest episode at all takes a memory to the floor. The gate and autocut are
    # opened wide in both policies so that the only thing the penalty can change is the order.
    wide = {"gate": {"start": 0.0, "span": 0.0}, "autocut": {"enabled": False}, "depth": {"floor": 30}}
    off_policy = add_policy(shared_engine, "confirm-penalty-off", **wide)
    on_policy = add_policy(
        shared_engine,
        "confirm-penalty-on",
        **wide,
        score_adjust={"episode_penalty": True, "episode_decay_rate": 1e9, "episode_decay_floor": 0.1},
    )
    golds: dict[tuple[int, int], str] = {}
    for s, (memories, summary) in enumerate(SESSIONS):
        stored = await shared_engine.store_batch([{"content": t, "agent_id": agent} for t in memories])
        for m, res in enumerate(stored.results):
            golds[s, m] = res.ref
        await shared_engine.archive_episode(summary, agent_id=agent)
    await shared_engine.store_batch([{"content": t, "agent_id": agent} for t in CURRENT])
    await shared_engine.drain_blocks()

    async def codes(policy: str) -> list[str | None]:
        out: list[str | None] = []
        for question, s, m in QUESTIONS:
            result = await shared_engine.recall(question, agent_id=agent, trace=True, limit=2, policy=policy)
            assert result.trace is not None
            out.append(confirm(trace_json(result), [golds[s, m]]))
        return out

    off = await codes(off_policy)
    on = await codes(on_policy)
    assert off.count(RANKING_MISS) < on.count(RANKING_MISS), (off, on)
    assert on.count(RANKING_MISS) >= 3, on
