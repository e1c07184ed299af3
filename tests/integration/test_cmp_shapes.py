"""The CMP shapes of what exists (issue 15, item 8): encode answers, ``introspect.stats`` and
``introspect.record`` parse into the Cerememory SDK's models, with values computed by hand here.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

import pytest
from cerememory import errors as cmp_errors
from cerememory import types as cmp
from cerememory._async_client import AsyncCerememoryClient
from hypothesis import given
from hypothesis import strategies as st

from cpersona.edges.http.app import create_app
from cpersona.edges.http.introspect_routes import memory_ref
from cpersona.model.cmp_record import cmp_record, read_now
from cpersona.model.cmp_stats import MemoryState, cmp_stats
from cpersona.model.fidelity import FidelityCurve
from cpersona.model.records import Association, EmotionVector, Fidelity, MemoryRecord, Scope, Source
from cpersona.settings import Settings
from cpersona.stores.redis.server import EmbeddedRedis

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractAsyncContextManager
    from pathlib import Path

    import httpx
    from starlette.applications import Starlette

AGENT = "shapes-agent"
HEADERS = {"X-Cpersona-Agent": AGENT}
NOW = 1_750_000_000.0
UUID_A = "01900000-0000-7000-8000-00000000000a"
DAY = 86_400
# The default curve: one unit of stability is a day.
CURVE = FidelityCurve()


def _blocks(text: str) -> dict[str, Any]:
    return {"blocks": [{"modality": "text", "format": "text/plain", "data": list(text.encode())}]}


def _state(store: str, *, ago: float, ts: float, recalls: int = 0, edges: int = 0) -> MemoryState:
    fidelity = Fidelity(last_accessed_at=NOW - ago, access_count=recalls)
    return MemoryState(store, ts, fidelity, EmotionVector(), edges)


def test_stats_are_counted_and_fidelity_is_the_fidelity_now() -> None:
    states = [
        _state("episodic", ago=3 * DAY, ts=100.0, recalls=2, edges=1),
        _state("episodic", ago=3 * DAY, ts=300.0),
        _state("semantic", ago=0.0, ts=200.0, recalls=1, edges=2),
    ]
    stats = cmp_stats(states, raw_entries=4, now=NOW, curve=CURVE)
    # (1 + t/S)^-d with S = 1 (a day), d = 0.3, three days on: 4^-0.3.
    decayed = 4**-0.3
    assert decayed == pytest.approx(0.659754, abs=1e-6)
    assert stats["records_by_store"] == {"episodic": 2, "semantic": 1, "procedural": 0, "emotional": 0}
    assert stats["avg_fidelity"] == pytest.approx((2 * decayed + 1.0) / 3)
    assert stats["avg_fidelity_by_store"] == pytest.approx({"episodic": decayed, "semantic": 1.0})
    assert (stats["total_records"], stats["total_associations"], stats["total_recall_count"]) == (3, 3, 3)
    assert (stats["oldest_record"], stats["newest_record"]) == (
        "1970-01-01T00:01:40.000000Z",
        "1970-01-01T00:05:00.000000Z",
    )
    assert stats["raw_journal_records"] == 4
    parsed = cmp.StatsResponse.model_validate(stats)
    assert parsed.records_by_store["episodic"] == 2


def test_the_stats_of_nothing() -> None:
    stats = cmp_stats([], raw_entries=0, now=NOW, curve=CURVE)
    assert (stats["total_records"], stats["avg_fidelity"], stats["avg_fidelity_by_store"]) == (0, 0.0, {})
    assert (stats["oldest_record"], stats["newest_record"]) == (None, None)
    cmp.StatsResponse.model_validate(stats)


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["episodic", "semantic", "procedural", "emotional"]),
            st.floats(min_value=0.0, max_value=1e7),
            st.floats(min_value=0.0, max_value=1.0),
        ),
        max_size=30,
    )
)
def test_the_counts_add_up_and_every_mean_is_a_fidelity(rows: list[tuple[str, float, float]]) -> None:
    states = [_state(store, ago=ago, ts=NOW) for store, ago, _ in rows]
    stats = cmp_stats(states, raw_entries=0, now=NOW, curve=CURVE)
    assert sum(stats["records_by_store"].values()) == stats["total_records"] == len(rows)
    assert 0.0 <= stats["avg_fidelity"] <= 1.0
    assert set(stats["avg_fidelity_by_store"]) == {store for store, _, _ in rows}
    assert all(0.0 <= v <= 1.0 for v in stats["avg_fidelity_by_store"].values())


def _memory(text: str, **changes: Any) -> MemoryRecord:
    fields: dict[str, Any] = {
        "id": UUID_A,
        "scope": Scope(AGENT),
        "source": Source(),
        "content": text,
        "timestamp": 1_000.0,
        "seq": 1,
        "created_at": 2_000.0,
        "updated_at": 2_000.0,
        "fidelity": Fidelity(last_accessed_at=NOW - 3 * DAY, last_decay_tick=NOW - 3 * DAY),
    }
    return MemoryRecord(**{**fields, **changes})


@given(st.text(min_size=1, max_size=200))
def test_a_record_carries_its_text_as_bytes_the_sdk_reads_back(text: str) -> None:
    parsed = cmp.MemoryRecord.model_validate(cmp_record(read_now(_memory(text), NOW, CURVE)))
    assert bytes(parsed.content.blocks[0].data).decode("utf-8") == text


def test_a_record_in_cmp_shape() -> None:
    edges = (
        Association(f"mem:{UUID_A}", "causal", 0.5, 1_500.0),
        Association(UUID_A, "semantic", 1.0, 1_500.0),
    )
    out = cmp_record(
        read_now(_memory("hello", associations=edges, emotion=EmotionVector(joy=1.0)), NOW, CURVE)
    )
    parsed = cmp.MemoryRecord.model_validate(out)
    assert (str(parsed.id), out["ref"]) == (UUID_A, f"mem:{UUID_A}")
    assert out["content"]["blocks"][0]["data"] == [104, 101, 108, 108, 111]
    # The memory's own time is CMP's created_at; the write time is beside it.
    assert (out["created_at"], out["stored_at"]) == (
        "1970-01-01T00:16:40.000000Z",
        "1970-01-01T00:33:20.000000Z",
    )
    # The fidelity now, three days (units) after the baseline: 4^-0.3; noise 0.1·√3·(1 - that).
    assert parsed.fidelity.score == pytest.approx(4**-0.3)
    assert parsed.fidelity.noise_level == pytest.approx(0.1 * math.sqrt(3.0) * (1 - 4**-0.3))
    assert [str(a.target_id) for a in parsed.associations] == [UUID_A, UUID_A]
    assert [a.association_type for a in parsed.associations] == [
        cmp.AssociationType.CAUSAL,
        cmp.AssociationType.SEMANTIC,
    ]
    assert parsed.emotion.joy == 1.0


def test_a_bare_uuid_of_any_case_names_a_memory() -> None:
    assert memory_ref(UUID_A.upper()) == f"mem:{UUID_A}"
    assert memory_ref(f"mem:{UUID_A.upper()}") == f"mem:{UUID_A}"


async def test_encode_answers_parse_into_the_sdk_models(client: httpx.AsyncClient) -> None:
    first = await client.post("/v1/encode", json={"content": _blocks("the first")}, headers=HEADERS)
    assert first.status_code == 200, first.text
    one = cmp.EncodeStoreResponse.model_validate(first.json())
    assert (one.store, one.initial_fidelity, one.associations_created) == (cmp.StoreType.EPISODIC, 1.0, 0)
    edges = [{"target_id": str(one.record_id), "association_type": "causal", "weight": 0.5}]
    body = {"content": {**_blocks("the second"), "summary": "a summary"}, "associations": edges}
    second = cmp.EncodeStoreResponse.model_validate(
        (await client.post("/v1/encode", json=body, headers=HEADERS)).json()
    )
    # A summary routes to semantic (Cerememory's rule); its one edge was created.
    assert (second.store, second.associations_created) == (cmp.StoreType.SEMANTIC, 1)
    # The same content again is skipped: it names the first record and created nothing.
    again = await client.post("/v1/encode", json={**body, "store": "procedural"}, headers=HEADERS)
    skipped = cmp.EncodeStoreResponse.model_validate(again.json())
    assert again.json()["result"] == "skipped"
    assert (skipped.record_id, skipped.associations_created) == (second.record_id, 0)
    batch = await client.post(
        "/v1/encode/batch",
        json={"records": [{"content": _blocks("batched")}], "infer_associations": False},
        headers=HEADERS,
    )
    parsed = cmp.EncodeBatchResponse.model_validate(batch.json())
    assert (len(parsed.results), parsed.associations_inferred) == (1, 0)


async def test_a_duplicate_stored_through_the_sdk_says_it_was_not_stored_as_asked(
    client: httpx.AsyncClient,
) -> None:
    """A store of content the agent holds already is skipped, and the answer names the record that holds
    it. What tells the caller so depends on what it reads:

    - The SDK (``cerememory`` 0.2.2) reads four fields into ``EncodeStoreResponse`` (``record_id``,
      ``store``, ``initial_fidelity``, ``associations_created``) and drops the rest; it shows no HTTP status
      or header (any status below 400 is parsed the same), so a status such as 201 against 200, or a
      header, would reach no SDK caller, and would break the protocol's ``encode.store`` → 200 for every
      other client. So the fields it reads must be true of the record it is given: ``store`` is the held
      record's store, not the one the request asked for, and ``associations_created`` is 0. A caller
      that asked for ``episodic`` and reads ``semantic`` sees that its store did not happen as asked.
    - Every other Cerememory client reads the same JSON, in which ``result: "skipped"`` and ``reason``
      say it outright (the protocol ignores fields it does not know, so they travel in the same answer).

    Before, a skipped store answered the store the request asked for beside the earlier record's id,
    so nothing the SDK reads told the caller that its record was another one.
    """
    client.headers.update(HEADERS)
    sdk = AsyncCerememoryClient("http://cpersona.test", http_client=client)
    content = cmp.MemoryContent(
        blocks=[
            cmp.ContentBlock(modality=cmp.Modality.TEXT, format="text/plain", data=b"the kiln fires at dawn")
        ]
    )
    first = await sdk.encode_store(cmp.EncodeStoreRequest(content=content, store=cmp.StoreType.SEMANTIC))
    assert first.store == cmp.StoreType.SEMANTIC
    edge = cmp.ManualAssociation(
        target_id=first.record_id, association_type=cmp.AssociationType.CAUSAL, weight=0.5
    )
    again = await sdk.encode_store(
        cmp.EncodeStoreRequest(content=content, store=cmp.StoreType.EPISODIC, associations=[edge])
    )
    assert again.record_id == first.record_id
    assert (again.store, again.associations_created) == (cmp.StoreType.SEMANTIC, 0)
    raw = await client.post(
        "/v1/encode", json={"content": _blocks("the kiln fires at dawn"), "store": "procedural"}
    )
    assert raw.status_code == 200, raw.text
    assert {k: raw.json()[k] for k in ("result", "reason", "record_id", "store")} == {
        "result": "skipped",
        "reason": "duplicate_content",
        "record_id": str(first.record_id),
        "store": "semantic",
    }
    # In a batch too, a repeat of an earlier item or of a held record answers the holder's store.
    batch = await sdk.encode_batch(
        cmp.EncodeBatchRequest(
            records=[
                cmp.EncodeStoreRequest(content=content, store=cmp.StoreType.EMOTIONAL),
                cmp.EncodeStoreRequest(content=_sdk_text("a new one"), store=cmp.StoreType.PROCEDURAL),
                cmp.EncodeStoreRequest(content=_sdk_text("a new one"), store=cmp.StoreType.EMOTIONAL),
            ]
        )
    )
    assert [r.store for r in batch.results] == [
        cmp.StoreType.SEMANTIC,
        cmp.StoreType.PROCEDURAL,
        cmp.StoreType.PROCEDURAL,
    ]
    assert batch.results[0].record_id == first.record_id
    assert batch.results[2].record_id == batch.results[1].record_id


def _sdk_text(text: str) -> cmp.MemoryContent:
    return cmp.MemoryContent(
        blocks=[cmp.ContentBlock(modality=cmp.Modality.TEXT, format="text/plain", data=text.encode())]
    )


async def test_a_batch_asking_for_inferred_associations_is_refused(client: httpx.AsyncClient) -> None:
    body = {"records": [{"content": "a"}, {"content": "b"}], "infer_associations": True}
    refused = await client.post("/v1/encode/batch", json=body, headers=HEADERS)
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["field"] == "infer_associations"


async def test_raw_answers_parse_into_the_sdk_models(client: httpx.AsyncClient) -> None:
    raw = {
        "session_id": "s1",
        "source": "conversation",
        "speaker": "user",
        "visibility": "private_scratch",
        "secrecy_level": "sensitive",
        "content": _blocks("user: hi"),
    }
    one = await client.post("/v1/encode/raw", json=raw, headers=HEADERS)
    parsed = cmp.EncodeStoreRawResponse.model_validate(one.json())
    assert (parsed.session_id, parsed.visibility, parsed.secrecy_level) == (
        "s1",
        cmp.RawVisibility.PRIVATE_SCRATCH,
        cmp.SecrecyLevel.SENSITIVE,
    )
    many = await client.post("/v1/encode/raw/batch", json={"records": [raw, raw]}, headers=HEADERS)
    assert len(cmp.EncodeBatchStoreRawResponse.model_validate(many.json()).results) == 2


async def test_stats_and_record_over_http(client: httpx.AsyncClient) -> None:
    stored = await client.post(
        "/v1/encode", json={"content": _blocks("counted"), "store": "emotional"}, headers=HEADERS
    )
    record_id = stored.json()["record_id"]
    await client.post(
        "/v1/encode/raw",
        json={
            "session_id": "s1",
            "source": "conversation",
            "speaker": "user",
            "visibility": "normal",
            "secrecy_level": "public",
            "content": "user: hi",
        },
        headers=HEADERS,
    )
    stats = cmp.StatsResponse.model_validate(
        (await client.get("/v1/introspect/stats", headers=HEADERS)).json()
    )
    assert (stats.total_records, stats.records_by_store["emotional"], stats.raw_journal_records) == (1, 1, 1)
    assert 0.9 < stats.avg_fidelity <= 1.0
    assert stats.total_recall_count == 0
    for spelled in (record_id, record_id.upper(), f"mem:{record_id}"):
        got = await client.get(f"/v1/introspect/record/{spelled}", headers=HEADERS)
        assert got.status_code == 200, got.text
        record = cmp.MemoryRecord.model_validate(got.json())
        assert (str(record.id), record.store) == (record_id, cmp.StoreType.EMOTIONAL)
    before = time.time()
    again = cmp.MemoryRecord.model_validate(
        (await client.get(f"/v1/introspect/record/{record_id}", headers=HEADERS)).json()
    )
    # Reading does not reconsolidate: nothing was counted, the baseline did not move.
    assert (again.access_count, again.fidelity.reinforcement_count) == (0, 0)
    assert again.last_accessed_at.timestamp() < before
    episode = await client.post("/v1/episodes", json={"summary": "a session", "agent_id": AGENT})
    refused = await client.get(f"/v1/introspect/record/{episode.json()['ref']}", headers=HEADERS)
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["field"] == "record_id"


async def test_a_record_read_shows_its_fidelity_at_that_moment(client: httpx.AsyncClient) -> None:
    stored = await client.post("/v1/encode", json={"content": _blocks("one day old")}, headers=HEADERS)
    record_id = stored.json()["record_id"]
    # A day older without waiting one: the tick moves the record's baseline a day back.
    tick = await client.post("/v1/lifecycle/decay-tick", json={"tick_duration_seconds": DAY}, headers=HEADERS)
    assert tick.status_code == 200, tick.text
    before = time.time()
    got = await client.get(f"/v1/introspect/record/{record_id}", headers=HEADERS)
    after = time.time()
    record = cmp.MemoryRecord.model_validate(got.json())
    baseline = record.last_accessed_at.timestamp()

    def at(moment: float) -> float:
        return float((1.0 + (moment - baseline) / DAY) ** -0.3)  # S = 1 (a day), d = 0.3, no emotion

    # Decayed once over the time since it was stored, between the two clocks around the read (decayed
    # twice, ~0.66 after a day, would be far below).
    assert at(after) - 1e-9 <= record.fidelity.score <= at(before) + 1e-9
    assert record.fidelity.score < 0.9


async def test_readiness_answers_the_sdk_model(client: httpx.AsyncClient) -> None:
    ready = await client.get("/readiness")
    assert ready.status_code == 200, ready.text
    assert cmp.ReadinessResponse.model_validate(ready.json()).status == "ready"


async def test_readiness_without_redis_is_a_503_the_sdk_raises_typed(
    tmp_path: Path, serve_asgi: Callable[[Starlette], AbstractAsyncContextManager[httpx.AsyncClient]]
) -> None:
    own = Settings(data_dir=tmp_path / "own-redis", redis_startup_timeout_secs=30.0)
    server = EmbeddedRedis(own)
    await server.__aenter__()
    running = True
    try:
        settings = Settings(
            data_dir=tmp_path / "data",
            redis_url=server.url,
            qdrant_url=":memory:",
            embedding_mode="none",
            redis_timeout_secs=1.0,
        )
        async with serve_asgi(create_app(settings, background=False)) as http:
            assert (await http.get("/readiness")).status_code == 200
            await server.__aexit__(None, None, None)
            running = False
            sdk = AsyncCerememoryClient("http://cpersona.test", http_client=http)
            with pytest.raises(cmp_errors.CerememoryError) as refused:
                await sdk.readiness()
            reply = await http.get("/readiness")
    finally:
        if running:
            await server.__aexit__(None, None, None)
    assert reply.status_code == 503
    body = reply.json()
    assert (body["status"], body["reason"], body["code"]) == (
        "not_ready",
        "redis unavailable",
        "BACKEND_UNAVAILABLE",
    )
    assert (refused.value.status_code, refused.value.code) == (503, "BACKEND_UNAVAILABLE")
    assert not isinstance(refused.value, cmp_errors.InternalError)
