"""A memory as the recall operations answer it: Cerememory's ``MemoryRecord`` shape (bare UUID ``id``,
content blocks whose text travels as UTF-8 byte values, ``fidelity`` as it is now), with our ``ref``,
scope and ``timestamp`` beside it; and ``RecalledMemory``, a record with its score.

The fidelity shown is the record's fidelity at the moment of the read (:func:`current_fidelity`), never
the stored baseline. An association whose target is neither a record ref nor a UUID (our writes accept
any text there) has no UUID for Cerememory's ``target_id``: it is listed in ``unresolved_associations``
instead of ``associations``, so the Cerememory SDK can still read the record.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from cpersona.model.fidelity import current_fidelity, current_noise
from cpersona.model.records import EmotionVector, format_time, parse_ref

if TYPE_CHECKING:
    from cpersona.model.records import Association, MemoryRecord

__all__ = ["RecalledMemoryBody", "bare_id", "memory_json", "recalled", "recalled_json"]

# dataclasses.asdict copies deeply and was a third of a large timeline's time; the vector is flat.
_EMOTION_FIELDS = tuple(f.name for f in dataclasses.fields(EmotionVector))


class RecalledMemoryBody(BaseModel):
    """A memory and its relevance: for a timeline, the relevance is the record's fidelity now."""

    model_config = ConfigDict(title="RecalledMemory", extra="forbid")

    record: dict[str, Any] = Field(description="Cerememory MemoryRecord, with `ref`, scope and `timestamp`")
    relevance_score: float
    activation_path: list[str] | None = None
    rendered_content: dict[str, Any] = Field(description="The content as stored (no noise)")

    def to_json(self) -> dict[str, Any]:
        # The record is JSON already (memory_json): no second walk over its byte values.
        return {
            "record": self.record,
            "relevance_score": self.relevance_score,
            "activation_path": self.activation_path,
            "rendered_content": self.rendered_content,
        }


def bare_id(target: str) -> str | None:
    """The UUID a ref or a bare UUID names (``mem:<uuid>`` → ``<uuid>``); ``None`` for other text."""
    ref = parse_ref(target)
    if ref is not None:
        return ref.id
    try:
        return str(uuid.UUID(target))
    except ValueError:
        return None


def _content(record: MemoryRecord) -> dict[str, Any]:
    data = list(record.content.encode("utf-8"))
    return {"blocks": [{"modality": "text", "format": "text/plain", "data": data}], "summary": None}


def _association(edge: Association, target_id: str | None) -> dict[str, Any]:
    when = format_time(edge.created_at)
    return {
        "target_id": target_id,
        "target_ref": edge.target_id,
        "association_type": edge.type,
        "weight": edge.weight,
        "created_at": when,
        "last_co_activation": when,
    }


def _associations(edges: tuple[Association, ...]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {"associations": [], "unresolved_associations": []}
    for edge in edges:
        target = bare_id(edge.target_id)
        out["associations" if target else "unresolved_associations"].append(_association(edge, target))
    return out


def memory_json(record: MemoryRecord, now: float) -> dict[str, Any]:
    """``record`` as a Cerememory ``MemoryRecord`` at ``now``."""
    fid = record.fidelity
    return {
        "id": record.id,
        "ref": record.ref,
        "store": record.store,
        "agent_id": record.scope.agent_id,
        "project_id": record.scope.project_id,
        "channel": record.scope.channel,
        "timestamp": format_time(record.timestamp),
        "created_at": format_time(record.created_at),
        "updated_at": format_time(record.updated_at),
        "last_accessed_at": format_time(fid.last_accessed_at),
        "access_count": fid.access_count,
        "content": _content(record),
        "fidelity": {
            "score": current_fidelity(fid, record.emotion, now),
            "noise_level": current_noise(fid, record.emotion, now),
            "decay_rate": fid.decay_rate,
            "emotional_anchor": fid.emotional_anchor,
            "reinforcement_count": fid.reinforcement_count,
            "stability": fid.stability,
            "last_decay_tick": format_time(fid.last_decay_tick),
        },
        "emotion": {name: getattr(record.emotion, name) for name in _EMOTION_FIELDS},
        **_associations(record.associations),
        "metadata": dict(record.metadata),
        "version": record.version,
    }


def recalled_json(record: MemoryRecord, now: float) -> dict[str, Any]:
    """A timeline's ``RecalledMemory``: scored by its fidelity now, rendered as stored, no path."""
    body = memory_json(record, now)
    return {
        "record": body,
        "relevance_score": body["fidelity"]["score"],
        "activation_path": None,
        "rendered_content": body["content"],
    }


def recalled(record: MemoryRecord, now: float) -> RecalledMemoryBody:
    """:func:`recalled_json` as its model, built without validating again what was built here."""
    return RecalledMemoryBody.model_construct(**recalled_json(record, now))
