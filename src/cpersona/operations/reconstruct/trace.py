"""reconstruct's trace (§4.3, seed "trace.recall"): the full, uncompacted audit of one call, never held to
a mode cap. It is one :class:`~cpersona.model.trace.ReconstructTrace`, published on the trace channel as
one message (``kind: "reconstruct"``) with the recall it made nested as ``recall``, that recall's own
trace v1 unchanged:

``candidate_refs``
    The recall's rows as reconstruct ranked them (0 = most relevant), ``reserved`` for a held seat's row.
``clusters``
    Every cluster bundling made, by its best member's rank: ``refs``, ``why`` (the key that formed it,
    absent for a singleton), ``members`` with the key that joined each, and where it went: ``item`` (its
    place in the item order) with its ``head``, ``held`` for a reservation item, or ``past_window``.
``cues``
    The entities the query matched, the extra lexical terms, ``terms_omitted`` past the cap.
``items``
    The returned items: head ref, the refs each cites, ``held`` for a reservation item.
``sequence``
    The allocation: its name, the budget, what it used, whether it cut, and its pieces in sequence order
    (item, ref, head or excerpt, span, size, admitted), every one of them, admitted or not; with
    ``stopped_at`` the first piece left out and ``stop`` why the answer ended there: ``budget`` (that
    piece did not fit the characters left), ``cap`` (a mode's token cap allowed no more pieces; the
    budget is named when both would have stopped it), or ``count`` (every piece fitted, and clusters past
    the count's window were left out; ``stopped_at`` is then ``null``, as when nothing was left out and
    ``stop`` is ``null`` too). In ``items`` a piece's item is its place in the item order; in ``evidence``
    and ``whole`` too (the clusters' ``item``), and an item's first piece in sequence order is its head
    (its content when admitted), its later ones excerpts of the same record.
``coverage``
    The coverage ledger (§3.13a) over the records the returned items cite (the seed's rule for
    reconstruct), in the order the items cite them, from their full stored text.

Like the recall's trace it carries refs, ranks, keys and spans, never stored text. The question is not
in it either; the cue entities' names and terms are, as the recall's trace carries the scope's ids: they
are keys the caller declared (``associations``), not text of a record, and they are what a reader of the
trace needs to see why the lexical arms got extra terms.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Final, Protocol

from cpersona.model.trace import (
    CandidateRef,
    ClusterMember,
    ClusterTrace,
    CoverageFailure,
    CoverageLedger,
    CuesTrace,
    ItemTrace,
    PieceTrace,
    ReconstructTrace,
    SequenceTrace,
)

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence

    from cpersona.operations.reconstruct.allocation import Allocation
    from cpersona.operations.reconstruct.bundling import Cluster
    from cpersona.operations.reconstruct.candidates import Candidate, Recalled
    from cpersona.operations.reconstruct.cues import Cues
    from cpersona.operations.reconstruct.response import Quoted

__all__ = ["KIND", "Allocated", "Ledger", "cited_texts", "trace_of"]

KIND: Final = "reconstruct"


class Ledger(Protocol):
    """The coverage ledger (``recall.trace.coverage.coverage``), handed in by the engine: operations
    import nothing of recall."""

    def __call__(
        self, question: str, records: Iterable[tuple[str, str]]
    ) -> CoverageLedger | CoverageFailure: ...


@dataclasses.dataclass(frozen=True, slots=True)
class Allocated:
    """What allocation saw and did: every quoted item, the admitted ones with their shown pieces."""

    quoted: Sequence[Quoted]
    shown: Sequence[tuple[Quoted, int]]
    allocation: Allocation
    budget: int
    sequence: str
    past_window: int = 0
    """Ranked clusters the count's window left out."""


def trace_of(
    query: str,
    recalled: Recalled,
    clusters: Sequence[Cluster],
    cues: Cues,
    allocated: Allocated,
    ledger: Ledger,
) -> ReconstructTrace:
    pool: Sequence[Candidate] = recalled.candidates
    return ReconstructTrace(
        kind=KIND,
        recall=recalled.view.trace,
        candidate_refs=[CandidateRef(ref=c.ref, rank=c.rank, reserved=c.reserved) for c in pool],
        clusters=_clusters(pool, clusters, allocated.quoted),
        cues=CuesTrace(
            entities=[m.name for m in cues.entities], terms=list(cues.terms), terms_omitted=cues.omitted
        ),
        items=[_item(q) for q, _ in allocated.shown],
        sequence=_sequence(allocated),
        coverage=ledger(query, cited_texts(allocated.shown)),
    )


def cited_texts(shown: Iterable[tuple[Quoted, int]]) -> Iterator[tuple[str, str]]:
    """``(ref, full stored text)`` of each record a returned item cites, once, in citation order."""
    seen: set[str] = set()
    for q, _ in shown:
        for row, _roles in q.structured.claims:
            if row.ref not in seen:
                seen.add(row.ref)
                yield row.ref, row.text


def _clusters(
    pool: Sequence[Candidate], clusters: Sequence[Cluster], quoted: Sequence[Quoted]
) -> list[ClusterTrace]:
    placed = {q.cluster.members[0]: (n, q) for n, q in enumerate(quoted)}
    out: list[ClusterTrace] = []
    for cl in clusters:
        members = [ClusterMember(ref=pool[i].ref, why=cl.why.get(i)) for i in cl.members]
        refs = [pool[i].ref for i in cl.members]
        found = placed.get(cl.members[0])
        if found is None:
            out.append(ClusterTrace(refs=refs, members=members, why=cl.reason or None, past_window=True))
        else:
            n, q = found
            head = q.structured.head.ref
            out.append(
                ClusterTrace(
                    refs=refs, members=members, why=cl.reason or None, item=n, head=head, held=q.held
                )
            )
    return out


def _item(q: Quoted) -> ItemTrace:
    cites = [row.ref for row, _ in q.structured.claims]
    return ItemTrace(head_ref=q.structured.head.ref, cites=cites, held=q.held)


def _pieces(allocated: Allocated) -> list[tuple[int, str, tuple[int, int], bool]]:
    """The sequence whole, as ``(item, ref, span, excerpt)``: ``items`` as allocation walks it (every
    head, then the excerpts round-robin), ``evidence`` and ``whole`` in their passage order."""
    quoted = allocated.quoted
    if allocated.sequence != "items":
        seen: set[int] = set()
        pieces = []
        for n, span in allocated.allocation.order:
            pieces.append((n, quoted[n].structured.head.ref, span, n in seen))
            seen.add(n)
        return pieces
    pieces = [(n, q.structured.head.ref, q.head_span, False) for n, q in enumerate(quoted)]
    depth = max((len(q.excerpts) for q in quoted), default=0)
    for level in range(depth):
        pieces.extend(
            (n, q.excerpts[level][0].ref, q.excerpts[level][1], True)
            for n, q in enumerate(quoted)
            if level < len(q.excerpts)
        )
    return pieces


def _sequence(allocated: Allocated) -> SequenceTrace:
    pieces = _pieces(allocated)
    alloc = allocated.allocation
    admitted = alloc.admitted
    if allocated.sequence == "items":
        admitted = sum(1 + taken for _, taken in alloc.chosen)
    stopped = admitted if alloc.cut and admitted < len(pieces) else None
    stop = alloc.stop if stopped is not None else "count" if allocated.past_window else None
    return SequenceTrace(
        name=allocated.sequence,
        budget=allocated.budget,
        used=alloc.used,
        cut=alloc.cut,
        pieces=[
            PieceTrace(
                item=n,
                ref=ref,
                piece="excerpt" if excerpt else "head",
                span=(start, end),
                chars=end - start,
                admitted=k < admitted,
            )
            for k, (n, ref, (start, end), excerpt) in enumerate(pieces)
        ],
        stopped_at=stopped,
        stop=stop,
    )
