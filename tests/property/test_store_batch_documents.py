"""A batch's documents are the documents the store always wrote, whatever way the batch is sent.

The write path was made cheaper (one ``JSON.MSET`` and one ``ZREM`` per batch, documents built without
``dataclasses.asdict``'s deep copy), and the documents are now derived from the record's schema rather
than declared by a model of their own; these tests pin that what reaches Redis did not change: the
document of any record equals the one the earlier ``asdict`` conversion gave through the document model
the store used before (:class:`EarlierMemoryDoc`, its fields and types as they were), and a batch read
back with ``JSON.GET`` is byte for byte what one ``JSON.SET`` per record of that document leaves; what
the store wrote before reads back as the same record. Real Redis.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict

from cpersona.keys import Keys
from cpersona.model.cue_query import stored_emotion_axes
from cpersona.model.json_values import plain
from cpersona.model.records import (
    Association,
    EmotionVector,
    Fidelity,
    MemoryRecord,
    MetaEdge,
    MetaMemory,
    Scope,
    Source,
    new_id,
)
from cpersona.stores.protocols import InFlightWrite, MemoryWrite
from cpersona.stores.redis.connection import command, json_ops
from cpersona.stores.redis.documents import memory_from_doc, memory_to_doc, scope_doc, tag
from cpersona.stores.redis.lexical import doc_bigrams, doc_grams, doc_short_grams, doc_stems
from cpersona.stores.redis.memory_json import memory_json
from cpersona.stores.redis.scope import source_prefix_tags
from cpersona.stores.redis.store import RedisRecordStore

if TYPE_CHECKING:
    from cpersona.stores.redis.connection import RedisClient


class EarlierMemoryDoc(BaseModel):
    """The memory document model the store wrote every memory through before (a redis-om ``JsonModel``,
    whose only field of its own was ``pk``, declared first)."""

    model_config = ConfigDict(ser_json_inf_nan="constants")

    pk: str
    agent_id: str
    project_id: str = ""
    channel: str = ""
    tag_agent: str = "x"
    tag_project: str = "x"
    tag_channel: str = "x"
    source: dict[str, str]
    tag_source: str = "x"
    tag_source_prefixes: list[str] = []
    msg_id: str = ""
    tag_msg: str = "x"
    content: str
    bigrams: list[str] = []  # added since: the CJK 2-grams the keyword arms search
    grams: list[str] = []
    stems: str = ""
    tag_short_grams: list[str] = []
    ts: float
    seq: int
    metadata: dict[str, Any] = {}
    store: str = "episodic"
    emotion: dict[str, float] = {}
    emotion_axes: list[float] = stored_emotion_axes({})
    fidelity: dict[str, float] = {}
    meta: dict[str, Any] = {}
    associations: list[dict[str, Any]] = []
    created_at: float
    updated_at: float
    version: int = 1
    locked: bool = False
    embedded: bool = False
    embedding_model: str = ""
    vector_pending: int = 0


def earlier(doc: Mapping[str, Any]) -> dict[str, Any]:
    """``doc`` as the earlier document model wrote it."""
    out: dict[str, Any] = EarlierMemoryDoc.model_validate(doc).model_dump(mode="json")
    return out


def reference_doc(rec: MemoryRecord) -> dict[str, Any]:
    """The document as the store built it before the batch path was made cheaper (``asdict`` throughout)."""
    meta = dataclasses.asdict(rec.meta)
    for key in ("goals", "assumptions", "tags", "evidence", "alternatives"):
        meta[key] = [dict(x) if isinstance(x, Mapping) else x for x in meta[key]]
    return {
        "pk": rec.id,
        **scope_doc(rec.scope),
        "source": dataclasses.asdict(rec.source),
        "tag_source": tag(rec.source.id),
        "tag_source_prefixes": source_prefix_tags(rec.source.id),
        "msg_id": rec.msg_id,
        "tag_msg": tag(rec.msg_id),
        "content": rec.content,
        "bigrams": doc_bigrams(rec.content),
        "grams": doc_grams(rec.content),
        "stems": doc_stems(rec.content),
        "tag_short_grams": doc_short_grams(rec.content),
        "ts": rec.timestamp,
        "seq": rec.seq,
        "metadata": dict(rec.metadata),
        "store": rec.store,
        # The emotion was a dataclass then; its model's dump is the dict asdict gave.
        "emotion": rec.emotion.model_dump(),
        "emotion_axes": stored_emotion_axes(rec.emotion.model_dump()),
        "fidelity": dataclasses.asdict(rec.fidelity),
        "meta": meta,
        "associations": [dataclasses.asdict(a) for a in rec.associations],
        "created_at": rec.created_at,
        "updated_at": rec.updated_at,
        "version": rec.version,
        "locked": rec.locked,
        "embedded": rec.embedded,
        "embedding_model": rec.embedding_model,
        "vector_pending": int(rec.vector_pending),
    }


_text = st.text(st.characters(codec="utf-8"), max_size=12)
_unit = st.floats(0.0, 1.0, allow_nan=False)
_time = st.floats(0.0, 2e9, allow_nan=False)
_mapping = st.dictionaries(st.sampled_from(["kind", "ref", "note"]), _text, max_size=2)
_edges = st.builds(
    MetaEdge,
    target_id=_text.map(lambda t: f"mem:{t}"),
    rationale=st.none() | _text,
    evidence=st.lists(_mapping, max_size=2).map(tuple),
    confidence=st.none() | _unit,
    created_at=st.none() | _time,
)
_metas = st.builds(
    MetaMemory,
    capture_status=st.sampled_from(["unavailable", "provided"]),
    intent=st.none() | _text,
    goals=st.lists(_text, max_size=2).map(tuple),
    tags=st.lists(_text, max_size=2).map(tuple),
    evidence=st.lists(_mapping, max_size=2).map(tuple),
    alternatives=st.lists(_mapping, max_size=1).map(tuple),
    confidence=st.none() | _unit,
    captured_at=st.none() | _time,
    context_edges=st.lists(_edges, max_size=2).map(tuple),
)
_associations = st.builds(
    Association,
    target_id=_text.map(lambda t: f"mem:{t}"),
    type=st.sampled_from(["temporal", "semantic", "causal"]),
    weight=_unit,
    created_at=_time,
)
_records = st.builds(
    MemoryRecord,
    id=st.builds(new_id),
    scope=st.builds(Scope, _text.filter(bool), _text, _text),
    source=st.builds(Source, st.sampled_from(["Agent", "User"]), _text, _text),
    content=_text.filter(bool),
    timestamp=_time | st.integers(0, 2**31),  # an int where a float belongs: the model writes 5.0
    seq=st.integers(0, 2**40),
    msg_id=_text,
    metadata=st.dictionaries(
        _text,
        _text | st.integers(-5, 5) | st.floats(width=32, allow_nan=False, allow_infinity=False),
        max_size=3,
    ),
    emotion=st.builds(EmotionVector, joy=_unit, fear=_unit, intensity=_unit, valence=st.floats(-1, 1)),
    fidelity=st.builds(Fidelity, score=_unit, access_count=st.integers(0, 9), last_accessed_at=_time),
    meta=_metas,
    associations=st.lists(_associations, max_size=2).map(tuple),
    created_at=_time,
    updated_at=_time,
    locked=st.booleans(),
    embedded=st.booleans(),
    embedding_model=st.sampled_from(["", "caller", "all-MiniLM-L6-v2"]),
    vector_pending=st.booleans(),
)


async def _json_text(redis: RedisClient, key: str) -> bytes:
    """The document's text as the server serialises it (redis-py would parse a plain JSON.GET)."""
    text: bytes = await command(redis, "EVAL", "return redis.call('JSON.GET', KEYS[1])", 1, key)
    return text


@given(rec=_records)
@hsettings(max_examples=150, deadline=None)
def test_a_memory_document_is_what_the_asdict_conversion_gave(rec: MemoryRecord) -> None:
    assert json.dumps(memory_to_doc(rec)) == json.dumps(earlier(reference_doc(rec)))


@given(rec=_records)
@hsettings(max_examples=150, deadline=None)
def test_a_document_the_earlier_model_wrote_reads_back_as_its_record(rec: MemoryRecord) -> None:
    back = memory_from_doc(json.loads(json.dumps(earlier(reference_doc(rec)))))
    assert back == dataclasses.replace(rec, timestamp=float(rec.timestamp))


_odd_values = st.sampled_from(
    [float("nan"), float("inf"), 2**70, datetime.datetime(2024, 5, 1, tzinfo=datetime.UTC), ("a", 1), True]
)


def _parsed(text: bytes | str) -> str:
    """A JSON text parsed and written again: equal for equal documents, ``3`` and ``3.0`` told apart."""
    return json.dumps(json.loads(text))


@given(rec=_records, odd=st.none() | _odd_values, where=st.sampled_from(["metadata", "evidence"]))
@hsettings(max_examples=200, deadline=None)
def test_a_memory_json_text_is_the_models_own(rec: MemoryRecord, odd: object, where: str) -> None:
    """The JSON text (orjson's where it can, pydantic's otherwise) is the document the earlier model's
    encoder wrote, odd values in the free parts too; NaN and the infinities, which RedisJSON refuses in
    either spelling, are refused before anything is sent."""
    if odd is not None and where == "metadata":
        rec = dataclasses.replace(rec, metadata={**rec.metadata, "odd": odd})
    elif odd is not None:
        rec = dataclasses.replace(rec, meta=dataclasses.replace(rec.meta, evidence=({"odd": odd},)))
    if isinstance(odd, float) and not plain(odd):
        with pytest.raises(ValueError, match="NaN or an infinity"):
            memory_json(rec)
        return
    model = EarlierMemoryDoc.model_validate(reference_doc(rec)).model_dump_json()
    assert _parsed(memory_json(rec)) == _parsed(model)


@given(recs=st.lists(_records, min_size=1, max_size=6))
@hsettings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
async def test_a_batch_reads_back_as_one_json_set_per_record_left_it(
    recs: list[MemoryRecord], redis: RedisClient, key_prefix: str
) -> None:
    keys = Keys(key_prefix)
    store = RedisRecordStore(redis, keys)
    writes = [MemoryWrite(r, (f"{key_prefix}:claim:{r.id}",)) for r in recs]
    await store.reserve_writes(
        [InFlightWrite("memory", r.id, w.claims) for r, w in zip(recs, writes, strict=True)], ttl_secs=60
    )
    await store.put_memories(writes, queue_blocks=True)
    for rec in recs:
        mirror = f"{key_prefix}:mirror:{rec.id}"
        await json_ops(redis).set(mirror, "$", earlier(reference_doc(rec)))
        got = await _json_text(redis, keys.memory(rec.id))
        assert got == await _json_text(redis, mirror)
        assert json.loads(got)["pk"] == rec.id
    # What rides with the documents: the in-flight entries end, pending marks and block events start.
    assert await redis.zcard(keys.writes_in_flight) == 0
    pending = {k.decode() for k in await redis.smembers(keys.vector_pending)}
    assert pending == {keys.memory(r.id) for r in recs if r.vector_pending}
    events = await redis.xrange(keys.block_stream)
    assert [fields[b"key"].decode() for _, fields in events] == [keys.memory(r.id) for r in recs]
    for rec in recs:
        assert await redis.get(f"{key_prefix}:claim:{rec.id}") == rec.id.encode()
        await redis.delete(keys.memory(rec.id))
    await redis.delete(keys.vector_pending, keys.block_stream)


async def test_odd_numbers_and_text_read_back_as_before(redis: RedisClient, key_prefix: str) -> None:
    keys = Keys(key_prefix)
    rec = MemoryRecord(
        id=new_id(),
        scope=Scope("ägent ☃"),
        source=Source("User", "u/1:x", "Zoë"),
        content='東京タワー "quoted" \\ back\u2028slash 🎉',
        timestamp=1e-7,
        seq=2**53,
        # No NaN or infinity: RedisJSON refuses the NaN and Infinity that both encoders write.
        metadata={"big": 1e300, "small": 5e-324, "n": -0.0, "e": 5.096610486393242e16},
        created_at=1_700_000_000.123456789,
        updated_at=1e16,
    )
    await RedisRecordStore(redis, keys).put_memories([MemoryWrite(rec, ())], queue_blocks=False)
    mirror = f"{key_prefix}:mirror"
    await json_ops(redis).set(mirror, "$", earlier(reference_doc(rec)))
    assert await _json_text(redis, keys.memory(rec.id)) == await _json_text(redis, mirror)
