"""The recall operations' tools (Cerememory's ``recall.*``): the multimodal query by cue, the walk of a
memory's associations, the timeline and the graph. The raw journal's query is among the reading tools
(``raw_query``). The query and the walk answer text first (:mod:`~cpersona.edges.mcp.results`), not in
the byte arrays of the routes' Cerememory shape."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cpersona.edges.mcp.results import associate_json, query_json
from cpersona.edges.mcp.tool import Tool, route_arguments
from cpersona.model.cue_query import CueQueryRequest
from cpersona.model.graph_request import GraphRequest
from cpersona.model.timeline_request import TimelineRequest
from cpersona.model.timeline_response import timeline_json

if TYPE_CHECKING:
    from cpersona.engine.facade import Engine

__all__ = ["AssociateArguments", "RECALL_TOOLS"]

AssociateArguments = route_arguments("POST", "/v1/recall/associate/{record_id}", "AssociateArguments")
"""``POST /v1/recall/associate/{record_id}``'s body with its path's record."""


async def _query(engine: Engine, req: CueQueryRequest, request_id: str | None) -> dict[str, Any]:
    # The request id keys the reconsolidation, as on the route: a retry with the same x-request-id
    # strengthens nothing twice (over stdio each call is its own).
    return query_json(await engine.services.recall.query(req, request_id))


async def _associate(engine: Engine, req: Any, _: str | None) -> dict[str, Any]:
    return associate_json(await engine.services.recall.associate(req.record_id, req))


async def _timeline(engine: Engine, req: TimelineRequest, _: str | None) -> dict[str, Any]:
    return timeline_json(await engine.services.recall.timeline(req))


async def _graph(engine: Engine, req: GraphRequest, _: str | None) -> dict[str, Any]:
    return (await engine.services.recall.graph(req)).model_dump(mode="json")


RECALL_TOOLS: tuple[Tool, ...] = (
    Tool(
        "query",
        CueQueryRequest,
        _query,
        "Cerememory's recall by a cue (`text`, `embedding`, `emotion`, `temporal`: a hard filter, only when "
        "the request names a period) with spreading activation; answers each memory's text, ref, score "
        "and reason, and strengthens them unless `reconsolidate: false`.",
        read_only=False,
        empty={"memories": []},
    ),
    Tool(
        "associate",
        AssociateArguments,
        _associate,
        "The memories reached from one memory (`record_id`) over its typed, weighted associations, most "
        "activated first.",
        read_only=True,
        idempotent=True,
    ),
    Tool(
        "timeline",
        TimelineRequest,
        _timeline,
        "The agent's memories in a time range (their own timestamps) in UTC buckets of a minute to a "
        "month, oldest first; name the period the request is about.",
        read_only=True,
        idempotent=True,
    ),
    Tool(
        "graph",
        GraphRequest,
        _graph,
        "The subgraph of memories around one (`center_id`, default the newest) with their typed edges.",
        read_only=True,
        idempotent=True,
    ),
)
