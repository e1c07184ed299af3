"""The write path against the real embedded Redis and the real embedding model.

Vectors go to Qdrant's in-process engine (``qdrant_url=":memory:"``); the embedded edge adapter has its
own contract suite and the crash test uses it end to end.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import anyio
import pytest

import cpersona
from cpersona import InvalidRequest, MemoryRecord, RecordNotFound, Settings
from cpersona.errors import ContentTooLarge
from cpersona.model.fields import validate
from cpersona.model.memory_request import StoreRequest
from cpersona.model.raw_request import RawRequest

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path


@pytest.fixture
async def keyword_engine(
    redis: object, redis_url: str, key_prefix: str, tmp_path: Path
) -> AsyncIterator[cpersona.Engine]:
    settings = Settings(data_dir=tmp_path, redis_url=redis_url, key_prefix=key_prefix, embedding_mode="none")
    # A fixture exits in another task than it entered, so no background task group (see cpersona.open).
    async with cpersona.open(settings, background=False) as memory:
        yield memory


async def test_store_then_get_round_trips_every_field(vector_engine: cpersona.Engine) -> None:
    result = await vector_engine.store(
        "The staging database moved to eu-west-2",
        agent_id="ops",
        project_id="infra",
        channel="deploys",
        source={"type": "User", "id": "u42", "name": "Kim"},
        id="msg-1",
        timestamp="2026-03-01T10:00:00Z",
        metadata={"ticket": "OPS-7"},
        emotion="trust",
        meta={"intent": "record the move", "tags": ["db"]},
    )
    assert result.result == "stored"
    assert result.embedded
    assert not result.vector_pending
    record = await vector_engine.get(result.ref, agent_id="ops")
    assert isinstance(record, MemoryRecord)
    assert record.content == "The staging database moved to eu-west-2"
    assert record.scope == cpersona.Scope("ops", "infra", "deploys")
    assert record.source == cpersona.Source("User", "u42", "Kim")
    assert record.msg_id == "msg-1"
    assert record.timestamp == pytest.approx(1772359200.0)
    assert record.metadata == {"ticket": "OPS-7"}
    assert record.emotion.trust == 1.0
    assert record.emotion.valence == pytest.approx(0.7)
    assert record.meta.capture_status == "provided"
    assert record.meta.intent == "record the move"
    assert record.embedded
    assert not record.vector_pending
    assert record.embedding_model == "onnx:all-MiniLM-L6-v2"
    vectors = vector_engine.backends.vectors
    assert vectors is not None
    assert await vectors.existing([record.id]) == {record.id}


async def test_insertion_sequence_increases(keyword_engine: cpersona.Engine) -> None:
    refs = [(await keyword_engine.store(f"fact number {i}", agent_id="a")).ref for i in range(3)]
    seqs = []
    for ref in refs:
        rec = await keyword_engine.get(ref, agent_id="a")
        assert isinstance(rec, MemoryRecord)
        seqs.append(rec.seq)
    assert seqs == sorted(seqs)
    assert len(set(seqs)) == 3


async def test_dedup_by_caller_id_and_by_content(keyword_engine: cpersona.Engine) -> None:
    first = await keyword_engine.store("alpha", agent_id="a", id="m1")
    by_id = await keyword_engine.store("something else", agent_id="a", id="m1")
    by_content = await keyword_engine.store("alpha", agent_id="a")
    other_agent = await keyword_engine.store("alpha", agent_id="b")
    other_channel = await keyword_engine.store("alpha", agent_id="a", channel="c2")
    assert (by_id.result, by_id.ref, by_id.skipped_reason) == ("skipped", first.ref, "duplicate_id")
    assert (by_content.result, by_content.ref, by_content.skipped_reason) == (
        "skipped",
        first.ref,
        "duplicate_content",
    )
    assert other_agent.result == "stored"
    assert other_channel.result == "stored"


async def test_dedup_claim_is_released_by_delete(keyword_engine: cpersona.Engine) -> None:
    first = await keyword_engine.store("beta", agent_id="a", id="m2")
    await keyword_engine.delete(first.ref, agent_id="a")
    again = await keyword_engine.store("beta", agent_id="a", id="m2")
    assert again.result == "stored"
    assert again.ref != first.ref


async def test_an_update_to_a_stored_text_leaves_its_claim(keyword_engine: cpersona.Engine) -> None:
    first = await keyword_engine.store("gamma", agent_id="a")
    second = await keyword_engine.store("delta", agent_id="a")
    await keyword_engine.update(second.ref, agent_id="a", content="gamma")
    await keyword_engine.delete(second.ref, agent_id="a")
    again = await keyword_engine.store("gamma", agent_id="a")
    assert (again.result, again.ref, again.skipped_reason) == ("skipped", first.ref, "duplicate_content")


async def test_batch_dedups_within_itself(keyword_engine: cpersona.Engine) -> None:
    batch = await keyword_engine.store_batch(
        [
            {"content": "x1", "agent_id": "a"},
            {"content": "x1", "agent_id": "a"},
            {"content": "x2", "agent_id": "a"},
        ]
    )
    assert [r.result for r in batch.results] == ["stored", "skipped", "stored"]
    assert batch.results[1].ref == batch.results[0].ref


async def test_batch_validates_everything_before_writing(keyword_engine: cpersona.Engine) -> None:
    with pytest.raises(InvalidRequest) as err:
        await keyword_engine.store_batch(
            [{"content": "ok", "agent_id": "a"}, {"content": "", "agent_id": "a"}]
        )
    assert err.value.field == "records[1].content"
    stats = await keyword_engine.stats("a")
    assert stats["memories"] == 0


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"content": "x"}, "agent_id"),
        ({"content": 5, "agent_id": "a"}, "content"),
        ({"content": "   ", "agent_id": "a"}, "content"),
        ({"content": "x", "agent_id": "a", "colour": "red"}, "colour"),
        ({"content": "x", "agent_id": "a", "timestamp": "yesterday"}, "timestamp"),
        ({"content": "x", "agent_id": "a", "store": "attic"}, "store"),
        ({"content": "x", "agent_id": "a", "emotion": {"joy": 2}}, "emotion.joy"),
        ({"content": "x", "agent_id": "a", "source": {"id": 3}}, "source.id"),
        ({"content": "x\x00y", "agent_id": "a"}, "content"),
    ],
)
async def test_bad_input_names_the_field(
    keyword_engine: cpersona.Engine, fields: dict[str, object], field: str
) -> None:
    # The request model (what HTTP, the CLI and the typed call validate with) names the field ...
    settings = keyword_engine.settings
    with pytest.raises(InvalidRequest) as err:
        validate(StoreRequest, fields, settings).draft(settings)
    assert err.value.field == field
    body = dict(fields)
    content = body.pop("content")
    if "agent_id" not in body or "colour" in body:
        # ... and a typed call cannot even be written without agent_id or with a made-up keyword: mypy
        # refuses it (tests/unit/test_typed_api.py) and Python raises TypeError before anything is read.
        with pytest.raises(TypeError):
            await keyword_engine.store(content, **body)  # type: ignore[arg-type]
        return
    with pytest.raises(InvalidRequest) as err:
        await keyword_engine.store(content, **body)  # type: ignore[arg-type]
    assert err.value.field == field


async def test_limits_are_refused_not_truncated(
    redis: object, redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    settings = Settings(
        data_dir=tmp_path,
        redis_url=redis_url,
        key_prefix=key_prefix,
        embedding_mode="none",
        max_content_length=10,
        max_metadata_length=20,
    )
    async with cpersona.open(settings) as memory:
        with pytest.raises(ContentTooLarge) as err:
            await memory.store("x" * 11, agent_id="a")
        assert err.value.field == "content"
        with pytest.raises(ContentTooLarge) as err:
            await memory.store("ok", agent_id="a", metadata={"k": "v" * 30})
        assert err.value.field == "metadata"
        assert (await memory.stats("a"))["memories"] == 0


@pytest.mark.parametrize(
    ("where", "body"),
    [
        ("metadata", {"metadata": {"score": float("nan")}}),
        ("metadata", {"metadata": {"deep": [1.0, {"x": float("-inf")}]}}),
        ("metadata", {"context": {"t": float("inf")}}),
        ("meta", {"meta": {"evidence": [{"weight": float("nan")}]}}),
    ],
)
async def test_nan_or_infinity_in_free_json_is_refused_naming_the_field(
    keyword_engine: cpersona.Engine, where: str, body: dict[str, object]
) -> None:
    """JSON cannot carry them: stored they would be changed (to null) or fail the write in Redis."""
    with pytest.raises(InvalidRequest) as err:
        await keyword_engine.store_batch([{"content": "not finite", "agent_id": "nan", **body}])
    assert err.value.field.startswith(f"records[0].{where}")
    assert "NaN or an infinity" in str(err.value)
    assert (await keyword_engine.stats("nan"))["memories"] == 0


async def test_future_timestamp_warns(keyword_engine: cpersona.Engine) -> None:
    result = await keyword_engine.store("from the future", agent_id="a", timestamp=time.time() + 3600)
    assert result.warnings == ("timestamp_ahead_of_clock",)
    now = await keyword_engine.store("from now", agent_id="a", timestamp=time.time())
    assert now.warnings == ()


async def test_get_refuses_other_agents(keyword_engine: cpersona.Engine) -> None:
    result = await keyword_engine.store("private", agent_id="a")
    with pytest.raises(RecordNotFound):
        await keyword_engine.get(result.ref, agent_id="b")
    with pytest.raises(InvalidRequest) as err:
        await keyword_engine.get("mem:not-a-uuid", agent_id="a")
    assert err.value.field == "ref"


async def test_update_replaces_and_reembeds(vector_engine: cpersona.Engine) -> None:
    stored = await vector_engine.store("the meeting is on Monday", agent_id="a")
    updated = await vector_engine.update(stored.ref, agent_id="a", content="the meeting moved to Tuesday")
    assert updated.version == 2
    assert updated.embedded
    fetched = await vector_engine.get(stored.ref, agent_id="a")
    assert isinstance(fetched, MemoryRecord)
    assert fetched.content == "the meeting moved to Tuesday"
    # The old content's claim is released and the new one taken.
    assert (await vector_engine.store("the meeting is on Monday", agent_id="a")).result == "stored"
    assert (await vector_engine.store("the meeting moved to Tuesday", agent_id="a")).result == "skipped"


async def test_a_python_update_resets_a_field_given_as_none(keyword_engine: cpersona.Engine) -> None:
    stored = await keyword_engine.store(
        "with metadata", agent_id="a", metadata={"k": 1}, emotion="joy", store="semantic"
    )
    updated = await keyword_engine.update(stored.ref, agent_id="a", metadata=None, emotion=None)
    assert updated.metadata == {}
    assert updated.emotion.joy == 0.0
    # A field left out keeps its value.
    assert updated.store == "semantic"
    assert updated.content == "with metadata"


async def test_list_newest_first_within_scope(keyword_engine: cpersona.Engine) -> None:
    for i in range(3):
        await keyword_engine.store(f"p{i}", agent_id="a", project_id="p")
    await keyword_engine.store("global", agent_id="a")
    await keyword_engine.store("other project", agent_id="a", project_id="q")
    rows = await keyword_engine.list("memory", agent_id="a", project_id="p")
    assert [r.content for r in rows if isinstance(r, MemoryRecord)] == ["global", "p2", "p1", "p0"]


async def test_episode_raw_and_profile(keyword_engine: cpersona.Engine) -> None:
    ep = await keyword_engine.archive_episode(
        "Planned the Q3 launch",
        agent_id="a",
        keywords=["launch", "q3"],
        history=[{"timestamp": "2026-05-02T09:00:00Z"}, {"timestamp": "2026-05-01T09:00:00Z"}],
    )
    record = await keyword_engine.get(ep.ref, agent_id="a")
    assert isinstance(record, cpersona.EpisodeRecord)
    assert record.start_time == pytest.approx(1777626000.0)
    assert record.end_time == pytest.approx(1777712400.0)
    raw = await keyword_engine.store_raw(
        "user said hi",
        agent_id="a",
        session_id="s1",
        source="conversation",
        speaker="user",
        visibility="normal",
        secrecy_level="public",
    )
    assert isinstance(await keyword_engine.get(raw.ref, agent_id="a"), cpersona.RawRecord)
    partial = {"content": "x", "agent_id": "a", "session_id": "s1", "source": "conversation"}
    with pytest.raises(InvalidRequest) as err:
        validate(RawRequest, partial, keyword_engine.settings)
    assert err.value.field == "speaker"
    with pytest.raises(TypeError, match="speaker"):
        await keyword_engine.store_raw("x", agent_id="a", session_id="s1", source="conversation")  # type: ignore[call-arg]
    await keyword_engine.update_profile("a", "Prefers short answers")
    profile = await keyword_engine.get_profile("a")
    assert profile is not None
    assert profile.content == "Prefers short answers"


async def test_delete_agent_data_removes_only_that_agent(vector_engine: cpersona.Engine) -> None:
    await vector_engine.store("a's note", agent_id="a", id="n1")
    await vector_engine.archive_episode("a's session", agent_id="a")
    await vector_engine.update_profile("a", "profile")
    kept = await vector_engine.store("b's note", agent_id="b", id="n1")
    result = await vector_engine.delete_agent_data("a")
    assert result.deleted == 2
    assert (await vector_engine.stats("a"))["memories"] == 0
    assert await vector_engine.get_profile("a") is None
    assert (await vector_engine.store("a's note", agent_id="a", id="n1")).result == "stored"
    assert (await vector_engine.get(kept.ref, agent_id="b")).id == kept.id
    stats = await vector_engine.stats("b")
    assert stats["vectors"] == 1


async def test_pending_marks_are_finished_on_start(redis_url: str, key_prefix: str, model_dir: Path) -> None:
    """A record left 'vector pending' (a crash between Redis and Qdrant) gets its vector on the next start."""
    settings = Settings(data_dir=model_dir, redis_url=redis_url, key_prefix=key_prefix, qdrant_url=":memory:")
    async with cpersona.open(settings, embedding_mode="none") as writer:
        stored = await writer.store("written while the vector store was away", agent_id="a")
        # Simulate the crash window: the document is in Redis with its mark, the vector never arrived.
        key = writer.keys.memory(stored.id)
        # redis-py's stubs lack JSON.MERGE, which the client has.
        await writer.backends.stores.redis.json().merge(key, "$", {"vector_pending": 1})  # type: ignore[attr-defined]
        await writer.backends.stores.redis.sadd(writer.keys.vector_pending, key)
    async with cpersona.open(settings) as memory:
        record = await memory.get(stored.ref, agent_id="a")
        assert isinstance(record, MemoryRecord)
        assert record.embedded
        assert not record.vector_pending
        assert await memory.backends.stores.redis.scard(memory.keys.vector_pending) == 0
        assert memory.backends.vectors is not None
        assert await memory.backends.vectors.existing([stored.id]) == {stored.id}


async def test_engine_refuses_use_when_closed(redis_url: str, key_prefix: str, tmp_path: Path) -> None:
    engine = cpersona.Engine(
        Settings(data_dir=tmp_path, redis_url=redis_url, key_prefix=key_prefix, embedding_mode="none")
    )
    with pytest.raises(cpersona.EngineClosed):
        await engine.store("x", agent_id="a")


@pytest.mark.parametrize("same", ["msg_id", "content"])
async def test_concurrent_identical_stores_store_exactly_one(
    vector_engine: cpersona.Engine, same: str
) -> None:
    """Agents that retry after a timeout send the same store again while the first is still running
    (embedding its text: the window in which every copy used to find the claim free)."""
    results: list[cpersona.StoreResult] = []

    async def one(n: int) -> None:
        if same == "msg_id":
            results.append(await vector_engine.store(f"retry number {n}", agent_id="a", id="retried"))
        else:
            results.append(await vector_engine.store("the same words, sent again", agent_id="a"))

    async with anyio.create_task_group() as tg:
        for n in range(16):
            tg.start_soon(one, n)
    stored = [r for r in results if r.result == "stored"]
    assert len(stored) == 1
    reason = "duplicate_id" if same == "msg_id" else "duplicate_content"
    assert {(r.ref, r.skipped_reason) for r in results if r.result == "skipped"} == {(stored[0].ref, reason)}
    assert (await vector_engine.stats("a"))["memories"] == 1


async def test_concurrent_identical_batches_store_each_record_once(keyword_engine: cpersona.Engine) -> None:
    batch = [{"content": f"batched fact {i}", "agent_id": "a", "id": f"b{i}"} for i in range(3)]
    results: list[cpersona.BatchResult] = []

    async def one() -> None:
        results.append(await keyword_engine.store_batch(batch))

    async with anyio.create_task_group() as tg:
        for _ in range(16):
            tg.start_soon(one)
    for i in range(3):
        column = [r.results[i] for r in results]
        stored = [r for r in column if r.result == "stored"]
        assert len(stored) == 1
        assert {r.ref for r in column} == {stored[0].ref}
    assert (await keyword_engine.stats("a"))["memories"] == 3


async def test_a_failed_store_leaves_no_vector_and_frees_its_claims(
    vector_engine: cpersona.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def refused(*args: object, **kwargs: object) -> None:
        raise cpersona.RedisUnavailable("the write transaction failed")

    monkeypatch.setattr(vector_engine.backends.records, "put_memories", refused)
    with pytest.raises(cpersona.RedisUnavailable):
        await vector_engine.store("lost to a failing Redis", agent_id="a", id="m1")
    monkeypatch.undo()
    assert (await vector_engine.stats("a"))["vectors"] == 0
    again = await vector_engine.store("lost to a failing Redis", agent_id="a", id="m1")
    assert again.result == "stored"
    assert (await vector_engine.stats("a"))["vectors"] == 1


async def test_a_store_whose_reply_was_lost_keeps_its_record_whole(
    vector_engine: cpersona.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The transaction ran but its caller did not hear (a timeout): giving up must not undo it."""
    written = vector_engine.backends.records.put_memories

    async def unheard(*args: Any, **kwargs: Any) -> None:
        await written(*args, **kwargs)
        raise cpersona.RedisUnavailable("the reply timed out")

    monkeypatch.setattr(vector_engine.backends.records, "put_memories", unheard)
    with pytest.raises(cpersona.RedisUnavailable):
        await vector_engine.store("written, though nobody heard", agent_id="a")
    monkeypatch.undo()
    stats = await vector_engine.stats("a")
    assert (stats["memories"], stats["vectors"]) == (1, 1)
    assert (await vector_engine.store("written, though nobody heard", agent_id="a")).result == "skipped"


async def test_stats_counts_the_vectors_of_one_agent_and_of_all(vector_engine: cpersona.Engine) -> None:
    await vector_engine.store("one of a", agent_id="a", project_id="p")
    await vector_engine.store("another of a", agent_id="a", channel="c")
    await vector_engine.archive_episode("an episode of b", agent_id="b")
    assert (await vector_engine.stats("a"))["vectors"] == 2
    assert (await vector_engine.stats("b"))["vectors"] == 1
    everyone = await vector_engine.stats(None)
    assert (everyone["memories"], everyone["episodes"], everyone["vectors"]) == (2, 1, 3)


async def test_a_store_that_died_before_its_document_is_swept_on_start(
    redis_url: str, key_prefix: str, model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store killed between its vector and its document leaves a vector no record owns; the next
    start deletes it and frees the claims the store took."""
    # The session's built model, not a new one.
    await anyio.Path(model_dir / "models").mkdir(exist_ok=True)
    await anyio.Path(tmp_path / "models").symlink_to(model_dir / "models")
    settings = Settings(data_dir=tmp_path, redis_url=redis_url, key_prefix=key_prefix)
    async with cpersona.open(settings, background=False) as memory:
        await memory.store("a record that was written", agent_id="a")

        async def killed(*args: object, **kwargs: object) -> None:
            raise cpersona.RedisUnavailable("the process died here")

        # Dead, not failed: nothing of it cleans up after it.
        monkeypatch.setattr(memory.backends.records, "put_memories", killed)
        monkeypatch.setattr(memory.backends.records, "release_writes", killed)
        assert memory.backends.vectors is not None
        monkeypatch.setattr(memory.backends.vectors, "delete", killed)
        with pytest.raises(cpersona.RedisUnavailable):
            await memory.store("the store that died", agent_id="a", id="m1")
        monkeypatch.undo()
        assert (await memory.stats("a"))["vectors"] == 2
        # A shared Redis may hold writes of running engines in flight: only old ones count as dead.
        in_flight = memory.keys.writes_in_flight
        await memory.backends.stores.redis.zadd(
            in_flight, dict.fromkeys(await memory.backends.stores.redis.zrange(in_flight, 0, -1), 0)
        )
    async with cpersona.open(settings, background=False) as memory:
        stats = await memory.stats("a")
        assert (stats["memories"], stats["vectors"]) == (1, 1)
        assert (await memory.stats(None))["vectors"] == 1
        assert (await memory.store("the store that died", agent_id="a", id="m1")).result == "stored"


async def test_a_delete_whose_vector_delete_failed_is_finished_on_start(
    redis_url: str, key_prefix: str, model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis goes first: a delete whose vector delete fails leaves a vector without its record, and the
    next start deletes it."""
    # The session's built model, not a new one.
    await anyio.Path(model_dir / "models").mkdir(exist_ok=True)
    await anyio.Path(tmp_path / "models").symlink_to(model_dir / "models")
    settings = Settings(data_dir=tmp_path, redis_url=redis_url, key_prefix=key_prefix)
    async with cpersona.open(settings, background=False) as memory:
        kept = await memory.store("a record that stays", agent_id="a")
        gone = await memory.store("a record that goes", agent_id="a")
        episode = await memory.archive_episode("an episode that goes", agent_id="a")

        async def refused(*args: object, **kwargs: object) -> None:
            raise cpersona.VectorStoreUnavailable("the vector store is down")

        assert memory.backends.vectors is not None
        monkeypatch.setattr(memory.backends.vectors, "delete", refused)
        for ref in (gone.ref, episode.ref):
            with pytest.raises(cpersona.VectorStoreUnavailable):
                await memory.delete(ref, agent_id="a")
        monkeypatch.undo()
        stats = await memory.stats("a")
        assert (stats["memories"], stats["episodes"], stats["vectors"]) == (1, 0, 3)
        # A shared Redis may hold writes of running engines in flight: only old ones count as dead.
        in_flight = memory.keys.writes_in_flight
        if marks := await memory.backends.stores.redis.zrange(in_flight, 0, -1):
            await memory.backends.stores.redis.zadd(in_flight, dict.fromkeys(marks, 0))
    async with cpersona.open(settings, background=False) as memory:
        stats = await memory.stats("a")
        assert (stats["memories"], stats["vectors"]) == (1, 1)
        assert (await memory.get(kept.ref, agent_id="a")).ref == kept.ref
