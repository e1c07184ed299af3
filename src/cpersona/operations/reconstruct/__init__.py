"""reconstruct: a read-only exit over ONE recall (reference §4). It selects, orders and assigns roles
to stored rows; it never composes text, never calls a model and never writes (no record or vector
write; a traced call's recall trace goes to the trace channel, through the engine's port). Every
item's content and every excerpt is a contiguous span of a stored record it cites.

::

    bounds      count, top_k, max_hops, max_evidence, head caps, budget      (``bounds``)
    1 cues      entity matches → extra terms for the two lexical arms        (``cues``)
    2-3         the one recall (limit = top_k) and its rows' records          (``candidates``)
    4 bundling  union-find: msg_id, episode, adjacent (anchored), relation   (``bundling``)
    5 order     the window of ``count`` clusters, then the held clusters     (``order``)
    6 walk      entity relations up to max_hops → evidence                  (``walk``)
    7 structure head, claims newest first, roles, conflicts                  (``structure``)
    8 quoting   head quote and excerpts, contiguous spans of the record     (``quoting``)
    9 allocate  the ``items`` sequence cut to the budget                     (``allocation``)
     10 cap      lite/pro: the longest prefix whose JSON fits the token cap   (``modes``, ``tokens``)
       response  the compact answer, and with ``trace`` the audit  (``response``, ``trace``)
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from cpersona.model.reconstruct_response import ReconstructResult
from cpersona.model.scope import ReadScope
from cpersona.operations.associations import record_links
from cpersona.operations.reconstruct.allocation import Allocation, allocate, allocate_passages
from cpersona.operations.reconstruct.bounds import limits_of
from cpersona.operations.reconstruct.bundling import bundle
from cpersona.operations.reconstruct.candidates import KEYWORD_SEAT, recall_candidates
from cpersona.operations.reconstruct.cues import associative_cues
from cpersona.operations.reconstruct.modes import HELD_LONG_CHARS, hold_to_cap, mode_of
from cpersona.operations.reconstruct.order import order_items
from cpersona.operations.reconstruct.quoting import passage_spans, quote_span
from cpersona.operations.reconstruct.response import Quoted, build_result
from cpersona.operations.reconstruct.structure import structure
from cpersona.operations.reconstruct.trace import Allocated, trace_of
from cpersona.operations.reconstruct.walk import relation_walk

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from cpersona.model.reconstruct_request import ReconstructRequest
    from cpersona.operations.reconstruct.bounds import Budget, Limits
    from cpersona.operations.reconstruct.candidates import Recalled, RecallPort, RecallView
    from cpersona.operations.reconstruct.modes import Mode
    from cpersona.operations.reconstruct.order import Ordered
    from cpersona.operations.reconstruct.structure import Structured
    from cpersona.operations.reconstruct.trace import Ledger
    from cpersona.settings import ReconstructSequence, Settings
    from cpersona.stores.protocols import RecordStore

__all__ = ["reconstruct"]


def _scope(req: ReconstructRequest) -> ReadScope:
    return ReadScope(req.agent_id, req.project_id, req.channel, req.source_id)


async def reconstruct(
    recall: RecallPort, records: RecordStore, settings: Settings, req: ReconstructRequest, ledger: Ledger
) -> ReconstructResult:
    """Reconstruct over one recall run by ``recall`` (see :class:`RecallPort`), reading ``records``;
    ``ledger`` builds a traced call's coverage ledger."""
    mode = mode_of(req, settings)
    limits = limits_of(req, settings, mode)
    if limits.count == 0:
        return ReconstructResult(
            items=[], effective_count=0, returned_count=0, shortfall_reason="count_zero",
            requested_count=limits.requested_count, count_policy=limits.count_policy,
        )  # fmt: skip
    scope = _scope(req)
    cues = await associative_cues(records, scope, req.query)
    asks = KEYWORD_SEAT if mode is None else mode.asks
    recalled = await recall_candidates(recall, records, req, limits.top_k, cues.terms, asks)
    pool = recalled.candidates
    links = dict(await record_links(records, scope, [c.ref for c in pool]))
    clusters = bundle(pool, links, limits.adjacency_seconds)
    ordered = order_items(clusters, pool, limits.count)
    entities = [sorted({e for i in cl.members if pool[i].ref in links for e in links[pool[i].ref].entities})
                for cl in ordered.items]  # fmt: skip
    pool_refs = {c.ref for c in pool}
    walked = await relation_walk(
        records, scope, entities, pool_refs, max_hops=limits.max_hops, max_evidence=limits.max_evidence
    )
    evidence = [w.ref for hits in walked.per_item for w in hits]
    if evidence:
        links.update(await record_links(records, scope, evidence))
    structs = [
        structure(cl, pool, walked.per_item[n], links, limits.max_evidence)
        for n, cl in enumerate(ordered.items)
    ]
    view = recalled.view
    quoted = _quote(req.query, limits, ordered, structs, view.best_blocks, view.block_chars)
    budget = limits.budget(len(ordered.window))
    if mode is None:
        layout = Layout(settings.reconstruct_sequence)
        shown, alloc = _allocate(layout, req.query, limits, quoted, view, budget.chars)
        trace = None
        if req.trace:
            allocated = Allocated(quoted, shown, alloc, budget.chars, layout.sequence)
            trace = trace_of(req.query, recalled, clusters, cues, allocated, ledger)
        return build_result(
            limits, recalled, quoted, shown, alloc, budget, beyond_hops=walked.reached_max_hops, trace=trace
        )
    capped = _capped(mode, req.query, limits, recalled, quoted, budget)
    if not req.trace:
        return capped
    # The trace is the audit, never held to the cap (§4.3): its sequence is the mode's before the cap.
    layout = Layout("whole", mode.whole_floor, mode.held_long_last)
    shown, alloc = _allocate(layout, req.query, limits, quoted, view, budget.chars)
    allocated = Allocated(quoted, shown, alloc, budget.chars, layout.sequence)
    trace = trace_of(req.query, recalled, clusters, cues, allocated, ledger)
    return capped.model_copy(update={"trace": trace})


def _capped(
    mode: Mode, query: str, limits: Limits, recalled: Recalled, quoted: Sequence[Quoted], budget: Budget
) -> ReconstructResult:
    """Stages 9 and 10 of a mode: the ``whole`` sequence as the mode lays it out, cut to its cap."""

    def build(pieces: int | None) -> tuple[ReconstructResult, int]:
        layout = Layout("whole", mode.whole_floor, mode.held_long_last, pieces)
        shown, alloc = _allocate(layout, query, limits, quoted, recalled.view, budget.chars)
        result = build_result(limits, recalled, quoted, shown, alloc, budget, beyond_hops=False, trace=None)
        return result, sum(1 + taken for _, taken in shown)

    return hold_to_cap(build, mode)


@dataclasses.dataclass(frozen=True, slots=True)
class Layout:
    """How the sequence is laid out: which one; the items the whole-record floor covers (None: all);
    held-long-last; at most ``limit`` pieces (the mode cap's prefix)."""

    sequence: ReconstructSequence
    floor: int | None = None
    held_long_last: bool = False
    limit: int | None = None


def _allocate(
    layout: Layout,
    query: str,
    limits: Limits,
    quoted: Sequence[Quoted],
    view: RecallView,
    budget: int,
) -> tuple[list[tuple[Quoted, int]], Allocation]:
    """The items as the sequence admits them, each with how many pieces it shows after its content."""
    if layout.sequence == "items":
        heads = [q.head_span[1] - q.head_span[0] for q in quoted]
        alloc = allocate(heads, [[b - a for _, (a, b) in q.excerpts] for q in quoted], budget)
        return [(quoted[i], taken) for i, taken in alloc.chosen], alloc
    spans, whole, last = [], [], set()
    floor = len(quoted) if layout.floor is None else layout.floor
    for n, q in enumerate(quoted):
        head, cap = q.structured.head, limits.head_cap(n)
        best = view.best_blocks.get(head.ref)
        spans.append(passage_spans(head.text, query, cap, best_block=best, max_chars=view.block_chars))
        whole.append(layout.sequence == "whole" and n < floor and len(head.text) <= cap)
        if layout.held_long_last and q.held and len(head.text) > HELD_LONG_CHARS:
            last.add(n)
    sizes = [[e - s for s, e in sp] for sp in spans]
    admitted, used, cut = allocate_passages(sizes, whole, budget, last=last, limit=layout.limit)
    shown: list[tuple[Quoted, int]] = []
    for n, q in enumerate(quoted):
        if admitted[n]:
            first, *rest = (spans[n][r] for r in admitted[n])
            pieces = tuple((q.structured.head, span) for span in rest)
            shown.append((dataclasses.replace(q, head_span=first, excerpts=pieces), len(rest)))
    return shown, Allocation(tuple((i, 0) for i, a in enumerate(admitted) if a), used, cut)


def _quote(
    query: str,
    limits: Limits,
    ordered: Ordered,
    structs: Sequence[Structured],
    blocks: Mapping[str, int],
    max_chars: int,
) -> list[Quoted]:
    out: list[Quoted] = []
    held = set(range(len(ordered.window), len(ordered.items)))
    for n, (cl, s) in enumerate(zip(ordered.items, structs, strict=True)):
        head = s.head
        span = quote_span(
            head.text, query, limits.head_cap(n), best_block=blocks.get(head.ref), max_chars=max_chars
        )
        # Excerpts in relevance order (members, then the walk), not the claims' time order.
        others = sorted((row for row, _ in s.claims if row is not head and row.text), key=lambda r: r.rank)
        excerpts = tuple(
            (
                row,
                quote_span(
                    row.text, query, limits.excerpt_chars, best_block=blocks.get(row.ref), max_chars=max_chars
                ),
            )
            for row in others
        )
        out.append(Quoted(s, cl, n in held, span, excerpts))
    return out
