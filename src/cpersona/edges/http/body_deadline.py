"""The request body's deadline: the whole body must arrive within ``CPERSONA_HTTP_BODY_TIMEOUT_SECS`` of
the request's head, or the request is answered 408 ``REQUEST_TIMEOUT`` and its connection closed.

uvicorn has no such deadline (a client that sends its headers and half its body, or one byte a minute,
holds its connection and a request task for as long as it likes), and a deadline in the protocol could
only drop the connection. Here, between the server and the app, the late body is an error the app
answers in its own envelope. The clock runs from the head, not from each chunk, so a body that trickles
in is late as one that stops. A body the app does not read is not waited for here; the connection's own
deadline (:mod:`~cpersona.edges.http.connections`) drops what is left of it once the app has answered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
from starlette.datastructures import MutableHeaders

from cpersona.edges.http.errors import RequestTimeout

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["BodyDeadline"]


class BodyDeadline:
    """ASGI middleware: each ``receive`` of a request's body waits only until its deadline.

    Past it, the ``receive`` raises :class:`~cpersona.edges.http.errors.RequestTimeout`, which the app's
    error handlers answer (408), and that answer says ``connection: close``, since the rest of the body
    may still be on its way. Once the body is whole, ``receive`` is the server's own again (a streaming
    response waits on it for the client's disconnect as long as the stream lasts).
    """

    def __init__(self, app: ASGIApp, *, timeout_secs: float) -> None:
        self.app = app
        self.timeout_secs = timeout_secs

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        deadline = anyio.current_time() + self.timeout_secs
        whole = False
        late = False
        started = False

        async def receive_in_time() -> Message:
            nonlocal whole, late
            if whole:
                return await receive()
            with anyio.CancelScope(deadline=deadline):
                message = await receive()
                whole = message["type"] != "http.request" or not message.get("more_body", False)
                return message
            late = True
            if started:
                # The answer is under way (a stream that never read the body it was declared): no 408
                # can be sent now, so the late body ends it as a client that went away does.
                return {"type": "http.disconnect"}
            raise RequestTimeout(
                "body", f"did not arrive whole within {self.timeout_secs:g} s of the request's head"
            )

        async def send_closing_if_late(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                if late:
                    MutableHeaders(scope=message)["connection"] = "close"
            await send(message)

        await self.app(scope, receive_in_time, send_closing_if_late)
