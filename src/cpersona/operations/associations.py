"""The associative layer's reads that need no engine: match the entities a text names, read what is
declared about records, and the bounded breadth-first walk over entity relations. The engine's
``declare`` and ``traverse`` (:mod:`cpersona.engine.associations`) and reconstruct's cues and relation
walk (:mod:`cpersona.operations.reconstruct`) share them.

Every record a read returns is checked again against the read's own scope, so neither a mention declared
in a wider scope nor a dangling one widens a read. The walk is bounded: at most
:data:`MAX_WALK_ENTITIES` entities are visited and :data:`MAX_WALK_REFS` mentions checked.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from cpersona.errors import InvalidRequest
from cpersona.model.association_results import Reached
from cpersona.model.entity_match import EntityMatch, match_terms

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from cpersona.model.scope import ReadScope
    from cpersona.stores.protocols import AssociationStore, EntityLinks, IndexedEntity, RecordLinks

__all__ = ["MAX_WALK_ENTITIES", "MAX_WALK_REFS", "Walk", "match_entities", "record_links"]

MAX_WALK_ENTITIES = 256
MAX_WALK_REFS = 2_000
_CHECK_PAGE = 200


def _terms(index: Sequence[IndexedEntity]) -> dict[str, set[str]]:
    terms: dict[str, set[str]] = {}
    for entity in index:
        terms.setdefault(entity.key, set()).add(entity.key)
        for alias_key, _ in entity.aliases:
            terms.setdefault(alias_key, set()).add(entity.key)
    return terms


async def match_entities(records: AssociationStore, scope: ReadScope, text: str) -> list[EntityMatch]:
    """The entities the scope sees that ``text`` names: longest first, spans not overlapping, ≤ 64."""
    if not isinstance(text, str):
        raise InvalidRequest("text", "must be a string")
    index = await records.entity_index(scope)
    if not index:
        return []
    named = {e.key: e for e in index}
    return [
        dataclasses.replace(
            m, name=named[m.entity].name, aliases=tuple(alias for _, alias in named[m.entity].aliases)
        )
        for m in match_terms(text, _terms(index))
    ]


async def record_links(
    records: AssociationStore, scope: ReadScope, refs: Sequence[str]
) -> dict[str, RecordLinks]:
    """What is declared about each record (mentions, record relations) in the scopes ``scope`` reads;
    a relation's other end is kept only when the scope sees that record too."""
    links = await records.record_links(scope, refs)
    others = sorted({link.other for found in links.values() for link in found.relations})
    seen = set(await records.visible_refs(scope, others)) if others else set()
    return {
        ref: dataclasses.replace(found, relations=tuple(r for r in found.relations if r.other in seen))
        for ref, found in links.items()
    }


@dataclasses.dataclass
class Walk:
    """One traversal's state: what it has visited and reached, and what it may still spend."""

    records: AssociationStore
    scope: ReadScope
    limit: int
    names: Mapping[str, str]
    seen: set[str]
    reached: dict[str, Reached] = dataclasses.field(default_factory=dict)
    checked: int = 0
    truncated: bool = False

    async def collect(
        self, level: Sequence[tuple[str, tuple[str, ...]]], links: Mapping[str, EntityLinks], hops: int
    ) -> None:
        """Add the records mentioning this level's entities, up to ``limit`` and the check bound."""
        found = {}
        for key, path in level:
            for ref in links[key].mentions:
                if ref not in self.reached and ref not in found:
                    found[ref] = Reached(ref=ref, hops=hops, predicates=path, entity=self.names.get(key, key))
        pending = list(found.values())
        while pending and len(self.reached) < self.limit:
            room = MAX_WALK_REFS - self.checked
            if room <= 0:
                self.truncated = True
                return
            page, pending = pending[: min(_CHECK_PAGE, room)], pending[min(_CHECK_PAGE, room) :]
            self.checked += len(page)
            visible = set(await self.records.visible_refs(self.scope, [r.ref for r in page]))
            for i, hit in enumerate(page):
                if hit.ref in visible:
                    self.reached[hit.ref] = hit
                    if len(self.reached) >= self.limit:
                        self.truncated = self.truncated or i + 1 < len(page) or bool(pending)
                        return

    def expand(
        self, level: Sequence[tuple[str, tuple[str, ...]]], links: Mapping[str, EntityLinks]
    ) -> list[tuple[str, tuple[str, ...]]]:
        """The entities one relation further, each once, within the entity bound."""
        following: list[tuple[str, tuple[str, ...]]] = []
        for key, path in level:
            for link in links[key].relations:
                if link.other in self.seen:
                    continue
                if len(self.seen) >= MAX_WALK_ENTITIES:
                    self.truncated = True
                    return following
                self.seen.add(link.other)
                following.append((link.other, (*path, link.predicate)))
        return following
