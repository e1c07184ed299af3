"""The routes of recall.timeline and recall.graph (added to the route table by
:data:`~cpersona.edges.http.routes.OPERATIONS`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from cpersona.edges.http.errors import ORJSONResponse
from cpersona.edges.http.operation import Operation
from cpersona.edges.http.reading import json_object
from cpersona.engine.facade import Engine
from cpersona.model.fields import RequestModel, arguments, validate
from cpersona.model.graph_request import GraphRequest
from cpersona.model.graph_response import GraphResult
from cpersona.model.timeline_request import TimelineRequest
from cpersona.model.timeline_response import TimelineResult

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

__all__ = ["TIMELINE_OPERATIONS"]

_M = TypeVar("_M", bound=RequestModel)


def _engine(request: Request) -> Engine:
    # routes.engine_of's check; importing it would make the route table import itself.
    engine = request.state.engine
    if not isinstance(engine, Engine):  # pragma: no cover - the lifespan always puts an Engine here
        raise TypeError("request.state.engine is not an Engine")
    return engine


async def _body(request: Request, model: type[_M]) -> tuple[Engine, _M]:
    engine = _engine(request)
    raw = await json_object(request, request.app.state.max_body_bytes)
    return engine, validate(model, raw, engine.settings)


async def _timeline(request: Request) -> Response:
    engine, req = await _body(request, TimelineRequest)
    return ORJSONResponse((await engine.timeline(**arguments(req))).to_json())


async def _graph(request: Request) -> Response:
    engine, req = await _body(request, GraphRequest)
    return ORJSONResponse((await engine.graph(**arguments(req))).to_json())


TIMELINE_OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "POST", "/v1/recall/timeline", _timeline,
        "The memories of a time range in UTC buckets (recall.timeline)", TimelineResult,
        body=TimelineRequest,
        description="A record's time is its own `timestamp`; the range includes both ends. Buckets are "
        "UTC minutes, hours, days, ISO weeks (from Monday) or calendar months, each `[start, end)`; only "
        "buckets holding a record are listed, oldest first. At most `limit` records (default 1000); "
        "`truncated: true` when more matched.",
    ),
    Operation(
        "POST", "/v1/recall/graph", _graph,
        "The subgraph of memories around one, with their edges (recall.graph)", GraphResult,
        body=GraphRequest, errors=(400, 404, 503),
        description="Breadth-first over outbound associations and declared record relations "
        "(`user_defined`), within the caller's scope: `depth` edges, `limit_nodes` nodes (`truncated` "
        "when more were reachable). `edges` are those between returned nodes. Without `center_id`, the "
        "scope's newest memories. An unknown `center_id` is a 404.",
    ),
)  # fmt: skip
