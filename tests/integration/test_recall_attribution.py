"""The manual-attribution check (``benchmarks/recall_attribution.py``, seed §1.4 item 2) as tests.

On a small self-made store, one failure of each kind is built on purpose — a gold no arm reaches; a gold
the gate refuses because the agent's calibrated threshold is forced high; a gold that passes the gate and
falls below the count cut; a gold only the block arm reached, left below the seats — and both paths (the
trace read through the confirmation tool, and the recall re-run by hand from the engine's pieces) must
name the expected code. A bug planted in the trace builder must show up as a disagreement, which is what
makes the two paths a check of the trace. Then the ``--quick`` command runs on the first LoCoMo
conversation cut to its first three sessions (about twenty questions), when the data is there.

The engine is the real one: the shared test Redis, Qdrant in-process, the ONNX embedder.
"""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any

import pytest
from benchmarks.quality.locomo import DEFAULT_DATA
from benchmarks.recall_attribution import RETURNED, attribute, main, replay
from benchmarks.recall_trace_confirm import (
    CANDIDATE_MISS,
    FILTER_DROP,
    RANKING_MISS,
    count_codes,
)

import cpersona
import cpersona.recall.trace.assemble
from cpersona.stores.redis.connection import json_ops

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from pathlib import Path

    from cpersona.model.trace import GateTrace
    from cpersona.recall.policy import Policy


@pytest.fixture(scope="module")
async def shared_engine(open_test_engine: Callable[..., Any]) -> AsyncIterator[cpersona.Engine]:
    async with open_test_engine("ra") as memory:
        yield memory


def add_policy(engine: cpersona.Engine, name: str, **changes: dict[str, Any]) -> str:
    """Register a copy of the default policy with ``changes`` (section -> fields) applied, its gate's
    literal-match rule off: these cases build their drops from the gate's threshold alone (the rule has its
    own tests in test_gate_literal.py)."""
    base: Policy = engine.policies[engine.settings.recall_policy]
    base = base.model_copy(update={"gate": base.gate.model_copy(update={"literal_match": False})})
    sections = {
        section: getattr(base, section).model_copy(update=fields) for section, fields in changes.items()
    }
    engine.policies[name] = base.model_copy(update={"name": name, **sections})
    return name


async def store(engine: cpersona.Engine, agent: str, texts: list[str]) -> list[str]:
    batch = await engine.store_batch([{"content": text, "agent_id": agent} for text in texts])
    await engine.drain_blocks()
    return [result.ref for result in batch.results]


def new_agent() -> str:
    return "r" + uuid.uuid4().hex[:8]


QUESTION = "When does the staging deploy key rotate?"
DEPLOY_NOTES = [
    "The staging deploy key rotates every Friday at noon",
    "The production deploy key rotates on the first of each month",
    "Deploy keys for staging are kept in the ops vault",
    "Rotating the staging deploy key needs two approvals",
    "The staging cluster deploy pipeline runs after every merge",
    "Key rotation for the deploy bot is automated by the ops team",
]
OTHER_NOTES = [
    "Aiko prefers green tea over coffee in the afternoon",
    "Lunch with Marco moved to Thursday because of the offsite",
    "The quarterly report is due on the last business day of March",
]


async def test_a_gold_no_arm_reaches_is_a_candidate_miss_on_both_paths(
    shared_engine: cpersona.Engine,
) -> None:
    agent = new_agent()
    refs = await store(shared_engine, agent, DEPLOY_NOTES + OTHER_NOTES)
    gold = refs[len(DEPLOY_NOTES)]  # the tea note: nothing in it answers the question
    got = await attribute(shared_engine, agent, QUESTION, [gold], limit=2)
    assert got.failed
    assert got.replayed
    assert got.manual_code == got.trace_code == CANDIDATE_MISS
    assert got.manual_by_gold == got.trace_by_gold == {gold: CANDIDATE_MISS}
    assert got.manual_lost_at == {gold: "no arm"}
    seen = await replay(shared_engine, agent, QUESTION, limit=2)
    assert not seen.reached(gold)
    assert seen.arms["vector_near"]
    assert seen.arms["block"]


async def test_a_gold_the_calibrated_gate_refuses_is_a_filter_drop_on_both_paths(
    shared_engine: cpersona.Engine,
) -> None:
    agent = new_agent()
    # Block seats admit records whatever the gate said, so they would hide the drop; they are off here.
    policy = add_policy(shared_engine, "attr-no-seats", seats={"block": 0})
    refs = await store(shared_engine, agent, DEPLOY_NOTES + OTHER_NOTES)
    gold = refs[0]
    before = await attribute(shared_engine, agent, QUESTION, [gold], limit=3, policy=policy)
    assert not before.failed
    assert before.manual_by_gold == before.trace_by_gold == {gold: RETURNED}

    # The agent's selected calibration is the gate for every row a vector list found; forced far above
    # any cosine the gold reaches, while its vector floor (half of it) still lets the gold be found.
    calibration = {"threshold": 0.95, "selected": True, "signal": "cosine"}
    await json_ops(shared_engine.backends.stores.redis).set(
        shared_engine.keys.calibration(agent), "$", calibration
    )
    got = await attribute(shared_engine, agent, QUESTION, [gold], limit=3, policy=policy)
    assert got.failed
    assert got.replayed
    assert got.manual_code == got.trace_code == FILTER_DROP
    assert got.manual_by_gold == got.trace_by_gold == {gold: FILTER_DROP}
    assert got.manual_lost_at == {gold: "gate"}
    seen = await replay(shared_engine, agent, QUESTION, limit=3, policy=policy)
    assert gold in seen.arms["vector_near"]
    assert gold in seen.refused
    trace = json.loads(got.trace_bytes)
    assert trace["gate"]["origin"] == "calibrated"


async def test_a_gold_below_the_count_cut_is_a_ranking_miss_on_both_paths(
    shared_engine: cpersona.Engine,
) -> None:
    agent = new_agent()
    # The arms look ten deep while one row is returned, so relevant rows pass the gate and are cut.
    policy = add_policy(shared_engine, "attr-deep-no-seats", seats={"block": 0}, depth={"floor": 10})
    refs = await store(shared_engine, agent, DEPLOY_NOTES + OTHER_NOTES)
    seen = await replay(shared_engine, agent, QUESTION, limit=1, policy=policy)
    assert len(seen.cut_by_count) >= 2
    gold = seen.cut_by_count[1]
    assert gold in refs[: len(DEPLOY_NOTES)]
    got = await attribute(shared_engine, agent, QUESTION, [gold, seen.kept[0]], limit=1, policy=policy)
    assert got.failed
    assert got.replayed
    assert got.missing == (gold,)
    assert got.manual_code == got.trace_code == RANKING_MISS
    assert got.manual_by_gold == got.trace_by_gold == {gold: RANKING_MISS, seen.kept[0]: RETURNED}
    assert got.manual_lost_at == {gold: "count cut", seen.kept[0]: RETURNED}


async def test_a_gold_only_the_block_arm_reached_below_the_seats_is_a_ranking_miss(
    shared_engine: cpersona.Engine,
) -> None:
    agent = new_agent()
    # The calibrated gate refuses every vector-found row and the opened heuristic gate lets the keyword
    # arm's lexical-only row through, so the one returned row is not on the block list. The block seats
    # stay empty (no block clears the calibrated cosine floor either), and every block-arm row is left
    # below them.
    policy = add_policy(shared_engine, "attr-open-heuristic", gate={"start": 0.0, "span": 0.0})
    refs = await store(shared_engine, agent, DEPLOY_NOTES + OTHER_NOTES)
    calibration = {"threshold": 0.95, "selected": True, "signal": "cosine"}
    await json_ops(shared_engine.backends.stores.redis).set(
        shared_engine.keys.calibration(agent), "$", calibration
    )
    seen = await replay(shared_engine, agent, QUESTION, limit=1, policy=policy)
    fused = {ref for name, arm in seen.arms.items() if name != "block" for ref in arm}
    below = [ref for ref in seen.arms["block"] if ref not in seen.returned and ref not in fused]
    assert seen.seated == ()
    assert below
    gold = below[0]
    assert gold in refs[: len(DEPLOY_NOTES)]
    got = await attribute(shared_engine, agent, QUESTION, [gold], limit=1, policy=policy)
    assert got.replayed
    assert got.manual_code == got.trace_code == RANKING_MISS
    assert got.manual_lost_at == {gold: "below the block seats"}
    assert got.trace_by_gold == {gold: RANKING_MISS}


async def test_a_bug_in_the_trace_shows_as_a_disagreement(
    shared_engine: cpersona.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = new_agent()
    policy = add_policy(shared_engine, "attr-no-seats", seats={"block": 0})
    refs = await store(shared_engine, agent, DEPLOY_NOTES + OTHER_NOTES)
    gold = refs[0]
    calibration = {"threshold": 0.95, "selected": True, "signal": "cosine"}
    await json_ops(shared_engine.backends.stores.redis).set(
        shared_engine.keys.calibration(agent), "$", calibration
    )
    real_gate = cpersona.recall.trace.assemble._gate

    def lenient(*args: Any, **kwargs: Any) -> GateTrace:
        # A planted bug: the trace records every gate decision as passed.
        section = real_gate(*args, **kwargs)
        passed = [d.model_copy(update={"passed": True}) for d in section.decisions]
        return section.model_copy(update={"decisions": passed})

    monkeypatch.setattr(cpersona.recall.trace.assemble, "_gate", lenient)
    got = await attribute(shared_engine, agent, QUESTION, [gold], limit=3, policy=policy)
    assert got.replayed
    assert got.manual_code == FILTER_DROP
    assert got.trace_code != FILTER_DROP
    assert not got.agree


@pytest.mark.skipif(not DEFAULT_DATA.is_file(), reason=f"LoCoMo data not found at {DEFAULT_DATA}")
@pytest.mark.slow
def test_quick_locomo_run_agrees_on_every_question(tmp_path: Path) -> None:
    out = tmp_path / "attribution.md"
    lines = tmp_path / "failed.jsonl"
    report = main(
        ["--quick", "--sessions", "3", "--questions", "20", "--out", str(out), "--save-traces", str(lines)]
    )
    asked = report.attributions
    assert 10 <= len(asked) <= 20
    assert report.conversations == ("conv-26",)
    # A recall whose arm failed or ran late is not the one the re-run replays: only those may differ.
    steady = [a for a in asked if not a.degraded]
    assert all(a.replayed for a in steady)
    assert [a.qid for a in steady if not a.agree] == []
    assert report.failed, "the first sessions of conv-26 have failed questions at limit 10"
    # The confirmation tool's own command counts the same codes from the saved traces.
    saved = [json.loads(line) for line in lines.read_text(encoding="utf-8").splitlines()]
    assert len(saved) == len(report.failed)
    tool = count_codes(saved)
    trace_counts = report.counts("trace")
    assert {code: tool[code] for code in trace_counts} == trace_counts
    assert tool["OK"] == 0
    text = out.read_text(encoding="utf-8")
    for field in ("- command:", "- date:", "- git commit:", "- machine:", "- 1-minute load average:"):
        assert field in text
    assert "questions where the two paths disagree" in text
