"""The response bodies of the HTTP API, as models: the OpenAPI document is generated from them.

The engine's results build their JSON themselves (``to_json``, kept byte for byte); these models
describe that JSON, and the HTTP tests validate every answer they get against them, so a description
cannot drift from what is sent. Each model's ``title`` is its name in the document.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from cpersona.model.agent_requests import Gate
from cpersona.model.record_queries import RecordKind
from cpersona.model.trace import RecallTrace, RecallTraceFailure

__all__ = [
    "CalibrationResponse",
    "ErrorDetail",
    "ErrorResponse",
    "GateResponse",
    "HealthResponse",
    "ProfileBody",
    "ProfileResponse",
    "RecallResponse",
    "RecallRowBody",
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


class RecallRowBody(ResponseModel):
    model_config = ConfigDict(title="RecallRow")

    ref: str = Field(description="mem:<uuid>, ep:<uuid>, or profile:<agent_id> for the profile row")
    kind: Literal["memory", "episode", "profile"]
    content: str
    content_truncated: bool | None = None
    content_len: int | None = None
    id: str | None = Field(default=None, description="The caller's id of the memory")
    timestamp: str | None
    source: dict[str, str] | None = None
    score: float | None = Field(default=None, description="The fused score")
    match_reason: dict[str, Any] = Field(
        description="Why the row is here, on every row: signal (cosine | rrf | rsf | keyword | recency | "
        "profile for ranked rows; block | cue for seats, with admission 'reservation'), the score the gate "
        "compared, and the scores the row carries"
    )


class DegradedArm(ResponseModel):
    arm: str
    status: str
    detail: str


class RecallResponse(ResponseModel):
    """The rows that answer a question, best first unless ``order`` says otherwise: up to ``limit`` ranked
    rows, then at most 2 block and 3 cue seats (rows whose match_reason has admission 'reservation')."""

    model_config = ConfigDict(title="RecallResult")

    ok: Literal[True]
    policy: dict[str, str]
    mode: str
    order: str
    limit: int = Field(description="The ranked rows asked for (the request's limit, or the policy's default)")
    count: int = Field(description="Rows returned: at most limit ranked rows plus the seated ones")
    seated: int = Field(description="How many of the rows hold a seat (block or cue) rather than a rank")
    rows: list[RecallRowBody]
    depth: int | None = Field(default=None, description="Rows per arm, when it differs from limit")
    degraded: list[DegradedArm] | None = None
    time_cue: dict[str, Any] | None = Field(
        default=None,
        description="Only with a cue: {policy, period: [start, end], confidence (the step searched), "
        "revised, moved, seated}, or {policy, ignored: 'recent_only', period}",
    )
    trace: RecallTrace | RecallTraceFailure | None = Field(
        default=None,
        description="Only when the request set trace: the recall trace (trace_version 1, or the error that "
        "kept it from being built); no text",
    )


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
