"""The HTTP edge: a Starlette app over one :class:`~cpersona.Engine`, and ``serve`` to run it with uvicorn.

:func:`create_app` builds the app and nothing else; the engine is opened by the app's lifespan and
reaches the handlers as ``request.state.engine``, so importing this module or building an app touches no
backend. Every response carries an ``x-request-id`` header (the caller's, when it sent a usable one) and
every failure has one shape, the error envelope::

    {"ok": false, "error": {"code": "VALIDATION_ERROR", "message": "agent_id: is required",
                            "field": "agent_id"}, "request_id": "..."}

with the HTTP status taken from the error class (see :mod:`cpersona.errors`). Success bodies carry
``"ok": true``. The routes are described by the OpenAPI document at ``GET /openapi.json``
(:func:`openapi_document`), which a test keeps in step with the routing table.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

import anyio
import anyio.to_thread
import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from uvicorn.config import STARTUP_FAILURE

from cpersona.engine.facade import Engine
from cpersona.errors import (
    BackendUnavailable,
    ContentTooLarge,
    CpersonaError,
    InvalidRequest,
    RecordNotFound,
)
from cpersona.model.records import (
    EpisodeRecord,
    MemoryRecord,
    ProfileRecord,
    RawRecord,
    format_time,
)

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from cpersona.settings import Settings

__all__ = [
    "MAX_BODY_BYTES",
    "ForgetUnconfirmed",
    "ORJSONResponse",
    "create_app",
    "error_envelope",
    "openapi_document",
    "record_to_json",
    "serve",
    "single_error",
]

log = logging.getLogger("cpersona.http")

MAX_BODY_BYTES = 64 * 1024 * 1024
# The recall operations seed caps a request's limit at 100 rows; library callers may ask for more.
HTTP_MAX_LIMIT = 100
"""The largest request body the app reads (the Cerememory server's cap); larger bodies get a 413."""

# Bodies above this size are parsed in a worker thread: orjson holds the event loop for about a
# millisecond per 100 KiB, and a 64 MiB batch would otherwise stall every other request.
_PARSE_IN_THREAD_BYTES = 1024 * 1024

# A caller's request id is echoed back only if it is short printable ASCII, so it cannot be used to
# smuggle header syntax or bloat every log line; otherwise a fresh UUID replaces it.
_REQUEST_ID = re.compile(r"[\x21-\x7e]{1,128}")

_OPAQUE_500 = "An internal error occurred"

_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


class ForgetUnconfirmed(InvalidRequest):
    """A request to delete all of an agent's data came without ``confirm=true``."""

    code = "FORGET_UNCONFIRMED"


class ORJSONResponse(Response):
    """A JSON response serialised by orjson (UTF-8, no spaces, non-finite floats refused)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


# ---------------------------------------------------------------------------------------------- errors


def error_envelope(code: str, message: str, field: str | None, request_id: str | None) -> dict[str, Any]:
    """The one body every failed request gets."""
    return {
        "ok": False,
        "error": {"code": code, "message": message, "field": field},
        "request_id": request_id,
    }


def _request_id(request: Request) -> str | None:
    return cast("str | None", request.scope.get("state", {}).get("request_id"))


def _error_response(exc: CpersonaError, request_id: str | None) -> ORJSONResponse:
    if isinstance(exc, InvalidRequest):
        body = error_envelope(exc.code, str(exc), exc.field, request_id)
    elif isinstance(exc, RecordNotFound):
        body = error_envelope(exc.code, str(exc), "ref", request_id)
    elif isinstance(exc, BackendUnavailable):
        # The detail names the backend and what failed (timeout, refused); adapters never put
        # credentials in it (URLs are redacted), and an operator needs it to act.
        log.warning("request %s: %s", request_id, exc)
        body = error_envelope(exc.code, str(exc), None, request_id)
    else:
        # Engine-state errors (closed engine, locked data dir) are server faults: log, answer opaquely.
        log.error("request %s failed: %s", request_id, exc, exc_info=exc)
        return ORJSONResponse(error_envelope("INTERNAL_ERROR", _OPAQUE_500, None, request_id), 500)
    return ORJSONResponse(body, status_code=exc.status)


async def _on_cpersona_error(request: Request, exc: Exception) -> Response:
    return _error_response(cast("CpersonaError", exc), _request_id(request))


async def _on_http_error(request: Request, exc: Exception) -> Response:
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


class _RequestEdge:
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
            inner = single_error(exc)
            if isinstance(inner, CpersonaError):
                response = _error_response(inner, request_id)
            else:
                method, path = scope.get("method"), scope.get("path")
                log.error("request %s: unhandled error in %s %s", request_id, method, path, exc_info=exc)
                response = ORJSONResponse(
                    error_envelope("INTERNAL_ERROR", _OPAQUE_500, None, request_id), 500
                )
            response.headers["x-request-id"] = request_id
            await response(scope, receive, send)


# ------------------------------------------------------------------------------------- request reading


async def _json_object(request: Request, limit: int) -> dict[str, Any]:
    """The request body as a JSON object; errors name ``body``."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise ContentTooLarge("body", f"is {declared} bytes; the limit is {limit}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ContentTooLarge("body", f"is larger than the limit of {limit} bytes")
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip():
        raise InvalidRequest("body", "is required: send a JSON object")
    try:
        if len(raw) > _PARSE_IN_THREAD_BYTES:
            body = await anyio.to_thread.run_sync(orjson.loads, raw)
        else:
            body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest("body", f"is not valid JSON ({exc})") from None
    if not isinstance(body, dict):
        raise InvalidRequest("body", f"must be a JSON object, got {_json_kind(body)}")
    return body


def _json_kind(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number"


def _query(request: Request, allowed: frozenset[str]) -> dict[str, str]:
    """The query parameters, each given at most once and each one this route knows."""
    params = request.query_params
    out: dict[str, str] = {}
    for key in params:
        if key not in allowed:
            raise InvalidRequest(key, "is not a known query parameter")
        values = params.getlist(key)
        if len(values) > 1:
            raise InvalidRequest(key, "must be given once")
        out[key] = values[0]
    return out


def _required(params: Mapping[str, str], name: str) -> str:
    if name not in params:
        raise InvalidRequest(name, "is required")
    return params[name]


def _query_int(value: str, name: str) -> int:
    try:
        return int(value, 10)
    except ValueError:
        raise InvalidRequest(name, f"must be an integer, got {value!r}") from None


def _split(
    body: dict[str, Any], name: str, *, reserved: tuple[str, ...] = ()
) -> tuple[object, dict[str, Any]]:
    """Take the required field ``name`` out of ``body``, for an engine call that takes it positionally.

    The other fields become keyword arguments, so a field spelled like one of the engine method's own
    parameters (``reserved``, and ``self``) would collide with it; it is refused as unknown instead.
    """
    for key in ("self", *reserved):
        if key in body:
            raise InvalidRequest(key, "is not a known field")
    if name not in body:
        raise InvalidRequest(name, "is required")
    rest = dict(body)
    return rest.pop(name), rest


def _records(body: Mapping[str, Any]) -> object:
    """The ``records`` list of a batch body, which may also carry the protocol ``header``."""
    for key in body:
        if key not in ("records", "header"):
            raise InvalidRequest(key, "is not a known field")
    if "records" not in body:
        raise InvalidRequest("records", "is required")
    return body["records"]


# ------------------------------------------------------------------------------------------ records


# Fields holding epoch seconds; on the wire they are RFC 3339 text (see ``format_time``).
_TIME_FIELDS = frozenset(
    {
        "timestamp", "created_at", "updated_at", "start_time", "end_time", "last_accessed_at",
        "last_decay_tick", "captured_at",
    }
)  # fmt: skip


def _plain(value: object) -> object:
    """A record value as JSON-ready data: dataclasses to objects, tuples to arrays, times to text.

    Time conversion applies to dataclass fields only, never inside caller metadata, whose keys mean
    whatever the caller wants them to mean.
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, object] = {}
        for field in dataclasses.fields(value):
            item = getattr(value, field.name)
            if field.name in _TIME_FIELDS and isinstance(item, int | float) and not isinstance(item, bool):
                out[field.name] = format_time(item)
            else:
                out[field.name] = _plain(item)
        return out
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


def record_to_json(record: MemoryRecord | EpisodeRecord | RawRecord | ProfileRecord) -> dict[str, Any]:
    """A record as the HTTP API and the CLI show it.

    Memories, episodes and raw entries get ``ref`` and ``kind`` first and their scope flattened to
    ``agent_id``/``project_id``/``channel`` (the names requests use); times are RFC 3339 in UTC.
    """
    plain = cast("dict[str, Any]", _plain(record))
    if isinstance(record, ProfileRecord):
        return plain
    kind = (
        "memory"
        if isinstance(record, MemoryRecord)
        else "episode"
        if isinstance(record, EpisodeRecord)
        else "raw"
    )
    scope = plain.pop("scope")
    out: dict[str, Any] = {"ref": record.ref, "kind": kind, **scope, **plain}
    if isinstance(record, EpisodeRecord):
        out["timestamp"] = format_time(record.timestamp)
    return out


# ------------------------------------------------------------------------------------------ handlers


def _engine(request: Request) -> Engine:
    engine = request.state.engine
    if not isinstance(engine, Engine):  # pragma: no cover - the lifespan always puts an Engine here
        raise TypeError("request.state.engine is not an Engine")
    return engine


_Handler = Callable[[Request], Awaitable[Response]]


def _ok(body: Mapping[str, Any], status_code: int = 200) -> ORJSONResponse:
    return ORJSONResponse({"ok": True, **body}, status_code=status_code)


async def _health(request: Request) -> Response:
    return _ok({"status": "ok", **await _engine(request).health()})


async def _openapi(request: Request) -> Response:
    return ORJSONResponse(openapi_document())


def _body_handlers(max_body_bytes: int) -> dict[str, _Handler]:
    """The handlers that read a JSON body, closed over the body size limit."""

    async def body_of(request: Request) -> dict[str, Any]:
        return await _json_object(request, max_body_bytes)

    async def encode(request: Request) -> Response:
        content, rest = _split(await body_of(request), "content")
        return ORJSONResponse((await _engine(request).store(content, **rest)).to_json())

    async def encode_batch(request: Request) -> Response:
        records = _records(await body_of(request))
        return ORJSONResponse((await _engine(request).store_batch(cast("Any", records))).to_json())

    async def encode_raw(request: Request) -> Response:
        content, rest = _split(await body_of(request), "content")
        return ORJSONResponse((await _engine(request).store_raw(content, **rest)).to_json())

    async def encode_raw_batch(request: Request) -> Response:
        records = _records(await body_of(request))
        return ORJSONResponse((await _engine(request).store_raw_batch(cast("Any", records))).to_json())

    async def update(request: Request) -> Response:
        ref = request.path_params["ref"]
        # Cerememory addresses a record by its bare UUID; only memories can be updated, so a bare
        # UUID here can only mean a memory.
        if _UUID.fullmatch(ref):
            ref = f"mem:{ref.lower()}"
        body = await body_of(request)
        agent_id, changes = _split(body, "agent_id", reserved=("ref",))
        record = await _engine(request).update(ref, agent_id=agent_id, **changes)
        return _ok({"record": record_to_json(record)})

    async def archive_episode(request: Request) -> Response:
        summary, rest = _split(await body_of(request), "summary")
        return ORJSONResponse((await _engine(request).archive_episode(summary, **rest)).to_json())

    async def put_profile(request: Request) -> Response:
        body = await body_of(request)
        for key in body:
            if key not in ("profile", "header"):
                raise InvalidRequest(key, "is not a known field")
        profile, _ = _split(body, "profile")
        record = await _engine(request).update_profile(request.path_params["agent_id"], profile)
        return _ok({"profile": record_to_json(record)})

    async def recall_query(request: Request) -> Response:
        body = await body_of(request)
        query, rest = _split(body, "query", reserved=("limit_cap",))
        result = await _engine(request).recall(query, limit_cap=HTTP_MAX_LIMIT, **rest)
        return ORJSONResponse(result.to_json())

    async def calibrate(request: Request) -> Response:
        body = await body_of(request)
        for key in body:
            if key not in ("agent_id", "precision", "header"):
                raise InvalidRequest(key, "is not a known field")
        agent_id, rest = _split(body, "agent_id")
        doc = await _engine(request).calibrate(agent_id, precision=rest.get("precision", "balanced"))
        return _ok({"calibration": doc})

    async def select_gate(request: Request) -> Response:
        body = await body_of(request)
        for key in body:
            if key not in ("agent_id", "gate", "header"):
                raise InvalidRequest(key, "is not a known field")
        agent_id, rest = _split(body, "agent_id")
        if "gate" not in rest:
            raise InvalidRequest("gate", "is required: calibrated or heuristic")
        return _ok(await _engine(request).select_gate(agent_id, rest["gate"]))

    return {
        "calibrate": calibrate,
        "select_gate": select_gate,
        "recall_query": recall_query,
        "encode": encode,
        "encode_batch": encode_batch,
        "encode_raw": encode_raw,
        "encode_raw_batch": encode_raw_batch,
        "update": update,
        "archive_episode": archive_episode,
        "put_profile": put_profile,
    }


async def _get_profile(request: Request) -> Response:
    _query(request, frozenset())
    record = await _engine(request).get_profile(request.path_params["agent_id"])
    return _ok({"profile": None if record is None else record_to_json(record)})


async def _get_record(request: Request) -> Response:
    params = _query(request, frozenset({"agent_id"}))
    record = await _engine(request).get(request.path_params["ref"], agent_id=_required(params, "agent_id"))
    return _ok({"record": record_to_json(record)})


_KINDS = ("memory", "episode", "raw")


async def _list_records(request: Request) -> Response:
    params = _query(request, frozenset({"agent_id", "kind", "project_id", "channel", "source_id", "limit"}))
    kind = params.get("kind", "memory")
    if kind not in _KINDS:
        raise InvalidRequest("kind", f"must be one of {', '.join(_KINDS)}; got {kind!r}")
    records = await _engine(request).list(
        cast("Any", kind),
        agent_id=_required(params, "agent_id"),
        project_id=params.get("project_id"),
        channel=params.get("channel"),
        source_id=params.get("source_id", ""),
        limit=_query_int(params["limit"], "limit") if "limit" in params else 100,
    )
    return _ok({"kind": kind, "count": len(records), "records": [record_to_json(r) for r in records]})


async def _delete_record(request: Request) -> Response:
    params = _query(request, frozenset({"agent_id"}))
    result = await _engine(request).delete(request.path_params["ref"], agent_id=_required(params, "agent_id"))
    return ORJSONResponse(result.to_json())


async def _delete_agent(request: Request) -> Response:
    params = _query(request, frozenset({"confirm"}))
    agent_id = request.path_params["agent_id"]
    if params.get("confirm", "").lower() != "true":
        raise ForgetUnconfirmed("confirm", f"deleting all data of agent {agent_id!r} needs ?confirm=true")
    result = await _engine(request).delete_agent_data(agent_id)
    return ORJSONResponse({**result.to_json(), "agent_id": agent_id})


async def _stats(request: Request) -> Response:
    params = _query(request, frozenset({"agent_id"}))
    return ORJSONResponse(await _engine(request).stats(params.get("agent_id")))


# --------------------------------------------------------------------------------------------- the app


def create_app(
    settings: Settings, *, max_body_bytes: int = MAX_BODY_BYTES, background: bool = True
) -> Starlette:
    """The HTTP API over an engine opened with ``settings`` when the app starts (its lifespan).

    ``max_body_bytes`` caps request bodies (413 beyond it). ``background`` runs the engine's background
    tasks (block worker, trace publisher) in a task group around the app's life, as ``cpersona.open``
    does; tests that enter and leave the lifespan in different tasks pass ``False`` and drain by hand.
    """

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[dict[str, Any]]:
        if not background:
            async with Engine(settings) as engine:
                yield {"engine": engine}
            return
        # The background tasks live as long as the app: started before the first request, cancelled at
        # shutdown before the engine closes.
        async with Engine(settings) as engine, anyio.create_task_group() as tg:
            await tg.start(engine.run_background)
            try:
                yield {"engine": engine}
            finally:
                tg.cancel_scope.cancel()

    body = _body_handlers(max_body_bytes)
    routes = [
        Route("/health", _health, methods=["GET"]),
        Route("/openapi.json", _openapi, methods=["GET"]),
        Route("/v1/encode", body["encode"], methods=["POST"]),
        Route("/v1/encode/batch", body["encode_batch"], methods=["POST"]),
        Route("/v1/encode/raw", body["encode_raw"], methods=["POST"]),
        Route("/v1/encode/raw/batch", body["encode_raw_batch"], methods=["POST"]),
        Route("/v1/encode/{ref}", body["update"], methods=["PATCH"]),
        Route("/v1/episodes", body["archive_episode"], methods=["POST"]),
        # Agent ids are caller text and may contain '/', so these terminal segments take the rest of the path.
        Route("/v1/profile/{agent_id:path}", body["put_profile"], methods=["PUT"]),
        Route("/v1/profile/{agent_id:path}", _get_profile, methods=["GET"]),
        Route("/v1/records", _list_records, methods=["GET"]),
        Route("/v1/records/{ref}", _get_record, methods=["GET"]),
        Route("/v1/records/{ref}", _delete_record, methods=["DELETE"]),
        Route("/v1/agents/{agent_id:path}", _delete_agent, methods=["DELETE"]),
        Route("/v1/introspect/stats", _stats, methods=["GET"]),
        Route("/v1/recall/query", body["recall_query"], methods=["POST"]),
        Route("/v1/recall/calibrate", body["calibrate"], methods=["POST"]),
        Route("/v1/recall/gate", body["select_gate"], methods=["PUT"]),
    ]
    return Starlette(
        routes=routes,
        middleware=[Middleware(_RequestEdge)],
        exception_handlers={CpersonaError: _on_cpersona_error, HTTPException: _on_http_error},
        lifespan=lifespan,
    )


async def serve(settings: Settings) -> bool:
    """Run the API with uvicorn on ``settings.host:settings.port`` until interrupted.

    Returns whether the server started; ``False`` means the engine did not open or the address could not
    be bound (uvicorn has logged why, e.g. Redis did not answer). Ctrl-C or SIGTERM shut the server down
    gracefully, after which uvicorn re-raises the signal (so the process still ends as interrupted).
    """
    config = uvicorn.Config(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        lifespan="on",
        log_level="info",
        timeout_graceful_shutdown=10,
    )
    server = uvicorn.Server(config)
    try:
        await server.serve()
    except SystemExit as exc:
        # uvicorn exits the process itself when the lifespan or the bind fails; the caller decides.
        if exc.code != STARTUP_FAILURE:
            raise
        return False
    return server.started


# ---------------------------------------------------------------------------------------------- OpenAPI


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _str(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **extra}


_TIME = {
    "description": "RFC 3339 / ISO 8601 text (no offset means UTC) or epoch seconds",
    "oneOf": [{"type": "string"}, {"type": "number", "minimum": 0}],
}
_SCOPE_FIELDS: dict[str, Any] = {
    "agent_id": _str("The owning agent (exact match on every read)", minLength=1, maxLength=256),
    "project_id": _str("Project; '' is the global pool", default="", maxLength=256),
    "channel": _str("Channel; '' is the global pool", default="", maxLength=256),
}
_HEADER = {"type": "object", "description": "Cerememory protocol header: accepted and ignored"}


def _errors(*statuses: int) -> dict[str, Any]:
    text = {
        400: "Bad input (VALIDATION_ERROR, or FORGET_UNCONFIRMED); `error.field` names the field",
        404: "No such record in this agent's scope (RECORD_NOT_FOUND), or no such route (NOT_FOUND)",
        413: "Content, metadata or the body is over its limit (CONTENT_TOO_LARGE)",
        500: "Unexpected server error (INTERNAL_ERROR, opaque message; details are logged)",
        503: "A backend did not answer within its deadline (BACKEND_UNAVAILABLE)",
    }
    return {
        str(s): {"description": text[s], "content": {"application/json": {"schema": _ref("Error")}}}
        for s in (*statuses, 500)
    }


def _op(
    summary: str,
    ok: dict[str, Any],
    *,
    body: dict[str, Any] | None = None,
    params: list[dict[str, Any]] | None = None,
    errors: tuple[int, ...] = (400, 503),
    description: str | None = None,
) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary}
    if description:
        op["description"] = description
    if params:
        op["parameters"] = params
    if body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
    op["responses"] = {
        "200": {"description": "Success", "content": {"application/json": {"schema": ok}}},
        **_errors(*errors),
    }
    return op


def _param(
    name: str, where: str, description: str, *, required: bool = False, **schema: Any
) -> dict[str, Any]:
    return {
        "name": name,
        "in": where,
        "required": required or where == "path",
        "description": description,
        "schema": {"type": "string", **schema},
    }


def _obj(properties: dict[str, Any], required: tuple[str, ...] = (), **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False, **extra}
    if required:
        out["required"] = list(required)
    return out


def _schemas() -> dict[str, Any]:
    ok = {"type": "boolean", "const": True}
    emotion_axes = ("joy", "trust", "fear", "surprise", "sadness", "disgust", "anger", "anticipation")
    emotion = {
        "description": "An emotion label (e.g. 'joy', 'anger') or an EmotionVector",
        "oneOf": [
            {"type": "string"},
            _obj(
                {
                    **{axis: {"type": "number", "minimum": 0, "maximum": 1} for axis in emotion_axes},
                    "intensity": {"type": "number", "minimum": 0, "maximum": 1},
                    "valence": {"type": "number", "minimum": -1, "maximum": 1},
                }
            ),
        ],
    }
    meta = {
        "type": "object",
        "description": "MetaMemory, the 'why' plane (intent, rationale, decision, goals, assumptions, tags, "
        "evidence, alternatives, confidence, capture_status, captured_at)",
    }
    metadata = {
        "description": "Free JSON (an object, or any value kept as `_metadata`); 8,000 chars serialised"
    }
    return {
        "Error": _obj(
            {
                "ok": {"type": "boolean", "const": False},
                "error": _obj(
                    {
                        "code": _str("Stable SCREAMING_SNAKE_CASE code"),
                        "message": _str("What was wrong, for people"),
                        "field": {
                            "type": ["string", "null"],
                            "description": "Dotted path of the offending field (e.g. `records[3].content`, "
                            "`body`), or null",
                        },
                    },
                    ("code", "message", "field"),
                ),
                "request_id": {
                    "type": ["string", "null"],
                    "description": "Also in the `x-request-id` header",
                },
            },
            ("ok", "error", "request_id"),
            description="The one error envelope of every route",
        ),
        "MemoryContent": _obj(
            {
                "blocks": {
                    "type": "array",
                    "minItems": 1,
                    "description": "Content blocks; the first text block is the memory's text",
                    "items": {
                        "type": "object",
                        "required": ["modality", "data"],
                        "properties": {
                            "modality": {"type": "string", "enum": ["text"]},
                            "format": _str("e.g. text/plain"),
                            "data": {
                                "description": "UTF-8 bytes as integers 0-255, or text",
                                "oneOf": [
                                    {
                                        "type": "array",
                                        "items": {"type": "integer", "minimum": 0, "maximum": 255},
                                    },
                                    {"type": "string"},
                                ],
                            },
                        },
                    },
                },
                "summary": {"type": ["string", "null"]},
            },
            ("blocks",),
            description="Cerememory MemoryContent (only text blocks are supported)",
        ),
        "EncodeRequest": _obj(
            {
                "content": {
                    "description": "Plain text (CPersona) or Cerememory MemoryContent; 16,000 chars at most",
                    "oneOf": [{"type": "string", "minLength": 1}, _ref("MemoryContent")],
                },
                **_SCOPE_FIELDS,
                "id": _str("Caller's message id; a repeat within agent+project is skipped"),
                "msg_id": _str("Alias of `id`"),
                "timestamp": {**_TIME, "description": "The memory's own time (default now)"},
                "source": _obj(
                    {"type": {"type": "string"}, "id": {"type": "string"}, "name": {"type": "string"}}
                ),
                "metadata": metadata,
                "context": {"type": "object", "description": "Kept as metadata._context"},
                "store": {"type": "string", "enum": ["episodic", "semantic", "procedural", "emotional"]},
                "emotion": emotion,
                "meta": meta,
                "associations": {
                    "type": "array",
                    "items": _obj(
                        {
                            "target_id": {"type": "string"},
                            "association_type": {"type": "string"},
                            "type": {"type": "string"},
                            "weight": {"type": "number", "minimum": 0, "maximum": 1},
                        },
                        ("target_id",),
                    ),
                },
                "lock": {"type": "boolean", "default": False},
                "header": _HEADER,
            },
            ("content", "agent_id"),
            description="One memory. Unknown fields are refused (400 naming the field).",
        ),
        "EncodeBatchRequest": _obj(
            {
                "records": {"type": "array", "maxItems": 1000, "items": _ref("EncodeRequest")},
                "header": _HEADER,
            },
            ("records",),
            description="Validated as a whole before anything is written; errors name `records[i].field`",
        ),
        "RawRequest": _obj(
            {
                "content": {"type": "string", "minLength": 1},
                **_SCOPE_FIELDS,
                "session_id": {"type": "string", "minLength": 1},
                "turn_id": {"type": "string"},
                "topic_id": {"type": "string"},
                "source": {
                    "type": "string",
                    "enum": ["conversation", "tool_io", "scratchpad", "summary", "imported"],
                },
                "speaker": {"type": "string", "enum": ["user", "assistant", "system", "tool"]},
                "visibility": {"type": "string", "enum": ["normal", "private_scratch", "sealed"]},
                "secrecy_level": {"type": "string", "enum": ["public", "sensitive", "secret"]},
                "metadata": metadata,
                "meta": meta,
                "header": _HEADER,
            },
            ("content", "agent_id", "session_id", "source", "speaker", "visibility", "secrecy_level"),
            description="One verbatim journal entry",
        ),
        "RawBatchRequest": _obj(
            {"records": {"type": "array", "maxItems": 1000, "items": _ref("RawRequest")}, "header": _HEADER},
            ("records",),
        ),
        "UpdateRequest": _obj(
            {
                "agent_id": _SCOPE_FIELDS["agent_id"],
                "content": {"oneOf": [{"type": "string"}, _ref("MemoryContent")]},
                "metadata": metadata,
                "emotion": emotion,
                "meta": meta,
                "store": {"type": "string", "enum": ["episodic", "semantic", "procedural", "emotional"]},
                "timestamp": _TIME,
                "record_id": _str("Accepted for Cerememory compatibility; the path wins"),
                "header": _HEADER,
            },
            ("agent_id",),
            description="Each given field replaces the old value wholesale; at least one must be given",
        ),
        "EpisodeRequest": _obj(
            {
                "summary": {"type": "string", "minLength": 1},
                **_SCOPE_FIELDS,
                "keywords": {
                    "description": "A list of keywords or one space-separated string",
                    "oneOf": [{"type": "array", "items": {"type": "string"}}, {"type": "string"}],
                },
                "history": {
                    "type": "array",
                    "description": "Messages; only their `timestamp`s are used (for start/end time)",
                    "items": {"type": "object"},
                },
                "start_time": _TIME,
                "end_time": _TIME,
                "resolved": {"type": "boolean", "default": False},
                "header": _HEADER,
            },
            ("summary", "agent_id"),
        ),
        "ProfileRequest": _obj(
            {"profile": {"type": "string", "minLength": 1, "maxLength": 2000}, "header": _HEADER},
            ("profile",),
        ),
        "StoreResult": {
            "type": "object",
            "required": ["ok", "result", "ref", "record_id", "embedded"],
            "properties": {
                "ok": ok,
                "result": {"type": "string", "enum": ["stored", "skipped"]},
                "ref": _str(
                    "mem:<uuid>, ep:<uuid> or raw:<uuid>; for `skipped`, the record already holding it"
                ),
                "record_id": {"type": "string", "format": "uuid"},
                "embedded": {"type": "boolean"},
                "id": _str("The caller's message id, when given"),
                "vector_pending": {"type": "boolean", "description": "Saved; the vector is written later"},
                "reason": {"type": "string", "enum": ["duplicate_id", "duplicate_content", "duplicate"]},
                "warnings": {
                    "type": "array",
                    "items": {"type": "string", "enum": ["timestamp_ahead_of_clock"]},
                },
            },
        },
        "BatchResult": {
            "type": "object",
            "required": ["ok", "stored", "skipped", "results"],
            "properties": {
                "ok": ok,
                "stored": {"type": "integer"},
                "skipped": {"type": "integer"},
                "results": {"type": "array", "items": _ref("StoreResult")},
            },
        },
        "Record": {
            "type": "object",
            "description": "A memory, episode or raw entry; times are RFC 3339 UTC. Memories carry content, "
            "timestamp, seq, msg_id, metadata, store, emotion, fidelity, meta, associations, version, "
            "embedded; episodes summary, keywords, start_time, end_time, resolved; raw entries session_id, "
            "speaker, visibility, secrecy_level, content.",
            "required": ["ref", "kind", "id", "agent_id", "project_id", "channel"],
            "properties": {
                "ref": {"type": "string"},
                "kind": {"type": "string", "enum": list(_KINDS)},
                "id": {"type": "string", "format": "uuid"},
                **{k: {"type": "string"} for k in ("agent_id", "project_id", "channel")},
            },
        },
        "RecordResponse": _obj({"ok": ok, "record": _ref("Record")}, ("ok", "record")),
        "RecordList": _obj(
            {
                "ok": ok,
                "kind": {"type": "string", "enum": list(_KINDS)},
                "count": {"type": "integer"},
                "records": {"type": "array", "items": _ref("Record")},
            },
            ("ok", "kind", "count", "records"),
        ),
        "Profile": _obj(
            {"agent_id": {"type": "string"}, "content": {"type": "string"}, "updated_at": {"type": "string"}},
            ("agent_id", "content", "updated_at"),
        ),
        "ProfileResponse": _obj(
            {"ok": ok, "profile": {"oneOf": [_ref("Profile"), {"type": "null"}]}}, ("ok", "profile")
        ),
        "DeleteResult": {
            "type": "object",
            "required": ["ok", "deleted"],
            "properties": {"ok": ok, "deleted": {"type": "integer"}, "agent_id": {"type": "string"}},
        },
        "Stats": {
            "type": "object",
            "properties": {
                "ok": ok,
                "memories": {"type": "integer"},
                "episodes": {"type": "integer"},
                "raw_entries": {"type": "integer"},
                "vector_pending": {"type": "integer"},
                "vectors": {"type": ["integer", "null"], "description": "null without an embedder"},
            },
        },
        "RecallRequest": _obj(
            {
                "agent_id": _str("The agent whose memory is searched (exact)"),
                "query": _str("The question; an empty string lists the newest records"),
                "limit": {"type": "integer", "minimum": 0, "maximum": 100, "default": 10},
                "deep": {"type": "boolean", "default": False, "description": "Halve the gate's thresholds"},
                "mode": {"type": "string", "enum": ["rrf", "rsf", "cascade"], "description": "Fusion mode"},
                "project_id": _str("Project X sees X and the global pool ''; '' sees only the pool"),
                "channel": _str("Channel X sees X and the global pool ''"),
                "source_id": _str("Exact source id, or a prefix when it ends in a non-alphanumeric"),
                "exclude_contents": {"type": "array", "items": {"type": "string"}},
                "full_content": {"type": "boolean", "default": False, "description": "No 500-char preview"},
                "order": {"type": "string", "enum": ["best_first", "best_last"], "default": "best_first"},
                "policy": _str(
                    "The recall policy to run (a file in stages/); default CPERSONA_RECALL_POLICY, or "
                    "CPERSONA_RECALL_CUE_POLICY when a time_cue is given"
                ),
                "time_cue": {
                    "type": ["object", "null"],
                    "description": "When the answer was stored: {after?, before?} (ISO dates or times, UTC "
                    "without an offset; a date in before includes that day) or {ago: {unit: days|weeks|"
                    "months, value} | 'long_ago'}, with confidence sure|likely|vague (required). The engine "
                    "also searches that period and moves rows it found there up by at most 3/2/1 places, "
                    "adding as many seats; it never removes a row. {} or null means no cue",
                    "additionalProperties": False,
                    "properties": {
                        "after": {"type": "string"},
                        "before": {"type": "string"},
                        "ago": {"oneOf": [{"type": "object"}, {"type": "string", "enum": ["long_ago"]}]},
                        "confidence": {"type": "string", "enum": ["sure", "likely", "vague"]},
                    },
                },
                "trace": {
                    "type": "boolean",
                    "default": False,
                    "description": "Return the recall trace (refs, ranks, scores and reasons; no text)",
                },
                "header": {"type": "object", "description": "Accepted and ignored"},
            },
            ("agent_id", "query"),
        ),
        "RecallRow": _obj(
            {
                "ref": {"type": ["string", "null"], "description": "null for the profile row"},
                "kind": {"type": "string", "enum": ["memory", "episode", "profile"]},
                "content": {"type": "string"},
                "content_truncated": {"type": "boolean"},
                "content_len": {"type": "integer"},
                "id": _str("The caller's id of the memory"),
                "timestamp": {"type": ["string", "null"], "format": "date-time"},
                "source": {"type": "object"},
                "score": {"type": "number", "description": "The fused score"},
                "match_reason": {
                    "type": "object",
                    "description": "signal (cosine | rrf | rsf | block), score, and the scores it carries",
                },
            }
        ),
        "RecallResult": _obj(
            {
                "ok": ok,
                "policy": _obj({"scoring": {"type": "string"}, "process": {"type": "string"}}),
                "mode": {"type": "string"},
                "order": {"type": "string"},
                "count": {"type": "integer"},
                "rows": {"type": "array", "items": _ref("RecallRow")},
                "depth": {"type": "integer", "description": "Rows per arm, when it differs from limit"},
                "degraded": {"type": "array", "items": {"type": "object"}},
                "time_cue": {
                    "type": "object",
                    "description": "Only with a cue: {policy, period: [start, end], confidence (the step "
                    "searched), revised, moved, seated}, or {policy, ignored: 'recent_only', period}",
                },
                "trace": {
                    "type": ["object", "null"],
                    "description": "Only when the request set trace: the recall trace, trace_version 1 "
                    "(policy, server_version, scope, request, config, arms, fusion, scoring, gate, autocut, "
                    "order, reservation, stages, suspected, coverage, timing_ms); the profile row's ref is "
                    "'profile' there",
                },
            }
        ),
        "Health": {
            "type": "object",
            "properties": {
                "ok": ok,
                "status": {"type": "string", "const": "ok"},
                "redis": {
                    "type": "object",
                    "description": "Server version, module versions (search, ReJSON), whether embedded",
                    "properties": {
                        "version": {"type": "string"},
                        "modules": {"type": "object", "additionalProperties": {"type": "string"}},
                        "embedded": {"type": "boolean"},
                    },
                },
                "vector_engine": {"type": ["string", "null"]},
                "embedder": {
                    "oneOf": [
                        {"type": "null"},
                        _obj({"name": {"type": "string"}, "dim": {"type": "integer"}}),
                    ]
                },
                "traces": {
                    "type": "object",
                    "description": "This worker's trace publisher: traces published on the Redis channel, "
                    "dropped (queue full), failed (Redis error or deadline), queued now, queue capacity",
                    "properties": {
                        name: {"type": "integer"}
                        for name in ("published", "dropped", "failed", "queued", "capacity")
                    },
                },
            },
        },
    }


def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 description of every route of :func:`create_app`."""
    agent_q = _param("agent_id", "query", "The owning agent", required=True)
    ref_p = _param("ref", "path", "A record ref: mem:<uuid>, ep:<uuid> or raw:<uuid>")
    agent_p = _param("agent_id", "path", "The agent (may contain '/')")
    paths: dict[str, Any] = {
        "/health": {
            "get": _op(
                "Backends' health: Redis version and modules, the vector engine, the embedder",
                _ref("Health"),
                errors=(503,),
            )
        },
        "/openapi.json": {"get": _op("This document", {"type": "object"}, errors=())},
        "/v1/encode": {
            "post": _op(
                "Store one memory (encode.store)",
                _ref("StoreResult"),
                body=_ref("EncodeRequest"),
                errors=(400, 413, 503),
                description="A repeat of the caller's `id` (within agent+project) or of identical content "
                "(within agent+project+channel) is not stored again: `result: skipped` with the first ref. "
                "A timestamp more than 300 s ahead of the server clock adds the warning "
                "`timestamp_ahead_of_clock`.",
            )
        },
        "/v1/encode/batch": {
            "post": _op(
                "Store many memories (encode.batch)",
                _ref("BatchResult"),
                body=_ref("EncodeBatchRequest"),
                errors=(400, 413, 503),
            )
        },
        "/v1/encode/raw": {
            "post": _op(
                "Append one raw journal entry (encode.store_raw)",
                _ref("StoreResult"),
                body=_ref("RawRequest"),
                errors=(400, 413, 503),
            )
        },
        "/v1/encode/raw/batch": {
            "post": _op(
                "Append many raw journal entries (encode.batch_raw)",
                _ref("BatchResult"),
                body=_ref("RawBatchRequest"),
                errors=(400, 413, 503),
            )
        },
        "/v1/encode/{ref}": {
            "patch": _op(
                "Update a memory (encode.update)",
                _ref("RecordResponse"),
                params=[
                    _param("ref", "path", "mem:<uuid>, or the bare <uuid> as Cerememory sends it"),
                ],
                body=_ref("UpdateRequest"),
                errors=(400, 404, 413, 503),
                description="Unlike Cerememory (204, empty body), answers 200 with the updated record. "
                "A content change re-embeds the memory.",
            )
        },
        "/v1/episodes": {
            "post": _op(
                "Archive a session summary (archive_episode)",
                _ref("StoreResult"),
                body=_ref("EpisodeRequest"),
                errors=(400, 413, 503),
            )
        },
        "/v1/profile/{agent_id}": {
            "put": _op(
                "Set the agent's profile text",
                _ref("ProfileResponse"),
                params=[agent_p],
                body=_ref("ProfileRequest"),
                errors=(400, 413, 503),
            ),
            "get": _op(
                "The agent's profile (`profile: null` when none was set)",
                _ref("ProfileResponse"),
                params=[agent_p],
            ),
        },
        "/v1/records": {
            "get": _op(
                "The newest records of one kind in a scope",
                _ref("RecordList"),
                params=[
                    agent_q,
                    _param("kind", "query", "Record kind", enum=list(_KINDS), default="memory"),
                    _param("project_id", "query", "Project (also sees the global pool)"),
                    _param("channel", "query", "Channel (also sees the global pool)"),
                    _param("source_id", "query", "Source id, exact or prefix"),
                    {
                        "name": "limit",
                        "in": "query",
                        "required": False,
                        "description": "How many (newest first)",
                        "schema": {"type": "integer", "minimum": 0, "maximum": 1000, "default": 100},
                    },
                ],
            )
        },
        "/v1/records/{ref}": {
            "get": _op("One record", _ref("RecordResponse"), params=[ref_p, agent_q], errors=(400, 404, 503)),
            "delete": _op(
                "Delete one record (with its dedup claims and vector)",
                _ref("DeleteResult"),
                params=[ref_p, agent_q],
                errors=(400, 404, 503),
            ),
        },
        "/v1/agents/{agent_id}": {
            "delete": _op(
                "Delete every record, claim, profile and vector of an agent",
                _ref("DeleteResult"),
                params=[
                    agent_p,
                    _param(
                        "confirm", "query", "Must be 'true'; otherwise 400 FORGET_UNCONFIRMED", required=True
                    ),
                ],
            )
        },
        "/v1/recall/query": {
            "post": _op(
                "Recall the rows that answer a question (recall.query, policy single-pass-v0)",
                _ref("RecallResult"),
                body=_ref("RecallRequest"),
                errors=(400, 503),
                description="Rows come back best first (`order: best_last` gives CPersona's order, best row "
                "last). Each row says why it is there in `match_reason`. An arm that fails or misses its "
                "deadline contributes nothing and is named in `degraded`; the recall still answers.",
            )
        },
        "/v1/recall/calibrate": {
            "post": _op(
                "Calibrate the agent's gate from its own memories (deterministic) and select it",
                {"type": "object"},
                body=_obj(
                    {
                        "agent_id": _str("The agent"),
                        "precision": {"type": "string", "enum": ["strict", "balanced", "lenient"]},
                        "header": {"type": "object"},
                    },
                    ("agent_id",),
                ),
                errors=(400, 503),
            )
        },
        "/v1/recall/gate": {
            "put": _op(
                "Select the agent's gate: calibrated or heuristic",
                {"type": "object"},
                body=_obj(
                    {
                        "agent_id": _str("The agent"),
                        "gate": {"type": "string", "enum": ["calibrated", "heuristic"]},
                        "header": {"type": "object"},
                    },
                    ("agent_id", "gate"),
                ),
                errors=(400, 503),
            )
        },
        "/v1/introspect/stats": {
            "get": _op(
                "Record counts (of one agent, or all) and pending vector writes",
                _ref("Stats"),
                params=[_param("agent_id", "query", "Count only this agent's records")],
            )
        },
    }
    for item in paths.values():
        for op in item.values():
            op["parameters"] = [*op.get("parameters", []), _REQUEST_ID_PARAM]
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "cpersona",
            "version": "0.1.0",
            "description": "Agent memory: write memories, episodes and raw journal entries; read them back. "
            "Every response carries `x-request-id`; every error is the `Error` envelope.",
        },
        "paths": paths,
        "components": {"schemas": _schemas()},
    }


_REQUEST_ID_PARAM = {
    "name": "x-request-id",
    "in": "header",
    "required": False,
    "description": "Echoed in the response header (and `request_id` of errors); generated when absent",
    "schema": {"type": "string", "maxLength": 128},
}
