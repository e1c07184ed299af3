"""The associative layer's methods of :class:`~cpersona.Engine` (a base class of it, so the facade stays
one screenful per concept); each turns its typed keywords into one request body for
:mod:`cpersona.engine.associations`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cpersona.engine import associations as graph
from cpersona.model.fields import given

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from cpersona.engine.lifecycle import Lifecycle
    from cpersona.model.association_results import DeclareResult, TraverseResult
    from cpersona.model.associations import AssociationsBody
    from cpersona.model.entity_match import EntityMatch
    from cpersona.model.scope import ReadScope
    from cpersona.stores.protocols import RecordLinks

__all__ = ["AssociationMethods"]


class AssociationMethods:
    """Entities, aliases, relations and mentions: declare, traverse, match (see the module's docs)."""

    _life: Lifecycle

    async def declare_associations(
        self,
        agent_id: str,
        associations: Mapping[str, Any] | AssociationsBody,
        *,
        anchor_ref: str | None = None,
        retract: bool = False,
        project_id: str | None = None,
        channel: str | None = None,
    ) -> DeclareResult:
        """Declare entities (with aliases) and relations in one scope (an omitted project or channel is
        ``''``); ``anchor_ref``'s record gets the entities as its mentions. ``retract`` removes exactly
        what is named instead (a bare entity without an anchor: the entity and all that hangs from it)."""
        body = given(
            agent_id=agent_id,
            associations=associations,
            anchor_ref=anchor_ref,
            retract=retract,
            project_id=project_id,
            channel=channel,
        )
        return await graph.declare(self._life, body)

    async def traverse(
        self,
        agent_id: str,
        entity: str,
        *,
        max_hops: int = 1,
        limit: int = 20,
        project_id: str | None = None,
        channel: str | None = None,
        source_id: str = "",
    ) -> TraverseResult:
        """The records reached from ``entity`` (a name or alias) over entity relations in either
        direction, breadth-first: ``max_hops`` 0-5, ``limit`` 1-100, each record once at its fewest hops."""
        body = given(
            agent_id=agent_id,
            entity=entity,
            max_hops=max_hops,
            limit=limit,
            project_id=project_id,
            channel=channel,
            source_id=source_id,
        )
        return await graph.traverse(self._life, body)

    async def match_entities(self, scope: ReadScope, text: str) -> list[EntityMatch]:
        """The entities ``scope`` sees that ``text`` names: longest first, not overlapping, at most 64."""
        return await graph.match_entities(self._life.backends.records, scope, text)

    async def record_links(self, scope: ReadScope, refs: Sequence[str]) -> dict[str, RecordLinks]:
        """What is declared about each record (its entities, its record relations) that ``scope`` sees."""
        return await graph.record_links(self._life.backends.records, scope, refs)
