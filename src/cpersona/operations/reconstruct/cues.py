"""Stage 1, associative cues: the entities the query names become extra terms for the recall's two
lexical arms only (the vector arm, scoring and the gate see the original query). An empty graph, or a
query that names no entity, changes nothing."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from cpersona.model.associations import name_key
from cpersona.operations.associations import match_entities

if TYPE_CHECKING:
    from cpersona.model.entity_match import EntityMatch
    from cpersona.model.scope import ReadScope
    from cpersona.stores.protocols import AssociationStore

__all__ = ["MAX_TERMS", "Cues", "associative_cues"]

MAX_TERMS = 32


@dataclasses.dataclass(frozen=True, slots=True)
class Cues:
    entities: tuple[EntityMatch, ...] = ()
    terms: tuple[str, ...] = ()
    omitted: int = 0

    def trace(self) -> dict[str, Any]:
        out: dict[str, Any] = {"entities": [m.name for m in self.entities], "terms": list(self.terms)}
        if self.omitted:
            out["terms_omitted"] = self.omitted
        return out


async def associative_cues(records: AssociationStore, scope: ReadScope, query: str) -> Cues:
    """Each matched entity's name and aliases that the query does not already hold, at most 32."""
    matches = tuple(await match_entities(records, scope, query))
    folded = name_key(query)
    terms: dict[str, None] = {}
    for match in matches:
        for term in (match.name, *match.aliases):
            if term and name_key(term) not in folded:
                terms.setdefault(term)
    found = tuple(terms)
    return Cues(matches, found[:MAX_TERMS], max(0, len(found) - MAX_TERMS))
