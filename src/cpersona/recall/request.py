"""A recall's request and its answer: the validated request, the returned rows, the result."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Literal

from cpersona.errors import InvalidRequest
from cpersona.model.fields import validate
from cpersona.model.recall_query import Order, RecallQuery
from cpersona.model.records import Source, format_time
from cpersona.model.scope import ReadScope

if TYPE_CHECKING:
    from collections.abc import Mapping

    from cpersona.model.time_cue import TimeCue
    from cpersona.model.trace import RecallTrace, RecallTraceFailure
    from cpersona.recall.policy import Policy
    from cpersona.recall.stages.chain import Seated
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


@dataclasses.dataclass(frozen=True, slots=True)
class RecallRow:
    """One returned row. ``content`` is cut to the policy's preview length unless ``full_content``.

    ``ref`` is ``mem:<id>``, ``ep:<id>``, or ``profile:<agent_id>`` for the profile row (read with
    ``get_profile``); ``match_reason`` says why the row is there, on every row. A held seat's reason has
    ``admission: "reservation"``.
    """

    ref: str
    kind: Literal["memory", "episode", "profile"]
    content: str
    content_len: int
    content_truncated: bool
    msg_id: str
    timestamp: float | None
    source: Source | None
    match_reason: Mapping[str, Any]
    score: float | None

    @property
    def seated(self) -> bool:
        """Whether the row holds a seat (appended after the ``limit`` ranked rows) rather than a rank."""
        return self.match_reason.get("admission") == "reservation"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ref": self.ref, "kind": self.kind, "content": self.content}
        if self.content_truncated:
            out["content_truncated"] = True
            out["content_len"] = self.content_len
        if self.msg_id:
            out["id"] = self.msg_id
        out["timestamp"] = None if self.timestamp is None else format_time(self.timestamp)
        if self.source is not None:
            out["source"] = dataclasses.asdict(self.source)
        if self.score is not None:
            out["score"] = self.score
        out["match_reason"] = dict(self.match_reason)
        return out


@dataclasses.dataclass(frozen=True, slots=True)
class Degraded:
    arm: str
    status: str
    detail: str


@dataclasses.dataclass(frozen=True, slots=True)
class RecallResult:
    """A recall's answer. ``final`` is the last stage set, from which the whole history can be read.

    ``trace`` is the recall trace when one was built (``recall.trace.assemble``); it is part of the
    response only when the request asked for it (``trace_requested``), so a trace built for the server's
    own use (a sampler) leaves the response as it was. ``time_cue`` is the response's account of a cue
    (``None`` without one).
    """

    rows: tuple[RecallRow, ...]
    policy: Mapping[str, str]
    limit: int
    depth: int
    mode: FusionMode
    order: Order
    degraded: tuple[Degraded, ...]
    final: Seated
    timing_ms: Mapping[str, float]
    trace: RecallTrace | RecallTraceFailure | None = None
    trace_requested: bool = False
    time_cue: Mapping[str, Any] | None = None

    @property
    def count(self) -> int:
        """How many rows came back: up to ``limit`` ranked rows plus the ``seated`` ones."""
        return len(self.rows)

    @property
    def seated(self) -> int:
        """How many of the rows hold a seat (at most 2 block and 3 cue seats), not a rank."""
        return sum(1 for row in self.rows if row.seated)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ok": True,
            "policy": dict(self.policy),
            "mode": self.mode,
            "order": self.order,
            "limit": self.limit,
            "count": self.count,
            "seated": self.seated,
            "rows": [r.to_json() for r in self.rows],
        }
        if self.depth != self.limit:
            out["depth"] = self.depth
        if self.degraded:
            out["degraded"] = [dataclasses.asdict(d) for d in self.degraded]
        if self.time_cue is not None:
            out["time_cue"] = dict(self.time_cue)
        if self.trace_requested:
            out["trace"] = None if self.trace is None else self.trace.model_dump(mode="json")
        return out
