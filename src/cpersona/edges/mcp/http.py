"""The route of ``/mcp`` in the HTTP route table, and so in the OpenAPI document: it hands the request to
the app's :class:`~cpersona.edges.mcp.endpoint.McpEndpoint` (``app.state.mcp``), which answers it.

This module imports neither the SDK nor the tools: the route table imports it, and the tools' models
are read from the route table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.responses import Response

from cpersona.edges.http.operation import Operation
from cpersona.edges.mcp import MCP_PATH

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["MCP_OPERATIONS", "MCP_PATH"]


class _Answered(Response):
    """What the route answers: the endpoint, which writes its own response on the connection."""

    def __init__(self, endpoint: ASGIApp) -> None:
        super().__init__()
        self._endpoint = endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._endpoint(scope, receive, send)


async def _mcp(request: Request) -> Response:
    endpoint = request.app.state.mcp
    if not callable(endpoint):  # pragma: no cover - create_app always puts its McpEndpoint there
        raise TypeError("app.state.mcp is not an ASGI endpoint")
    return _Answered(endpoint)


MCP_OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "POST",
        MCP_PATH,
        _mcp,
        "MCP streamable HTTP: the tools of cpersona (JSON-RPC 2.0)",
        None,
        # The transport's own refusals (400, 406, 413) are JSON-RPC error bodies, not the envelope.
        errors=(),
        description="The Model Context Protocol's streamable HTTP transport, stateless, answering JSON: "
        "`tools/list` lists every tool with its input schema (the request model of the route that does "
        "the same thing, compacted) and `tools/call` runs one; `query` and `associate` answer text "
        "first. A tool's failure is a result marked `isError` whose "
        "JSON is `{ok: false, error: {code, message, field}}`. A message the transport refuses (malformed "
        "JSON-RPC, a key given twice in one object or an `id` that is no string or integer (-32600), or a "
        "body that is not `application/json`: 400; an `Accept` without `application/json`: "
        "406; over CPERSONA_MAX_BODY_BYTES: 413) is answered with a JSON-RPC error body. There is no "
        "server-to-client stream (GET) and no session to end (DELETE).",
    ),
)
"""The route of ``/mcp`` in the HTTP route table (and so in the OpenAPI document)."""
