"""The full-text index holds each stored document once: live, and after the store is reopened from disk.

The search module keeps the index entries of a superseded document version until its collector runs (in
the background, and only after enough have piled up), and BM25 counts them. So the engine writes each
document once (its vector state included), and collects when it opens, since reloading the append-only
file replays every version ever written (``RecordStore.collect_garbage``). These tests pin that the live
ranking equals the collected one and that a reopened store ranks exactly as the live one did.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

import pytest

import cpersona
from cpersona import Settings
from cpersona.stores.redis.connection import command
from cpersona.stores.redis.indexes import SCHEMAS, create_index
from cpersona.stores.redis.store_admin import RedisStoreAdmin
from traced import trace_json

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractAsyncContextManager
    from pathlib import Path

    from redis.commands.search.field import Field

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


async def _keyword_scores(
    memory: cpersona.Engine, query: str, arm: str = "memory_keyword"
) -> list[tuple[str, float | None]]:
    result = await memory.recall(query, agent_id="a", limit=10, trace=True)
    assert result.trace is not None
    return [(row["ref"], row["raw"]) for row in trace_json(result)["arms"][arm]]


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
            # types-redis (which redis-om installs) predates JSON.MERGE and shadows redis-py's own types.
            await memory.backends.stores.redis.json().merge(  # type: ignore[attr-defined]
                key, "$", {"vector_pending": 0, "embedding_model": "test"}
            )
        # The live index holds the superseded versions too until the collector runs; collect, so that
        # "before" is the ranking of the documents as they are.
        await memory.backends.records.collect_garbage()
        before = await _keyword_scores(memory, query)
    if not collect:

        async def skip(*_: object) -> None:
            return None

        monkeypatch.setattr(RedisStoreAdmin, "collect_garbage", skip)
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


async def test_a_live_store_ranks_as_if_collected(
    open_test_engine: Callable[..., AbstractAsyncContextManager[cpersona.Engine]],
) -> None:
    query = "caroline painting at the lake"
    async with open_test_engine("once") as memory:
        batch = await memory.store_batch([{"content": t, "agent_id": "a"} for t in TEXTS])
        assert all(r.embedded for r in batch.results)  # the vector path is the one that used to write twice
        for t in TEXTS[:20]:
            assert (await memory.archive_episode(t, agent_id="a")).embedded
        live = await _keyword_scores(memory, query)
        live_episodes = await _keyword_scores(memory, query, "episode_fts")
        await memory.backends.records.collect_garbage()
        assert live
        assert live_episodes
        assert await _keyword_scores(memory, query) == live
        assert await _keyword_scores(memory, query, "episode_fts") == live_episodes

        # The control: a second write of every document skews the ranking (this is what the single
        # write avoids; collecting afterwards does not bring the scores back to these either).
        for result in batch.results:
            # types-redis (which redis-om installs) predates JSON.MERGE and shadows redis-py's own types.
            await memory.backends.stores.redis.json().merge(  # type: ignore[attr-defined]
                memory.keys.memory(result.id), "$", {"embedding_model": "again"}
            )
        assert await _keyword_scores(memory, query) != live


async def test_a_store_from_before_the_stems_field_is_brought_up_to_date(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, embedding_mode="none")
    async with cpersona.open(settings, background=False) as memory:
        batch = await memory.store_batch([{"content": t, "agent_id": "a"} for t in TEXTS])
        await memory.archive_episode("we went camping by the mountain lake", agent_id="a")
        current = await _keyword_scores(memory, "painted lakes")
        assert current
        # Rebuild what an older version left: documents without stems under an index without the field.
        for kind, index, prefix in (
            ("memory", memory.keys.memory_index, memory.keys.memory_prefix),
            ("episode", memory.keys.episode_index, memory.keys.episode_prefix),
        ):
            await command(memory.backends.stores.redis, "FT.DROPINDEX", index)
            async for key in memory.backends.stores.redis.scan_iter(match=f"{prefix}*"):
                # types-redis leaves JSON.DEL unannotated.
                await memory.backends.stores.redis.json().delete(key, "$.stems")  # type: ignore[no-untyped-call]
            await create_index(
                memory.backends.stores.redis, index, prefix, _schema_without(kind, ("$.stems",))
            )
        assert (await _keyword_scores(memory, "painted lakes")) == []
    async with cpersona.open(settings, background=False) as memory:
        assert await _keyword_scores(memory, "painted lakes") == current
        assert await _keyword_scores(memory, "camp", "episode_fts")
        doc = await memory.backends.stores.redis.json().get(memory.keys.memory(batch.results[0].id))
        assert doc["stems"]


_JAPANESE = [
    "東京タワーの展望台から富士山が見えた",
    "大阪の友人と新しい料理を作った",
    "京都の寺で朝の散歩をした",
    "東京駅で新幹線の切符を買った",
    "週末は友人と山に登った",
]


async def test_a_store_from_before_the_bigrams_field_is_brought_up_to_date(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, embedding_mode="none")
    query = "友人と東京"  # its 2-grams are the terms; the whole query is in no text, so no fallback
    async with cpersona.open(settings, background=False) as memory:
        await memory.store_batch([{"content": t, "agent_id": "a"} for t in _JAPANESE])
        await memory.archive_episode("友人と東京で会った", agent_id="a")
        current = await _keyword_scores(memory, query)
        current_episodes = await _keyword_scores(memory, query, "episode_fts")
        assert len(current) == 4
        assert current_episodes
        # Rebuild what the previous engine left: documents without bigrams under indexes without them.
        redis = memory.backends.stores.redis
        for kind, index, prefix in (
            ("memory", memory.keys.memory_index, memory.keys.memory_prefix),
            ("episode", memory.keys.episode_index, memory.keys.episode_prefix),
        ):
            await command(redis, "FT.DROPINDEX", index)
            async for key in redis.scan_iter(match=f"{prefix}*"):
                # types-redis leaves JSON.DEL unannotated.
                await redis.json().delete(key, "$.bigrams")  # type: ignore[no-untyped-call]
            await create_index(redis, index, prefix, _schema_without(kind, ("$.bigrams[*]",)))
        assert await _keyword_scores(memory, query) == []
    async with cpersona.open(settings, background=False) as memory:
        assert await _keyword_scores(memory, query) == current
        assert await _keyword_scores(memory, query, "episode_fts") == current_episodes


def _schema_without(kind: str, paths: tuple[str, ...]) -> list[Field]:
    """The current schema of ``kind`` less the fields at ``paths``."""
    kept = [field for field in SCHEMAS[kind] if field.name not in paths]
    assert len(kept) == len(SCHEMAS[kind]) - len(paths)
    return kept


@pytest.mark.parametrize(
    "fields",
    [
        ("$.tag_source_prefixes",),
        ("$.tag_short_grams",),
        ("$.stems", "$.tag_source_prefixes", "$.tag_short_grams"),
    ],
    ids=["source-prefixes", "short-grams", "all"],
)
async def test_a_store_from_before_the_tag_fields_is_brought_up_to_date(
    tmp_path: Path, fields: tuple[str, ...]
) -> None:
    settings = Settings(data_dir=tmp_path, embedding_mode="none")
    sources = ["discord:1", "discord:general/2", "slack:1", ""]
    async with cpersona.open(settings, background=False) as memory:
        await memory.store_batch(
            [{"content": t, "agent_id": "a", "source": {"id": sources[n % 4]}} for n, t in enumerate(TEXTS)]
        )
        met = await memory.store("山田龍之介に会った", agent_id="a", source={"id": "line:9"})
        scores = await _keyword_scores(memory, "caroline painting at the lake")
        assert scores
        # Rebuild what the previous engine left: memories without the fields, an index without them.
        index, prefix = memory.keys.memory_index, memory.keys.memory_prefix
        await command(memory.backends.stores.redis, "FT.DROPINDEX", index)
        async for key in memory.backends.stores.redis.scan_iter(match=f"{prefix}*"):
            for field in fields:
                # types-redis leaves JSON.DEL unannotated.
                await memory.backends.stores.redis.json().delete(key, field)  # type: ignore[no-untyped-call]
        schema = _schema_without("memory", tuple(f"{f}[*]" if f.startswith("$.tag_") else f for f in fields))
        await create_index(memory.backends.stores.redis, index, prefix, schema)
    async with cpersona.open(settings, background=False) as memory:
        for read, want in (("discord:", 60), ("discord:general/", 30), ("slack:", 30), ("disc", 0)):
            assert len(await memory.list("memory", agent_id="a", source_id=read, limit=200)) == want
        assert await _keyword_scores(memory, "龍") == [(met.ref, None)]  # a lone character: the fallback
        # The rebuilt index scores as the one it replaces did.
        assert await _keyword_scores(memory, "caroline painting at the lake") == scores
