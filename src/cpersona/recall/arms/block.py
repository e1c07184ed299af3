"""The block arm: the records whose best block is nearest the query.

Blocks are clause-sized spans of a record, each with its own vector in a second collection
(``"blocks"``, binary quantised, rescored with the original vectors); :mod:`cpersona.model.blocks`
cuts them and names their points, and the block builder (``engine.workers.blocks``) writes them off the
write path. The arm finds the best blocks for the query and collapses them to their record; its rows
enter a recall only through the held block seats.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from cpersona.model.blocks import ParentKind, parent_kind
from cpersona.model.candidates import ArmResult, ArmRow
from cpersona.stores.protocols import VectorFilter, scope_filter
from cpersona.stores.vectors.common import open_tail_start

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from cpersona.model.scope import ReadScope
    from cpersona.stores.protocols import Vector, VectorHit, VectorStore

__all__ = ["block_arm", "block_filter", "parent_kind_of"]


def parent_kind_of(hit: VectorHit) -> ParentKind | None:
    """Whether a block hit belongs to a memory or an episode (None: not a block written here)."""
    return parent_kind(hit.id, hit.parent, hit.block_index)


_REF_PREFIX: Mapping[ParentKind, str] = {"memory": "mem:", "episode": "ep:"}


async def block_arm(
    blocks: VectorStore, vector: Vector, scope: ReadScope, *, limit: int, max_hits: int
) -> ArmResult:
    """The records whose best block is nearest the query, best first, up to ``limit``.

    Looks at the ``max_hits`` nearest blocks in the scope (the policy's ``blocks.search_hits``), keeps
    each record's best block (scores of a record's blocks are never added up), and orders by (-cosine,
    kind, record id, block index). ``raw`` is that block's cosine and ``block_index`` its index. The
    source filter and exclusions are applied later, on the hydrated records, like for every arm.

    The search is restricted by scope alone, not also to ``kind == "block"``: the block collection holds
    block points only (the builder is its one writer), so that clause matched every point while costing
    a payload check at each graph node the search visits (measured on a single-agent shard, same
    answers, search time 0.89x at 26k blocks and 0.63x at 266k).
    """
    started = time.perf_counter()
    if limit <= 0 or max_hits <= 0:
        return ArmResult("block")
    flt = scope_filter(scope)
    # The hits past the cut below are never read, so the search may leave its last run of tied scores
    # open (no second fetch to complete it: 22% of searches needed one at 100k memories). Only when the
    # cut falls in that run, or is never reached, is the search repeated with the run completed.
    hits = await blocks.search(vector, flt, max_hits, open_tail=True)
    ranked, read = _best_blocks(hits, limit)
    if len(hits) == max_hits and read > open_tail_start(hits):
        ranked, _ = _best_blocks(await blocks.search(vector, flt, max_hits), limit)
    rows = tuple(
        ArmRow(ref, rank, score, block_index=index)
        for rank, (ref, (score, _, _, index)) in enumerate(ranked[:limit])
    )
    return ArmResult("block", rows, elapsed_ms=(time.perf_counter() - started) * 1000)


_Best = tuple[float, ParentKind, str, int]  # (cosine, parent kind, parent id, block index)


def _best_blocks(hits: Sequence[VectorHit], limit: int) -> tuple[list[tuple[str, _Best]], int]:
    """Each record's best block among ``hits`` (best first), ranked; and how many hits were read."""
    best: dict[str, _Best] = {}
    # Hits are read best first, so once `limit` records are held, a hit scoring below the last of them
    # can neither enter the first `limit` records nor change their best block: the rest is skipped
    # (telling a hit's parent kind is most of this loop's cost, and most hits fall past the cut).
    cutoff: float | None = None
    read = 0
    for hit in hits:
        if cutoff is not None and hit.score < cutoff:
            break
        read += 1
        kind = parent_kind_of(hit)
        if kind is None:
            continue
        ref = _REF_PREFIX[kind] + hit.parent
        entry = (hit.score, kind, hit.parent, hit.block_index)
        held = best.get(ref)
        if held is None:
            best[ref] = entry
            if len(best) == limit:
                cutoff = hit.score
        elif (-entry[0], entry[3]) < (-held[0], held[3]):
            best[ref] = entry
    ranked = sorted(best.items(), key=lambda item: (-item[1][0], item[1][1], item[1][2], item[1][3]))
    return ranked, read


def block_filter(agent_id: str) -> VectorFilter:
    """Every block point of one agent (for deleting an agent's data)."""
    return VectorFilter(agent_id=agent_id, kinds=("block",))
