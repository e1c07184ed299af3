"""Stage 9, allocation under ``items`` (the default sequence): every head quote in item order, then the
excerpts round-robin (each item's first, then each item's second, …), one fixed sequence cut to the
budget at its first piece that does not fit. The sequence does not depend on the budget and the cut is
a prefix, so raising the budget never removes an item or an excerpt. The first head always fits: the
budget is raised to at least one head quote (:mod:`.bounds`)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["Allocation", "allocate"]


@dataclasses.dataclass(frozen=True, slots=True)
class Allocation:
    items: int  # heads admitted, a prefix of the item order
    excerpts: tuple[int, ...]  # excerpts admitted per admitted item, each a prefix of its list
    used: int
    cut: bool  # the budget left something out


def allocate(heads: Sequence[int], excerpts: Sequence[Sequence[int]], budget: int) -> Allocation:
    """``heads[i]`` is item i's quote size, ``excerpts[i]`` its excerpts' sizes in order."""
    used = 0
    for n, size in enumerate(heads):
        if used + size > budget and n > 0:
            return Allocation(n, (0,) * n, used, True)
        used += size
    taken = [0] * len(heads)
    depth = max((len(e) for e in excerpts), default=0)
    for level in range(depth):
        for i, sizes in enumerate(excerpts):
            if level >= len(sizes):
                continue
            if used + sizes[level] > budget:
                return Allocation(len(heads), tuple(taken), used, True)
            used += sizes[level]
            taken[i] += 1
    return Allocation(len(heads), tuple(taken), used, False)
