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

import uuid
from typing import Any

from cpersona.model.fidelity import FidelityCurve, as_read
from cpersona.model.records import (
    MEMORY,
    META,
    TIMES_AS_TEXT,
    MemoryRecord,
    MetaMemory,
    parse_ref,
)

__all__ = ["cmp_record", "memory_id", "meta_json", "read_now"]


def memory_id(target: str) -> str:
    """A record id as CMP writes it: the bare UUID of ``mem:<uuid>``, anything else as it is."""
    ref = parse_ref(target)
    return ref.id if ref is not None and ref.kind == "mem" else target


def _association(edge: dict[str, Any], target_id: str) -> dict[str, Any]:
    """An association of the record's JSON form (its time as text) as CMP shows it."""
    return {
        "target_id": target_id,
        "association_type": edge["type"],
        "weight": edge["weight"],
        "created_at": edge["created_at"],
        "last_co_activation": edge["created_at"],
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


def meta_json(meta: MetaMemory) -> dict[str, Any]:
    """A MetaMemory as JSON-ready data, its times as RFC 3339 text (a graph node's ``meta`` too)."""
    out: dict[str, Any] = META.dump_python(meta, mode="json", context=TIMES_AS_TEXT)
    return out


def read_now(rec: MemoryRecord, now: float, curve: FidelityCurve) -> MemoryRecord:
    """The stored record as read at ``now`` (:func:`~cpersona.model.fidelity.as_read`, the one reading).

    Apply it once, to a record as stored: applied to a record already read this way, it decays it twice.
    ``Engine.get`` and ``list`` already hand records out this way.
    """
    return as_read(rec, now, curve=curve)


def cmp_record(rec: MemoryRecord) -> dict[str, Any]:
    """``rec`` (as read, :func:`read_now`) as a CMP ``MemoryRecord``, from the memory's JSON form."""
    data = MEMORY.dump_python(rec, mode="json", context=TIMES_AS_TEXT)
    f = data["fidelity"]
    edges = data["associations"]
    return {
        "id": rec.id,
        "ref": rec.ref,
        **data["scope"],
        "store": rec.store,
        "created_at": data["timestamp"],
        "stored_at": data["created_at"],
        "updated_at": data["updated_at"],
        "last_accessed_at": f["last_accessed_at"],
        "access_count": f["access_count"],
        "content": {
            "blocks": [
                {"modality": "text", "format": "text/plain", "data": list(rec.content.encode("utf-8"))}
            ],
            "summary": None,
        },
        "fidelity": {
            "score": f["score"],
            "noise_level": f["noise_level"],
            "decay_rate": f["decay_rate"],
            "emotional_anchor": f["emotional_anchor"],
            "reinforcement_count": f["reinforcement_count"],
            "stability": f["stability"],
            "last_decay_tick": f["last_decay_tick"],
        },
        "emotion": data["emotion"],
        "associations": [
            _association(e, memory_id(e["target_id"])) for e in edges if _names_memory(e["target_id"])
        ],
        "other_associations": [
            _association(e, e["target_id"]) for e in edges if not _names_memory(e["target_id"])
        ],
        "metadata": data["metadata"],
        "version": rec.version,
        "meta": data["meta"],
    }
