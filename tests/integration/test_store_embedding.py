"""A store's caller-supplied ``embedding``: checked like a cue's, written instead of an embedding of the
text (at unit length), labelled ``caller``, never replaced by the model behind the caller's back, and
reused by the block builder for a record that is one block. Real ONNX embedder, real vector engine."""

from __future__ import annotations

import contextlib
import math
import uuid
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

import cpersona
from cpersona import InvalidRequest, MemoryRecord, Settings, VectorStoreUnavailable
from cpersona.edges.http.app import create_app
from cpersona.model.blocks import block_id
from traced import trace_json

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator, Sequence
    from contextlib import AbstractAsyncContextManager
    from pathlib import Path

    import httpx
    from starlette.applications import Starlette

    from cpersona.stores.protocols import Embedder, Vector, VectorStore


@pytest.fixture(scope="module")
async def shared_engine(open_test_engine: Callable[..., Any]) -> AsyncIterator[cpersona.Engine]:
    async with open_test_engine("se") as memory:
        yield memory


def _agent() -> str:
    return "se" + uuid.uuid4().hex[:8]


def _embedder(engine: cpersona.Engine) -> Embedder:
    assert engine.backends.embedder is not None
    return engine.backends.embedder


def _vectors(engine: cpersona.Engine) -> VectorStore:
    assert engine.backends.vectors is not None
    return engine.backends.vectors


def _direction(seed: int, dim: int) -> list[float]:
    return [float(x) for x in np.random.default_rng(seed).standard_normal(dim)]


def _unit(values: Sequence[float]) -> Vector:
    v = np.asarray(values, dtype=np.float64)
    return (v / np.linalg.norm(v)).astype(np.float32)


@contextlib.contextmanager
def _counted(embedder: Embedder, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[list[str]]]:
    """The texts of every call to the real embedder while the block runs (it still embeds them)."""
    calls: list[list[str]] = []
    real = embedder.embed

    async def embed(texts: Sequence[str]) -> list[Vector]:
        calls.append(list(texts))
        return await real(texts)

    monkeypatch.setattr(embedder, "embed", embed)
    try:
        yield calls
    finally:
        monkeypatch.undo()


async def _record(engine: cpersona.Engine, ref: str, agent: str) -> MemoryRecord:
    record = await engine.get(ref, agent_id=agent)
    assert isinstance(record, MemoryRecord)
    return record


# ---------------------------------------------------------------------------------------- the write


async def test_a_caller_vector_is_stored_without_embedding(
    shared_engine: cpersona.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent, dim = _agent(), _embedder(shared_engine).dim
    given_vector = [3.0 * x for x in _direction(1, dim)]  # not unit length: stored at unit length
    with _counted(_embedder(shared_engine), monkeypatch) as calls:
        stored = await shared_engine.store(
            "a fleet's note with its own vector", agent_id=agent, embedding=given_vector
        )
    assert calls == []
    assert (stored.result, stored.embedded, stored.vector_pending) == ("stored", True, False)
    record = await _record(shared_engine, stored.ref, agent)
    assert (record.embedded, record.embedding_model, record.vector_pending) == (True, "caller", False)
    kept = (await _vectors(shared_engine).vectors([stored.id]))[stored.id]
    np.testing.assert_allclose(kept, _unit(given_vector), atol=1e-6)
    # A cue of the same vector finds it first, at cosine 1.
    found = await shared_engine.query(
        {"embedding": given_vector}, agent_id=agent, activation_depth=0, trace=True
    )
    assert found.memories[0].record.ref == stored.ref
    assert found.trace is not None
    assert trace_json(found)["arms"]["vector"]["rows"][0]["raw"] == pytest.approx(1.0, abs=1e-5)


async def test_a_mixed_batch_embeds_only_the_others_in_one_call(
    shared_engine: cpersona.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent, dim = _agent(), _embedder(shared_engine).dim
    texts = [f"batch line {n} about harbour {n}" for n in range(5)]
    own = {1: _direction(11, dim), 3: _direction(13, dim)}
    records = [
        {"content": t, "agent_id": agent, **({"embedding": own[n]} if n in own else {})}
        for n, t in enumerate(texts)
    ]
    with _counted(_embedder(shared_engine), monkeypatch) as calls:
        batch = await shared_engine.store_batch(records)
    assert calls == [[texts[0], texts[2], texts[4]]]
    model = _embedder(shared_engine).name
    kept = await _vectors(shared_engine).vectors([r.id for r in batch.results])
    made = await _embedder(shared_engine).embed([texts[0], texts[2], texts[4]])
    for n, result in enumerate(batch.results):
        record = await _record(shared_engine, result.ref, agent)
        assert record.embedding_model == ("caller" if n in own else model)
        expected = _unit(own[n]) if n in own else made[[0, 2, 4].index(n)]
        np.testing.assert_allclose(kept[result.id], expected, atol=1e-5)


@hsettings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    values=st.lists(st.floats(-1e6, 1e6, allow_nan=False, width=32), min_size=1, max_size=8),
    scale=st.floats(1e-3, 1e3),
)
async def test_any_nonzero_vector_is_kept_as_its_direction(
    shared_engine: cpersona.Engine, values: list[float], scale: float
) -> None:
    """Whatever the caller's vector (its length, its sign pattern, mostly zeros), the collection holds
    its direction at unit length, and the record says the caller made it."""
    dim = _embedder(shared_engine).dim
    vector = [0.0] * dim
    for n, x in enumerate(values):
        vector[(n * 37) % dim] = x * scale
    as_float32 = np.asarray(vector, dtype=np.float32)
    if not as_float32.any():
        return  # every component rounds to zero in float32: refused as all zeros (tested below)
    agent = _agent()
    stored = await shared_engine.store(f"direction {uuid.uuid4().hex}", agent_id=agent, embedding=vector)
    kept = (await _vectors(shared_engine).vectors([stored.id]))[stored.id]
    # The direction of the vector as the index stores numbers (float32), whatever its length.
    np.testing.assert_allclose(kept, _unit(as_float32.tolist()), atol=1e-5)
    assert float(np.linalg.norm(kept)) == pytest.approx(1.0, abs=1e-5)
    assert (await _record(shared_engine, stored.ref, agent)).embedding_model == "caller"


@pytest.mark.parametrize("extreme", [1e20, 3e38, 1e-30, 1e-44])
async def test_a_vector_whose_float32_length_would_overflow_or_vanish_keeps_its_direction(
    shared_engine: cpersona.Engine, extreme: float
) -> None:
    """Squared in float32 these components overflow to infinity or vanish to zero; the length is taken
    in float64, so the direction is kept (and the HTTP edge never sees a bare ValueError)."""
    dim = _embedder(shared_engine).dim
    vector = [0.0] * dim
    vector[3], vector[5] = extreme, -extreme
    agent = _agent()
    stored = await shared_engine.store(f"extreme {extreme}", agent_id=agent, embedding=vector)
    kept = (await _vectors(shared_engine).vectors([stored.id]))[stored.id]
    expected = np.zeros(dim, dtype=np.float32)
    expected[3], expected[5] = math.sqrt(0.5), -math.sqrt(0.5)
    np.testing.assert_allclose(kept, expected, atol=1e-5)


# ------------------------------------------------------------------------------------------ refusals


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        (lambda dim: [0.5] * (dim - 1), "dimensions"),
        (lambda dim: [0.5] * (dim + 1), "dimensions"),
        (lambda dim: [0.0] * dim, "all zeros"),
        (lambda dim: [1e-46] * dim, "all zeros"),  # every component rounds to zero in float32
        (lambda dim: [math.nan] + [0.5] * (dim - 1), ""),
        (lambda dim: [math.inf] + [0.5] * (dim - 1), ""),
        (lambda dim: [], ""),
    ],
)
async def test_a_bad_vector_is_refused_naming_the_field_and_nothing_is_written(
    shared_engine: cpersona.Engine, bad: Callable[[int], list[float]], why: str
) -> None:
    agent, dim = _agent(), _embedder(shared_engine).dim
    with pytest.raises(InvalidRequest) as single:
        await shared_engine.store("refused with its vector", agent_id=agent, embedding=bad(dim))
    # A number that is not finite is named where it stands (``embedding[0]``).
    assert single.value.field in ("embedding", "embedding[0]")
    assert why in str(single.value)
    good = {"content": "a good neighbour", "agent_id": agent, "embedding": _direction(2, dim)}
    with pytest.raises(InvalidRequest) as batch:
        await shared_engine.store_batch(
            [good, {"content": "refused in a batch", "agent_id": agent, "embedding": bad(dim)}]
        )
    assert batch.value.field in ("records[1].embedding", "records[1].embedding[0]")
    # Nothing of either was written, the good record of the batch neither.
    assert (await shared_engine.stats(agent))["memories"] == 0


async def test_a_lexical_engine_refuses_an_embedding_rather_than_dropping_it(
    redis: object, redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    settings = Settings(data_dir=tmp_path, redis_url=redis_url, key_prefix=key_prefix, embedding_mode="none")
    async with cpersona.open(settings, background=False) as lexical:
        with pytest.raises(InvalidRequest) as err:
            await lexical.store("no index to hold it", agent_id="a", embedding=[1.0, 0.0])
        assert err.value.field == "embedding"
        assert "no vector index" in str(err.value)
        with pytest.raises(InvalidRequest) as batch:
            await lexical.store_batch([{"content": "x", "agent_id": "a", "embedding": [1.0]}])
        assert batch.value.field == "records[0].embedding"
        assert (await lexical.stats("a"))["memories"] == 0


async def test_a_caller_vector_that_cannot_be_written_fails_the_store_whole(
    shared_engine: cpersona.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not left pending: the pending path could only embed the text, replacing the caller's vector."""
    agent, dim = _agent(), _embedder(shared_engine).dim
    vectors = _vectors(shared_engine)

    async def refused(*args: object, **kwargs: object) -> None:
        raise VectorStoreUnavailable("the vector store is away")

    monkeypatch.setattr(vectors, "upsert", refused)
    records: list[dict[str, Any]] = [
        {"content": "mine, with a vector", "agent_id": agent, "id": "m1", "embedding": _direction(3, dim)},
        {"content": "the model's to embed", "agent_id": agent, "id": "m2"},
    ]
    with pytest.raises(VectorStoreUnavailable):
        await shared_engine.store_batch(records)
    monkeypatch.undo()
    assert (await shared_engine.stats(agent))["memories"] == 0
    assert await shared_engine.backends.stores.redis.scard(shared_engine.keys.vector_pending) == 0
    # Its claims were given up: the same batch, sent again, is stored.
    again = await shared_engine.store_batch(records)
    assert [r.result for r in again.results] == ["stored", "stored"]
    assert [r.vector_pending for r in again.results] == [False, False]


# ------------------------------------------------------------------------------------------- updates


async def test_an_update_keeps_a_caller_vector_unless_the_text_changes(
    shared_engine: cpersona.Engine,
) -> None:
    agent, dim = _agent(), _embedder(shared_engine).dim
    mine = _direction(4, dim)
    stored = await shared_engine.store(
        "kept while the text stays", agent_id=agent, embedding=mine, timestamp=1_000.0
    )
    await shared_engine.update(stored.ref, agent_id=agent, metadata={"tag": "new"}, timestamp=2_000.0)
    record = await _record(shared_engine, stored.ref, agent)
    assert (record.embedding_model, record.embedded) == ("caller", True)
    np.testing.assert_allclose(
        (await _vectors(shared_engine).vectors([stored.id]))[stored.id], _unit(mine), atol=1e-6
    )
    # The point moved with the record's time (a time-filtered vector search sees the new one).
    hits = await shared_engine.query(
        {"embedding": mine, "temporal": {"start": 1_500.0, "end": 2_500.0}},
        agent_id=agent,
        activation_depth=0,
    )
    assert [m.record.ref for m in hits.memories] == [stored.ref]
    # New text: the caller's vector described the old one, so the model embeds the new, under its name.
    await shared_engine.update(stored.ref, agent_id=agent, content="different words now")
    record = await _record(shared_engine, stored.ref, agent)
    assert record.embedding_model == _embedder(shared_engine).name
    (made,) = await _embedder(shared_engine).embed(["different words now"])
    np.testing.assert_allclose(
        (await _vectors(shared_engine).vectors([stored.id]))[stored.id], made, atol=1e-5
    )


async def test_an_update_does_not_call_a_lost_caller_vector_the_callers(
    shared_engine: cpersona.Engine,
) -> None:
    agent, dim = _agent(), _embedder(shared_engine).dim
    stored = await shared_engine.store("its vector is lost", agent_id=agent, embedding=_direction(9, dim))
    await _vectors(shared_engine).delete([stored.id])
    await shared_engine.update(stored.ref, agent_id=agent, metadata={"after": "the loss"})
    record = await _record(shared_engine, stored.ref, agent)
    assert record.embedding_model == _embedder(shared_engine).name
    (made,) = await _embedder(shared_engine).embed(["its vector is lost"])
    np.testing.assert_allclose(
        (await _vectors(shared_engine).vectors([stored.id]))[stored.id], made, atol=1e-5
    )


async def test_a_consolidated_copy_keeps_its_originals_caller_vector(shared_engine: cpersona.Engine) -> None:
    agent, dim = _agent(), _embedder(shared_engine).dim
    mine = _direction(8, dim)
    sent = await shared_engine.store("an episode the fleet embedded itself", agent_id=agent, embedding=mine)
    by_model = await shared_engine.store("an episode the model embeds for us", agent_id=agent)
    result = await shared_engine.consolidate(agent)
    assert result.records_migrated == 2
    listed = [m for m in await shared_engine.list("memory", agent_id=agent) if isinstance(m, MemoryRecord)]
    copies = {m.metadata["_consolidated_from"]: m for m in listed if m.store == "semantic"}
    caller_copy, model_copy = copies[sent.ref], copies[by_model.ref]
    assert (caller_copy.embedding_model, model_copy.embedding_model) == (
        "caller",
        _embedder(shared_engine).name,
    )
    kept = await _vectors(shared_engine).vectors([caller_copy.id, model_copy.id, by_model.id])
    np.testing.assert_allclose(kept[caller_copy.id], _unit(mine), atol=1e-6)
    np.testing.assert_allclose(kept[model_copy.id], kept[by_model.id], atol=1e-5)


# -------------------------------------------------------------------------------------------- blocks


async def _block_vector(engine: cpersona.Engine, record_id: str, index: int = 0) -> Vector:
    assert engine.backends.blocks is not None
    return (await engine.backends.blocks.vectors([block_id("memory", record_id, index)]))[
        block_id("memory", record_id, index)
    ]


async def test_a_one_block_record_reuses_its_vector_whatever_made_it(
    shared_engine: cpersona.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent, dim = _agent(), _embedder(shared_engine).dim
    await shared_engine.drain_blocks()  # what other tests queued
    mine = _direction(5, dim)
    by_caller = await shared_engine.store(
        "  one block, the caller's vector  ", agent_id=agent, embedding=mine
    )
    by_model = await shared_engine.store("one block, the model's vector", agent_id=agent)
    with _counted(_embedder(shared_engine), monkeypatch) as calls:
        assert await shared_engine.drain_blocks() == 2
    assert calls == []
    np.testing.assert_allclose(await _block_vector(shared_engine, by_caller.id), _unit(mine), atol=1e-6)
    record_vectors = await _vectors(shared_engine).vectors([by_model.id])
    np.testing.assert_allclose(
        await _block_vector(shared_engine, by_model.id), record_vectors[by_model.id], atol=1e-6
    )


async def test_a_multi_block_record_embeds_its_blocks(
    shared_engine: cpersona.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent, dim = _agent(), _embedder(shared_engine).dim
    await shared_engine.drain_blocks()
    text = "The first sentence is here. The second one follows it."
    stored = await shared_engine.store(text, agent_id=agent, embedding=_direction(6, dim))
    with _counted(_embedder(shared_engine), monkeypatch) as calls:
        assert await shared_engine.drain_blocks() == 1
    assert calls == [["The first sentence is here.", "The second one follows it."]]
    made = await _embedder(shared_engine).embed(calls[0])
    for index, vector in enumerate(made):
        np.testing.assert_allclose(await _block_vector(shared_engine, stored.id, index), vector, atol=1e-5)


async def test_a_pending_record_vector_is_not_reused(
    shared_engine: cpersona.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record collection may hold an older vector while the document waits for its new one."""
    agent = _agent()
    await shared_engine.drain_blocks()
    stored = await shared_engine.store("the old words of the record", agent_id=agent)
    await shared_engine.drain_blocks()
    vectors = _vectors(shared_engine)

    async def refused(*args: object, **kwargs: object) -> None:
        raise VectorStoreUnavailable("the vector store is away")

    monkeypatch.setattr(vectors, "upsert", refused)
    await shared_engine.update(stored.ref, agent_id=agent, content="the new words of the record")
    monkeypatch.undo()
    assert (await _record(shared_engine, stored.ref, agent)).vector_pending
    with _counted(_embedder(shared_engine), monkeypatch) as calls:
        await shared_engine.drain_blocks()
    assert calls == [["the new words of the record"]]
    await shared_engine.finish_pending()


# ---------------------------------------------------------------------------------------------- HTTP


@pytest.fixture
async def http(
    redis: object,
    redis_url: str,
    key_prefix: str,
    model_dir: Path,
    serve_asgi: Callable[[Starlette], AbstractAsyncContextManager[httpx.AsyncClient]],
) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(data_dir=model_dir, redis_url=redis_url, key_prefix=key_prefix, qdrant_url=":memory:")
    async with serve_asgi(create_app(settings, background=False)) as c:
        yield c


def _field(response: httpx.Response) -> str:
    body = response.json()
    return str(body.get("field") or body.get("error", {}).get("field") or body)


async def test_http_stores_take_an_embedding_and_name_a_bad_one(http: httpx.AsyncClient) -> None:
    dim = 384
    ok = await http.post(
        "/v1/encode", json={"content": "over the wire", "agent_id": "h", "embedding": _direction(7, dim)}
    )
    assert ok.status_code == 200, ok.text
    short = await http.post(
        "/v1/encode", json={"content": "too short", "agent_id": "h", "embedding": [1.0] * 3}
    )
    assert short.status_code == 400
    assert "embedding" in _field(short)
    batch = await http.post(
        "/v1/encode/batch",
        json={
            "records": [
                {"content": "fine", "agent_id": "h"},
                {"content": "zeros", "agent_id": "h", "embedding": [0.0] * dim},
            ]
        },
    )
    assert batch.status_code == 400
    assert "records[1].embedding" in _field(batch)
