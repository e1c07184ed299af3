"""A session summary to archive (``archive_episode``, ``POST /v1/episodes``) and the draft it becomes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Discriminator, Field, Tag, WithJsonSchema, field_validator

from cpersona.errors import InvalidRequest
from cpersona.model.drafts import EpisodeDraft
from cpersona.model.epoch_time import EPOCH_TIME_SCHEMA, EpochTime
from cpersona.model.fields import (
    TAG,
    AgentId,
    ContentText,
    Header,
    KeyText,
    RequestModel,
    check,
    refusal,
)
from cpersona.model.records import Scope

if TYPE_CHECKING:
    from cpersona.settings import Settings

__all__ = ["EpisodeRequest"]


def _keywords_branch(value: Any) -> str:
    return f"{TAG}words" if isinstance(value, str) else f"{TAG}list"


_Keywords = Annotated[
    Annotated[str, Tag(f"{TAG}words")]
    | Annotated[Sequence[KeyText], Field(max_length=256), Tag(f"{TAG}list")],
    Discriminator(_keywords_branch),
    Field(description="A list of keywords or one space-separated string"),
]


# Any messages; an object's ``timestamp`` (unless null) is read as a time, and refused if it is none.
_HISTORY_SCHEMA = {
    "anyOf": [
        {
            "type": "array",
            "items": {"properties": {"timestamp": {"anyOf": [EPOCH_TIME_SCHEMA, {"type": "null"}]}}},
        },
        {"type": "null"},
    ]
}


class EpisodeRequest(RequestModel):
    """A session summary; its period comes from start/end time or the history's timestamps."""

    summary: ContentText
    agent_id: AgentId
    project_id: KeyText = ""
    channel: KeyText = ""
    keywords: _Keywords = ()
    history: Annotated[Sequence[Any] | None, WithJsonSchema(_HISTORY_SCHEMA)] = Field(
        default=None, description="Messages; only their `timestamp`s are used (for start/end time)"
    )
    start_time: EpochTime | None = None
    end_time: EpochTime | None = None
    resolved: bool = False
    header: Header = None

    @field_validator("history", mode="before")
    @classmethod
    def _messages(cls, value: Any) -> Any:
        if isinstance(value, str | bytes):
            raise refusal("not_messages", "must be a list of messages")
        return value

    def draft(self, settings: Settings) -> EpisodeDraft:
        start, end = self.start_time, self.end_time
        times = [
            check(EpochTime, message["timestamp"], f"history[{i}].timestamp", settings)
            for i, message in enumerate(self.history or ())
            if isinstance(message, Mapping) and message.get("timestamp") is not None
        ]
        if times:
            start = min(times) if start is None else start
            end = max(times) if end is None else end
        if start is not None and end is not None and end < start:
            raise InvalidRequest("end_time", "is before start_time")
        keywords = self.keywords.split() if isinstance(self.keywords, str) else self.keywords
        return EpisodeDraft(
            scope=Scope(self.agent_id, self.project_id, self.channel),
            summary=self.summary,
            keywords=tuple(keywords),
            start_time=start,
            end_time=end,
            resolved=self.resolved,
        )
