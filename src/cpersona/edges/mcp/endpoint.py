"""Streamable HTTP at ``/mcp``: the MCP server as one more endpoint of the HTTP app.

Mounted in the same Starlette app as the REST routes, it is behind the same middleware (the request id,
the loopback ``Host`` guard, the API keys) and its tools call the engine the routes use. The SDK's
session manager runs **stateless** and answers **JSON**: no session lives in one process's memory, so
any worker of several can answer any request, and no tool needs a stream back to the client. The
manager's task group is owned by the app's lifespan (:meth:`McpEndpoint.running`). An app whose lifespan
is entered and left in different tasks (the tests' in-process client) cannot hold a task group across
them; there each request runs its own manager, which a stateless manager allows at the cost of a task
group per request.

A web page cannot reach the tools of a local server: its browser sends a cross-site body unasked only
as ``text/plain`` (or a form), which the transport refuses (400), and asks first for ``application/json``
or the protocol's headers, which this server never grants; a page that rebinds its own name to loopback
still names itself in ``Host``, which the app's HostGuard refuses.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.types import Receive, Scope, Send

__all__ = ["McpEndpoint"]


class McpEndpoint:
    """The ASGI endpoint of ``/mcp``."""

    def __init__(self, *, max_body_bytes: int) -> None:
        # The SDK is imported when an app is built, not when the command line imports the app's module
        # (it costs every other command a few hundred milliseconds).
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        from cpersona.edges.mcp.server import build_server

        self._server = build_server()
        self._manager_class = StreamableHTTPSessionManager
        self._manager: StreamableHTTPSessionManager | None = None
        # The app's own body limit (CPERSONA_MAX_BODY_BYTES), not the SDK's 4 MiB: an archive imported
        # through a tool may be as large as one the route takes.
        self._max_body_bytes = max_body_bytes

    def _new_manager(self) -> StreamableHTTPSessionManager:
        # The app's HostGuard already refuses a foreign Host on a loopback server (the SDK's own DNS
        # rebinding check would be a second, differently configured copy of it).
        return self._manager_class(
            app=self._server, stateless=True, json_response=True, max_request_body_size=self._max_body_bytes
        )

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
