"""Spreading activation over the memories' typed, weighted associations (Cerememory §5.1.5, ADR-004).

The edges are each memory's own ``associations``: outbound, stored on the source record. The data model
keeps no reverse edge and no inbound index, so activation follows outbound edges only; an edge made in
both directions (a batch's sequential pair) is two records' outbound edges and is walked both ways.
A target is read as a memory when it is ``mem:<uuid>`` or a bare UUID; any other target names no
memory and is not walked.

From each seed at its own level ``a``, an edge of weight ``w`` passes ``a·w·0.5`` to its target; a level
below 0.05 stops there, a target already on the path is not entered again (no cycles), and a record
keeps the best level any path gave it, with that path. Unlike the reference, which spreads from the one
best candidate, every seed spreads (recall.query seeds the fused leaders at their fused share, the best
at 1.0), and the walk goes hop by hop so each hop's targets are read in one batch.

Isolation: a target is entered only if the loader returns it, and the loader returns only records the
caller's scope sees, so activation never crosses an agent, project or channel boundary, and never walks
through a record the caller may not read.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence

    from cpersona.model.records import AssociationType, MemoryRecord

__all__ = ["HOP_DECAY", "PRUNE", "Activation", "edge_target", "spread"]

HOP_DECAY = 0.5
"""What one hop keeps of the level it passes on (times the edge's weight)."""
PRUNE = 0.05
"""Below this level activation stops."""


@dataclasses.dataclass(frozen=True, slots=True)
class Activation:
    """How a record was reached: its level, hops from its seed, the last edge's type and the path
    (memory ids from the seed to this record, both included)."""

    record_id: str
    level: float
    hop: int
    edge_type: AssociationType
    path: tuple[str, ...]

    @property
    def seed(self) -> str:
        return self.path[0]


def edge_target(target_id: str) -> str | None:
    """The memory id an edge points at (``mem:<uuid>`` or a bare UUID), else ``None``."""
    text = target_id.removeprefix("mem:")
    try:
        canonical = str(uuid.UUID(text))
    except ValueError:
        return None
    return canonical if canonical == text.lower() else None


@dataclasses.dataclass(frozen=True, slots=True)
class _Reach:
    level: float
    path: tuple[str, ...]
    edge_type: AssociationType


async def spread(
    seeds: Sequence[tuple[MemoryRecord, float]],
    load: Callable[[Sequence[str]], Awaitable[Mapping[str, MemoryRecord]]],
    *,
    depth: int,
    min_weight: float = PRUNE,
    types: Collection[AssociationType] | None = None,
) -> dict[str, Activation]:
    """Every record reached from ``seeds`` (record, level) within ``depth`` hops over edges of at least
    ``min_weight`` (and of ``types``, when given), by id. A seed is in the answer only when another seed
    reached it (a leader that another leader activates gains from it); it is never its own activation.

    ``load`` returns the records of the ids it is given that the caller's scope sees (others omitted).
    """
    records: dict[str, MemoryRecord] = {rec.id: rec for rec, _ in seeds}
    best: dict[str, _Reach] = {}
    frontier = {rec.id: _Reach(level, (rec.id,), "semantic") for rec, level in seeds}
    unseen: set[str] = set()  # read once and not returned: missing, or outside the caller's scope
    for _hop in range(depth):
        offers = _offers(frontier, records, best, min_weight, types)
        missing = [rid for rid in offers if rid not in records and rid not in unseen]
        if missing:
            records.update(await load(missing))
            unseen.update(rid for rid in missing if rid not in records)
        frontier = {rid: reach for rid, reach in offers.items() if rid in records}
        if not frontier:
            break
        best.update(frontier)
    return {
        rid: Activation(rid, reach.level, len(reach.path) - 1, reach.edge_type, reach.path)
        for rid, reach in best.items()
    }


def _offers(
    frontier: Mapping[str, _Reach],
    records: Mapping[str, MemoryRecord],
    best: Mapping[str, _Reach],
    min_weight: float,
    types: Collection[AssociationType] | None,
) -> dict[str, _Reach]:
    """The best new reach of each target one hop past ``frontier`` that beats what it already has."""
    out: dict[str, _Reach] = {}
    # Best level first, then id: the same graph always gives the same paths, ties included.
    for rid, reach in sorted(frontier.items(), key=lambda item: (-item[1].level, item[0])):
        for edge in records[rid].associations:
            if edge.weight < min_weight or (types is not None and edge.type not in types):
                continue
            target = edge_target(edge.target_id)
            level = reach.level * edge.weight * HOP_DECAY
            if target is None or level < PRUNE or target in reach.path:
                continue
            known = out.get(target) or best.get(target)
            if known is None or level > known.level:
                out[target] = _Reach(level, (*reach.path, target), edge.type)
    return out
