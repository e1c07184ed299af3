"""The HTTP app served in this process, for an in-process client (httpx's or the MCP SDK's ``httpx2``).

An ASGI transport sends requests straight to the app but never runs its lifespan, so :func:`running`
enters the lifespan itself and hands its state to each request, as Starlette's router does under a server.
The benchmarks and the tests share it: the tests import from here, nothing here from them.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping

    from starlette.applications import Starlette
    from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["running", "with_state"]


def with_state(app: ASGIApp, state: Mapping[str, Any]) -> ASGIApp:
    """``app`` with a copy of ``state`` as each request's state (a request may change its own copy)."""

    async def given_state(scope: Scope, receive: Receive, send: Send) -> None:
        scope["state"] = dict(state)
        await app(scope, receive, send)

    return given_state


@contextlib.asynccontextmanager
async def running(
    app: Starlette, request_state: Mapping[str, Any] | None = None
) -> AsyncIterator[tuple[ASGIApp, Mapping[str, Any]]]:
    """Enter ``app``'s lifespan and yield ``(asgi, state)``: ``asgi`` is ``app`` giving each request a copy
    of the lifespan's ``state`` (``request_state`` over it), for a client's ASGI transport; the app's engine
    is ``state["engine"]``.

    With background tasks on (``create_app``'s default) the lifespan holds a task group, so enter this in
    one task (a test's body), not across a fixture's setup and teardown: give such an app
    ``background=False``.
    """
    async with app.router.lifespan_context(app) as state:
        assert state is not None, "the app's lifespan yields its state"
        yield with_state(app, {**state, **(request_state or {})}), state
