"""What the associative layer's operations return: small frozen values with a ``to_json`` for the edges."""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["DeclareResult", "Reached", "TraverseResult"]


@dataclasses.dataclass(frozen=True, slots=True)
class DeclareResult:
    """How many entities, aliases, mentions and relations a declaration added (or, with ``retract``,
    removed). Declaring the same thing again counts zero everywhere."""

    entities: int = 0
    aliases: int = 0
    mentions: int = 0
    relations: int = 0
    retract: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, **dataclasses.asdict(self)}


@dataclasses.dataclass(frozen=True, slots=True)
class Reached:
    """A record a traversal reached: after ``hops`` relations, along ``predicates`` (in path order),
    because it mentions ``entity`` (the entity's name)."""

    ref: str
    hops: int
    predicates: tuple[str, ...]
    entity: str

    def to_json(self) -> dict[str, Any]:
        return {
            "ref": self.ref,
            "hops": self.hops,
            "predicates": list(self.predicates),
            "entity": self.entity,
        }


@dataclasses.dataclass(frozen=True, slots=True)
class TraverseResult:
    """The records reached from ``entity`` (``None`` when no entity of that name or alias is visible).

    ``truncated`` says the walk stopped at ``limit`` or at a work bound with mentions or related entities
    left unread.
    """

    entity: str | None
    records: tuple[Reached, ...] = ()
    truncated: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": True,
            "entity": self.entity,
            "count": len(self.records),
            "records": [r.to_json() for r in self.records],
            "truncated": self.truncated,
        }
