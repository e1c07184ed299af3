"""A change to one memory (``encode.update``, ``PATCH /v1/encode/{ref}``): each given field replaces the
old value wholesale, and at least one must be given."""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import ConfigDict, Field, field_validator

from cpersona.model.epoch_time import EpochTime
from cpersona.model.fields import NOT_NULL, Header, KeyText, RequestModel, refusal, validate
from cpersona.model.memory_parts import (
    NO_RATIONALE,
    Content,
    Emotion,
    EmotionBody,
    MemoryContent,
    MetaBody,
    check_meta_size,
)
from cpersona.model.memory_request import StoreRequest
from cpersona.model.records import MemoryRecord, StoreKind

if TYPE_CHECKING:
    from collections.abc import Mapping

    from cpersona.settings import Settings

__all__ = ["CHANGEABLE", "UpdateRequest", "updated_record"]

CHANGEABLE = ("content", "metadata", "emotion", "meta", "store", "timestamp")
"""The fields an update may change; the others of the body only address the record."""


def _changes_something(schema: dict[str, Any]) -> None:
    # An update that names no changeable field is refused (400, "names no field to update").
    schema["anyOf"] = [{"required": [name]} for name in CHANGEABLE]


class UpdateRequest(RequestModel):
    """The owner and the new values of a memory. A content change re-embeds it."""

    model_config = ConfigDict(json_schema_extra=_changes_something)

    agent_id: KeyText = Field(description="The owning agent; another agent's record is not found")
    # Left out, the content stays; a null is refused, so the schema offers no null either.
    content: Annotated[Content | None, NOT_NULL] = None
    metadata: Any = None
    emotion: Emotion | None = None
    meta: MetaBody | None = None
    store: StoreKind | None = None
    timestamp: EpochTime | None = None
    record_id: Any = Field(default=None, description="Accepted for Cerememory compatibility; the path wins")
    header: Header = None

    _meta_size = field_validator("meta", mode="before")(check_meta_size)

    @field_validator("content", mode="before")
    @classmethod
    def _content_not_null(cls, value: Any) -> Any:
        if value is None:
            raise refusal("not_null", "must be text or content blocks, got null")
        return value

    def changes(self) -> dict[str, Any]:
        """The changeable fields the caller gave. A null resets its field to what a store without it
        would hold (no metadata, no emotion, no meta, the store kind of the content, now)."""
        out = {name: getattr(self, name) for name in CHANGEABLE if name in self.model_fields_set}
        resets: dict[str, Any] = {
            "metadata": {},
            "emotion": EmotionBody(),
            "meta": MetaBody(capture_status="unavailable", rationale=NO_RATIONALE),
            "store": "semantic"
            if isinstance(self.content, MemoryContent) and self.content.summary
            else "episodic",
            "timestamp": time.time(),
        }
        return {name: resets[name] if value is None else value for name, value in out.items()}


def updated_record(
    current: MemoryRecord, changes: Mapping[str, Any], settings: Settings, *, now: float, reembed: bool
) -> MemoryRecord:
    """``current`` with ``changes`` applied, each checked as a store of the whole memory would check it.

    The record gets the next version; ``reembed`` (an embedder is configured) marks it as not embedded
    until the write path has written its new vector.
    """
    base: dict[str, Any] = {
        "agent_id": current.scope.agent_id,
        "project_id": current.scope.project_id,
        "channel": current.scope.channel,
        "content": changes.get("content", current.content),
        "timestamp": changes.get("timestamp", current.timestamp),
        "metadata": changes.get("metadata", dict(current.metadata)),
        "store": changes.get("store", current.store),
    }
    for name in ("emotion", "meta"):
        if name in changes:
            base[name] = changes[name]
    draft = validate(StoreRequest, base, settings).draft(settings).record
    return dataclasses.replace(
        current,
        content=draft.content,
        timestamp=draft.timestamp,
        metadata=draft.metadata,
        store=draft.store,
        emotion=draft.emotion if "emotion" in changes else current.emotion,
        meta=dataclasses.replace(draft.meta, trigger="encode.update") if "meta" in changes else current.meta,
        updated_at=now,
        version=current.version + 1,
        vector_pending=False,
        embedded=False if reembed else current.embedded,
    )
