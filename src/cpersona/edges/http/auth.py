"""API keys at the HTTP edge: the middleware that asks every request for its key, counts it against the
key's rate limit, and tells the rest of the app which agents the request may act for.

Keys are in force when ``CPERSONA_KEYS`` is ``on``, or ``auto`` (the default) on a server bound beyond
loopback. Then every request but the probes (``/health``, ``/readiness``), the OpenAPI document and the
trace page's HTML (``/traces``), none of which shows an agent's data, needs ``Authorization: Bearer
<key>``: none, or one that is no live key, is a 401 ``UNAUTHORIZED``; over the key's limit
(``CPERSONA_RATE_LIMIT_PER_SEC``, ``..._BURST``) a 429 ``RATE_LIMITED`` with ``Retry-After``. That covers
every route, ``/mcp`` and the trace stream alike. ``/health`` without a key says only that the server is
up; a key sent to it is checked like any other, and its answer then holds the versions and counters. A
key's agents are left in ``request.state.key_agents`` (a frozenset; ``None`` for an admin key), which
:mod:`.access` reads and :mod:`.reading` checks for every agent a request names; the key itself in
``request.state.api_key``. The key routes and the deletion of an agent need an admin key (403).

With keys off nothing is asked and nothing is limited: a loopback server serves its one user, and a
rate limit by address would only limit that user. Whoever can read the data dir is that user: ``cpersona
keys`` makes the first admin key straight in Redis. Keys off on a server bound beyond loopback would serve
every agent's data to whoever reaches the port, so that is refused at start (:func:`exposure_refusal`)
unless ``CPERSONA_INSECURE_NO_KEYS`` says it is meant, and then warned about.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING

from cpersona.edges.http.access import AgentForbidden
from cpersona.edges.http.hosts import is_loopback
from cpersona.errors import CpersonaError, InvalidSetting

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from starlette.requests import HTTPConnection
    from starlette.types import ASGIApp, Receive, Scope, Send

    from cpersona.engine.facade import Engine
    from cpersona.model.api_keys import ApiKey
    from cpersona.settings import Settings

__all__ = [
    "ADMIN_ONLY_TOOLS",
    "HEALTH_PATH",
    "OPEN_PATHS",
    "KeyGuard",
    "KeyRequired",
    "RateLimited",
    "admin_only",
    "exposure_refusal",
    "key_check",
    "keys_in_force",
    "require_admin",
    "shows_health_details",
    "warn_if_exposed",
]

_log = logging.getLogger("cpersona.serve")

# The trace page is only its HTML and script (edges/http/trace_page.py's PAGE_PATH): a browser loads
# it with no way to send a header, and its stream (GET /v1/traces/stream) sends the key typed into it.
HEALTH_PATH = "/health"
OPEN_PATHS = frozenset({HEALTH_PATH, "/readiness", "/openapi.json", "/traces"})
"""Paths answered without a key: the probes, the API's description and the trace page's own HTML (no
agent's data in any). ``/health`` without a key says only that the server is up
(:func:`shows_health_details`)."""

# Paths (by method) that need an admin key: making and revoking keys, deleting an agent's data.
_ADMIN_PREFIXES = (("", "/v1/keys"), ("DELETE", "/v1/agents/"))
ADMIN_ONLY_TOOLS = frozenset({"delete_agent_data"})
"""The MCP tools that need an admin key, as their routes do (deleting an agent's data)."""


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


def exposure_refusal(settings: Settings) -> InvalidSetting | None:
    """Why a server on ``settings`` must not start: bound beyond loopback with keys off, unless
    ``CPERSONA_INSECURE_NO_KEYS`` accepts it (then it starts, and :func:`warn_if_exposed` says so)."""
    if is_loopback(settings.host) or keys_in_force(settings) or settings.insecure_no_keys:
        return None
    return InvalidSetting(
        "CPERSONA_KEYS",
        f"is off on a server bound beyond loopback (CPERSONA_HOST={settings.host}), which would serve every "
        "agent's data to whoever reaches the port: turn keys on (CPERSONA_KEYS=auto or on), or set "
        "CPERSONA_INSECURE_NO_KEYS=true (serve --insecure-no-keys) to serve without them",
    )


def warn_if_exposed(settings: Settings) -> None:
    """Say loudly that a server beyond loopback asks for no key (``CPERSONA_INSECURE_NO_KEYS``)."""
    if is_loopback(settings.host) or keys_in_force(settings):
        return
    _log.warning(
        "INSECURE: serving on %s with CPERSONA_KEYS=off (CPERSONA_INSECURE_NO_KEYS=true): every request from "
        "anyone who reaches this port may read, change and delete every agent's data",
        settings.host,
    )


def key_check(connection: HTTPConnection) -> Callable[[], Awaitable[bool]] | None:
    """For a request let in with a key, a check of whether that key is still live (revoked: ``False``),
    for what outlives its admission (a stream); ``None`` for a request that came with no key to check."""
    admitted: ApiKey | None = getattr(connection.state, "api_key", None)
    if admitted is None:
        return None
    token = _bearer(connection.scope)
    engine: Engine = connection.state.engine

    async def live() -> bool:
        key = await engine.verify_key(token)
        return key is not None and key.key_id == admitted.key_id

    return live


def require_admin(connection: HTTPConnection) -> None:
    """Refuse a request made with a key that is not an admin's (none asked: keys are off, allowed)."""
    key = getattr(connection.state, "api_key", None)
    if key is not None and not key.admin:
        raise AgentForbidden("this needs an admin key")


def _bearer(scope: Scope) -> str:
    raw: bytes | None = dict(scope.get("headers", ())).get(b"authorization")
    if raw is None:
        raise KeyRequired(
            "send the API key as 'Authorization: Bearer <key>' (the CLI sends CPERSONA_API_KEY)"
        )
    scheme, _, token = raw.decode("latin-1").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise KeyRequired("the Authorization header must be 'Bearer <key>'")
    return token.strip()


def admin_only(method: str, path: str) -> bool:
    """Whether a request of ``method`` on ``path`` needs an admin key (the key routes, deleting an agent)."""
    return any((not want or method == want) and path.startswith(pre) for want, pre in _ADMIN_PREFIXES)


def _asks_key(scope: Scope) -> bool:
    path = scope.get("path")
    if path == HEALTH_PATH:
        # Open, but a key sent is checked as anywhere else: with it the answer holds the details.
        return b"authorization" in dict(scope.get("headers", ()))
    return path not in OPEN_PATHS


def shows_health_details(connection: HTTPConnection, settings: Settings) -> bool:
    """Whether ``/health`` answers ``connection`` with its details (versions, engines, counters): to any
    caller when no key is in force, else only to a request that came with a live key."""
    return not keys_in_force(settings) or getattr(connection.state, "api_key", None) is not None


class KeyGuard:
    """ASGI middleware asking each request for its key while keys are in force (see the module).

    Plain ASGI, like :class:`~cpersona.edges.http.errors.RequestEdge`, so streams (SSE, MCP) pass
    through untouched; its refusals are raised for that outer middleware to answer in the envelope.
    """

    def __init__(self, app: ASGIApp, *, settings: Settings) -> None:
        self.app = app
        self.active = keys_in_force(settings)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.active and scope["type"] in ("http", "websocket") and _asks_key(scope):
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
        if not key.admin and admin_only(scope.get("method", ""), scope.get("path", "")):
            raise AgentForbidden("this needs an admin key")
        return key
