"""A change to one memory (``encode.update``, ``PATCH /v1/encode/{ref}``): each given field replaces the
old value wholesale, and at least one must be given."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from cpersona.model.fields import EpochTime, Header, KeyText, RequestModel
from cpersona.model.memory_parts import Content, Emotion, MetaBody, check_meta_size
from cpersona.model.records import StoreKind

__all__ = ["CHANGEABLE", "UpdateRequest"]

CHANGEABLE = ("content", "metadata", "emotion", "meta", "store", "timestamp")
"""The fields an update may change; the others of the body only address the record."""


class UpdateRequest(RequestModel):
    """The owner and the new values of a memory. A content change re-embeds it."""

    agent_id: KeyText = Field(description="The owning agent; another agent's record is not found")
    content: Content | None = None
    metadata: Any = None
    emotion: Emotion | None = None
    meta: MetaBody | None = None
    store: StoreKind | None = None
    timestamp: EpochTime | None = None
    record_id: Any = Field(default=None, description="Accepted for Cerememory compatibility; the path wins")
    header: Header = None

    _meta_size = field_validator("meta", mode="before")(check_meta_size)

    def changes(self) -> dict[str, Any]:
        """The changeable fields the caller gave, as given."""
        return {name: getattr(self, name) for name in CHANGEABLE if name in self.model_fields_set}
