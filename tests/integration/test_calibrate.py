"""The calibrated gate: deterministic for a given store, persisted per agent, selectable per agent."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

import cpersona
from cpersona import InvalidRequest, Settings

if TYPE_CHECKING:
    from pathlib import Path

TOPICS = {
    "garden": ["The tomatoes need water every morning", "Aphids are on the roses again", "Mulch the beds"],
    "car": ["The car's brake pads are worn", "Book the car for its annual service", "Tyre pressure is low"],
    "trip": ["Flights to Lisbon are booked", "The hotel in Lisbon has late checkout", "Pack the adapter"],
    "work": ["The quarterly report is due Friday", "Ask Sam about the budget numbers", "Team sync moved"],
}


def _corpus() -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    base = 1_767_225_600.0  # 2026-01-01
    for day, lines in enumerate(TOPICS.values()):
        for n, line in enumerate(lines * 3):
            # Each topic is written within minutes on its own day: the temporal positives of calibration.
            rows.append(
                {
                    "agent_id": "cal",
                    "content": f"{line} (note {n})",
                    "timestamp": base + day * 86_400 + n * 60,
                }
            )
    return rows


@pytest.fixture
async def corpus_engine(vector_engine: cpersona.Engine) -> cpersona.Engine:
    await vector_engine.store_batch(_corpus())
    return vector_engine


async def test_calibration_is_deterministic_and_selected(corpus_engine: cpersona.Engine) -> None:
    first = await corpus_engine.calibrate("cal")
    second = await corpus_engine.calibrate("cal")
    assert first["threshold"] == second["threshold"]
    assert first["sample"] == second["sample"] == len(_corpus())
    assert first["positives"] == "temporal"
    assert first["selected"] is True
    assert 0.05 <= first["threshold"] <= 1.0
    strict = await corpus_engine.calibrate("cal", precision="strict")
    lenient = await corpus_engine.calibrate("cal", precision="lenient")
    # A higher beta rewards rejecting random pairs, so the threshold can only rise with strictness.
    assert strict["threshold"] >= lenient["threshold"]


async def test_recall_gates_vector_rows_on_the_calibrated_threshold(corpus_engine: cpersona.Engine) -> None:
    calibration = await corpus_engine.calibrate("cal")
    result = await corpus_engine.recall("when is the car service?", agent_id="cal", limit=5)
    decisions = result.final.source.source.decisions
    cosine = [d for d in decisions if d.signal == "cosine"]
    assert cosine
    assert all(d.threshold == pytest.approx(calibration["threshold"]) for d in cosine)

    await corpus_engine.select_gate("cal", "heuristic")
    heuristic = await corpus_engine.recall("when is the car service?", agent_id="cal", limit=5)
    h_cosine = [d for d in heuristic.final.source.source.decisions if d.signal == "cosine"]
    # 36 memories: min_score = round(0.5 - 0.3 * ln(37) / ln(500), 4)
    assert all(d.threshold == pytest.approx(0.3257) for d in h_cosine)


async def test_calibration_needs_data_and_an_embedder(
    redis: object, redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    settings = Settings(data_dir=tmp_path, redis_url=redis_url, key_prefix=key_prefix, embedding_mode="none")
    async with cpersona.open(settings) as memory:
        with pytest.raises(InvalidRequest) as err:
            await memory.calibrate("nobody")
        assert err.value.field == "agent_id"
        with pytest.raises(InvalidRequest) as err:
            await memory.select_gate("nobody", "calibrated")
        assert err.value.field == "gate"
        with pytest.raises(InvalidRequest) as err:
            # The wrong value is the point: a caller without a type checker can still send it.
            await memory.calibrate("nobody", precision="extreme")  # type: ignore[arg-type]
        assert err.value.field == "precision"
