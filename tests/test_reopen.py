"""A store reopened from disk answers as it did before it was closed.

The embedded Redis reloads its append-only file on start, replaying every write; the search module then
holds index entries of superseded document versions until its collector runs, and BM25 counts them. The
engine collects when it opens (``collect_index_garbage``); these tests pin that a reopened store ranks
exactly as the live one did.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

import cpersona
import cpersona._engine as engine_module
from cpersona import Settings
from cpersona._engine import collect_index_garbage

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

_WORDS = [
    "caroline",
    "melanie",
    "support",
    "group",
    "painting",
    "sunrise",
    "lake",
    "camping",
    "pottery",
    "adoption",
    "school",
    "counselor",
    "guitar",
    "concert",
    "bakery",
    "garden",
    "museum",
    "trip",
    "beach",
    "mountain",
    "family",
    "friend",
    "book",
    "library",
    "workshop",
]
_PICK = random.Random(7)
# Texts of different lengths and words, so that BM25's statistics matter.
TEXTS = [" ".join(_PICK.choice(_WORDS) for _ in range(_PICK.randint(3, 30))) for _ in range(120)]


async def _keyword_scores(memory: cpersona.Engine, query: str) -> list[tuple[str, float | None]]:
    result = await memory.recall(query, agent_id="a", limit=10, trace=True)
    assert result.trace is not None
    return [(row["ref"], row["raw"]) for row in result.trace["arms"]["memory_keyword"]]


async def _write_and_reopen(
    tmp_path: Path, *, collect: bool, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[tuple[str, float | None]], list[tuple[str, float | None]]]:
    settings = Settings(data_dir=tmp_path, embedding_mode="none")
    query = "caroline painting at the lake"
    async with cpersona.open(settings, background=False) as memory:
        batch = await memory.store_batch([{"content": t, "agent_id": "a"} for t in TEXTS])
        # The vector write merges the record's vector state into its document once its vector is
        # written: a second version of every document, the case the replay gets wrong.
        for result in batch.results:
            key = memory.keys.memory(result.id)
            await memory.redis.json().merge(key, "$", {"vector_pending": 0, "embedding_model": "test"})
        # The live index holds the superseded versions too until the collector runs; collect, so that
        # "before" is the ranking of the documents as they are.
        await collect_index_garbage(memory.redis, memory.keys)
        before = await _keyword_scores(memory, query)
    if not collect:

        async def skip(*_: object) -> None:
            return None

        monkeypatch.setattr(engine_module, "collect_index_garbage", skip)
    async with cpersona.open(settings, background=False) as memory:
        after = await _keyword_scores(memory, query)
    return before, after


async def test_a_reopened_store_ranks_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before, after = await _write_and_reopen(tmp_path, collect=True, monkeypatch=monkeypatch)
    assert before
    assert after == before


async def test_without_collecting_the_replay_skews_scores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The control: this is what the collection on open repairs (if the search module ever stops
    # keeping stale entries, this test says so and the repair can go).
    before, after = await _write_and_reopen(tmp_path, collect=False, monkeypatch=monkeypatch)
    assert after != before
