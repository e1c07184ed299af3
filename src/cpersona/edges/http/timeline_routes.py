"""The routes of recall.timeline and recall.graph (added to the route table by
:data:`~cpersona.edges.http.routes.OPERATIONS`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cpersona.edges.http.errors import ORJSONResponse
from cpersona.edges.http.operation import Operation
from cpersona.edges.http.reading import read_body
from cpersona.edges.http.state import services_of
from cpersona.model.graph_request import GraphRequest
from cpersona.model.graph_response import GraphResult
from cpersona.model.timeline_request import TimelineRequest
from cpersona.model.timeline_response import TimelineResult, timeline_json

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

__all__ = ["TIMELINE_OPERATIONS"]


async def _timeline(request: Request) -> Response:
    req = await read_body(request, TimelineRequest)
    return ORJSONResponse(timeline_json(await services_of(request).recall.timeline(req)))


async def _graph(request: Request) -> Response:
    req = await read_body(request, GraphRequest)
    return ORJSONResponse((await services_of(request).recall.graph(req)).model_dump(mode="json"))


TIMELINE_OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "POST",
        "/v1/recall/timeline",
        _timeline,
        "The memories of a time range in UTC buckets (recall.timeline)",
        TimelineResult,
        body=TimelineRequest,
        description="A record's time is its own `timestamp`; the range includes both ends. Buckets are "
        "UTC minutes, hours, days, ISO weeks (from Monday) or calendar months, each `[start, end)`; only "
        "buckets holding a record are listed, oldest first. At most `limit` records (default 1000); "
        "`truncated: true` when more matched.",
    ),
    Operation(
        "POST",
        "/v1/recall/graph",
        _graph,
        "The subgraph of memories around one, with their edges (recall.graph)",
        GraphResult,
        body=GraphRequest,
        errors=(400, 404, 503),
        description="Breadth-first over outbound associations and declared record relations "
        "(`user_defined`), within the caller's scope: `depth` edges, `limit_nodes` nodes (`truncated` "
        "when more were reachable). `edges` are those between returned nodes. Without `center_id`, the "
        "scope's newest memories. An unknown `center_id` is a 404.",
    ),
)
