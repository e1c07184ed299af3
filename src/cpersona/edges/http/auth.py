"""API keys at the HTTP edge: the middleware that asks every request for its key, counts it against the
key's rate limit, and tells the rest of the app which agents the request may act for.

Keys are in force when ``CPERSONA_KEYS`` is ``on``, or ``auto`` (the default) on a server bound beyond
loopback. Then every request but the probes (``/health``, ``/readiness``) and the OpenAPI document, none
of which shows an agent's data, needs ``Authorization: Bearer <key>``: none, or one that is no live key,
is a 401 ``UNAUTHORIZED``; over the key's limit (``CPERSONA_RATE_LIMIT_PER_SEC``, ``..._BURST``) a 429
``RATE_LIMITED`` with ``Retry-After``. That covers every route, ``/mcp`` and the trace stream alike
(whose GETs may carry the key in a cookie instead, :data:`KEY_COOKIE`, for a browser's EventSource). A
key's agents are left in ``request.state.key_agents`` (a frozenset; ``None`` for an admin key), which
:mod:`.access` reads and :mod:`.reading` checks for every agent a request names; the key itself in
``request.state.api_key``. The key routes and the deletion of an agent need an admin key (403).

With keys off nothing is asked and nothing is limited: a loopback server serves its one user, and a
rate limit by address would only limit that user. Whoever can read the data dir is that user: ``cpersona
keys`` makes the first admin key straight in Redis.
"""

from __future__ import annotations

import math
from http.cookies import SimpleCookie
from typing import TYPE_CHECKING

from cpersona.edges.http.access import AgentForbidden
from cpersona.edges.http.hosts import is_loopback
from cpersona.errors import CpersonaError

if TYPE_CHECKING:
    from starlette.requests import HTTPConnection
    from starlette.types import ASGIApp, Receive, Scope, Send

    from cpersona.engine.facade import Engine
    from cpersona.model.api_keys import ApiKey
    from cpersona.settings import Settings

__all__ = [
    "KEY_COOKIE",
    "OPEN_PATHS",
    "TRACE_PAGE",
    "KeyGuard",
    "KeyRequired",
    "RateLimited",
    "keys_in_force",
    "require_admin",
]

OPEN_PATHS = frozenset({"/health", "/readiness", "/openapi.json"})
"""Paths answered without a key: the probes and the API's description (no agent's data in any)."""

TRACE_PAGE = "/traces"
"""The live trace page and its event stream: a GET there may carry its key in the :data:`KEY_COOKIE`."""
KEY_COOKIE = "cpersona_key"
"""The cookie the trace page keeps its key in (set it ``SameSite=Strict``), read only by GETs of
:data:`TRACE_PAGE` and below, because a browser's ``EventSource`` sends no ``Authorization`` header."""

# Paths (by method) that need an admin key: making and revoking keys, deleting an agent's data.
_ADMIN_PREFIXES = (("", "/v1/keys"), ("DELETE", "/v1/agents/"))


class KeyRequired(CpersonaError):
    """No key, or one that is no live key (unknown, revoked, malformed)."""

    code = "UNAUTHORIZED"
    status = 401
    headers = {"www-authenticate": "Bearer"}  # noqa: RUF012 - read only


class RateLimited(CpersonaError):
    """The key made more requests than its limit allows; ``retry_after`` seconds until it may again."""

    code = "RATE_LIMITED"
    status = 429

    def __init__(self, retry_after: int) -> None:
        self.retry_after = retry_after
        self.headers = {"retry-after": str(retry_after)}
        super().__init__(f"this key is over its rate limit; retry in {retry_after}s")


def keys_in_force(settings: Settings) -> bool:
    """Whether requests need a key: ``CPERSONA_KEYS=on``, or ``auto`` on a server bound beyond loopback."""
    if settings.keys == "auto":
        return not is_loopback(settings.host)
    return settings.keys == "on"


def require_admin(connection: HTTPConnection) -> None:
    """Refuse a request made with a key that is not an admin's (none asked: keys are off, allowed)."""
    key = getattr(connection.state, "api_key", None)
    if key is not None and not key.admin:
        raise AgentForbidden("this needs an admin key")


def _bearer(scope: Scope) -> str:
    headers = dict(scope.get("headers", ()))
    raw: bytes | None = headers.get(b"authorization")
    if raw is None and scope.get("method") == "GET" and scope.get("path", "").startswith(TRACE_PAGE):
        # A browser's EventSource cannot send a header: the trace page keeps the key in a cookie. Only
        # GETs of the page and its stream read it, so no cookie can make a write or a delete.
        cookie = SimpleCookie(headers.get(b"cookie", b"").decode("latin-1")).get(KEY_COOKIE)
        if cookie is not None and cookie.value:
            return cookie.value
    if raw is None:
        raise KeyRequired(
            "send the API key as 'Authorization: Bearer <key>' (the CLI sends CPERSONA_API_KEY)"
        )
    scheme, _, token = raw.decode("latin-1").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise KeyRequired("the Authorization header must be 'Bearer <key>'")
    return token.strip()


def _needs_admin(scope: Scope) -> bool:
    method, path = scope.get("method", ""), scope.get("path", "")
    return any((not want or method == want) and path.startswith(pre) for want, pre in _ADMIN_PREFIXES)


class KeyGuard:
    """ASGI middleware asking each request for its key while keys are in force (see the module).

    Plain ASGI, like :class:`~cpersona.edges.http.errors.RequestEdge`, so streams (SSE, MCP) pass
    through untouched; its refusals are raised for that outer middleware to answer in the envelope.
    """

    def __init__(self, app: ASGIApp, *, settings: Settings) -> None:
        self.app = app
        self.active = keys_in_force(settings)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.active and scope["type"] in ("http", "websocket") and scope.get("path") not in OPEN_PATHS:
            key = await self._admit(scope)
            state = scope.setdefault("state", {})
            state["api_key"] = key
            state["key_agents"] = key.scope
        await self.app(scope, receive, send)

    async def _admit(self, scope: Scope) -> ApiKey:
        token = _bearer(scope)
        engine: Engine = scope["state"]["engine"]
        key, wait = await engine.admit_key(token)
        if key is None:
            raise KeyRequired("the API key is not valid (unknown or revoked)")
        if wait > 0:
            raise RateLimited(max(1, math.ceil(wait)))
        if not key.admin and _needs_admin(scope):
            raise AgentForbidden("this needs an admin key")
        return key
