"""The associations role: entities, aliases, mentions and relations, scoped like records.

Consumers: the engine's declarations and the checks of declared refs (:mod:`~cpersona.engine.associations`),
deletes (:mod:`~cpersona.engine.deletes`: a record's associations, an agent's graph), the archive
(:mod:`~cpersona.engine.upkeep_archive`), the entity matching and record links of the operations
(:mod:`~cpersona.operations.associations`, :mod:`~cpersona.operations.graph`) and the reconstruct walk
(:mod:`~cpersona.operations.reconstruct.walk`). The Redis adapter is
:class:`~cpersona.stores.redis.associations.RedisAssociations`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cpersona.model.associations import Declaration
    from cpersona.model.records import Scope
    from cpersona.model.scope import ReadScope
    from cpersona.stores.association_values import (
        AssociationGraph,
        DeclareCounts,
        EntityLinks,
        IndexedEntity,
        RecordLinks,
    )

__all__ = ["AssociationStore"]


@runtime_checkable
class AssociationStore(Protocol):
    """Entities, aliases, mentions and relations, scoped like records: a read sees only what was declared
    in a scope it may read (:meth:`~cpersona.model.scope.ReadScope.sees`)."""

    async def declare_associations(
        self, scope: Scope, declared: Declaration, *, anchor_ref: str | None, retract: bool
    ) -> DeclareCounts:
        """Declare (or retract) in ``scope``, atomically: entities and aliases, the anchor's mentions of
        the entities, and the relations. Declaring twice changes nothing; retracting removes what is
        named (a bare entity without an anchor: the entity with all that hangs from it in ``scope``)."""
        ...

    async def entity_index(self, scope: ReadScope) -> list[IndexedEntity]:
        """Every entity declared in a scope the read sees, with its aliases, sorted by key."""
        ...

    async def entity_links(self, scope: ReadScope, entities: Sequence[str]) -> dict[str, EntityLinks]:
        """The mentions and relations (both directions) of each entity key, in the scopes the read sees."""
        ...

    async def record_links(self, scope: ReadScope, refs: Sequence[str]) -> dict[str, RecordLinks]:
        """The mentions and record relations of each record, declared in the scopes the read sees."""
        ...

    async def visible_refs(self, scope: ReadScope, refs: Sequence[str]) -> list[str]:
        """The refs, in order, whose record exists and is visible to the read (source filter included)."""
        ...

    async def forget_record_associations(self, agent_id: str, ref: str) -> None:
        """Remove a record's mentions and record relations (both ends), in every scope."""
        ...

    async def delete_agent_associations(self, agent_id: str) -> int:
        """Remove the agent's whole graph; return how many keys went."""
        ...

    async def association_graphs(self, agent_id: str) -> list[AssociationGraph]:
        """Everything the agent declared, one graph per scope it declared in (for its archive)."""
        ...

    async def restore_association_graphs(self, agent_id: str, graphs: Sequence[AssociationGraph]) -> None:
        """Write archived graphs under ``agent_id``, atomically; writing one twice changes nothing."""
        ...
