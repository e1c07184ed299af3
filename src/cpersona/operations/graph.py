"""recall.graph: a breadth-first walk over memories' outbound edges, within the caller's scope.

The edges walked are a memory's Cerememory associations (``MemoryRecord.associations``) and the record
relations declared on it through the associative layer (each a ``user_defined`` edge of weight 1 that
keeps its predicate as ``relation``), both outbound only: an association is stored on its source. An
edge's target joins the walk only if it is a memory the scope sees (every id is read back through
:meth:`~cpersona.stores.memory_reads.MemoryReadStore.memories_by_id`, which checks the scope), so no
walk crosses into another agent's, project's or channel's records. The walk stops at ``depth`` edges
from the start or at ``limit_nodes`` nodes, whichever comes first; a node left out for the limit makes
the answer ``truncated``.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import TYPE_CHECKING, Protocol, get_args

from cpersona.errors import RecordNotFound
from cpersona.model.cmp_record import meta_json
from cpersona.model.fidelity import FidelityCurve, as_read
from cpersona.model.graph_parts import meta_edges, node_summary
from cpersona.model.graph_response import GraphEdgeBody, GraphNodeBody, GraphResult
from cpersona.model.records import AssociationType, MemoryRecord, parse_ref
from cpersona.model.scope import ReadScope
from cpersona.stores.association_store import AssociationStore
from cpersona.stores.memory_reads import MemoryReadStore
from cpersona.stores.record_reads import RecordReads

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cpersona.model.graph_request import GraphRequest

__all__ = ["Edge", "GraphReads", "graph", "memory_target"]


class GraphReads(MemoryReadStore, RecordReads, AssociationStore, Protocol):
    """The roles the graph reads: memories by id in its scope, the newest as its default start, and the
    records' declared links."""


_RELATION_TYPE: AssociationType = "user_defined"
_ALL_TYPES: frozenset[str] = frozenset(get_args(AssociationType))


def memory_target(target: str) -> str | None:
    """The memory id an association's target names (``mem:<uuid>`` or a bare UUID); ``None`` for an
    episode, a raw entry or text that names no record."""
    ref = parse_ref(target)
    if ref is not None:
        return ref.id if ref.kind == "mem" else None
    try:
        return str(uuid.UUID(target))
    except ValueError:
        return None


@dataclasses.dataclass(frozen=True, slots=True)
class Edge:
    """An outbound edge of a memory to another memory (by bare id)."""

    source: str
    target: str
    type: AssociationType
    weight: float
    relation: str | None = None


async def _out_edges(
    records: GraphReads, scope: ReadScope, level: Sequence[MemoryRecord], allowed: frozenset[str]
) -> list[Edge]:
    """The outbound edges of ``level``'s memories whose type is ``allowed``, to memories by id."""
    out: list[Edge] = []
    for record in level:
        for edge in record.associations:
            target = memory_target(edge.target_id)
            if target is not None and edge.type in allowed:
                out.append(Edge(record.id, target, edge.type, edge.weight))
    if _RELATION_TYPE in allowed and level:
        links = await records.record_links(scope, [r.ref for r in level])
        for record in level:
            found = links.get(record.ref)
            for link in found.relations if found else ():
                if link.direction == "out" and link.other.startswith("mem:"):
                    out.append(
                        Edge(record.id, link.other.removeprefix("mem:"), _RELATION_TYPE, 1.0, link.predicate)
                    )
    return out


@dataclasses.dataclass
class _Walk:
    records: GraphReads
    scope: ReadScope
    req: GraphRequest
    allowed: frozenset[str]
    nodes: dict[str, tuple[MemoryRecord, int]] = dataclasses.field(default_factory=dict)
    edges: list[Edge] = dataclasses.field(default_factory=list)
    truncated: bool = False

    def admit(self, level: Sequence[MemoryRecord], depth: int) -> list[MemoryRecord]:
        """Add ``level``'s new memories as nodes at ``depth`` while there is room; return those added."""
        added: list[MemoryRecord] = []
        for record in level:
            if record.id in self.nodes:
                continue
            if len(self.nodes) >= self.req.limit_nodes:
                self.truncated = True
                break
            self.nodes[record.id] = (record, depth)
            added.append(record)
        return added

    async def run(self, start: Sequence[MemoryRecord]) -> None:
        level = self.admit(start, 0)
        for depth in range(1, self.req.depth + 1):
            if not level:
                return
            found = await _out_edges(self.records, self.scope, level, self.allowed)
            self.edges.extend(found)
            fresh = [e.target for e in found if e.target not in self.nodes]
            loaded = await self.records.memories_by_id(self.scope, fresh)
            level = self.admit([loaded[t] for t in dict.fromkeys(fresh) if t in loaded], depth)
        if level:
            # The last level's own edges: kept where they join two returned nodes (the induced subgraph).
            self.edges.extend(await _out_edges(self.records, self.scope, level, self.allowed))


def _edges(walk: _Walk) -> list[GraphEdgeBody]:
    seen: set[tuple[str, str, str, str | None]] = set()
    out: list[GraphEdgeBody] = []
    for e in walk.edges:
        key = (e.source, e.target, e.type, e.relation)
        if e.source in walk.nodes and e.target in walk.nodes and key not in seen:
            seen.add(key)
            out.append(
                GraphEdgeBody(
                    source=e.source, target=e.target, edge_type=e.type, weight=e.weight, relation=e.relation
                )
            )
    return out


async def _start(records: GraphReads, scope: ReadScope, req: GraphRequest) -> list[MemoryRecord]:
    if req.center_id is None:
        newest = await records.newest("memory", scope, req.limit_nodes)
        return [r for r in newest if isinstance(r, MemoryRecord)]
    found = await records.memories_by_id(scope, [req.center_id])
    if req.center_id not in found:
        raise RecordNotFound(f"mem:{req.center_id}", "center_id")
    return [found[req.center_id]]


def _node(
    record: MemoryRecord, depth: int, req: GraphRequest, now: float, curve: FidelityCurve
) -> GraphNodeBody:
    return GraphNodeBody(
        id=record.id,
        ref=record.ref,
        store=record.store,
        summary=node_summary(record.content),
        fidelity=as_read(record, now, curve=curve).fidelity.score,
        depth=depth,
        meta=meta_json(record.meta) if req.include_meta else None,
    )


async def graph(records: GraphReads, req: GraphRequest, now: float, curve: FidelityCurve) -> GraphResult:
    """The subgraph ``req`` asks for, with every fidelity read at ``now`` on ``curve``."""
    scope = ReadScope(req.agent_id, req.project_id, req.channel, req.source_id)
    types = frozenset(req.edge_types) if req.edge_types is not None else _ALL_TYPES
    walk = _Walk(records, scope, req, types)
    await walk.run(await _start(records, scope, req))
    nodes = [_node(record, depth, req, now, curve) for record, depth in walk.nodes.values()]
    metas = [m for record, _ in walk.nodes.values() for m in meta_edges(record)] if req.include_meta else []
    return GraphResult(
        nodes=nodes, edges=_edges(walk), meta_edges=metas, total_nodes=len(nodes), truncated=walk.truncated
    )
