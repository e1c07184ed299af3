"""A memory write (``encode.store``, ``POST /v1/encode``) and a batch of them, and the draft each becomes.

The request model checks every field on its own; :meth:`StoreRequest.draft` adds what needs the server
(the clock, the merged metadata's size) and returns the frozen draft the write path stores without
further checks.
"""

from __future__ import annotations

import functools
import struct
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
from pydantic import ConfigDict, Field, WithJsonSchema, field_validator

from cpersona.errors import InvalidRequest
from cpersona.model.associations import StoreAssociations, store_declaration, store_edges
from cpersona.model.cue_query import CallerEmbedding
from cpersona.model.drafts import CALLER_EMBEDDING, MemoryDraft, WriteWarning
from cpersona.model.epoch_time import EpochTime
from cpersona.model.fields import (
    AgentId,
    ContentText,
    Header,
    KeyText,
    Limit,
    RequestModel,
    check,
    json_size,
    refusal,
)
from cpersona.model.memory_parts import (
    Content,
    Emotion,
    MemoryContent,
    MetaBody,
    SourceBody,
    check_meta_size,
    emotion_vector,
)
from cpersona.model.records import MemoryRecord, Scope, StoreKind

if TYPE_CHECKING:
    import numpy.typing as npt

    from cpersona.settings import Settings

__all__ = ["BatchRequest", "StoreRequest", "caller_metadata", "content_text"]


_AGENT_SOURCE = SourceBody()
"""The source of a memory that names none (the agent); one frozen instance, not a model built per record."""


class StoreRequest(RequestModel):
    """One memory. Unknown fields are refused (400 naming the field)."""

    model_config = ConfigDict(title="EncodeRequest")

    content: Content
    agent_id: AgentId = Field(description="The owning agent (exact match on every read)")
    project_id: KeyText = Field(default="", description="Project; '' is the global pool")
    channel: KeyText = Field(default="", description="Channel; '' is the global pool")
    source: SourceBody | None = None
    id: KeyText | None = Field(default=None, description="Caller's message id; a repeat is skipped")
    msg_id: KeyText | None = Field(default=None, description="Alias of id")
    timestamp: EpochTime | None = Field(default=None, description="The memory's own time (default now)")
    metadata: Any = Field(default=None, description="Free JSON (an object, or any value kept as _metadata)")
    context: dict[str, Any] | None = Field(default=None, description="Kept as metadata._context")
    store: StoreKind | None = None
    emotion: Emotion | None = None
    meta: MetaBody | None = None
    associations: StoreAssociations | None = None
    lock: bool = False
    embedding: CallerEmbedding | None = Field(
        default=None,
        description="The memory's vector, of the index's dimension, stored (at unit length) instead of "
        "embedding the content; its record's embedding_model is 'caller'",
    )
    header: Header = None

    _meta_size = field_validator("meta", mode="before")(check_meta_size)

    def draft(self, settings: Settings, *, prefix: str = "") -> MemoryDraft:
        """The validated write; ``prefix`` names its place in a batch (``records[3].``)."""
        content, summary = content_text(self.content, f"{prefix}content", settings)
        now = time.time()
        warnings: list[WriteWarning] = []
        timestamp = now if self.timestamp is None else self.timestamp
        ahead = timestamp - now
        if self.timestamp is not None and ahead > settings.future_timestamp_slack_secs:
            if settings.future_timestamp_mode == "reject":
                raise InvalidRequest(f"{prefix}timestamp", f"is {ahead:.0f} s ahead of the server clock")
            if settings.future_timestamp_mode == "warn":
                warnings.append("timestamp_ahead_of_clock")
        scope = Scope(self.agent_id, self.project_id, self.channel)
        msg_id = self.msg_id if self.msg_id is not None else self.id
        record = MemoryRecord(
            id="",
            scope=scope,
            source=(self.source or _AGENT_SOURCE).source(scope.agent_id),
            content=content,
            timestamp=timestamp,
            seq=0,
            msg_id=msg_id or "",
            metadata=caller_metadata(self.metadata, self.context, settings, f"{prefix}metadata"),
            store=self.store or ("semantic" if summary else "episodic"),
            emotion=emotion_vector(self.emotion),
            meta=MetaBody.absent("encode.store", now)
            if self.meta is None
            else self.meta.meta("encode.store", now),
            associations=store_edges(self.associations, now),
            locked=self.lock,
            # Said now, so that with_vectors need not copy the record to say it: a caller's vector is
            # written or the whole store fails (it is never left pending).
            embedded=self.embedding is not None,
            embedding_model=CALLER_EMBEDDING if self.embedding is not None else "",
        )
        return MemoryDraft(
            record=record,
            declared=store_declaration(self.associations),
            warnings=tuple(warnings),
            embedding=None if self.embedding is None else _frozen_array(self.embedding),
            embedding_field=f"{prefix}embedding",
        )


class BatchRequest(RequestModel):
    """Many memories, validated as a whole before anything is written; errors name ``records[i].field``."""

    model_config = ConfigDict(title="EncodeBatchRequest")

    records: Annotated[Sequence[StoreRequest], Limit("batch_max", items=True)]
    infer_associations: Annotated[bool, WithJsonSchema({"type": "boolean", "const": False})] = Field(
        default=False,
        description="Cerememory's request for sequential edges between consecutive items; this engine "
        "infers none, so only false is accepted (true is a 400 rather than a request silently ignored)",
    )
    header: Header = None

    @field_validator("infer_associations")
    @classmethod
    def _no_inference(cls, value: bool) -> bool:
        if value:
            raise refusal("not_inferred", "must be false: this engine infers no associations between items")
        return value


def _frozen_array(values: list[float]) -> npt.NDArray[np.float64]:
    """A caller's vector as one read-only array of exactly the numbers sent (float64: no number a request
    holds overflows it; the engine narrows the batch to the index's float32 at once). The write holds on
    to it rather than the request's list of Python floats: the collector walks every element of a list
    each time it looks at one, and a batch holds a thousand.

    The numbers are packed as C doubles and the array reads that buffer (read-only, as bytes are): the
    same values bit for bit, in about half the time numpy takes to read a list of 384 floats itself."""
    return np.frombuffer(_doubles(len(values)).pack(*values), dtype=np.float64)


@functools.lru_cache(maxsize=8)
def _doubles(n: int) -> struct.Struct:
    return struct.Struct(f"={n}d")


def content_text(value: str | MemoryContent, field: str, settings: Settings) -> tuple[str, str | None]:
    """(text, summary) of plain text or Cerememory content, the text checked as stored content."""
    if isinstance(value, str):
        return value, None  # plain text is a ContentText field of the model, already checked
    return check(ContentText, value.text(), field, settings), value.summary


def caller_metadata(
    value: Any, context: dict[str, Any] | None, settings: Settings, field: str
) -> dict[str, Any]:
    """The caller's metadata as stored: an object as given, any other value under ``_metadata``."""
    if value is None:
        metadata: dict[str, Any] = {}
    elif isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                raise InvalidRequest(field, "keys must be strings")
        metadata = dict(value)
    else:
        metadata = {"_metadata": value}
    if context is not None:
        metadata["_context"] = context
    json_size(metadata, field, most=settings.max_metadata_length)
    return metadata
