"""A raw journal entry (``encode.store_raw``, ``POST /v1/encode/raw``), a batch of them, and their draft.

The raw journal keeps what was said verbatim, with who said it and how secret it is; it is searched only
by the forensic raw query, never by a recall.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field, field_validator

from cpersona.model.drafts import RawDraft
from cpersona.model.fields import AgentId, Header, KeyText, Limit, RequestModel
from cpersona.model.memory_parts import Content, MetaBody, check_meta_size
from cpersona.model.memory_request import caller_metadata, content_text
from cpersona.model.records import RawSource, RawSpeaker, RawVisibility, Scope, SecrecyLevel

if TYPE_CHECKING:
    from cpersona.settings import Settings

__all__ = ["RawBatchRequest", "RawRequest"]


class RawRequest(RequestModel):
    """One verbatim journal entry."""

    content: Content
    agent_id: AgentId
    project_id: KeyText = ""
    channel: KeyText = ""
    session_id: Annotated[KeyText, Field(min_length=1)]
    turn_id: KeyText | None = None
    topic_id: KeyText | None = None
    source: RawSource
    speaker: RawSpeaker
    visibility: RawVisibility
    secrecy_level: SecrecyLevel
    metadata: Any = Field(default=None, description="Free JSON (an object, or any value kept as _metadata)")
    meta: MetaBody | None = None
    header: Header = None

    _meta_size = field_validator("meta", mode="before")(check_meta_size)

    def draft(self, settings: Settings, *, prefix: str = "") -> RawDraft:
        content, _ = content_text(self.content, f"{prefix}content", settings)
        now = time.time()
        return RawDraft(
            scope=Scope(self.agent_id, self.project_id, self.channel),
            session_id=self.session_id,
            source=self.source,
            speaker=self.speaker,
            visibility=self.visibility,
            secrecy_level=self.secrecy_level,
            content=content,
            turn_id=self.turn_id,
            topic_id=self.topic_id,
            metadata=caller_metadata(self.metadata, None, settings, f"{prefix}metadata"),
            meta=MetaBody.absent("encode.store_raw", now)
            if self.meta is None
            else self.meta.meta("encode.store_raw", now),
        )


class RawBatchRequest(RequestModel):
    """Many journal entries, validated as a whole before any is written."""

    records: Annotated[Sequence[RawRequest], Limit("batch_max", items=True)]
    header: Header = None
