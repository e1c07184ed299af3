"""The routes of the recall operations: the multimodal ``recall.query`` (a body with ``cue`` on
``POST /v1/recall/query``, dispatched here by :mod:`.routes`) and ``recall.associate``.

A query's request id (``x-request-id``, or the fresh one the app gave the request) is its
reconsolidation's idempotency key: a retry with the same id strengthens nothing twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, cast

from pydantic import Field

from cpersona.edges.http.errors import ORJSONResponse
from cpersona.edges.http.operation import Operation
from cpersona.edges.http.reading import read_body
from cpersona.edges.http.state import engine_of, services_of
from cpersona.model.cue_query import CueQueryRequest
from cpersona.model.cue_query_associate import AssociateRequest
from cpersona.model.cue_query_response import AssociateResult
from cpersona.model.fields import validate
from cpersona.model.lifecycle_requests import MEMORY_ID_PATTERN

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

__all__ = ["QUERY_OPERATIONS", "cue_query"]


def _request_id(request: Request) -> str | None:
    return cast("str | None", request.scope.get("state", {}).get("request_id"))


async def cue_query(request: Request, raw: dict[str, Any]) -> Response:
    """``POST /v1/recall/query`` with a ``cue`` (the body already read)."""
    engine = engine_of(request)
    req = validate(CueQueryRequest, raw, engine.settings)
    result = await engine.services.recall.query(req, _request_id(request))
    return ORJSONResponse(result.model_dump(mode="json"))


async def _associate(request: Request) -> Response:
    req = await read_body(request, AssociateRequest)
    result = await services_of(request).recall.associate(request.path_params["record_id"], req)
    return ORJSONResponse(result.model_dump(mode="json"))


_RECORD_ID = {
    "record_id": Annotated[
        str,
        Field(description="The memory to start from: mem:<uuid> or its bare UUID", pattern=MEMORY_ID_PATTERN),
    ]
}

QUERY_OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "POST",
        "/v1/recall/associate/{record_id}",
        _associate,
        "The memories reached from one memory over its typed, weighted associations (recall.associate)",
        AssociateResult,
        body=AssociateRequest,
        errors=(400, 404, 503),
        path_params=_RECORD_ID,
        description="Spreading activation from the memory (level 1.0; each hop passes level * weight * "
        "0.5, stopping under 0.05; no cycles), over edges of at least `min_weight` and, with "
        "`association_types`, only edges of those types at every hop. Only the caller's scope is walked "
        "(a record outside it is a 404). Each memory has its `activation_path` from the source.",
    ),
)
