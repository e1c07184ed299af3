"""The forensic raw-journal query (``recall.raw_query``, ``POST /v1/recall/raw``): its request, the filter
it resolves to, and its answer.

Decisions where the seed and the reference engine differ (Cerememory §5.5, §11):

* **Matching.** ``query`` is analysed as the memory keyword index analyses text (:mod:`cpersona.stores.
  redis.lexical`): every word must occur, as its English (Snowball) stem, stopwords left out; a Chinese or
  Japanese run must occur as a substring. Word order and punctuation do not matter. The caller's text is
  never passed to the search engine as syntax (each word becomes a term the engine cannot misread), so
  no query is a syntax error; one with no word to search (punctuation, stopwords) is refused naming
  ``query``. The reference ANDs a substring match of the whole query onto its full-text hits instead.
* **Order.** Chronological within the matches: oldest first by ``created_at``, ties by id. A forensic
  reader reconstructs what happened; the entries are not ranked by score.
* **temporal** is always applied, both ends included at the microsecond answers show; the reference
  drops it when a ``session_id`` is given (its §5.5 bug).
* **secrecy_levels** left out means ``public`` and ``sensitive`` (the reference engine's rule; its docs say
  all levels): a ``secret`` entry comes back only to a caller that names ``secret``.
* **limit** is 1 to :data:`MAX_RAW_LIMIT`, refused outside (never clamped); ``total_candidates`` counts every
  match of the filter, before ``limit``.
* A ``sealed`` entry is stored encrypted; with ``include_sealed`` the sealed entries of the scope are
  decrypted and matched in process, at most :data:`SEALED_SCAN_MAX` of them per query (the newest, and
  ``sealed_scanned`` says how many were read). Without the flag nothing of them is read or counted.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, model_validator

from cpersona.errors import InvalidRequest
from cpersona.model.epoch_time import EpochTime
from cpersona.model.fields import WHOLE, AgentId, Header, KeyText, RequestModel
from cpersona.model.records import RawRecord, RawSource, RawSpeaker, RawVisibility, SecrecyLevel, format_time
from cpersona.model.result_model import ResultModel, absent
from cpersona.model.scope import ReadScope

__all__ = [
    "DEFAULT_SECRECY",
    "MAX_RAW_LIMIT",
    "SEALED_SCAN_MAX",
    "RawContentBlock",
    "RawContentBody",
    "RawEntry",
    "RawFilter",
    "RawPage",
    "RawQueryRequest",
    "RawQueryResult",
    "RawTemporalRange",
]

MAX_RAW_LIMIT = 1_000
"""The most entries one raw query returns; a larger ``limit`` is refused."""
SEALED_SCAN_MAX = 2_000
"""The most sealed entries one query with ``include_sealed`` decrypts (the newest of the filter)."""
DEFAULT_SECRECY: tuple[SecrecyLevel, ...] = ("public", "sensitive")
_MAX_QUERY = 4_000
_HALF_MICROSECOND = 5e-7


class RawTemporalRange(RequestModel):
    """A closed time range; both ends included."""

    start: EpochTime = Field(description="First instant included")
    end: EpochTime = Field(description="Last instant included (not before start)")

    def period(self) -> tuple[float, float]:
        """The range in epoch seconds, compared at the microsecond an answer shows a time with (so an
        entry's ``created_at`` copied into both ends finds it)."""
        return self.start - _HALF_MICROSECOND, self.end + _HALF_MICROSECOND

    @model_validator(mode="after")
    def _ordered(self) -> RawTemporalRange:
        if self.end < self.start:
            raise InvalidRequest("temporal.end", "must not be before temporal.start")
        return self


class RawQueryRequest(RequestModel):
    """Which raw journal entries of one scope to read back verbatim."""

    model_config = ConfigDict(title="RecallRawQueryRequest")

    agent_id: AgentId = Field(description="The agent whose journal is read (exact)")
    project_id: KeyText | None = Field(default=None, description="Project X sees X and the global pool ''")
    channel: KeyText | None = Field(default=None, description="Channel X sees X and the global pool ''")
    session_id: Annotated[KeyText, Field(min_length=1)] | None = Field(
        default=None, description="Only this session's entries, matched exactly (leave it out for all)"
    )
    query: Annotated[str, Field(min_length=1, max_length=_MAX_QUERY)] | None = Field(
        default=None,
        description="Words every returned entry holds (by English stem; stopwords left out); not a "
        "search syntax: punctuation and operators are words' separators",
    )
    temporal: RawTemporalRange | None = Field(default=None, description="Only entries created in this range")
    limit: Annotated[int, Field(ge=1, le=MAX_RAW_LIMIT), WHOLE] = Field(
        default=10, description=f"Entries returned, oldest first (1 to {MAX_RAW_LIMIT})"
    )
    include_private_scratch: bool = Field(default=False, description="Also private_scratch entries")
    include_sealed: bool = Field(
        default=False, description=f"Also sealed entries (decrypted; at most {SEALED_SCAN_MAX} per query)"
    )
    secrecy_levels: Annotated[list[SecrecyLevel], Field(min_length=1, max_length=3)] | None = Field(
        default=None, description="Secrecy levels returned (default public and sensitive)"
    )
    header: Header = None

    def resolved(self) -> RawFilter:
        """The filter this request reads."""
        visibilities: list[RawVisibility] = ["normal"]
        if self.include_private_scratch:
            visibilities.append("private_scratch")
        levels = DEFAULT_SECRECY if self.secrecy_levels is None else tuple(dict.fromkeys(self.secrecy_levels))
        return RawFilter(
            scope=ReadScope(self.agent_id, self.project_id, self.channel),
            session_id=self.session_id,
            period=None if self.temporal is None else self.temporal.period(),
            visibilities=tuple(visibilities),
            secrecy_levels=levels,
            query=self.query,
            include_sealed=self.include_sealed,
            limit=self.limit,
        )


@dataclasses.dataclass(frozen=True, slots=True)
class RawFilter:
    """What a raw query reads: every condition an entry must pass, and how many to return.

    ``visibilities`` never holds ``sealed``: sealed entries are read only with ``include_sealed``, by
    their own path. ``query`` ``None`` means every entry of the filter.
    """

    scope: ReadScope
    session_id: str | None
    period: tuple[float, float] | None
    visibilities: tuple[RawVisibility, ...]
    secrecy_levels: tuple[SecrecyLevel, ...]
    query: str | None
    include_sealed: bool
    limit: int


@dataclasses.dataclass(frozen=True, slots=True)
class RawPage:
    """What the store found: the first ``limit`` entries in order, how many matched in all, and how many
    sealed entries it decrypted to decide."""

    records: tuple[RawRecord, ...]
    total: int
    sealed_scanned: int = 0


# ------------------------------------------------------------------------------------------- answer


class _Body(ResultModel):
    pass


class RawContentBlock(_Body):
    modality: Literal["text"] = "text"
    format: Literal["text/plain"] = "text/plain"
    data: list[int] = Field(description="The entry's text as its UTF-8 bytes (Cerememory's wire form)")


class RawContentBody(_Body):
    model_config = ConfigDict(title="RawContent")

    blocks: list[RawContentBlock]
    summary: None = None


class RawEntry(_Body):
    """One raw journal entry, verbatim (Cerememory's ``RawJournalRecord`` and our ref and scope)."""

    model_config = ConfigDict(title="RawJournalRecord")

    id: str = Field(description="The entry's UUID")
    ref: str = Field(description="raw:<uuid>")
    agent_id: str
    project_id: str
    channel: str
    session_id: str
    turn_id: str | None = None
    topic_id: str | None = None
    source: RawSource
    speaker: RawSpeaker
    visibility: RawVisibility
    secrecy_level: SecrecyLevel
    created_at: str = Field(description="RFC 3339, UTC")
    updated_at: str = Field(description="RFC 3339, UTC (a raw entry is never changed: its created_at)")
    content: RawContentBody
    metadata: dict[str, Any]
    derived_memory_ids: list[str] = Field(description="Memories derived from the entry (none are, yet)")
    suppressed: bool = Field(description="Always false: a suppressed entry is never returned")

    @property
    def text(self) -> str:
        return bytes(self.content.blocks[0].data).decode()

    @classmethod
    def of(cls, record: RawRecord) -> RawEntry:
        # Built without validation: every value is a stored record's, already checked when written, and
        # validating a text's bytes one integer at a time made a 1000-entry answer take 60 ms.
        when = format_time(record.created_at)
        block = RawContentBlock.model_construct(data=list(record.content.encode()))
        return cls.model_construct(
            id=record.id,
            ref=record.ref,
            agent_id=record.scope.agent_id,
            project_id=record.scope.project_id,
            channel=record.scope.channel,
            session_id=record.session_id,
            turn_id=record.turn_id,
            topic_id=record.topic_id,
            source=record.source,
            speaker=record.speaker,
            visibility=record.visibility,
            secrecy_level=record.secrecy_level,
            created_at=when,
            updated_at=when,
            content=RawContentBody.model_construct(blocks=[block]),
            metadata=dict(record.metadata),
            derived_memory_ids=[],
            suppressed=False,
        )


class RawQueryResult(_Body):
    """The matching entries, oldest first, and how many matched before ``limit``. A record's nulls
    (turn_id, topic_id, summary) are shown, as Cerememory shows them."""

    model_config = ConfigDict(title="RecallRawQueryResponse")

    ok: Literal[True] = True
    records: list[RawEntry]
    total_candidates: int = Field(description="Entries that pass every filter, before limit")
    sealed_scanned: int | None = Field(
        default=None,
        exclude_if=absent,
        description="With include_sealed: the sealed entries decrypted to answer",
    )
