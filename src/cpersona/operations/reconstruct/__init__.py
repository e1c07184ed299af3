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
from typing import TYPE_CHECKING, Protocol

from cpersona.model.reconstruct_response import ReconstructResult
from cpersona.model.scope import ReadScope
from cpersona.operations.associations import record_links
from cpersona.operations.reconstruct.allocation import Allocation, allocate, cut_passages
from cpersona.operations.reconstruct.bounds import limits_of
from cpersona.operations.reconstruct.bundling import bundle
from cpersona.operations.reconstruct.candidates import KEYWORD_SEAT, recall_candidates
from cpersona.operations.reconstruct.cues import associative_cues
from cpersona.operations.reconstruct.modes import HELD_LONG_CHARS, hold_to_cap, mode_of, tokens_of
from cpersona.operations.reconstruct.order import Ordered, order_items
from cpersona.operations.reconstruct.quoting import passage_spans, quote_span
from cpersona.operations.reconstruct.response import Quoted, build_result
from cpersona.operations.reconstruct.structure import structure
from cpersona.operations.reconstruct.tokens import load_vocabulary
from cpersona.operations.reconstruct.trace import Allocated, trace_of
from cpersona.operations.reconstruct.walk import WalkReads, relation_walk
from cpersona.stores.record_reads import RecordReads

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from cpersona.model.reconstruct_request import ReconstructRequest
    from cpersona.model.trace import ReconstructTrace
    from cpersona.operations.reconstruct.bounds import Budget, Limits
    from cpersona.operations.reconstruct.bundling import Cluster
    from cpersona.operations.reconstruct.candidates import Candidate, Recalled, RecallPort, RecallView
    from cpersona.operations.reconstruct.cues import Cues
    from cpersona.operations.reconstruct.modes import Mode
    from cpersona.operations.reconstruct.structure import Structured
    from cpersona.operations.reconstruct.trace import Ledger
    from cpersona.settings import ReconstructSequence, Settings
    from cpersona.stores.association_values import RecordLinks

__all__ = ["ReconstructReads", "reconstruct"]


class ReconstructReads(WalkReads, RecordReads, Protocol):
    """The roles reconstruct reads: the walk's (associations, hydration) and its candidates' records."""


def _scope(req: ReconstructRequest) -> ReadScope:
    return ReadScope(req.agent_id, req.project_id, req.channel, req.source_id)


async def reconstruct(
    recall: RecallPort, records: ReconstructReads, settings: Settings, req: ReconstructRequest, ledger: Ledger
) -> ReconstructResult:
    """Reconstruct over one recall run by ``recall`` (see :class:`RecallPort`), reading ``records``;
    ``ledger`` builds a traced call's coverage ledger."""
    mode = mode_of(req, settings)
    if mode is not None:
        await load_vocabulary()
    limits = limits_of(req, settings, mode)
    if limits.count == 0 and not req.trace:
        return _count_zero(limits, mode)
    scope = _scope(req)
    cues = await associative_cues(records, scope, req.query)
    overlay = KEYWORD_SEAT if mode is None else mode.overlay
    recalled = await recall_candidates(recall, records, settings, req, limits.top_k, cues.terms, overlay)
    pool = recalled.candidates
    links = dict(await record_links(records, scope, [c.ref for c in pool]))
    clusters = bundle(pool, links, limits.adjacency_seconds)
    ordered = order_items(clusters, pool, limits.count)
    if limits.count == 0:
        # Traced, count 0 still makes its recall, for the audit; nothing becomes an item, held ones neither.
        ordered = Ordered((), (), len(clusters))
    quoted, beyond_hops = await _quoted(
        records, scope, req.query, limits, pool, links, ordered, recalled.view
    )
    budget = limits.budget(len(ordered.window))
    audit = _Audit(req.query, recalled, clusters, cues, ledger, ordered.dropped)
    if mode is None:
        layout = Layout(settings.reconstruct_sequence)
        shown, alloc = _allocate(layout, req.query, limits, quoted, recalled.view, budget.chars)
        trace = audit.trace(quoted, shown, alloc, budget.chars, layout) if req.trace else None
        if limits.count == 0:
            return _count_zero(limits, None, trace)
        return build_result(
            limits, recalled, quoted, shown, alloc, budget, beyond_hops=beyond_hops, trace=trace
        )
    capped = None if limits.count == 0 else _capped(mode, req.query, limits, recalled, quoted, budget)
    if not req.trace:
        assert capped is not None
        return capped
    # The trace is the audit, never held to the cap (§4.3); its sequence is the mode's, cut where the cap
    # (or the budget) cut the answer.
    layout = Layout(
        "whole", mode.whole_floor, mode.held_long_last, None if capped is None else _pieces(capped)
    )
    shown, alloc = _allocate(layout, req.query, limits, quoted, recalled.view, budget.chars)
    trace = audit.trace(quoted, shown, alloc, budget.chars, layout)
    if capped is None:
        return _count_zero(limits, mode, trace)
    return capped.model_copy(update={"trace": trace})


def _count_zero(
    limits: Limits, mode: Mode | None, trace: ReconstructTrace | None = None
) -> ReconstructResult:
    """``count: 0``: no item, with ``count_zero``; a mode still reports itself, a traced call its audit."""
    result = ReconstructResult(
        items=[],
        effective_count=0,
        returned_count=0,
        shortfall_reason="count_zero",
        requested_count=limits.requested_count,
        count_policy=limits.count_policy,
    )
    if mode is not None:
        result = tokens_of(result, mode)
    return result if trace is None else result.model_copy(update={"trace": trace})


def _pieces(result: ReconstructResult) -> int:
    """How many pieces of the sequence an answer shows: each item's content and its excerpts."""
    return sum(1 + len(item.excerpts or ()) for item in result.items)


@dataclasses.dataclass(frozen=True, slots=True)
class _Audit:
    """What a traced call's audit is built from, besides the allocation."""

    query: str
    recalled: Recalled
    clusters: Sequence[Cluster]
    cues: Cues
    ledger: Ledger
    past_window: int

    def trace(
        self,
        quoted: Sequence[Quoted],
        shown: Sequence[tuple[Quoted, int]],
        alloc: Allocation,
        budget: int,
        layout: Layout,
    ) -> ReconstructTrace:
        allocated = Allocated(quoted, shown, alloc, budget, layout.sequence, self.past_window)
        return trace_of(self.query, self.recalled, self.clusters, self.cues, allocated, self.ledger)


async def _quoted(
    records: ReconstructReads,
    scope: ReadScope,
    query: str,
    limits: Limits,
    pool: Sequence[Candidate],
    links: dict[str, RecordLinks],
    ordered: Ordered,
    view: RecallView,
) -> tuple[list[Quoted], bool]:
    """Stages 6 to 8: the relation walk from each item's entities, the items' structure, their quotes;
    and whether the walk reached ``max_hops`` with more beyond."""
    entities = [
        sorted({e for i in cl.members if pool[i].ref in links for e in links[pool[i].ref].entities})
        for cl in ordered.items
    ]
    walked = await relation_walk(
        records,
        scope,
        entities,
        {c.ref for c in pool},
        max_hops=limits.max_hops,
        max_evidence=limits.max_evidence,
    )
    evidence = [w.ref for hits in walked.per_item for w in hits]
    if evidence:
        links.update(await record_links(records, scope, evidence))
    structs = [
        structure(cl, pool, walked.per_item[n], links, limits.max_evidence)
        for n, cl in enumerate(ordered.items)
    ]
    return _quote(
        query, limits, ordered, structs, view.best_blocks, view.block_chars
    ), walked.reached_max_hops


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
    cut = cut_passages(sizes, whole, budget, last=last, limit=layout.limit)
    admitted: list[list[int]] = [[] for _ in quoted]
    for i, r in cut.order[: cut.admitted]:
        admitted[i].append(r)
    shown: list[tuple[Quoted, int]] = []
    for n, q in enumerate(quoted):
        if admitted[n]:
            first, *rest = (spans[n][r] for r in admitted[n])
            pieces = tuple((q.structured.head, span) for span in rest)
            shown.append((dataclasses.replace(q, head_span=first, excerpts=pieces), len(rest)))
    chosen = tuple((i, 0) for i, a in enumerate(admitted) if a)
    order = tuple((i, spans[i][r]) for i, r in cut.order)
    return shown, Allocation(chosen, cut.used, cut.stop is not None, cut.stop, order, cut.admitted)


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
