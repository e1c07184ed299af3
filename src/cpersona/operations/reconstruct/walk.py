"""Stage 6, the relation walk: from each item's entities (the mentions declared on its rows),
breadth-first over entity relations in either direction, up to ``max_hops``, with traverse's own
machinery (:class:`~cpersona.operations.associations.Walk`: its bounds and its scope check of every
record). A record mentioning an entity reached over ``h >= 1`` relations becomes evidence of that item,
``why: "relation:<the last predicate>"``. Evidence is never an item, never a pool row, never repeated
across items; ``max_hops = 0`` walks nothing."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Protocol

from cpersona.model.association_results import Reached
from cpersona.operations.associations import Walk
from cpersona.stores.association_store import AssociationStore
from cpersona.stores.recall_reads import RecallReads

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cpersona.model.scope import ReadScope
    from cpersona.stores.protocols import HydratedRecord

__all__ = ["WalkReads", "Walked", "WalkOutcome", "relation_walk"]


class WalkReads(RecallReads, AssociationStore, Protocol):
    """The roles the walk reads: the entity graph it follows, and the records it reaches (hydrated as a
    recall shows them)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Walked:
    ref: str
    hops: int
    why: str
    record: HydratedRecord


@dataclasses.dataclass(frozen=True, slots=True)
class WalkOutcome:
    per_item: tuple[tuple[Walked, ...], ...]
    reached_max_hops: bool = False


async def _walk_one(walk: Walk, start: Sequence[str], max_hops: int) -> bool:
    """Walk from ``start``; whether entities lay beyond ``max_hops``."""
    level: list[tuple[str, tuple[str, ...]]] = [(key, ()) for key in start]
    links = await walk.records.entity_links(walk.scope, list(start))
    for hops in range(1, max_hops + 1):
        following = walk.expand(level, links)
        if not following:
            return False
        links = await walk.records.entity_links(walk.scope, [key for key, _ in following])
        await walk.collect(following, links, hops)
        level = following
        if len(walk.reached) >= walk.limit:
            return False
    return bool(walk.expand(level, links))


async def relation_walk(
    records: WalkReads,
    scope: ReadScope,
    item_entities: Sequence[Sequence[str]],
    pool: set[str],
    *,
    max_hops: int,
    max_evidence: int,
) -> WalkOutcome:
    if max_hops <= 0 or not any(item_entities):
        return WalkOutcome(tuple(() for _ in item_entities))
    names = {e.key: e.name for e in await records.entity_index(scope)}
    taken = set(pool)
    found: list[list[Reached]] = []
    beyond = False
    for start in item_entities:
        if not start:
            found.append([])
            continue
        # The pool and earlier items' evidence are marked reached up front, so the walk passes them by.
        blocked = {ref: Reached(ref=ref, hops=0, predicates=(), entity="") for ref in taken}
        walk = Walk(records, scope, max_evidence + len(blocked), names, set(start), dict(blocked))
        beyond = await _walk_one(walk, sorted(set(start)), max_hops) or beyond
        new = [hit for ref, hit in walk.reached.items() if ref not in blocked][:max_evidence]
        taken.update(hit.ref for hit in new)
        found.append(new)
    docs = await records.hydrate(hit.ref for hits in found for hit in hits)
    per_item = tuple(
        tuple(
            Walked(h.ref, h.hops, f"relation:{h.predicates[-1]}", docs[h.ref]) for h in hits if h.ref in docs
        )
        for hits in found
    )
    return WalkOutcome(per_item, beyond)
