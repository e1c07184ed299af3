"""reconstruct's bounds (§4.1): count, breadth (top_k, max_hops, max_evidence), head quote sizes, and the
budget in characters of quoted text.

The hard ranges are the request model's (a value outside one is refused, naming its field). What is
left to clamp is reported, never done silently: ``count`` above ``CPERSONA_RECONSTRUCT_MAX_COUNT``
(``count_policy``), and a budget above ``CPERSONA_RECONSTRUCT_MAX_BUDGET`` or below one head quote
(``budget_policy``). The numbers are settings rather than a stages/ policy table: reconstruct is no stage
of a recall policy, and its reference tunes them by these same environment variables.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import TYPE_CHECKING

from cpersona.model.reconstruct_response import Policy

if TYPE_CHECKING:
    from cpersona.model.reconstruct_request import ReconstructRequest
    from cpersona.operations.reconstruct.modes import Mode
    from cpersona.settings import Settings

__all__ = ["Budget", "Limits", "limits_of"]


@dataclasses.dataclass(frozen=True, slots=True)
class Limits:
    """One request's bounds once the defaults are filled in and the count is clamped."""

    count: int
    requested_count: int | None
    count_policy: Policy | None
    top_k: int
    max_hops: int
    max_evidence: int
    requested_budget: int | None
    default_budget: int
    max_budget: int
    quote_chars: int
    full_quotes: int
    tail_quote_chars: int
    excerpt_chars: int
    adjacency_seconds: float
    # A mode's own budget default (lite's 2,800), and pro's "no character budget unless one is given".
    mode_budget: int | None = None
    unbounded: bool = False

    def head_cap(self, position: int) -> int:
        """The head quote's size for the item at ``position`` (0-based) in item order."""
        return self.quote_chars if position < self.full_quotes else self.tail_quote_chars

    def budget(self, window: int) -> Budget:
        """The budget for a window of ``window`` items: requested, else max(default, their head caps);
        then capped, then raised to one head quote."""
        base = self.requested_budget
        source: str = "requested"
        if base is None and self.unbounded:
            return Budget(sys.maxsize, None)
        if base is None:
            source = "default"
            base = self.mode_budget
            if base is None:
                base = max(self.default_budget, sum(self.head_cap(i) for i in range(window)))
        if base > self.max_budget:
            return Budget(self.max_budget, _policy(source, "max_budget"))
        if base < self.head_cap(0):
            return Budget(self.head_cap(0), _policy(source, "below_one_head_quote"))
        return Budget(base, None)


@dataclasses.dataclass(frozen=True, slots=True)
class Budget:
    chars: int
    policy: Policy | None

    @property
    def clamped(self) -> bool:
        return self.policy is not None


def _policy(source: str, reason: str) -> Policy:
    return Policy(source="requested" if source == "requested" else "default", clamped=True, reason=reason)


def limits_of(req: ReconstructRequest, settings: Settings, mode: Mode | None = None) -> Limits:
    """The request's bounds; a ``mode`` brings its count, its budget and no relation walk (§4.1)."""
    default_count, max_count = settings.reconstruct_default_count, settings.reconstruct_max_count
    if mode is not None and mode.count is not None:
        default_count = max_count = mode.count
    base = default_count if req.count is None else req.count
    count, count_policy = base, None
    if base > max_count:
        count = max_count
        count_policy = _policy("default" if req.count is None else "requested", "max_count")
    return Limits(
        count=count,
        requested_count=None if count_policy is None else base,
        count_policy=count_policy,
        top_k=settings.reconstruct_top_k if req.top_k is None else req.top_k,
        max_hops=0 if mode is not None else 2 if req.max_hops is None else req.max_hops,
        max_evidence=40 if req.max_evidence is None else req.max_evidence,
        requested_budget=req.budget,
        default_budget=settings.reconstruct_default_budget,
        max_budget=settings.reconstruct_max_budget,
        quote_chars=settings.reconstruct_quote_chars,
        full_quotes=settings.reconstruct_full_quotes,
        tail_quote_chars=settings.reconstruct_tail_quote_chars,
        excerpt_chars=settings.reconstruct_excerpt_chars,
        adjacency_seconds=settings.reconstruct_adjacency_seconds,
        mode_budget=None if mode is None else mode.budget,
        unbounded=mode is not None and mode.budget is None,
    )
