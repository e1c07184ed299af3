"""A memory as Cerememory's ``MemoryRecord`` (CMP §2.1): the shape ``introspect.record`` answers and the
Cerememory SDK's model reads.

- ``id`` is the bare UUID (the SDK types it ``UUID``); ``ref`` (``mem:<uuid>``) and the scope stay beside
  it, as fields the SDK ignores.
- ``created_at`` is the memory's own time (``timestamp``), the time CMP's temporal filters and timelines
  read, as ours do; ``stored_at`` is when it was written.
- ``content`` is one text block whose ``data`` is the UTF-8 bytes as integers 0-255 (CMP §1's binary
  form); this engine keeps the text of the first block only.
- ``fidelity.score`` and ``noise_level`` are shown as the record carries them: give it the record as read
  (:func:`read_now`: the values at that moment, :mod:`~cpersona.model.fidelity`), never the stored anchor.
- an association's ``target_id`` is the target's bare UUID when it names a memory (``mem:<uuid>`` or a
  bare UUID); ``last_co_activation`` is its creation time, as in the reference engine, which never moves
  it either. An association whose target is no memory (an episode, a raw entry, or text our writes
  accepted there) is listed in ``other_associations`` with its target as written, not in
  ``associations``, whose ``target_id`` the SDK reads as a memory's UUID.
- ``meta`` is the MetaMemory with its times (``captured_at``, each context edge's ``created_at``) as
  RFC 3339 text.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from cpersona.model.fidelity import as_read
from cpersona.model.records import (
    Association,
    EmotionVector,
    MemoryRecord,
    MetaMemory,
    format_time,
    parse_ref,
)

__all__ = ["cmp_record", "memory_id", "meta_json", "read_now"]

_EMOTION_FIELDS = tuple(f.name for f in dataclasses.fields(EmotionVector))


def memory_id(target: str) -> str:
    """A record id as CMP writes it: the bare UUID of ``mem:<uuid>``, anything else as it is."""
    ref = parse_ref(target)
    return ref.id if ref is not None and ref.kind == "mem" else target


def _association(edge: Association) -> dict[str, Any]:
    made = format_time(edge.created_at)
    return {
        "target_id": memory_id(edge.target_id),
        "association_type": edge.type,
        "weight": edge.weight,
        "created_at": made,
        "last_co_activation": made,
    }


def _names_memory(target: str) -> bool:
    ref = parse_ref(target)
    if ref is not None:
        return ref.kind == "mem"
    try:
        uuid.UUID(target)
    except ValueError:
        return False
    return True


def _time(value: float | None) -> str | None:
    return None if value is None else format_time(value)


def meta_json(meta: MetaMemory) -> dict[str, Any]:
    """A MetaMemory as JSON-ready data, its times as RFC 3339 text (a graph node's ``meta`` too)."""
    out = dataclasses.asdict(meta)
    out["captured_at"] = _time(meta.captured_at)
    for edge in out["context_edges"]:
        edge["created_at"] = _time(edge["created_at"])
    return out


def read_now(rec: MemoryRecord, now: float) -> MemoryRecord:
    """The stored record as read at ``now`` (:func:`~cpersona.model.fidelity.as_read`, the one reading).

    Apply it once, to a record as stored: applied to a record already read this way, it decays it twice.
    ``Engine.get`` and ``list`` already hand records out this way.
    """
    return as_read(rec, now)


def cmp_record(rec: MemoryRecord) -> dict[str, Any]:
    """``rec`` (as read, :func:`read_now`) as a CMP ``MemoryRecord``."""
    f = rec.fidelity
    return {
        "id": rec.id,
        "ref": rec.ref,
        "agent_id": rec.scope.agent_id,
        "project_id": rec.scope.project_id,
        "channel": rec.scope.channel,
        "store": rec.store,
        "created_at": format_time(rec.timestamp),
        "stored_at": format_time(rec.created_at),
        "updated_at": format_time(rec.updated_at),
        "last_accessed_at": format_time(f.last_accessed_at),
        "access_count": f.access_count,
        "content": {
            "blocks": [
                {"modality": "text", "format": "text/plain", "data": list(rec.content.encode("utf-8"))}
            ],
            "summary": None,
        },
        "fidelity": {
            "score": f.score,
            "noise_level": f.noise_level,
            "decay_rate": f.decay_rate,
            "emotional_anchor": f.emotional_anchor,
            "reinforcement_count": f.reinforcement_count,
            "stability": f.stability,
            "last_decay_tick": format_time(f.last_decay_tick),
        },
        # Not dataclasses.asdict, which copies deeply: a timeline renders thousands of these.
        "emotion": {name: getattr(rec.emotion, name) for name in _EMOTION_FIELDS},
        "associations": [_association(a) for a in rec.associations if _names_memory(a.target_id)],
        "other_associations": [
            {**_association(a), "target_id": a.target_id}
            for a in rec.associations
            if not _names_memory(a.target_id)
        ],
        "metadata": dict(rec.metadata),
        "version": rec.version,
        "meta": meta_json(rec.meta),
    }
