"""A recall's request and its answer: the validated request, the returned rows, the result."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Literal

from cpersona.errors import InvalidRequest
from cpersona.model.records import Source, format_time
from cpersona.model.scope import ReadScope
from cpersona.model.time_cue import parse_time_cue
from cpersona.model.validate import as_bool, as_choice, as_int, as_str, as_str_list

if TYPE_CHECKING:
    from collections.abc import Mapping

    from cpersona.model.time_cue import TimeCue
    from cpersona.recall.policy import Policy
    from cpersona.recall.stages.chain import Seated
    from cpersona.recall.stages.fusion import FusionMode
    from cpersona.settings import Settings

__all__ = ["Degraded", "Order", "RecallRequest", "RecallResult", "RecallRow", "recall_request"]


Order = Literal["best_first", "best_last"]
_MODES: tuple[FusionMode, ...] = ("rrf", "rsf", "cascade")
_ORDERS: tuple[Order, ...] = ("best_first", "best_last")
_REQUEST_FIELDS = frozenset(
    {
        "agent_id", "query", "limit", "deep", "mode", "project_id", "channel", "source_id",
        "exclude_contents", "full_content", "order", "policy", "header", "trace", "time_cue",
    }
)  # fmt: skip
_MAX_QUERY = 4_000
_MAX_EXCLUDES = 256


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

    @property
    def blank(self) -> bool:
        return not self.query.strip()


def recall_request(
    body: Mapping[str, Any], settings: Settings, policies: Mapping[str, Policy], *, max_limit: int
) -> RecallRequest:
    """Validate a recall request; every problem names its field."""
    for key in body:
        if key not in _REQUEST_FIELDS:
            raise InvalidRequest(key, "is not a known field")
    klen = settings.max_key_length
    if "agent_id" not in body:
        raise InvalidRequest("agent_id", "is required")
    if "query" not in body:
        raise InvalidRequest("query", "is required (an empty string asks for the newest records)")
    time_cue = parse_time_cue(body.get("time_cue"))
    # Without a named policy, a recall with a cue runs the cue policy and one without runs the plain one,
    # so a recall without a cue answers exactly as it did before cues existed.
    default = settings.recall_policy if time_cue is None else settings.recall_cue_policy
    policy_name = as_str(body.get("policy", default), "policy", max_len=klen)
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
    project = body.get("project_id")
    channel = body.get("channel")
    return RecallRequest(
        scope=ReadScope(
            agent_id=as_str(body["agent_id"], "agent_id", max_len=klen),
            project_id=None if project is None else as_str(project, "project_id", max_len=klen),
            channel=None if channel is None else as_str(channel, "channel", max_len=klen),
            source_id=as_str(body.get("source_id", ""), "source_id", max_len=klen),
        ),
        query=as_str(body["query"], "query", max_len=_MAX_QUERY),
        limit=as_int(body.get("limit", policy.limit.default), "limit", lo=0, hi=top),
        deep=as_bool(body.get("deep", False), "deep"),
        mode=as_choice(body.get("mode", settings.recall_mode), "mode", _MODES),
        policy=policy_name,
        exclude_contents=as_str_list(
            body.get("exclude_contents", []),
            "exclude_contents",
            max_items=_MAX_EXCLUDES,
            max_len=settings.max_content_length,
        ),
        full_content=as_bool(body.get("full_content", False), "full_content"),
        order=as_choice(body.get("order", "best_first"), "order", _ORDERS),
        trace=as_bool(body.get("trace", False), "trace"),
        time_cue=time_cue,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class RecallRow:
    """One returned row. ``content`` is cut to the policy's preview length unless ``full_content``."""

    ref: str | None
    kind: Literal["memory", "episode", "profile"]
    content: str
    content_len: int
    content_truncated: bool
    msg_id: str
    timestamp: float | None
    source: Source | None
    match_reason: Mapping[str, Any] | None
    score: float | None

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
        if self.match_reason is not None:
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

    ``trace`` is the recall trace when one was built (``_trace``); it is part of the response only when
    the request asked for it (``trace_requested``), so a trace built for the server's own use (a
    sampler) leaves the response as it was. ``time_cue`` is the response's account of a cue (``None``
    without one); ``cue_log`` is what the cue loop did, stage by stage, for the trace.
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
    trace: Mapping[str, Any] | None = None
    trace_requested: bool = False
    time_cue: Mapping[str, Any] | None = None
    cue_log: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ok": True,
            "policy": dict(self.policy),
            "mode": self.mode,
            "order": self.order,
            "count": len(self.rows),
            "rows": [r.to_json() for r in self.rows],
        }
        if self.depth != self.limit:
            out["depth"] = self.depth
        if self.degraded:
            out["degraded"] = [dataclasses.asdict(d) for d in self.degraded]
        if self.time_cue is not None:
            out["time_cue"] = dict(self.time_cue)
        if self.trace_requested:
            out["trace"] = None if self.trace is None else dict(self.trace)
        return out
