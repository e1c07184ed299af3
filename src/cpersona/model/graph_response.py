"""recall.graph's answer, one model for the Python API and ``POST /v1/recall/graph``.

``nodes`` are memories of the caller's scope, in the order the walk reached them; ``edges`` are every
edge of an allowed type between two returned nodes (the subgraph the nodes induce, so a drawing never
holds an edge to a node it lacks). ``meta_edges`` are the returned nodes' declared context edges
(:class:`~cpersona.MetaEdge`), only with ``include_meta``; their target may be any record the caller
named, and is not looked up. Ids are bare UUIDs (the Cerememory SDK reads them as ``UUID``), each beside
its ``ref``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from cpersona.model.records import AssociationType, MetaRelation, StoreKind
from cpersona.model.result_model import ResultModel, absent

__all__ = ["GraphEdgeBody", "GraphNodeBody", "GraphResult", "GraphMetaEdgeBody"]


class _Body(ResultModel):
    pass


class GraphNodeBody(_Body):
    model_config = ConfigDict(title="GraphNode")

    id: str = Field(description="The memory's UUID")
    ref: str = Field(description="mem:<uuid>")
    store: StoreKind
    summary: str = Field(description="The first 80 bytes of the memory's text, '...' when cut")
    fidelity: float = Field(description="The memory's fidelity now")
    depth: int = Field(description="Edges from the nearest start")
    meta: dict[str, Any] | None = Field(
        default=None, exclude_if=absent, description="The node's MetaMemory (include_meta)"
    )


class GraphEdgeBody(_Body):
    model_config = ConfigDict(title="GraphEdge")

    source: str
    target: str
    edge_type: AssociationType
    weight: float
    relation: str | None = Field(
        default=None, exclude_if=absent, description="A declared record relation's predicate"
    )


class GraphMetaEdgeBody(_Body):
    model_config = ConfigDict(title="MetaEdge")

    source_id: str = Field(description="The UUID of source_ref")
    target_id: str = Field(description="The UUID of target_ref")
    source_ref: str
    target_ref: str
    relation: MetaRelation
    rationale: str | None = Field(default=None, exclude_if=absent)
    evidence: list[dict[str, Any]]
    confidence: float | None = Field(default=None, exclude_if=absent)
    created_at: str | None = Field(default=None, exclude_if=absent)


class GraphResult(_Body):
    """A subgraph of memories around a center (or the newest memories)."""

    model_config = ConfigDict(title="RecallGraphResponse")

    ok: Literal[True] = True
    nodes: list[GraphNodeBody]
    edges: list[GraphEdgeBody]
    meta_edges: list[GraphMetaEdgeBody]
    total_nodes: int = Field(description="Nodes returned")
    truncated: bool = Field(description="More memories were reachable within depth than limit_nodes")
