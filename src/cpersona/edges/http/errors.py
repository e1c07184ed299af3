"""The HTTP edge's one error envelope, and the outermost middleware that gives every request its id.

Every response carries an ``x-request-id`` header (the caller's, when it sent a usable one) and every
failure has one shape, read by CPersona's clients and by Cerememory's (its SDK reads the top-level
``code``/``message``/``details``/``retry_after``/``request_id`` of CMP's envelope, §1.1)::

    {"ok": false, "error": {"code": "VALIDATION_ERROR", "message": "agent_id: is required",
                            "field": "agent_id"},
     "code": "VALIDATION_ERROR", "message": "agent_id: is required", "details": {"field": "agent_id"},
     "retry_after": null, "request_id": "..."}

with the HTTP status taken from the error class (see :mod:`cpersona.errors`). Both shapes carry the same
code: a code CMP also has (``VALIDATION_ERROR``, ``CONTENT_TOO_LARGE``, ``RECORD_NOT_FOUND``,
``FORGET_UNCONFIRMED``, ``MODALITY_UNSUPPORTED``, ``INTERNAL_ERROR``) becomes the SDK's matching exception;
one CMP has not (``BACKEND_UNAVAILABLE``, ``NOT_IMPLEMENTED``, ``UNSUPPORTED_MEDIA_TYPE``...) its base
``CerememoryError`` with the code and status kept — never its ``InternalError`` for what is no fault of
the server, and never a body it cannot read. A backend that fails is a
503 whatever raised it: a :class:`~cpersona.BackendUnavailable`, a group of them (parallel arms), or a
backend's error no adapter mapped (:mod:`cpersona.stores.outages`); its message never names a file (the
socket path, the data dir). A write refused because a disk is under the free-space floor is a 507
(:class:`~cpersona.InsufficientStorage`).
"""

from __future__ import annotations

import logging
import re
import uuid
from typing import TYPE_CHECKING, Any, cast

import orjson
from starlette.datastructures import MutableHeaders
from starlette.responses import Response

from cpersona.edges.http.access import AgentForbidden
from cpersona.errors import (
    BackendUnavailable,
    CpersonaError,
    InsufficientStorage,
    InvalidRequest,
    RecordNotFound,
)
from cpersona.stores.outages import escaped_outage

if TYPE_CHECKING:
    from starlette.exceptions import HTTPException
    from starlette.requests import Request
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "HostNotAllowed",
    "NotImplementedHere",
    "ORJSONResponse",
    "RequestEdge",
    "RequestTimeout",
    "UnsupportedMediaType",
    "error_envelope",
    "failure_response",
    "on_cpersona_error",
    "on_http_error",
    "single_error",
]

log = logging.getLogger("cpersona.http")

# A caller's request id is echoed back only if it is short printable ASCII, so it cannot be used to
# smuggle header syntax or bloat every log line; otherwise a fresh UUID replaces it.
_REQUEST_ID = re.compile(r"[\x21-\x7e]{1,128}")

_OPAQUE_500 = "An internal error occurred"

# What a caller can do about each refusal; the server log keeps Redis's own words.
_REFUSALS = {
    "REDIS_CANNOT_PERSIST": "Redis cannot write its append-only file or snapshot (MISCONF) and refuses "
    "writes; free disk space or fix the Redis directory",
    "REDIS_OUT_OF_MEMORY": "Redis reached its maxmemory (OOM) and refuses writes",
    "REDIS_READ_ONLY": "Redis is a read-only replica (READONLY) and refuses writes",
    "REDIS_LOADING": "Redis is still loading its data (LOADING); retry shortly",
    "REDIS_BUSY": "Redis is busy running a script or module command (BUSY); retry shortly",
    "REDIS_MASTER_DOWN": "Redis is a replica whose master is down (MASTERDOWN)",
    "REDIS_NO_REPLICAS": "Redis has too few replicas to accept writes (NOREPLICAS)",
    "REDIS_CLUSTER_DOWN": "the Redis cluster cannot serve this key now (CLUSTERDOWN)",
    "REDIS_NO_PERMISSION": "the Redis user may not run a command cpersona needs (NOPERM)",
    "REDIS_NOT_DURABLE": "Redis did not confirm the write on its disk in time (WAITAOF), so it is not "
    "acknowledged; retry it",
}
# Refusals that end by themselves: the envelope's ``retry_after`` (and a ``Retry-After`` header) says when
# to try again, which the Cerememory SDK's retries wait for; other 503s leave the wait to the caller.
_RETRY_AFTER_SECS = {"REDIS_LOADING": 1, "REDIS_BUSY": 1, "REDIS_NOT_DURABLE": 1}
# A unix socket URL, or an absolute path standing alone (not the path of an http URL).
_FILE_NAME = re.compile(r"unix://[^\s,;'\"()]+|(?<![\w:/.~])/[^\s,;'\"()]+")


class UnsupportedMediaType(InvalidRequest):
    """A request body that is not ``application/json``."""

    code = "UNSUPPORTED_MEDIA_TYPE"
    status = 415


class RequestTimeout(InvalidRequest):
    """A request body that did not arrive whole in time (``CPERSONA_HTTP_BODY_TIMEOUT_SECS``)."""

    code = "REQUEST_TIMEOUT"
    status = 408


class HostNotAllowed(InvalidRequest):
    """A ``Host`` header a server bound to loopback does not answer to (DNS rebinding)."""

    code = "HOST_NOT_ALLOWED"
    status = 421


class NotImplementedHere(CpersonaError):
    """A Cerememory operation this engine does not offer (501 ``NOT_IMPLEMENTED``): the route exists so
    that a client of that protocol hears so in the error envelope, not a 404 that reads as a wrong URL."""

    code = "NOT_IMPLEMENTED"
    status = 501

    def __init__(self, operation: str, reason: str) -> None:
        self.operation = operation
        super().__init__(f"{operation} is not implemented by cpersona: {reason}")


class ORJSONResponse(Response):
    """A JSON response serialised by orjson (UTF-8, no spaces, non-finite floats refused)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


def error_envelope(
    code: str,
    message: str,
    field: str | None,
    request_id: str | None,
    *,
    retry_after: int | None = None,
) -> dict[str, Any]:
    """The one body every failed request gets: CPersona's ``error`` object and CMP's top-level fields."""
    return {
        "ok": False,
        "error": {"code": code, "message": message, "field": field},
        "code": code,
        "message": message,
        "details": None if field is None else {"field": field},
        "retry_after": retry_after,
        "request_id": request_id,
    }


def _request_id(request: Request) -> str | None:
    return cast("str | None", request.scope.get("state", {}).get("request_id"))


def _error_response(exc: CpersonaError, request_id: str | None) -> ORJSONResponse:
    if isinstance(exc, (InvalidRequest, RecordNotFound, AgentForbidden)):
        body = error_envelope(exc.code, str(exc), exc.field, request_id)
    elif isinstance(exc, NotImplementedHere):
        body = error_envelope(exc.code, str(exc), None, request_id)
    elif isinstance(exc, BackendUnavailable):
        # The log keeps the whole detail for the operator; the caller gets it without file names. The
        # disk floor logs its refusals itself, once a minute, not once per refused request.
        if not isinstance(exc, InsufficientStorage):
            log.warning("request %s: %s", request_id, exc)
        retry_after = _RETRY_AFTER_SECS.get(exc.code)
        body = error_envelope(exc.code, backend_message(exc), None, request_id, retry_after=retry_after)
        if retry_after is not None:
            return ORJSONResponse(body, exc.status, headers={"retry-after": str(retry_after)})
    elif 400 <= exc.status < 500:
        # A refusal of its own (401 no key, 403 another agent's scope, 429 over the rate limit: auth.py,
        # access.py) says what it is, and a 429 when to come back.
        retry_after = getattr(exc, "retry_after", None)
        body = error_envelope(exc.code, str(exc), None, request_id, retry_after=retry_after)
        return ORJSONResponse(body, exc.status, headers=dict(getattr(exc, "headers", None) or {}))
    else:
        # Engine-state errors (closed engine, locked data dir) are server faults: log, answer opaquely.
        log.error("request %s failed: %s", request_id, exc, exc_info=exc)
        return ORJSONResponse(error_envelope("INTERNAL_ERROR", _OPAQUE_500, None, request_id), 500)
    return ORJSONResponse(body, status_code=exc.status)


def failure_response(exc: Exception, request_id: str | None, where: str) -> ORJSONResponse:
    """The answer to a request that raised ``exc``: a backend outage (raised alone, in a group, or
    unmapped) or one of the engine's errors in the envelope with its status; anything else logged
    (``where``: the method and path) and answered 500, opaquely."""
    inner = single_error(exc)
    failure = backend_failure(inner)
    if failure is not None:
        return _error_response(failure, request_id)
    if isinstance(inner, CpersonaError):
        return _error_response(inner, request_id)
    log.error("request %s: unhandled error in %s", request_id, where, exc_info=exc)
    return ORJSONResponse(error_envelope("INTERNAL_ERROR", _OPAQUE_500, None, request_id), 500)


def backend_message(exc: BackendUnavailable) -> str:
    """What a 503 says: the reason for a refusal, else the detail with every file name left out."""
    reason = _REFUSALS.get(exc.code)
    if reason is not None:
        return f"{exc.backend} unavailable: {reason}"
    return _FILE_NAME.sub("<path>", str(exc))


def backend_failure(exc: BaseException) -> BackendUnavailable | None:
    """The backend failure ``exc`` stands for: itself, an unmapped backend outage, or the first of a
    group whose every member is one (two arms failing on the same outage). ``None`` for anything else."""
    if isinstance(exc, BaseExceptionGroup):
        found = [backend_failure(inner) for inner in exc.exceptions]
        return found[0] if all(found) else None
    if isinstance(exc, BackendUnavailable):
        return exc
    return escaped_outage(exc)


async def on_cpersona_error(request: Request, exc: Exception) -> Response:
    return _error_response(cast("CpersonaError", exc), _request_id(request))


async def on_http_error(request: Request, exc: Exception) -> Response:
    http = cast("HTTPException", exc)
    code = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED"}.get(http.status_code, "HTTP_ERROR")
    message = {
        404: f"no route for {request.url.path}",
        405: f"{request.method} is not allowed on {request.url.path}",
    }.get(http.status_code, str(http.detail))
    return ORJSONResponse(
        error_envelope(code, message, None, _request_id(request)),
        status_code=http.status_code,
        headers=dict(http.headers or {}),
    )


def single_error(exc: BaseException) -> BaseException:
    """The one exception inside (possibly nested) exception groups, or ``exc`` itself.

    A task group inside the engine wraps what it raises; the edges still want to answer with the
    typed error when there is exactly one.
    """
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


class RequestEdge:
    """Outermost app middleware: the request id, and a 500 envelope for anything unexpected.

    Written as plain ASGI rather than ``BaseHTTPMiddleware`` so that streaming and cancellation pass
    through untouched.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = dict(scope.get("headers", ())).get(b"x-request-id", b"").decode("latin-1")
        request_id = incoming if _REQUEST_ID.fullmatch(incoming) else str(uuid.uuid4())
        scope.setdefault("state", {})["request_id"] = request_id
        started = False

        async def send_with_id(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                MutableHeaders(scope=message)["x-request-id"] = request_id
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception as exc:
            if started:
                raise
            response = failure_response(exc, request_id, f"{scope.get('method')} {scope.get('path')}")
            response.headers["x-request-id"] = request_id
            await response(scope, receive, send)
