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

Before the SDK reads a JSON message, two things it would let through are refused as the routes refuse
them, with a JSON-RPC error (400, ``-32600`` Invalid Request): a key given twice in one object (the SDK
keeps the last, so ``{"name": "recall", "name": "delete_agent_data"}`` would call the second), and an
``id`` that is neither a string nor an integer (the SDK reads ``{"id": {}, "method": ...}`` as a
notification and answers 202, running a request the caller cannot match to any answer).
"""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread
import orjson

from cpersona.edges.http.reading import PARSE_IN_THREAD_BYTES, unique_keys
from cpersona.errors import InvalidRequest

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.types import Message, Receive, Scope, Send

# JSON-RPC 2.0's code of a message that is JSON but no valid request.
_INVALID_REQUEST = -32600

__all__ = ["McpEndpoint", "refusal"]


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
        # Every POST body, whatever its content type says: the SDK reads "application/json, ..." too.
        if scope["type"] == "http" and scope["method"] == "POST":
            chunks, whole = await _read_up_to(receive, self._max_body_bytes)
            problem = await _refusal_off_loop(b"".join(chunks)) if whole else None
            if problem is not None:
                await _answer_error(send, problem)
                return
            # The SDK reads the body again (and refuses one over the limit, which is not read whole here).
            receive = _replay(chunks, receive, more=not whole)
        if self._manager is not None:
            await self._manager.handle_request(scope, receive, send)
            return
        manager = self._new_manager()
        async with manager.run():
            await manager.handle_request(scope, receive, send)


async def _refusal_off_loop(raw: bytes) -> str | None:
    """:func:`refusal`, in a worker thread for a large body (as the routes parse theirs)."""
    if len(raw) > PARSE_IN_THREAD_BYTES:
        return await anyio.to_thread.run_sync(refusal, raw)
    return refusal(raw)


async def _read_up_to(receive: Receive, limit: int) -> tuple[list[bytes], bool]:
    """The body's chunks, and whether that is the whole body (False: it went past ``limit``, or the
    client went away)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return chunks, False
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if not message.get("more_body", False):
            return chunks, True
        if size > limit:
            return chunks, False


def _replay(chunks: list[bytes], receive: Receive, *, more: bool) -> Receive:
    """A ``receive`` that gives ``chunks`` again, then (when ``more``) what the client still sends."""
    pending = list(chunks)

    async def replayed() -> Message:
        if pending:
            chunk = pending.pop(0)
            return {"type": "http.request", "body": chunk, "more_body": bool(pending) or more}
        return await receive()

    return replayed


def refusal(raw: bytes) -> str | None:
    """Why a JSON body is no message this server reads, or ``None`` (also for text that is no JSON at
    all: the SDK answers that with its own parse error). The stdio transport asks it of each line.

    Read by the standard library's parser, as lenient as the SDK's (``NaN``, ``1e400``, integers of any
    size), so that no body the SDK would take escapes the check by failing a stricter parse first."""
    try:
        body = json.loads(raw, object_pairs_hook=unique_keys)
    except InvalidRequest as exc:
        return str(exc)
    except RecursionError:
        return "body: nests too deeply to read"
    except ValueError:
        return None
    for message in body if isinstance(body, list) else [body]:
        if isinstance(message, dict) and "id" in message:
            given = message["id"]
            if isinstance(given, bool) or not isinstance(given, str | int):
                return f"id: must be a string or an integer, got {json.dumps(given)[:40]}"
    return None


async def _answer_error(send: Send, problem: str) -> None:
    error = {"jsonrpc": "2.0", "id": None, "error": {"code": _INVALID_REQUEST, "message": problem}}
    body = orjson.dumps(error)
    await send(
        {
            "type": "http.response.start",
            "status": 400,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
