"""How records are laid out in Redis: each record kind's JSON document, derived from its one schema.

A document is the record's JSON form (its schema in :mod:`~cpersona.model.records`, ``dump_python(mode=
"json")``) under the document's names (``pk`` for the id, ``ts`` for the memory's time, the scope
flattened), plus the fields only the search indexes (:mod:`.indexes`) read; both are computed here and
nowhere else, and a document is read back through the same schema. Scope values are caller text, so
documents hold them a second time as tags: the value's UTF-8 bytes in hex (``''`` becomes ``x``), so a
tag query never needs escaping and the global pool is an ordinary value; a memory also holds the tags of
the prefixes of its source id that a prefix read can name (``tag_source_prefixes``, see :mod:`.scope`).
Memory and episode documents also carry what the lexical arms search besides the text: ``bigrams`` (CJK
2-grams), ``grams`` (CJK 3-grams, glued words) and ``stems`` (the engine's own word stems), and memories
the tags of their short CJK substrings (``tag_short_grams``); see :mod:`.lexical`. The key order of each
document is the one it has always had, so a document written today is byte for byte what an older engine
wrote, but for the fields added since (``bigrams``), which an older store gets when it is opened.

A profile is one plain document under one key, so redis-om carries it: :class:`ProfileDocument` is
redis-om's JSON model of the record (``JsonModel``, bound to an engine's client by
:func:`~.om_models.bind`), and the store reads, writes and deletes it through redis-om. Memories,
episodes and raw entries are not redis-om models, for reasons of its own parts:

- its ``save`` is one ``JSON.SET`` of one model; a memory, episode or raw write here is a fenced
  transaction with its claims, its pending mark and its block event, decided by scripts
  (:mod:`.write_scripts`), and a batch of memories is one ``JSON.MSET`` of their JSON text
  (:mod:`.memory_json`): a batch of 500 written model by model cost more in Python than Redis spent on it;
- its search indexes cannot be declared as recall needs them (:mod:`.indexes` says which attributes), so
  its queries, which run on those indexes, cannot serve recall either; the documents carry index fields
  (bigrams, grams, stems, tags) computed here that are no part of the record;
- their documents are not the record under its own names (``pk`` for ``id``, ``ts``, the scope flattened,
  the index fields), so a ``JsonModel`` of them would declare each record a second time, in the
  document's layout, where :func:`memory_to_doc` and :func:`record_form` derive that layout from the one
  schema; reads of them by id are one ``JSON.GET`` or ``JSON.MGET`` read through that schema.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any, Self

from cpersona.model.cue_query import stored_emotion_axes
from cpersona.model.json_values import NOT_FINITE, non_finite
from cpersona.model.records import (
    EPISODE,
    MEMORY,
    EpisodeRecord,
    MemoryRecord,
    MetaMemory,
    ProfileRecord,
    Scope,
)
from cpersona.stores.record_values import BlockParent
from cpersona.stores.redis.lexical import doc_bigrams, doc_grams, doc_short_grams, doc_stems
from cpersona.stores.redis.om_models import UNBOUND, JsonDocument
from cpersona.stores.redis.scope import source_prefix_tags, tag

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "ProfileDocument",
    "block_parent_of",
    "check_finite",
    "episode_from_doc",
    "episode_to_doc",
    "memory_from_doc",
    "memory_to_doc",
    "record_form",
    "scope_doc",
    "tag",
]

INDEX_VERSION = 1


def scope_doc(scope: Scope) -> dict[str, str]:
    return {
        "agent_id": scope.agent_id,
        "project_id": scope.project_id,
        "channel": scope.channel,
        "tag_agent": tag(scope.agent_id),
        "tag_project": tag(scope.project_id),
        "tag_channel": tag(scope.channel),
    }


def record_form(doc: Mapping[str, Any], **renamed: str) -> dict[str, Any]:
    """A document under its record's names, for the schema to read: ``pk`` as ``id``, the scope as one
    object, each ``renamed`` record field (``timestamp="ts"``) from its document field. The index fields
    are left in; the schema ignores them."""
    out = {
        **doc,
        "id": doc["pk"],
        "scope": {
            "agent_id": doc["agent_id"],
            "project_id": doc.get("project_id", ""),
            "channel": doc.get("channel", ""),
        },
    }
    for field, stored in renamed.items():
        out[field] = doc[stored]
    return out


def check_finite(metadata: Mapping[str, Any], meta: MetaMemory) -> None:
    """Refuse caller JSON holding NaN or an infinity: the schema's JSON form would write it as ``null``,
    and RedisJSON reads neither (requests refuse it first, naming the field)."""
    parts = (
        dict(metadata),
        meta.evidence,
        meta.alternatives,
        *(edge.evidence for edge in meta.context_edges),
    )
    if any(non_finite(part) for part in parts):
        raise ValueError(f"a record's metadata or meta {NOT_FINITE}")


@functools.lru_cache(maxsize=4096)
def _source_tags(source_id: str) -> tuple[str, ...]:
    # A batch repeats a few source ids; scanning each one in Python was a twentieth of a store's time.
    return tuple(source_prefix_tags(source_id))


def memory_to_doc(rec: MemoryRecord) -> dict[str, Any]:
    """The JSON document of a memory, as stored under ``keys.memory(rec.id)``."""
    check_finite(rec.metadata, rec.meta)
    data = MEMORY.dump_python(rec, mode="json")
    emotion = data["emotion"]
    return {
        "pk": rec.id,
        **scope_doc(rec.scope),
        "source": data["source"],
        "tag_source": tag(rec.source.id),
        "tag_source_prefixes": list(_source_tags(rec.source.id)),
        "msg_id": rec.msg_id,
        "tag_msg": tag(rec.msg_id),
        "content": rec.content,
        "bigrams": doc_bigrams(rec.content),
        "grams": doc_grams(rec.content),
        "stems": doc_stems(rec.content),
        "tag_short_grams": doc_short_grams(rec.content),
        "ts": data["timestamp"],
        "seq": rec.seq,
        "metadata": data["metadata"],
        "store": rec.store,
        "emotion": emotion,
        "emotion_axes": stored_emotion_axes(emotion),
        # Stored as numbers of one kind, as the document always held them; the schema reads the counts
        # back as the integers they are.
        "fidelity": {name: float(value) for name, value in data["fidelity"].items()},
        "meta": data["meta"],
        "associations": data["associations"],
        "created_at": data["created_at"],
        "updated_at": data["updated_at"],
        "version": rec.version,
        "locked": rec.locked,
        "embedded": rec.embedded,
        "embedding_model": rec.embedding_model,
        "vector_pending": int(rec.vector_pending),
    }


def memory_from_doc(doc: Mapping[str, Any]) -> MemoryRecord:
    return MEMORY.validate_python(record_form(doc, timestamp="ts"))


def episode_to_doc(rec: EpisodeRecord) -> dict[str, Any]:
    data = EPISODE.dump_python(rec, mode="json")
    text = " ".join((rec.summary, *rec.keywords))
    return {
        "pk": rec.id,
        **scope_doc(rec.scope),
        "summary": rec.summary,
        "keywords": data["keywords"],
        "text": text,
        "bigrams": doc_bigrams(text),
        "grams": doc_grams(text),
        "stems": doc_stems(text),
        "ts": float(rec.timestamp),
        "seq": rec.seq,
        "start_time": data["start_time"],
        "end_time": data["end_time"],
        "resolved": rec.resolved,
        "created_at": data["created_at"],
        "embedded": rec.embedded,
        "embedding_model": rec.embedding_model,
        "vector_pending": int(rec.vector_pending),
    }


def episode_from_doc(doc: Mapping[str, Any]) -> EpisodeRecord:
    return EPISODE.validate_python(record_form(doc))


class ProfileDocument(ProfileRecord, JsonDocument):
    """A profile's document: the record and redis-om's primary key ``pk``, the agent's id, under
    ``keys.profile(agent_id)`` (the key of the bound model, :func:`~.om_models.bind`)."""

    class Meta:
        database = UNBOUND

    @classmethod
    def of(cls, rec: ProfileRecord) -> Self:
        return cls.model_validate({"pk": rec.agent_id, **rec.model_dump()})

    def record(self) -> ProfileRecord:
        return ProfileRecord.model_validate(self.model_dump(exclude={"pk"}))


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
