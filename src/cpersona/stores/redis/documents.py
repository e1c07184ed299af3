"""How records are laid out in Redis: redis-om JSON models, their search indexes, and the conversions.

Each record type is a redis-om ``JsonModel`` (validated by pydantic when written and read; a batch of
memories is written as the model's JSON text, by orjson where that is the same: :mod:`.memory_json`).
The models are bound to one engine's Redis client and key prefix by :func:`bind_documents`, so two
engines in one process never share a connection through class state.

The models declare the documents; their search indexes are declared by hand in :mod:`.indexes` (which
says why). Scope values are caller text, so documents hold them a second time as tags: the value's UTF-8
bytes in hex (``''`` becomes ``x``), so a tag query never needs escaping and the global pool is an
ordinary value; a memory also holds the tags of the prefixes of its source id that a prefix read can
name (``tag_source_prefixes``, see :mod:`.scope`). Memory and episode documents also carry what the
lexical arms search besides the text: ``grams`` (CJK trigrams, glued words) and ``stems`` (the engine's
own word stems), and memories the tags of their short CJK substrings (``tag_short_grams``); see
:mod:`.lexical`.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from aredis_om import Field, JsonModel
from pydantic import ConfigDict

from cpersona.model.cue_query import stored_emotion_axes
from cpersona.model.records import (
    Association,
    EmotionVector,
    EpisodeRecord,
    Fidelity,
    MemoryRecord,
    MetaEdge,
    MetaMemory,
    ProfileRecord,
    Scope,
    Source,
)
from cpersona.stores.record_values import BlockParent
from cpersona.stores.redis.lexical import doc_grams, doc_short_grams, doc_stems
from cpersona.stores.redis.scope import source_prefix_tags, tag

if TYPE_CHECKING:
    from cpersona.keys import Keys
    from cpersona.stores.redis.connection import RedisClient

__all__ = [
    "block_parent_of",
    "DocumentModels",
    "bind_documents",
    "episode_from_doc",
    "episode_to_doc",
    "memory_from_doc",
    "memory_to_doc",
    "validated_json",
    "meta_from",
    "meta_to_doc",
    "scope_doc",
    "scope_from",
    "tag",
]

INDEX_VERSION = 1


class _Document(JsonModel):
    """Base of our documents. It skips ``JsonModel.__init__``, which starts an async "is RedisJSON
    loaded" probe and never awaits it (a warning per instance); the engine checks the module once at
    connect time instead."""

    def __init__(self, **data: Any) -> None:
        super(JsonModel, self).__init__(**data)


class _ScopedDoc(_Document):
    agent_id: str
    project_id: str = ""
    channel: str = ""
    tag_agent: str = Field(default="x")
    tag_project: str = Field(default="x")
    tag_channel: str = Field(default="x")


class MemoryDoc(_ScopedDoc):
    # Free metadata may hold NaN or an infinity: the JSON text spells them as json.dumps did (NaN,
    # Infinity), which RedisJSON refuses, rather than as null; such a write fails as it did before.
    model_config = ConfigDict(ser_json_inf_nan="constants")

    source: dict[str, str]
    tag_source: str = "x"
    tag_source_prefixes: list[str] = []
    msg_id: str = ""
    tag_msg: str = "x"
    content: str
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


class EpisodeDoc(_ScopedDoc):
    summary: str
    keywords: list[str] = []
    text: str = ""
    grams: list[str] = []
    stems: str = ""
    ts: float
    seq: int
    start_time: float | None = None
    end_time: float | None = None
    resolved: bool = False
    created_at: float
    embedded: bool = False
    embedding_model: str = ""
    vector_pending: int = 0


class RawDoc(_ScopedDoc):
    session_id: str
    tag_session: str = "x"
    turn_id: str | None = None
    topic_id: str | None = None
    source: str
    speaker: str
    visibility: str
    secrecy_level: str
    content: str
    grams: list[str] = []
    stems: str = ""
    tag_short_grams: list[str] = []
    sealed: str = ""
    ts: float
    metadata: dict[str, Any] = {}
    meta: dict[str, Any] = {}
    suppressed: bool = False


class ProfileDoc(_Document):
    agent_id: str
    content: str
    updated_at: float


@dataclasses.dataclass(frozen=True, slots=True)
class DocumentModels:
    """The record models bound to one Redis client and key prefix."""

    memory: type[MemoryDoc]
    episode: type[EpisodeDoc]
    raw: type[RawDoc]
    profile: type[ProfileDoc]


def bind_documents(client: RedisClient, keys: Keys) -> DocumentModels:
    """Make model classes whose keys live under ``keys.prefix`` on ``client``.

    redis-om keeps the connection on the class, so each engine gets its own subclasses instead of
    setting a process-wide connection.
    """

    class BoundMemory(MemoryDoc, index=True):
        class Meta:
            database = client
            global_key_prefix = keys.prefix
            model_key_prefix = "mem"
            index_name = keys.memory_index

    class BoundEpisode(EpisodeDoc, index=True):
        class Meta:
            database = client
            global_key_prefix = keys.prefix
            model_key_prefix = "ep"
            index_name = keys.episode_index

    class BoundRaw(RawDoc, index=True):
        class Meta:
            database = client
            global_key_prefix = keys.prefix
            model_key_prefix = "raw"
            index_name = keys.raw_index

    class BoundProfile(ProfileDoc, index=True):
        class Meta:
            database = client
            global_key_prefix = keys.prefix
            model_key_prefix = "profile"
            index_name = f"{keys.prefix}:idx:profile"

    return DocumentModels(BoundMemory, BoundEpisode, BoundRaw, BoundProfile)


def scope_doc(scope: Scope) -> dict[str, str]:
    return {
        "agent_id": scope.agent_id,
        "project_id": scope.project_id,
        "channel": scope.channel,
        "tag_agent": tag(scope.agent_id),
        "tag_project": tag(scope.project_id),
        "tag_channel": tag(scope.channel),
    }


def scope_from(doc: Mapping[str, Any]) -> Scope:
    return Scope(doc["agent_id"], doc.get("project_id", ""), doc.get("channel", ""))


def _fields(value: Any) -> dict[str, Any]:
    """A flat slotted dataclass's fields (its ``__slots__``, in field order) by name: what ``asdict``
    gives for one without containers, without its recursive deep copy (a tenth of building a doc)."""
    return {name: getattr(value, name) for name in value.__slots__}


@functools.lru_cache(maxsize=4096)
def _source_tags(source_id: str) -> tuple[str, ...]:
    # A batch repeats a few source ids; scanning each one in Python was a twentieth of a store's time.
    return tuple(source_prefix_tags(source_id))


def meta_to_doc(meta: MetaMemory) -> dict[str, Any]:
    out = _fields(meta)
    for key in ("goals", "assumptions", "tags", "evidence", "alternatives"):
        out[key] = [dict(x) if isinstance(x, Mapping) else x for x in out[key]]
    # The edges are dataclasses holding containers: asdict's deep copy is the right tool for them.
    out["context_edges"] = [dataclasses.asdict(edge) for edge in meta.context_edges]
    return out


def meta_from(doc: Mapping[str, Any]) -> MetaMemory:
    if not doc:
        return MetaMemory()
    return MetaMemory(
        capture_status=doc.get("capture_status", "unavailable"),
        intent=doc.get("intent"),
        rationale=doc.get("rationale"),
        trigger=doc.get("trigger"),
        decision=doc.get("decision"),
        goals=tuple(doc.get("goals", ())),
        assumptions=tuple(doc.get("assumptions", ())),
        tags=tuple(doc.get("tags", ())),
        evidence=tuple(doc.get("evidence", ())),
        alternatives=tuple(doc.get("alternatives", ())),
        confidence=doc.get("confidence"),
        captured_at=doc.get("captured_at"),
        context_edges=tuple(MetaEdge(**edge) for edge in doc.get("context_edges", ())),
    )


def memory_to_doc(rec: MemoryRecord) -> dict[str, Any]:
    """The JSON document of a memory, as stored under ``keys.memory(rec.id)``."""
    emotion = _fields(rec.emotion)
    return {
        "pk": rec.id,
        **scope_doc(rec.scope),
        "source": _fields(rec.source),
        "tag_source": tag(rec.source.id),
        "tag_source_prefixes": list(_source_tags(rec.source.id)),
        "msg_id": rec.msg_id,
        "tag_msg": tag(rec.msg_id),
        "content": rec.content,
        "grams": doc_grams(rec.content),
        "stems": doc_stems(rec.content),
        "tag_short_grams": doc_short_grams(rec.content),
        "ts": rec.timestamp,
        "seq": rec.seq,
        "metadata": dict(rec.metadata),
        "store": rec.store,
        "emotion": emotion,
        "emotion_axes": stored_emotion_axes(emotion),
        "fidelity": _fields(rec.fidelity),
        "meta": meta_to_doc(rec.meta),
        "associations": [_fields(a) for a in rec.associations],
        "created_at": rec.created_at,
        "updated_at": rec.updated_at,
        "version": rec.version,
        "locked": rec.locked,
        "embedded": rec.embedded,
        "embedding_model": rec.embedding_model,
        "vector_pending": int(rec.vector_pending),
    }


def memory_from_doc(doc: Mapping[str, Any]) -> MemoryRecord:
    src = doc.get("source") or {}
    return MemoryRecord(
        id=doc["pk"],
        scope=scope_from(doc),
        source=Source(src.get("type", "Agent"), src.get("id", ""), src.get("name", "")),
        content=doc["content"],
        timestamp=float(doc["ts"]),
        seq=int(doc["seq"]),
        msg_id=doc.get("msg_id", ""),
        metadata=doc.get("metadata") or {},
        store=doc.get("store", "episodic"),
        emotion=EmotionVector(**(doc.get("emotion") or {})),
        fidelity=Fidelity(**(doc.get("fidelity") or {})),
        meta=meta_from(doc.get("meta") or {}),
        associations=tuple(Association(**a) for a in doc.get("associations") or ()),
        created_at=float(doc.get("created_at", 0.0)),
        updated_at=float(doc.get("updated_at", 0.0)),
        version=int(doc.get("version", 1)),
        locked=bool(doc.get("locked", False)),
        embedded=bool(doc.get("embedded", False)),
        embedding_model=doc.get("embedding_model", ""),
        vector_pending=bool(doc.get("vector_pending", 0)),
    )


def episode_to_doc(rec: EpisodeRecord) -> dict[str, Any]:
    text = " ".join((rec.summary, *rec.keywords))
    return {
        "pk": rec.id,
        **scope_doc(rec.scope),
        "summary": rec.summary,
        "keywords": list(rec.keywords),
        "text": text,
        "grams": doc_grams(text),
        "stems": doc_stems(text),
        "ts": rec.timestamp,
        "seq": rec.seq,
        "start_time": rec.start_time,
        "end_time": rec.end_time,
        "resolved": rec.resolved,
        "created_at": rec.created_at,
        "embedded": rec.embedded,
        "embedding_model": rec.embedding_model,
        "vector_pending": int(rec.vector_pending),
    }


def episode_from_doc(doc: Mapping[str, Any]) -> EpisodeRecord:
    return EpisodeRecord(
        id=doc["pk"],
        scope=scope_from(doc),
        summary=doc["summary"],
        seq=int(doc["seq"]),
        keywords=tuple(doc.get("keywords") or ()),
        start_time=doc.get("start_time"),
        end_time=doc.get("end_time"),
        resolved=bool(doc.get("resolved", False)),
        created_at=float(doc.get("created_at", 0.0)),
        embedded=bool(doc.get("embedded", False)),
        embedding_model=doc.get("embedding_model", ""),
        vector_pending=bool(doc.get("vector_pending", 0)),
    )


def profile_from_doc(doc: Mapping[str, Any]) -> ProfileRecord:
    return ProfileRecord(doc["agent_id"], doc["content"], float(doc["updated_at"]))


def validated(model: type[JsonModel], doc: Mapping[str, Any]) -> dict[str, Any]:
    """Run a document through its redis-om model (pydantic) and return the JSON-ready dict."""
    out: dict[str, Any] = model.model_validate(doc).model_dump(mode="json")
    return out


def validated_json(model: type[JsonModel], doc: Mapping[str, Any]) -> str:
    """:func:`validated`, as JSON text: pydantic's encoder writes it in a third of the time ``model_dump``
    and the standard library's took (17 µs against 47 µs); a test reads both back byte for byte."""
    return model.model_validate(doc).model_dump_json()


def block_parent_of(ref: str, doc: Mapping[str, Any]) -> BlockParent | None:
    """What a block build reads of a memory or episode document; ``None`` (logged) for a malformed one."""
    memory = ref.startswith("mem:")
    try:
        return BlockParent(
            kind="memory" if memory else "episode",
            record_id=str(doc["pk"]),
            agent_id=str(doc["agent_id"]),
            project_id=str(doc.get("project_id", "")),
            channel=str(doc.get("channel", "")),
            timestamp=float(doc["ts"]),
            seq=int(doc["seq"]),
            text=str(doc["content"] if memory else doc["summary"]),
            vector_model=str(doc.get("embedding_model") or "")
            if doc.get("embedded") and not doc.get("vector_pending")
            else "",
        )
    except (KeyError, TypeError, ValueError) as exc:
        logging.getLogger("cpersona.blocks").warning("cannot build blocks for %s: %s", ref, exc)
        return None
