"""The Host check of a server bound to loopback: the defence against DNS rebinding.

A web page can make its own host name resolve to 127.0.0.1 and then talk to a local server as if it were
its own origin, reading answers the browser would otherwise keep from it. The one thing such a request
cannot hide is its ``Host`` header, which still names the page's host; a server listening only on
loopback therefore answers only to ``localhost``, ``127.0.0.1`` or ``[::1]`` with its port (421 otherwise).
A server bound to other interfaces is reached by names this module cannot know, and is left alone.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

from cpersona.edges.http.errors import HostNotAllowed

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["HostGuard", "is_loopback"]

_NAMES = ("localhost", "127.0.0.1", "[::1]")
_HTTP_PORT = 80


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, IPv6 with or without brackets) is this machine's loopback."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def allowed_hosts(address: str, port: int) -> tuple[str, ...]:
    """The ``Host`` values a server on loopback ``address`` and ``port`` answers to: the loopback names
    and the address itself (``127.0.0.2``), each with the port, and bare on port 80."""
    own = f"[{address}]" if ":" in address else address
    names = _NAMES if own in _NAMES else (*_NAMES, own)
    with_port = tuple(f"{name}:{port}" for name in names)
    return (*with_port, *names) if port == _HTTP_PORT else with_port


class HostGuard:
    """ASGI middleware refusing a foreign ``Host`` when the server is bound to ``bind_host`` on loopback.

    The check applies to requests that arrived on a loopback address (``scope["server"]``, the socket
    uvicorn accepted them on, whose port is the real one even when the setting asked for port 0).
    """

    def __init__(self, app: ASGIApp, *, bind_host: str) -> None:
        self.app = app
        self.active = is_loopback(bind_host)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.active and scope["type"] == "http":
            server = scope.get("server")
            if server and server[1] is not None and is_loopback(str(server[0])):
                _check_host(scope, str(server[0]), int(server[1]))
        await self.app(scope, receive, send)


def _check_host(scope: Scope, address: str, port: int) -> None:
    given = next((value for name, value in scope.get("headers", ()) if name == b"host"), None)
    allowed = allowed_hosts(address.lower(), port)
    text = None if given is None else given.decode("latin-1")
    if text is not None and text.lower() in allowed:
        return
    shown = "is missing" if text is None else f"is {text[:200]!r}"
    raise HostNotAllowed("host", f"{shown}; a server bound to loopback answers only to {', '.join(allowed)}")
