"""The values of the associative layer that cross the :class:`~cpersona.stores.protocols.RecordStore`
protocol (re-exported there)."""

from __future__ import annotations

import dataclasses
from typing import Literal

__all__ = ["AssociationGraph", "DeclareCounts", "EntityLinks", "IndexedEntity", "Link", "RecordLinks"]

Direction = Literal["out", "in"]


@dataclasses.dataclass(frozen=True, slots=True)
class IndexedEntity:
    """An entity a read scope sees: its key, its name as first declared, its aliases (key, display)."""

    key: str
    name: str
    aliases: tuple[tuple[str, str], ...] = ()


@dataclasses.dataclass(frozen=True, slots=True, order=True)
class Link:
    """One relation seen from one end: ``out`` when this end is the subject, ``in`` when the object.

    ``other`` is the other end's entity key, or its record ref for a record relation.
    """

    direction: Direction
    predicate: str
    other: str


@dataclasses.dataclass(frozen=True, slots=True)
class EntityLinks:
    """What hangs from one entity in the scopes a read sees: the records mentioning it, its relations."""

    mentions: tuple[str, ...] = ()
    relations: tuple[Link, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class RecordLinks:
    """What is declared about one record in the scopes a read sees: the entities it mentions (keys) and
    its relations to other records."""

    entities: tuple[str, ...] = ()
    relations: tuple[Link, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class DeclareCounts:
    """How many entities, aliases, mentions and relations a declaration added (or a retraction removed);
    a repeated declaration counts nothing."""

    entities: int = 0
    aliases: int = 0
    mentions: int = 0
    relations: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class AssociationGraph:
    """All that one agent declared in one scope, in stored (folded) form, each part sorted: what an
    archive carries of the associative layer.

    ``entities`` are (key, name as first declared); ``aliases`` (alias key, entity key, alias as
    declared); ``relations`` entity relations (subject key, predicate key, object key); ``mentions``
    (entity key, record ref); ``record_relations`` (subject ref, predicate key, object ref).
    """

    project_id: str
    channel: str
    entities: tuple[tuple[str, str], ...] = ()
    aliases: tuple[tuple[str, str, str], ...] = ()
    relations: tuple[tuple[str, str, str], ...] = ()
    mentions: tuple[tuple[str, str], ...] = ()
    record_relations: tuple[tuple[str, str, str], ...] = ()
