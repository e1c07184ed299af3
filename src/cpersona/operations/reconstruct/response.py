"""The response (§4.3): the items the allocation admitted, the bounds and the budget as they acted, the
shortfall's reason, and with ``trace`` the audit that :mod:`.trace` builds."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from cpersona.model.reconstruct_response import Bounds, Claim, Excerpt, Item, ReconstructResult
from cpersona.model.records import format_time

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cpersona.model.reconstruct_response import ShortfallReason
    from cpersona.model.trace import ReconstructTrace
    from cpersona.operations.reconstruct.allocation import Allocation
    from cpersona.operations.reconstruct.bounds import Budget, Limits
    from cpersona.operations.reconstruct.bundling import Cluster
    from cpersona.operations.reconstruct.candidates import Recalled
    from cpersona.operations.reconstruct.structure import Row, Structured

__all__ = ["Quoted", "build_item", "build_result"]


@dataclasses.dataclass(frozen=True, slots=True)
class Quoted:
    """One item before allocation: its structure, its head quote's span and its excerpts in order."""

    structured: Structured
    cluster: Cluster
    held: bool
    head_span: tuple[int, int]
    excerpts: tuple[tuple[Row, tuple[int, int]], ...]


def _claim(row: Row, roles: Sequence[Any]) -> Claim:
    as_of = None if row.ts is None else format_time(row.ts)
    return Claim(ref=row.ref, as_of=as_of, why=row.why, hops=row.hops, roles=list(roles) or None)


def build_item(q: Quoted, excerpts: int) -> Item:
    s = q.structured
    head = s.head
    start, end = q.head_span
    whole = (start, end) == (0, len(head.text))
    shown = [
        Excerpt(ref=row.ref, content=row.text[a:b], span=(a, b)) for row, (a, b) in q.excerpts[:excerpts]
    ]
    return Item(
        content=head.text[start:end],
        head_ref=head.ref,
        claims=[_claim(row, roles) for row, roles in s.claims],
        span=None if whole else (start, end),
        content_len=None if whole else len(head.text),
        excerpts=shown or None,
        excerpts_omitted=(len(q.excerpts) - excerpts) or None,
        independence_reason=q.cluster.reason,
        conflicts=list(s.conflicts) or None,
        claims_omitted=s.omitted or None,
        admission="reservation" if q.held else None,
    )


def _shortfall(limits: Limits, recalled: Recalled, window: int, returned: int) -> ShortfallReason | None:
    if not recalled.candidates:
        return "no_relevant_evidence"
    if returned < window:
        return "budget_exhausted"
    if window >= limits.count:
        return None
    ranked = sum(1 for c in recalled.candidates if not c.reserved)
    return "exhausted_candidates" if ranked >= limits.top_k else "below_quality_threshold"


def _bounds(limits: Limits, recalled: Recalled, beyond_hops: bool, quoted: Sequence[Quoted]) -> Bounds | None:
    reached: list[Any] = []
    if sum(1 for c in recalled.candidates if not c.reserved) >= limits.top_k:
        reached.append("top_k")
    if beyond_hops:
        reached.append("max_hops")
    if any(q.structured.omitted for q in quoted):
        reached.append("max_evidence")
    if not reached:
        return None
    return Bounds(
        top_k=limits.top_k, max_hops=limits.max_hops, max_evidence=limits.max_evidence, reached=reached
    )


def build_result(
    limits: Limits,
    recalled: Recalled,
    quoted: Sequence[Quoted],
    shown: Sequence[tuple[Quoted, int]],
    alloc: Allocation,
    budget: Budget,
    *,
    beyond_hops: bool,
    trace: ReconstructTrace | None,
) -> ReconstructResult:
    items = [build_item(q, taken) for q, taken in shown]
    window = sum(1 for q in quoted if not q.held)
    returned = sum(1 for q, _ in shown if not q.held)
    held = len(quoted) - window
    acted = budget.clamped or alloc.cut
    return ReconstructResult(
        items=items,
        effective_count=limits.count,
        returned_count=returned,
        shortfall_reason=_shortfall(limits, recalled, window, returned),
        reserved_count=(len(items) - returned) or None,
        reserved_omitted=(held - (len(items) - returned)) or None,
        requested_count=limits.requested_count,
        count_policy=limits.count_policy,
        requested_budget=limits.requested_budget if budget.clamped else None,
        budget_policy=budget.policy,
        effective_budget=budget.chars if acted else None,
        used_budget=alloc.used if acted else None,
        bounds=_bounds(limits, recalled, beyond_hops, quoted),
        time_cue=None if recalled.view.time_cue is None else dict(recalled.view.time_cue),
        trace=trace,
    )
