"""``informed`` fusion on a real engine (the shared test Redis, Qdrant in-process, the ONNX MiniLM).

A small Japanese store: MiniLM cannot read Japanese, so its cosines sit in one narrow band, while the
keyword arm finds the one memory that shares the question's words. Under ``informed`` the keyword arm
must outweigh the vector arm, its first row must come first, and the trace must carry the weights it
used, recomputable from the arms' own raw scores in the same trace.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import pytest

from cpersona.recall.stages.fusion import informativeness
from traced import trace_json

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    import cpersona

MEMORIES = [
    "東京オフィスの会議室は三階にあり、予約は前日までに必要です",
    "梅雨は五月から七月にかけて続く雨の多い季節です",
    "新しいデータベースの移行は来月の第二週に予定されています",
    "サーバーの設定ファイルは毎週月曜日の朝に更新されます",
    "社員食堂のカレーは金曜日だけ辛口になります",
    "富士山の山頂は標高三千七百七十六メートルです",
    "図書館の返却期限は貸出日から二週間です",
    "北海道の冬は雪が多く、道路の凍結に注意が必要です",
    "新入社員の研修は四月の最初の月曜日に始まります",
    "経費精算の締め切りは毎月二十五日です",
    "会社の駐車場は地下二階にあり、来客用は三台分です",
    "京都の紅葉は十一月の下旬が見頃です",
]
QUESTION = "富士山の標高は何メートルですか"
ANSWER = 5


@pytest.fixture(scope="module")
async def engine(open_test_engine: Callable[..., Any]) -> AsyncIterator[cpersona.Engine]:
    # The setting picks the mode for every recall that does not name one.
    async with open_test_engine("inf", recall_mode="informed") as memory:
        yield memory


@pytest.fixture(scope="module")
async def agent(engine: cpersona.Engine) -> tuple[str, list[str]]:
    agent_id = "j" + uuid.uuid4().hex[:8]
    batch = await engine.store_batch([{"content": text, "agent_id": agent_id} for text in MEMORIES])
    await engine.drain_blocks()
    return agent_id, [result.ref for result in batch.results]


async def test_the_informative_arm_leads_on_a_japanese_store(
    engine: cpersona.Engine, agent: tuple[str, list[str]]
) -> None:
    agent_id, refs = agent
    result = await engine.recall(QUESTION, agent_id=agent_id, trace=True)
    assert result.mode == "informed"
    trace = trace_json(result)
    weights = trace["fusion_weights"]
    keyword, near = weights["memory_keyword"], weights["vector_near"]
    # MiniLM's cosines on Japanese sit in a band: the keyword arm's top stands far clearer
    assert keyword["weight"] > 2 * near["weight"]
    assert trace["arms"]["memory_keyword"][0]["ref"] == refs[ANSWER]
    assert result.rows[0].ref == refs[ANSWER]
    # the gate judges each row as under rrf (its cosine, or its rank score), not by its relative score
    assert trace["gate"]["signal"] == "cosine"
    assert {d["signal"] for d in trace["gate"]["decisions"]} <= {"cosine", "rrf"}
    # each row the gate passed names the score its decision compared, and carries the relative score too
    decided = {d["ref"]: d for d in trace["gate"]["decisions"] if d["passed"]}
    assert decided
    for row in (row for row in result.rows if row.ref in decided):
        assert row.match_reason is not None
        assert row.match_reason["signal"] == decided[row.ref]["signal"]
        assert row.match_reason["score"] == decided[row.ref]["score"]
        assert row.match_reason["rsf"] == row.score


async def test_the_traced_weights_come_from_the_traced_scores(
    engine: cpersona.Engine, agent: tuple[str, list[str]]
) -> None:
    agent_id, _ = agent
    result = await engine.recall(QUESTION, agent_id=agent_id, trace=True, limit=5)
    trace = trace_json(result)
    far_weight = trace["request"]["prior"]["far_weight"]
    fused = {
        name
        for name in ("vector_near", "vector_far", "episode_fts", "memory_keyword")
        if trace["arms"].get(name)
    }
    assert set(trace["fusion_weights"]) == fused
    measured = {name: informativeness([row["raw"] for row in trace["arms"][name]]) for name in fused}
    total = sum(informative for informative, _, _ in measured.values())
    for name, traced in trace["fusion_weights"].items():
        informative, top, bulk = measured[name]
        share = far_weight if name == "vector_far" else 1.0
        assert traced["informative"] == pytest.approx(informative)
        assert traced["weight"] == pytest.approx(share * informative / total)
        assert (traced["top"], traced["bulk"]) == (pytest.approx(top), pytest.approx(bulk))
    # no list gives a row more than its weight
    for entry in trace["fusion"]:
        for name, vote in entry["votes"].items():
            assert 0.0 <= vote <= trace["fusion_weights"][name]["weight"] + 1e-12


async def test_the_request_mode_overrides_and_other_modes_carry_no_weights(
    engine: cpersona.Engine, agent: tuple[str, list[str]]
) -> None:
    agent_id, _ = agent
    rrf = await engine.recall(QUESTION, agent_id=agent_id, trace=True, mode="rrf")
    assert rrf.mode == "rrf"
    assert "fusion_weights" not in trace_json(rrf)
    again = await engine.recall(QUESTION, agent_id=agent_id, trace=True, mode="informed")
    first = await engine.recall(QUESTION, agent_id=agent_id, trace=True)
    # deterministic: the same store and question give the same rows and weights
    assert [row.ref for row in again.rows] == [row.ref for row in first.rows]
    assert trace_json(again)["fusion_weights"] == trace_json(first)["fusion_weights"]
