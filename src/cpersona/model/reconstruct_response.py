"""reconstruct's answer (§4.3 of the reference), one model for the Python API and ``POST /v1/reconstruct``.

Compact by default: an optional field that is absent is left out of the JSON (``exclude_if``), so a
response carries a clamp, a cut or a reservation only when one happened. The trace keeps its nulls (its
own shape).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from cpersona.model.result_model import ResultModel, absent, empty
from cpersona.model.trace import ReconstructTrace

__all__ = [
    "Bounds",
    "Claim",
    "ClaimRole",
    "Conflict",
    "Excerpt",
    "Item",
    "Policy",
    "ReconstructResult",
    "RoleWord",
    "ShortfallReason",
]

RoleWord = Literal["supports", "supersedes", "corrects", "qualifies", "contradicts", "temporal_predecessor"]
ShortfallReason = Literal[
    "no_relevant_evidence",
    "below_quality_threshold",
    "exhausted_candidates",
    "budget_exhausted",
    "count_zero",
]


class _Body(ResultModel):
    pass


class ClaimRole(_Body):
    ref: str = Field(description="The row that is this to the claim")
    role: RoleWord


class Claim(_Body):
    ref: str
    as_of: str | None = Field(
        default=None, exclude_if=absent, description="The record's time (ISO 8601); absent without one"
    )
    why: str | None = Field(
        default=None,
        exclude_if=absent,
        description="How the row joined the item: cluster:<key>, relation:<p>",
    )
    hops: int | None = Field(
        default=None, exclude_if=absent, description="Entity relations walked to reach it"
    )
    roles: list[ClaimRole] | None = Field(default=None, exclude_if=absent)


class Excerpt(_Body):
    ref: str
    content: str = Field(description="A contiguous span of the record's stored text")
    span: tuple[int, int] = Field(description="[start, end) of the span in the stored text")


class Conflict(_Body):
    refs: list[str]
    reason: Literal["same_msg_id_same_timestamp"]
    msg_id: str


class Item(_Body):
    content: str = Field(description="The head quote: a contiguous span of the head record's stored text")
    head_ref: str
    claims: list[Claim] = Field(
        default_factory=list,
        # Empty only where a mode compacted a lone head claim into ``as_of``; then left out of the JSON.
        exclude_if=empty,
        description="The item's rows, newest first; left out by lite and pro when the only one is the head",
    )
    as_of: str | None = Field(
        default=None,
        exclude_if=absent,
        description="lite and pro, when the item's only claim is its head: that claim's time (ISO 8601)",
    )
    span: tuple[int, int] | None = Field(
        default=None, exclude_if=absent, description="The quote's span, when not the whole record"
    )
    content_len: int | None = Field(
        default=None, exclude_if=absent, description="The head record's length, when quoted in part"
    )
    excerpts: list[Excerpt] | None = Field(default=None, exclude_if=absent)
    excerpts_omitted: int | None = Field(default=None, exclude_if=absent)
    independence_reason: str | None = Field(
        default=None, exclude_if=absent, description="The key that formed the cluster"
    )
    conflicts: list[Conflict] | None = Field(default=None, exclude_if=absent)
    claims_omitted: int | None = Field(default=None, exclude_if=absent)
    admission: Literal["reservation"] | None = Field(
        default=None, exclude_if=absent, description="A held cluster's item"
    )


class Policy(_Body):
    source: Literal["default", "requested"]
    clamped: bool
    reason: str


class Bounds(_Body):
    top_k: int
    max_hops: int
    max_evidence: int
    reached: list[Literal["top_k", "max_hops", "max_evidence"]] | None = Field(
        default=None, exclude_if=absent
    )


class ReconstructResult(_Body):
    """Items quoting stored rows, in order; the bounds and budget as they acted."""

    model_config = ConfigDict(title="ReconstructResult")

    ok: Literal[True] = True
    items: list[Item]
    effective_count: int
    returned_count: int
    shortfall_reason: ShortfallReason | None = Field(default=None, exclude_if=absent)
    reserved_count: int | None = Field(default=None, exclude_if=absent)
    reserved_omitted: int | None = Field(default=None, exclude_if=absent)
    requested_count: int | None = Field(default=None, exclude_if=absent)
    count_policy: Policy | None = Field(default=None, exclude_if=absent)
    requested_budget: int | None = Field(default=None, exclude_if=absent)
    budget_policy: Policy | None = Field(default=None, exclude_if=absent)
    effective_budget: int | None = Field(default=None, exclude_if=absent)
    used_budget: int | None = Field(default=None, exclude_if=absent)
    bounds: Bounds | None = Field(default=None, exclude_if=absent)
    time_cue: dict[str, Any] | None = Field(default=None, exclude_if=absent)
    mode: Literal["lite", "pro"] | None = Field(
        default=None, exclude_if=absent, description="The mode that bounded the answer"
    )
    cap: int | None = Field(
        default=None, exclude_if=absent, description="The mode's cap in cl100k tokens of the whole JSON"
    )
    used_tokens: int | None = Field(
        default=None,
        exclude_if=absent,
        description="cl100k tokens of this JSON without the trace (at most ``cap``)",
    )
    lite: Literal[True] | None = Field(
        default=None,
        exclude_if=absent,
        description="Echoes a request that chose lite with lite: true rather than mode: lite",
    )
    trace: ReconstructTrace | None = Field(
        default=None,
        exclude_if=absent,
        description=(
            "With trace: the full audit (candidate_refs, clusters, cues, items, sequence, coverage) and "
            "trace.recall"
        ),
    )
