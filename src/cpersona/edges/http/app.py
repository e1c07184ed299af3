"""The HTTP edge: a Starlette app over one :class:`~cpersona.Engine`, and ``serve`` to run it with uvicorn.

:func:`create_app` builds the app and nothing else; the engine is opened by the app's lifespan and
reaches the handlers as ``request.state.engine``, so importing this module or building an app touches no
backend. The routes are one table (:mod:`~cpersona.edges.http.routes`), each with the models it reads
and answers; every failure is the one error envelope (:mod:`~cpersona.edges.http.errors`), and the
OpenAPI document at ``GET /openapi.json`` is generated from the table and the models
(:mod:`~cpersona.edges.http.openapi`).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio
import uvicorn
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.routing import Route
from uvicorn.config import STARTUP_FAILURE

from cpersona.edges.heap import freeze_startup_heap
from cpersona.edges.http.auth import KeyGuard, exposure_refusal, warn_if_exposed
from cpersona.edges.http.body_deadline import BodyDeadline
from cpersona.edges.http.connections import server_config
from cpersona.edges.http.errors import (
    ORJSONResponse,
    RequestEdge,
    error_envelope,
    on_cpersona_error,
    on_http_error,
    single_error,
)
from cpersona.edges.http.hosts import HostGuard
from cpersona.edges.http.openapi import ROUTES, openapi_document
from cpersona.edges.http.reading import declare_models
from cpersona.edges.http.records import record_json
from cpersona.edges.mcp.endpoint import McpEndpoint
from cpersona.engine.facade import Engine
from cpersona.errors import CpersonaError
from cpersona.settings import Settings

if TYPE_CHECKING:
    import socket
    from collections.abc import AsyncIterator

    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from cpersona.edges.http.operation import Handler, Operation

__all__ = [
    "MAX_BODY_BYTES",
    "ORJSONResponse",
    "create_app",
    "startup_refusal_in_one_line",
    "error_envelope",
    "openapi_document",
    "record_json",
    "serve",
    "single_error",
]

MAX_BODY_BYTES = Settings.model_fields["max_body_bytes"].default
"""The default of ``CPERSONA_MAX_BODY_BYTES``, the largest request body the app reads (413 beyond it)."""


def create_app(
    settings: Settings,
    *,
    max_body_bytes: int | None = None,
    background: bool = True,
    owns_process: bool = False,
) -> Starlette:
    """The HTTP API over an engine opened with ``settings`` when the app starts (its lifespan).

    ``max_body_bytes`` caps request bodies (413 beyond it; default ``settings.max_body_bytes``). A
    server bound to loopback answers only to a loopback ``Host`` (:mod:`~cpersona.edges.http.hosts`).
    MCP's streamable HTTP transport is served at ``/mcp`` (:mod:`cpersona.edges.mcp.endpoint`), its tools on
    the same engine. ``background`` runs the engine's background
    tasks (block worker, trace publisher) in a task group around the app's life, as ``cpersona.open``
    does; tests that enter and leave the lifespan in different tasks pass ``False`` and drain by hand.
    ``owns_process`` (the server the command line runs) freezes the heap once the engine is open
    (:mod:`cpersona.edges.heap`).

    Raises :class:`~cpersona.InvalidSetting` for a bind beyond loopback with keys off, unless
    ``CPERSONA_INSECURE_NO_KEYS`` accepts it (:func:`~cpersona.edges.http.auth.exposure_refusal`).
    """
    refused = exposure_refusal(settings)
    if refused is not None:
        raise refused

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[dict[str, Any]]:
        warn_if_exposed(settings)
        if not background:
            async with Engine(settings) as engine:
                yield {"engine": engine}
            return
        # The background tasks live as long as the app: started before the first request, cancelled at
        # shutdown before the engine closes; so does the MCP endpoint's task group.
        async with Engine(settings) as engine, mcp.running(), anyio.create_task_group() as tg:
            await tg.start(engine.run_background)
            if owns_process:
                freeze_startup_heap()
            try:
                yield {"engine": engine}
            finally:
                tg.cancel_scope.cancel()

    body_limit = settings.max_body_bytes if max_body_bytes is None else max_body_bytes
    mcp = McpEndpoint(max_body_bytes=body_limit)
    app = Starlette(
        routes=_routes(),
        middleware=[
            Middleware(RequestEdge),
            Middleware(BodyDeadline, timeout_secs=settings.http_body_timeout_secs),
            Middleware(HostGuard, bind_host=settings.host),
            Middleware(KeyGuard, settings=settings),
        ],
        exception_handlers={CpersonaError: on_cpersona_error, HTTPException: on_http_error},
        lifespan=lifespan,
    )
    app.state.max_body_bytes = body_limit
    app.state.mcp = mcp
    return app


def _routes() -> list[Route]:
    # One Starlette route per path, not per operation: a path's 405 then allows every method it has
    # (with a route per operation, the first route that matched the path answered with its own only).
    by_path: dict[str, dict[str, Handler]] = {}
    for op in ROUTES:
        by_path.setdefault(op.route_path, {})[op.method] = _declared(op)
    return [Route(path, _by_method(handlers), methods=list(handlers)) for path, handlers in by_path.items()]


def _declared(op: Operation) -> Handler:
    # The request knows its route's models, so reading its body or query string fills in its agent
    # (edges/http/reading.py) for every route, whichever module its handler lives in.
    async def handler(request: Request) -> Response:
        declare_models(request, body=op.body, query=op.query)
        return await op.handler(request)

    return handler


def _by_method(handlers: dict[str, Handler]) -> Handler:
    if len(handlers) == 1:
        return next(iter(handlers.values()))

    async def dispatch(request: Request) -> Response:
        # Starlette answers HEAD wherever GET is allowed, with the GET handler.
        method = "GET" if request.method == "HEAD" else request.method
        return await handlers[method](request)

    return dispatch


OnStarted = Callable[[str, Mapping[str, Any]], Awaitable[None]]
"""What :func:`serve` calls once it listens: with its URL and its engine's health."""


class _Server(uvicorn.Server):
    """uvicorn's server, telling its caller the URL it answers on once the engine is open and it listens."""

    def __init__(self, config: uvicorn.Config, on_started: OnStarted | None) -> None:
        super().__init__(config)
        self._on_started = on_started

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and self._on_started is not None and self.servers:
            listening = self.servers[0].sockets
            if listening:
                await self._on_started(_local_url(listening[0].getsockname()), await self._health())

    async def _health(self) -> Mapping[str, Any]:
        # Read from the engine the lifespan opened, not over HTTP: /health shows its details only to a key
        # when keys are in force, and the server holds none.
        engine = self.lifespan.state.get("engine")
        if not isinstance(engine, Engine):  # pragma: no cover - the lifespan always leaves its engine
            return {}
        try:
            return await engine.health()
        except CpersonaError:
            return {}


def _local_url(address: tuple[Any, ...]) -> str:
    # A wildcard bind is reached on loopback from this machine.
    host, port = str(address[0]), int(address[1])
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def startup_refusal_in_one_line(app: ASGIApp) -> ASGIApp:
    """``app``, whose startup refused by the engine (Redis unreachable, another model's store, a bad
    setting) is logged as the refusal's one line, not a traceback a person has to read to its end."""

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await app(scope, receive, send)
            return

        async def said(message: Message) -> None:
            # Starlette sends this from inside its handler of the lifespan's exception, with the formatted
            # traceback as the text uvicorn logs: the exception being handled is the one it describes.
            refused = sys.exc_info()[1]
            if message["type"] == "lifespan.startup.failed" and isinstance(refused, CpersonaError):
                message = {**message, "message": str(refused)}
            await send(message)

        await app(scope, receive, said)

    return guarded


async def serve(settings: Settings, *, on_started: OnStarted | None = None) -> bool:
    """Run the API with uvicorn on ``settings.host:settings.port`` until interrupted.

    Returns whether the server started; ``False`` means the engine did not open or the address could not
    be bound (uvicorn has logged why, e.g. Redis did not answer). Ctrl-C or SIGTERM shut the server down
    gracefully, after which uvicorn re-raises the signal (so the process still ends as interrupted).
    ``on_started`` is awaited with the server's URL and its engine's health (the details ``/health`` shows
    a caller with a key) once it listens (requests are already answered).
    """
    app = startup_refusal_in_one_line(create_app(settings, owns_process=True))
    server = _Server(server_config(app, settings), on_started)
    try:
        await server.serve()
    except SystemExit as exc:
        # uvicorn exits the process itself when the lifespan or the bind fails; the caller decides.
        if exc.code != STARTUP_FAILURE:
            raise
        return False
    return server.started
