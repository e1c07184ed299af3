"""A recall's request and its answer: the validated request, the returned rows, the result."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import (
    AliasChoices,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from cpersona.errors import InvalidRequest
from cpersona.model.epoch_time import ShownTime
from cpersona.model.fields import validate
from cpersona.model.recall_query import Order, RecallQuery
from cpersona.model.records import Source
from cpersona.model.result_model import ResultModel, absent, empty
from cpersona.model.scope import ReadScope
from cpersona.model.trace import RecallTrace, RecallTraceFailure
from cpersona.recall.stages.chain import Seated
from cpersona.settings import RecallMode

if TYPE_CHECKING:
    from collections.abc import Mapping

    from cpersona.model.time_cue import TimeCue
    from cpersona.recall.policy import Policy
    from cpersona.recall.stages.fusion import FusionMode
    from cpersona.settings import Settings

__all__ = ["Degraded", "Order", "RecallRequest", "RecallResult", "RecallRow", "recall_request"]


@dataclasses.dataclass(frozen=True, slots=True)
class RecallRequest:
    scope: ReadScope
    query: str
    limit: int
    deep: bool
    mode: FusionMode
    policy: str
    exclude_contents: tuple[str, ...] = ()
    full_content: bool = False
    order: Order = "best_first"
    trace: bool = False
    time_cue: TimeCue | None = None
    # Extra OR-ed phrases for the two lexical arms only (reconstruct's associative cues); the vector arm,
    # scoring and the gate see ``query`` alone. Empty, the recall is the one it was before.
    lexical_terms: tuple[str, ...] = ()

    @property
    def blank(self) -> bool:
        return not self.query.strip()


def recall_request(
    body: Mapping[str, Any] | RecallQuery,
    settings: Settings,
    policies: Mapping[str, Policy],
    *,
    max_limit: int,
) -> RecallRequest:
    """Validate a recall request (a body or a :class:`RecallQuery`) and resolve its policy and limit.

    Every problem names its field.
    """
    query = body if isinstance(body, RecallQuery) else validate(RecallQuery, body, settings)
    time_cue = None if query.time_cue is None else query.time_cue.cue()
    # Without a named policy, a recall with a cue runs the cue policy and one without runs the plain one,
    # so a recall without a cue answers exactly as it did before cues existed.
    default = settings.recall_policy if time_cue is None else settings.recall_cue_policy
    policy_name = default if query.policy is None else query.policy
    if policy_name not in policies:
        raise InvalidRequest(
            "policy", f"unknown policy {policy_name!r}; known: {', '.join(sorted(policies))}"
        )
    policy = policies[policy_name]
    if time_cue is not None and policy.cue is None:
        cued = ", ".join(sorted(name for name, p in policies.items() if p.cue is not None))
        raise InvalidRequest(
            "time_cue", f"policy {policy_name} takes no time cue; a cued policy does: {cued}"
        )
    top = min(max_limit, policy.depth.max)
    limit = policy.limit.default if query.limit is None else query.limit
    if limit > top:
        raise InvalidRequest("limit", f"must be at most {top}, got {limit}")
    return RecallRequest(
        scope=ReadScope(
            agent_id=query.agent_id,
            project_id=query.project_id,
            channel=query.channel,
            source_id=query.source_id,
        ),
        query=query.query,
        limit=limit,
        deep=query.deep,
        mode=settings.recall_mode if query.mode is None else query.mode,
        policy=policy_name,
        exclude_contents=tuple(query.exclude_contents),
        full_content=query.full_content,
        order=query.order,
        trace=query.trace,
        time_cue=time_cue,
    )


class RecallRow(ResultModel):
    """One returned row. ``content`` is cut to the policy's preview length unless ``full_content``.

    ``ref`` is ``mem:<id>``, ``ep:<id>``, or ``profile:<agent_id>`` for the profile row (read with
    ``get_profile``); ``match_reason`` says why the row is there, on every row. A held seat's reason has
    ``admission: "reservation"``.
    """

    ref: str = Field(description="mem:<uuid>, ep:<uuid>, or profile:<agent_id> for the profile row")
    kind: Literal["memory", "episode", "profile"]
    content: str
    content_truncated: bool = Field(default=False, exclude_if=empty)
    # Sent only beside content_truncated (the serializer below).
    content_len: int
    msg_id: str = Field(
        default="",
        validation_alias=AliasChoices("id", "msg_id"),
        serialization_alias="id",
        exclude_if=empty,
        description="The caller's id of the memory",
    )
    timestamp: ShownTime | None
    source: Source | None = Field(default=None, exclude_if=absent)
    score: float | None = Field(default=None, exclude_if=absent, description="The fused score")
    match_reason: dict[str, Any] = Field(
        description="Why the row is here, on every row: signal (cosine | rrf | rsf | keyword | recency | "
        "profile for ranked rows; block | cue for seats, with admission 'reservation'), the score the gate "
        "compared, and the scores the row carries"
    )

    sometimes_sent: ClassVar[frozenset[str]] = frozenset({"content_len"})

    @model_validator(mode="before")
    @classmethod
    def _read_back(cls, data: Any) -> Any:
        # A row read back from its JSON without content_len was sent whole.
        if isinstance(data, dict) and "content_len" not in data and isinstance(data.get("content"), str):
            return {**data, "content_len": len(data["content"])}
        return data

    # No return annotation: pydantic then describes the row by its fields (``Any`` would describe nothing).
    @model_serializer(mode="wrap")
    def _shown(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        out = handler(self)
        if not self.content_truncated:
            out.pop("content_len", None)
        return out

    @property
    def seated(self) -> bool:
        """Whether the row holds a seat (appended after the ``limit`` ranked rows) rather than a rank."""
        return self.match_reason.get("admission") == "reservation"


class Degraded(ResultModel):
    """An arm that failed or missed its deadline, and why; the recall answered without it."""

    model_config = ConfigDict(title="DegradedArm")

    arm: str
    status: str
    detail: str


class RecallResult(ResultModel):
    """A recall's answer: the rows that answer a question, best first unless ``order`` says otherwise (up
    to ``limit`` ranked rows, then at most 2 block and 3 cue seats, rows whose match_reason has admission
    'reservation').

    ``trace`` is the recall trace when one was built (``recall.trace.assemble``); it is part of the
    response only when the request asked for it (``trace_requested``), so a trace built for the server's
    own use (a sampler) leaves the response as it was. ``time_cue`` is the response's account of a cue
    (``None`` without one). :attr:`final`, the last stage set, from which the whole history can be read,
    and :attr:`timing_ms` are the run's, not the answer's: neither is sent.
    """

    ok: Literal[True] = True
    policy: dict[str, str]
    mode: RecallMode
    order: Order
    limit: int = Field(description="The ranked rows asked for (the request's limit, or the policy's default)")
    count: int = Field(default=0, description="Rows returned: at most limit ranked rows plus the seated ones")
    seated: int = Field(
        default=0, description="How many of the rows hold a seat (block or cue) rather than a rank"
    )
    rows: tuple[RecallRow, ...]
    # Sent only when it differs from limit (the serializer below).
    depth: int = Field(description="Rows per arm, when it differs from limit")
    degraded: tuple[Degraded, ...] = Field(default=(), exclude_if=empty)
    time_cue: dict[str, Any] | None = Field(
        default=None,
        exclude_if=absent,
        description="Only with a cue: {policy, period: [start, end], confidence (the step searched), "
        "revised, moved, seated}, or {policy, ignored: 'recent_only', period}",
    )
    # Sent when the request asked for it, then even as null (the serializer below).
    trace: RecallTrace | RecallTraceFailure | None = Field(
        default=None,
        description="Only when the request set trace: the recall trace (trace_version 1, or the error that "
        "kept it from being built); no text",
    )
    trace_requested: bool = Field(default=False, exclude=True)

    sometimes_sent: ClassVar[frozenset[str]] = frozenset({"depth", "trace"})

    _final: Seated | None = PrivateAttr(default=None)
    _timing_ms: dict[str, float] = PrivateAttr(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _counted(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        if "depth" not in data and "limit" in data:
            # An answer read back from its JSON without depth searched limit rows per arm.
            data = {**data, "depth": data["limit"]}
        if "count" in data:
            return data
        rows = data.get("rows", ())
        return {**data, "count": len(rows), "seated": sum(1 for row in rows if row.seated)}

    # No return annotation: pydantic then describes the answer by its fields (``Any`` would describe nothing).
    @model_serializer(mode="wrap")
    def _shown(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        out = handler(self)
        if self.depth == self.limit:
            out.pop("depth", None)
        if not self.trace_requested:
            out.pop("trace", None)
        return out

    def with_run(self, final: Seated | None, timing_ms: Mapping[str, float]) -> RecallResult:
        """This answer carrying the run behind it: its last stage set and its times."""
        out = self.model_copy()
        out._final = final
        out._timing_ms = dict(timing_ms)
        return out

    @property
    def final(self) -> Seated:
        """The last stage set of the run (absent from an answer read back from its JSON)."""
        if self._final is None:
            raise LookupError("this recall result holds no run: it was read back from its JSON")
        return self._final

    @property
    def timing_ms(self) -> Mapping[str, float]:
        """Milliseconds per step of the run (retrieval, each stage, the total; the trace's, when built)."""
        return self._timing_ms
