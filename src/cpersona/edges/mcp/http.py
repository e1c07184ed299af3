"""Streamable HTTP at ``/mcp``: the MCP server as one more endpoint of the HTTP app.

Mounted in the same Starlette app as the REST routes, it is behind the same middleware (the request id,
the loopback ``Host`` guard, the API keys) and its tools call the engine the routes use. The SDK's
session manager runs **stateless** and answers **JSON**: no session lives in one process's memory, so
any worker of several can answer any request, and no tool needs a stream back to the client. The
manager's task group is owned by the app's lifespan (:meth:`McpEndpoint.running`). An app whose lifespan
is entered and left in different tasks (the tests' in-process client) cannot hold a task group across
them; there each request runs its own manager, which a stateless manager allows at the cost of a task
group per request.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from starlette.responses import Response

from cpersona.edges.http.operation import Operation
from cpersona.edges.mcp import MCP_PATH

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.requests import Request
    from starlette.types import Receive, Scope, Send

__all__ = ["MCP_OPERATIONS", "MCP_PATH", "McpEndpoint"]


class McpEndpoint:
    """The ASGI endpoint of ``/mcp``."""

    def __init__(self) -> None:
        # The SDK is imported when an app is built, not when the command line imports the app's module
        # (it costs every other command a few hundred milliseconds).
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        from cpersona.edges.mcp.server import build_server

        self._server = build_server()
        self._manager_class = StreamableHTTPSessionManager
        self._manager: StreamableHTTPSessionManager | None = None

    def _new_manager(self) -> StreamableHTTPSessionManager:
        # The app's HostGuard already refuses a foreign Host on a loopback server (the SDK's own DNS
        # rebinding check would be a second, differently configured copy of it).
        return self._manager_class(app=self._server, stateless=True, json_response=True)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Serve every request with one manager, its task group open as long as this block."""
        manager = self._new_manager()
        async with manager.run():
            self._manager = manager
            try:
                yield
            finally:
                self._manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._manager is not None:
            await self._manager.handle_request(scope, receive, send)
            return
        manager = self._new_manager()
        async with manager.run():
            await manager.handle_request(scope, receive, send)


class _Answered(Response):
    """What the route answers: the endpoint, which writes its own response on the connection."""

    def __init__(self, endpoint: McpEndpoint) -> None:
        super().__init__()
        self._endpoint = endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._endpoint(scope, receive, send)


async def _mcp(request: Request) -> Response:
    endpoint = request.app.state.mcp
    if not isinstance(endpoint, McpEndpoint):  # pragma: no cover - create_app always puts one there
        raise TypeError("app.state.mcp is not an McpEndpoint")
    return _Answered(endpoint)


MCP_OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "POST", MCP_PATH, _mcp, "MCP streamable HTTP: the tools of cpersona (JSON-RPC 2.0)", None,
        # The transport's own refusals (400, 406, 413, 415) are JSON-RPC error bodies, not the envelope.
        errors=(),
        description="The Model Context Protocol's streamable HTTP transport, stateless, answering JSON: "
        "`tools/list` lists every tool with its input schema (the request model of the route that does "
        "the same thing) and `tools/call` runs one. A tool's failure is a result marked `isError` whose "
        "JSON is `{ok: false, error: {code, message, field}}`. A message the transport refuses (malformed "
        "JSON-RPC 400, an `Accept` without `application/json` 406, over 4 MiB 413, not JSON 415) is "
        "answered with a JSON-RPC error body. There is no server-to-client "
        "stream (GET) and no session to end (DELETE).",
    ),
)  # fmt: skip
"""The route of ``/mcp`` in the HTTP route table (and so in the OpenAPI document)."""
