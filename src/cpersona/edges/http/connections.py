"""What one server process does with its connections: how many it holds, and how long a client may keep
it waiting for a request. Both ways of serving (``serve`` in :mod:`~cpersona.edges.http.app`, and the
workers of :mod:`~cpersona.edges.cli.workers`) run uvicorn under :func:`server_config`.

uvicorn bounds the number of connections (``limit_concurrency``: a request on a connection beyond it is
answered 503 and the connection closed) and the idle time after a response (``timeout_keep_alive``). It
bounds nothing else a client controls: a connection that sends half a request head, or nothing, or a
body the app no longer reads, is held for as long as the client likes. :class:`DeadlineH11Protocol` is
uvicorn's h11 protocol with those two deadlines added. A body the app is still reading has the app's own
deadline (:mod:`~cpersona.edges.http.body_deadline`), which can still answer 408 in the error envelope.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

if TYPE_CHECKING:
    import asyncio

    from uvicorn.server import ServerState

    from cpersona.settings import Settings

__all__ = ["DeadlineH11Protocol", "ServerConfig", "server_config"]

_Owed = Literal["head", "body"]


class ServerConfig(uvicorn.Config):
    """uvicorn's config, carrying the deadlines :class:`DeadlineH11Protocol` reads. A class of this module,
    so it pickles by name into each spawned worker with the rest of the config."""

    def __init__(
        self, app: Any, *, header_timeout_secs: float, body_timeout_secs: float, **options: Any
    ) -> None:
        super().__init__(app, **options)
        self.header_timeout_secs = header_timeout_secs
        self.body_timeout_secs = body_timeout_secs


def server_config(app: Any, settings: Settings, **options: Any) -> ServerConfig:
    """The uvicorn config of ``app`` served on ``settings``: its address, its connection cap and deadlines,
    and ``options`` (uvicorn's own keywords) on top."""
    return ServerConfig(
        app,
        header_timeout_secs=settings.http_header_timeout_secs,
        body_timeout_secs=settings.http_body_timeout_secs,
        http=DeadlineH11Protocol,
        host=settings.host,
        port=settings.port,
        # uvicorn counts the connection whose request it is deciding on among those already held, so a cap
        # of N there serves N - 1 others; one more lets N connections be served and answers the next 503.
        limit_concurrency=settings.http_max_connections + 1,
        lifespan="on",
        log_level="info",
        timeout_graceful_shutdown=10,
        **options,
    )


class DeadlineH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, closing a connection on which the client owes what it does not send in time.

    The client owes a request head from the moment its connection opens, and again from the end of each
    response (uvicorn's keep-alive timeout closes an idle connection sooner, but not one that has begun a
    head and stopped). It owes the rest of a body the app has answered without reading (a 404, a 413): h11
    reads and drops it before the next request. The clock of each wait starts when it begins, not at each
    byte, so a client that trickles its head byte by byte is closed as one that stops.
    """

    def __init__(
        self,
        config: uvicorn.Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        if not isinstance(config, ServerConfig):
            raise TypeError("DeadlineH11Protocol is served under a ServerConfig (server_config)")
        self._deadline_secs: dict[_Owed, float] = {
            "head": config.header_timeout_secs,
            "body": config.body_timeout_secs,
        }
        self._owed: _Owed | None = None
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._watch()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._watch()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _watch(self) -> None:
        owed = self._now_owed()
        if owed == self._owed:
            # The same wait goes on (more of a head arrived, but not all of it): its deadline stands.
            return
        self._disarm()
        self._owed = owed
        if owed is not None and not self.transport.is_closing():
            self._deadline = self.loop.call_later(self._deadline_secs[owed], self._expire)

    def _now_owed(self) -> _Owed | None:
        state = self.conn.their_state
        if state is h11.IDLE:
            return "head"
        if state is h11.SEND_BODY and self.cycle is not None and self.cycle.response_complete:
            return "body"
        # A request the app is handling (its body, if any, under the app's deadline), an upgrade, or a
        # connection on its way out.
        return None

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self._owed = None

    def _expire(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            # connection_lost tells h11 and any request still running that the connection is gone.
            self.transport.close()
