"""The response bodies of the HTTP routes whose answer is not an operation's result (the error envelope,
records, profiles, stats, health, calibration), as models: the OpenAPI document is generated from them.

An operation's result is its own response model (:mod:`cpersona.model.result_model`). The HTTP tests
validate every answer they get against these, so a description cannot drift from what is sent. Each
model's ``title`` is its name in the document.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from cpersona.model.agent_requests import Gate
from cpersona.model.record_queries import RecordKind

__all__ = [
    "CalibrationResponse",
    "ErrorDetail",
    "ErrorResponse",
    "GateResponse",
    "HealthResponse",
    "ProfileBody",
    "ProfileResponse",
    "RecordBody",
    "RecordListResponse",
    "RecordResponse",
    "StatsResponse",
]


class ResponseModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorDetail(ResponseModel):
    code: str = Field(description="Stable SCREAMING_SNAKE_CASE code")
    message: str = Field(description="What was wrong, for people")
    field: str | None = Field(
        description="Dotted path of the offending field (e.g. `records[3].content`, `body`), or null"
    )


class ErrorFieldDetails(ResponseModel):
    model_config = ConfigDict(title="ErrorDetails")

    field: str = Field(description="The same path as `error.field`")


class ErrorResponse(ResponseModel):
    """The one error envelope of every route: CPersona's ``error`` object, and beside it the top-level
    fields of Cerememory's envelope (CMP §1.1) with the same code and message."""

    model_config = ConfigDict(title="Error")

    ok: Literal[False]
    error: ErrorDetail
    code: str = Field(description="`error.code` again, where CMP clients read it")
    message: str = Field(description="`error.message` again, where CMP clients read it")
    details: ErrorFieldDetails | None = Field(description="`{field}` when the error names a field, else null")
    retry_after: int | None = Field(
        description="Seconds to wait before retrying a refusal that ends by itself (also `Retry-After`), "
        "else null"
    )
    request_id: str | None = Field(description="Also in the `x-request-id` header")


class RecordBody(BaseModel):
    """A memory, episode or raw entry; times are RFC 3339 UTC, the scope flattened into the record."""

    model_config = ConfigDict(title="Record", extra="allow")

    ref: str
    kind: RecordKind
    id: str
    agent_id: str
    project_id: str
    channel: str


class RecordResponse(ResponseModel):
    ok: Literal[True]
    record: RecordBody


class RecordListResponse(ResponseModel):
    model_config = ConfigDict(title="RecordList")

    ok: Literal[True]
    kind: RecordKind
    count: int
    records: list[RecordBody]


class ProfileBody(ResponseModel):
    model_config = ConfigDict(title="Profile")

    agent_id: str
    content: str
    updated_at: str


class ProfileResponse(ResponseModel):
    ok: Literal[True]
    profile: ProfileBody | None


class StatsResponse(ResponseModel):
    """Record counts (of one agent, or all) and pending vector writes, and beside them the fields of
    Cerememory's ``StatsResponse`` (CMP §7) of the same scope (:mod:`cpersona.model.cmp_stats`)."""

    model_config = ConfigDict(title="Stats")

    ok: Literal[True]
    memories: int
    episodes: int
    raw_entries: int
    vector_pending: int
    vectors: int | None = Field(description="null without an embedder")
    # Cerememory's StatsResponse (CMP §7), of the same scope.
    total_records: int = Field(description="Memories (Cerememory's curated records)")
    records_by_store: dict[str, int] = Field(description="Memories per store, every store named")
    total_associations: int = Field(description="Outbound association edges of the memories")
    avg_fidelity: float = Field(description="Mean current fidelity of the memories (0 when none)")
    avg_fidelity_by_store: dict[str, float] = Field(description="The same per non-empty store")
    oldest_record: str | None = Field(description="The oldest memory's own time, RFC 3339 (null when none)")
    newest_record: str | None = Field(description="The newest memory's own time, RFC 3339 (null when none)")
    total_recall_count: int = Field(description="Reconsolidating recalls of the memories, summed")
    raw_journal_records: int = Field(description="Raw journal entries (= raw_entries)")


_KEYED = "; absent from the answer to a request without a key when keys are in force"


class HealthResponse(ResponseModel):
    """The status, and the backends: Redis version and modules, the vector engine, the embedder, the
    trace publisher (these only for a request with a key when keys are in force)."""

    model_config = ConfigDict(title="Health")

    ok: Literal[True]
    status: Literal["ok"]
    redis: dict[str, Any] | None = Field(default=None, description="Version, modules, embedded" + _KEYED)
    vector_engine: str | None = Field(default=None, description="The vector engine, null for none" + _KEYED)
    embedder: dict[str, Any] | None = Field(
        default=None, description="The embedder's name and dimensions, null for none" + _KEYED
    )
    traces: dict[str, int] | None = Field(default=None, description="The trace publisher's counters" + _KEYED)


class CalibrationResponse(ResponseModel):
    model_config = ConfigDict(title="Calibration")

    ok: Literal[True]
    calibration: dict[str, Any]


class GateResponse(ResponseModel):
    model_config = ConfigDict(title="GateSelection")

    ok: Literal[True]
    agent_id: str
    gate: Gate
    calibration: dict[str, Any] | None
