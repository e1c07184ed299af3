"""The associations service: declare (or retract), traverse, match entities in a text, and read what is
declared about records (for reconstruct).

Scope rules. A declaration is written in one scope (agent, project, channel; an omitted project or
channel is ``''``). Its anchor, and both ends of a record relation, must be records that scope may
read under the union-with-global rules of :class:`~cpersona.model.scope.ReadScope`, else
:class:`~cpersona.RecordNotFound` (a record of another agent looks exactly like a missing one). A
read sees what was declared in the scopes it may read, and every record it returns is checked again
against the read's own scope (source filter included), so neither a mention declared in a wider scope
nor a dangling one widens a read.

Traverse is breadth-first from the entity named (by name or alias key): hop 0 is the records mentioning
it, hop ``h`` those mentioning an entity ``h`` entity relations away (either direction). Each record
comes once, at its fewest hops (ties: in the order the walk met its entity, then by ref). The work is
bounded: at most :data:`MAX_WALK_ENTITIES` entities are visited and :data:`MAX_WALK_REFS` mentions
checked, whatever ``limit`` and ``max_hops`` ask. ``truncated`` says the walk stopped at ``limit`` or
at a bound while mentions or related entities were left unread (which may or may not hold more).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from cpersona.engine.disk import check_free_space
from cpersona.errors import InvalidRequest, RecordNotFound
from cpersona.model.association_results import DeclareResult, TraverseResult
from cpersona.model.associations import name_key
from cpersona.model.records import Scope, parse_ref
from cpersona.model.scope import ReadScope
from cpersona.operations.associations import (
    MAX_WALK_ENTITIES,
    MAX_WALK_REFS,
    Walk,
    match_entities,
    record_links,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cpersona.engine.lifecycle import Lifecycle
    from cpersona.model.associations import Declaration, DeclareRequest, TraverseRequest
    from cpersona.model.drafts import MemoryDraft
    from cpersona.model.entity_match import EntityMatch
    from cpersona.stores.protocols import AssociationStore, IndexedEntity, RecordLinks

__all__ = ["MAX_WALK_ENTITIES", "MAX_WALK_REFS", "AssociationService", "check_declared_refs"]


def _reader(scope: Scope) -> ReadScope:
    return ReadScope(scope.agent_id, scope.project_id, scope.channel)


async def _readable(records: AssociationStore, scope: Scope, refs: Sequence[str], field: str) -> list[str]:
    """The refs as canonical record refs, each a memory or episode ``scope`` may read."""
    canonical: list[str] = []
    for ref in refs:
        parsed = parse_ref(ref) if isinstance(ref, str) else None
        if parsed is None or parsed.kind == "raw":
            raise InvalidRequest(field, f"is not a memory or episode ref (mem:<uuid>, ep:<uuid>): {ref!r}")
        canonical.append(f"{parsed.kind}:{parsed.id}")
    found = set(await records.visible_refs(_reader(scope), canonical))
    for ref in canonical:
        if ref not in found:
            raise RecordNotFound(ref, field)
    return canonical


async def check_declared_refs(records: AssociationStore, drafts: Sequence[MemoryDraft]) -> None:
    """Refuse a store whose declared record relations name a record its scope cannot read."""
    for i, d in enumerate(drafts):
        if d.declared is not None and d.declared.record_refs():
            field = "associations.relations" if len(drafts) == 1 else f"records[{i}].associations.relations"
            await _readable(records, d.record.scope, d.declared.record_refs(), field)


def _start(index: Sequence[IndexedEntity], key: str) -> list[str]:
    named = [e.key for e in index if e.key == key]
    return named or [e.key for e in index if any(alias == key for alias, _ in e.aliases)]


class AssociationService:
    """Entities, aliases, relations and mentions: declare, traverse, match (see the module's docs)."""

    def __init__(self, life: Lifecycle) -> None:
        self._life = life

    async def declare(self, req: DeclareRequest) -> DeclareResult:
        """Declare entities (with aliases) and relations in one scope (an omitted project or channel is
        ``''``); ``anchor_ref``'s record gets the entities as its mentions. ``retract`` removes exactly
        what is named instead (a bare entity without an anchor: the entity and all that hangs from it)."""
        life = self._life
        records = life.backends.records
        if not req.retract:  # a retraction frees space, as a delete does: it is never refused for want of it
            await check_free_space(life.settings)
        scope = Scope(req.agent_id, req.project_id or "", req.channel or "")
        declared: Declaration = req.associations.declaration()
        anchor = None
        if req.anchor_ref is not None:
            (anchor,) = await _readable(records, scope, [req.anchor_ref], "anchor_ref")
        if not req.retract and declared.record_refs():
            # A retraction may name a record deleted since: its relations went with it, nothing to check.
            await _readable(records, scope, declared.record_refs(), "associations.relations")
        counts = await records.declare_associations(scope, declared, anchor_ref=anchor, retract=req.retract)
        return DeclareResult(**dataclasses.asdict(counts), retract=req.retract)

    async def traverse(self, req: TraverseRequest) -> TraverseResult:
        """The records reached from ``entity`` (a name or alias) over entity relations in either
        direction, breadth-first: ``max_hops`` 0-5, ``limit`` 1-100, each record once at its fewest hops."""
        records = self._life.backends.records
        scope = ReadScope(req.agent_id, req.project_id, req.channel, req.source_id)
        index = await records.entity_index(scope)
        start = _start(index, name_key(req.entity))
        if not start:
            return TraverseResult(entity=None)
        names = {e.key: e.name for e in index}
        walk = Walk(records, scope, req.limit, names, set(start))
        level: list[tuple[str, tuple[str, ...]]] = [(key, ()) for key in start]
        for hops in range(req.max_hops + 1):
            links = await records.entity_links(scope, [key for key, _ in level])
            await walk.collect(level, links, hops)
            following = walk.expand(level, links) if hops < req.max_hops else []
            if len(walk.reached) >= req.limit or walk.checked >= MAX_WALK_REFS:
                walk.truncated = walk.truncated or bool(following)
                break
            level = following
            if not level:
                break
        return TraverseResult(
            entity=names[start[0]], records=tuple(walk.reached.values()), truncated=walk.truncated
        )

    async def match_entities(self, scope: ReadScope, text: str) -> list[EntityMatch]:
        """The entities ``scope`` sees that ``text`` names: longest first, not overlapping, at most 64."""
        return await match_entities(self._life.backends.records, scope, text)

    async def record_links(self, scope: ReadScope, refs: Sequence[str]) -> dict[str, RecordLinks]:
        """What is declared about each record (its entities, its record relations) that ``scope`` sees."""
        return await record_links(self._life.backends.records, scope, refs)
