"""``cpersona mcp``: the MCP tools over stdio, for an MCP client that starts this command itself.

The process opens its own engine on the data dir (with the background tasks ``cpersona.open`` runs) and
serves one client on stdin and stdout until the client closes stdin. Logs go to stderr; stdout carries
only the protocol. No key is in force: whoever can start the command can read the data dir anyway. A
server to ask (``CPERSONA_URL``, or the ``cpersona serve`` that holds the data dir) is not bypassed:
the command refuses in one line that names that server's ``/mcp``.

Each line is checked as ``/mcp`` checks a body (:func:`~cpersona.edges.mcp.endpoint.refusal`) before the
SDK reads it: a key given twice in one object (the SDK keeps the last, so the tool called or its arguments
could be another than the ones checked first) or an ``id`` that is neither a string nor an integer (the
SDK takes the message for a notification, runs it and answers nothing). Such a line reaches no tool; it
is answered with a JSON-RPC error (``-32600`` Invalid Request, ``id`` null) and the session goes on.
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Any

import anyio

from cpersona.edges.cli.service import ServerRefused, server_url
from cpersona.edges.heap import freeze_startup_heap
from cpersona.edges.mcp import MCP_PATH
from cpersona.edges.mcp.endpoint import refusal
from cpersona.engine.facade import Engine

if TYPE_CHECKING:
    import argparse
    from collections.abc import AsyncIterable, AsyncIterator

    from anyio.streams.memory import MemoryObjectSendStream
    from mcp.server.lowlevel import Server
    from mcp.shared.message import SessionMessage

    from cpersona.settings import Settings

__all__ = ["add_mcp_parser", "mcp_command", "serve_stdio"]


def add_mcp_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """The ``mcp`` subcommand (it takes the common flags only)."""
    sub.add_parser(
        "mcp",
        parents=[common],
        help="serve the MCP tools over stdio (for an MCP client that starts this command)",
    )


async def mcp_command(settings: Settings) -> int:
    url = server_url(settings)
    if url is not None:
        # A second engine on the server's data would be refused (the dir's lock) or, on shared backends,
        # would be a second set of background tasks beside the server's: its own /mcp serves these tools.
        raise ServerRefused(
            f"the server at {url} serves this data (CPERSONA_URL, or the server that holds the data dir); "
            f"point the MCP client at {url}{MCP_PATH} (streamable HTTP) instead of cpersona mcp"
        )
    await serve_stdio(settings)
    return 0


async def serve_stdio(settings: Settings) -> None:
    """Serve the tools on this process's stdin and stdout over an engine opened with ``settings``."""
    # Imported here: the command line imports this module for its parser, and the SDK is slow to import.
    from mcp.server.stdio import stdio_server

    from cpersona.edges.mcp.server import build_server

    @contextlib.asynccontextmanager
    async def with_engine(server: Server[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
        async with Engine(settings) as engine, anyio.create_task_group() as tg:
            await tg.start(engine.run_background)
            freeze_startup_heap()  # this process is the MCP server's own (see cpersona.edges.heap)
            try:
                yield {"engine": engine}
            finally:
                tg.cancel_scope.cancel()

    server = build_server(with_engine)
    # The SDK claims stdout (it points fd 1 at stderr while it serves, so stray output misses the wire);
    # stdin it reads as given, here through the check. No child of this process inherits stdin.
    # closefd=False: fd 0 stays open when this file object goes.
    stdin = os.fdopen(0, "r", encoding="utf-8", errors="replace", closefd=False)
    lines = _CheckedLines(anyio.wrap_file(stdin))
    # The SDK annotates stdin as an anyio file, of which it only iterates the lines.
    async with stdio_server(stdin=lines) as (read, write):  # type: ignore[arg-type]
        lines.answer_on(write)
        await server.run(read, write, server.create_initialization_options())


class _CheckedLines:
    """The lines of stdin that ``/mcp`` would take; each other line is answered with its JSON-RPC error
    on the session's write stream instead of reaching the SDK."""

    def __init__(self, lines: AsyncIterable[str]) -> None:
        self._lines = lines
        self._answers: MemoryObjectSendStream[SessionMessage] | None = None
        self._ready = anyio.Event()

    def answer_on(self, write: MemoryObjectSendStream[SessionMessage]) -> None:
        self._answers = write
        self._ready.set()

    async def __aiter__(self) -> AsyncIterator[str]:
        from mcp.shared.message import SessionMessage
        from mcp_types import INVALID_REQUEST, ErrorData, JSONRPCError

        async for line in self._lines:
            problem = refusal(line.encode())
            if problem is None:
                yield line
                continue
            await self._ready.wait()
            assert self._answers is not None
            error = JSONRPCError(
                jsonrpc="2.0", id=None, error=ErrorData(code=INVALID_REQUEST, message=problem)
            )
            await self._answers.send(SessionMessage(error))
