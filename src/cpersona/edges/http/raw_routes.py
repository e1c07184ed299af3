"""The forensic raw-journal query's route (``POST /v1/recall/raw``), added to the route table by
:data:`RAW_OPERATIONS`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cpersona.edges.http.errors import ORJSONResponse
from cpersona.edges.http.operation import Operation
from cpersona.edges.http.reading import read_body
from cpersona.edges.http.state import services_of
from cpersona.model.raw_query import MAX_RAW_LIMIT, SEALED_SCAN_MAX, RawQueryRequest, RawQueryResult

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

__all__ = ["RAW_OPERATIONS"]


async def _raw_query(request: Request) -> Response:
    req = await read_body(request, RawQueryRequest)
    return ORJSONResponse((await services_of(request).recall.raw_query(req)).model_dump(mode="json"))


RAW_OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "POST",
        "/v1/recall/raw",
        _raw_query,
        "Raw journal entries, verbatim, oldest first (recall.raw_query)",
        RawQueryResult,
        body=RawQueryRequest,
        description="Forensic: no decay, no noise, no side effect. Every word of `query` must occur in an "
        "entry (by English stem, stopwords left out; the text is never query syntax); `temporal` is "
        "always applied, both ends included; `secrecy_levels` defaults to public and sensitive; "
        f"`limit` 1 to {MAX_RAW_LIMIT}. `private_scratch` and `sealed` entries come back only when asked: "
        "sealed entries are stored encrypted and, without `include_sealed`, are neither returned nor "
        f"counted; with it the newest {SEALED_SCAN_MAX} sealed entries of the filter are decrypted and "
        "matched (`sealed_scanned`).",
    ),
)
