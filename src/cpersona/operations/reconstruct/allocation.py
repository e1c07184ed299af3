"""Stage 9, allocation: one fixed sequence of quoted pieces, cut to the budget at its first piece that
does not fit. The sequence never depends on the budget and the cut is a prefix, so raising the budget
never removes an item or an excerpt. The first piece always fits: the budget is raised to at least one
head quote (:mod:`.bounds`). ``CPERSONA_RECONSTRUCT_SEQUENCE`` picks the sequence:

* ``items`` (the default): every head quote in item order, then the excerpts round-robin (each item's
  first, then each item's second, …);
* ``evidence``: the head records' passages, fused with RRF (K = 60) over the item's rank and the
  passage's rank inside its record (itself the fusion of trigram overlap and the recall's vector
  judgement, :mod:`.quoting`); an item shows its best admitted passage as its content and its other
  admitted passages as excerpts of the head, and an item none of whose passages is admitted is dropped;
* ``whole``: heads no longer than their cap first, whole, in item order; then the others' passages in
  the ``evidence`` order.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from collections.abc import Collection, Sequence

__all__ = ["RRF_K", "Allocation", "PassageCut", "StopReason", "allocate", "allocate_passages", "cut_passages"]

RRF_K = 60

StopReason = Literal["budget", "cap"]
"""What cut a sequence: its next piece did not fit the character budget, or the mode's token cap allowed
no more pieces (the prefix :mod:`.modes` found). When both would, the budget is named: the cap did not
have to act."""


@dataclasses.dataclass(frozen=True, slots=True)
class Allocation:
    chosen: tuple[tuple[int, int], ...]  # (item index, pieces after its content), in item order
    used: int
    cut: bool  # the budget (or the cap) left something out
    stop: StopReason | None = None
    order: tuple[tuple[int, tuple[int, int]], ...] = ()
    """The passage sequences only: every piece in sequence order, admitted or not, as (item, span)."""
    admitted: int = 0
    """The passage sequences only: how many of ``order``'s pieces were admitted (a prefix)."""


def allocate(heads: Sequence[int], excerpts: Sequence[Sequence[int]], budget: int) -> Allocation:
    """``items``: ``heads[i]`` is item i's quote size, ``excerpts[i]`` its excerpts' sizes in order."""
    used = 0
    for n, size in enumerate(heads):
        if used + size > budget and n > 0:
            return Allocation(tuple((i, 0) for i in range(n)), used, True, "budget")
        used += size
    taken = [0] * len(heads)
    depth = max((len(e) for e in excerpts), default=0)
    for level in range(depth):
        for i, sizes in enumerate(excerpts):
            if level >= len(sizes):
                continue
            if used + sizes[level] > budget:
                return Allocation(tuple(enumerate(taken)), used, True, "budget")
            used += sizes[level]
            taken[i] += 1
    return Allocation(tuple(enumerate(taken)), used, False)


def _sequence(
    passages: Sequence[Sequence[int]], whole: Sequence[bool], last: Collection[int]
) -> list[tuple[int, int]]:
    first = [(i, 0) for i, w in enumerate(whole) if w]
    rest = [(i, r) for i, sizes in enumerate(passages) if not whole[i] for r in range(len(sizes))]
    rest.sort(key=lambda p: (-(1.0 / (RRF_K + p[0]) + 1.0 / (RRF_K + p[1])), p))
    # held-long-last (pro): the later passages of the items in ``last`` go to the end, in their order.
    moved = [p for p in rest if p[0] in last and p[1] > 0]
    return first + [p for p in rest if not (p[0] in last and p[1] > 0)] + moved


@dataclasses.dataclass(frozen=True, slots=True)
class PassageCut:
    """A passage sequence and where it was cut: its first ``admitted`` pieces are in."""

    order: tuple[tuple[int, int], ...]  # (item, passage) in sequence order, the whole sequence
    admitted: int
    used: int
    stop: StopReason | None


def cut_passages(
    passages: Sequence[Sequence[int]],
    whole: Sequence[bool],
    budget: int,
    *,
    last: Collection[int] = (),
    limit: int | None = None,
) -> PassageCut:
    """``evidence`` / ``whole``: ``passages[i]`` is item i's head passages' sizes, best first; ``whole[i]``
    puts item i's single whole-record piece first; the items in ``last`` keep their first passage in
    place and move the others to the end. At most ``limit`` pieces (the mode cap's prefix)."""
    order = tuple(_sequence(passages, whole, last))
    used = 0
    for n, (i, r) in enumerate(order):
        size = passages[i][r]
        if used + size > budget and n > 0:
            return PassageCut(order, n, used, "budget")
        if n == limit:
            return PassageCut(order, n, used, "cap")
        used += size
    return PassageCut(order, len(order), used, None)


def allocate_passages(
    passages: Sequence[Sequence[int]],
    whole: Sequence[bool],
    budget: int,
    *,
    last: Collection[int] = (),
    limit: int | None = None,
) -> tuple[list[list[int]], int, bool]:
    """:func:`cut_passages` as per-item lists: the admitted passage indices per item, in sequence order,
    the characters used and whether the sequence was cut."""
    cut = cut_passages(passages, whole, budget, last=last, limit=limit)
    admitted: list[list[int]] = [[] for _ in passages]
    for i, r in cut.order[: cut.admitted]:
        admitted[i].append(r)
    return admitted, cut.used, cut.stop is not None
