"""Reading a request: its JSON body (size-capped, parsed off the loop when large), its query string, and
the agent it acts for.

The agent of a request is, in this order: the ``agent_id`` it names (body or query string); else the
``X-Cpersona-Agent`` header (ASCII; a client without scopes, such as the Cerememory SDK, sends it on
every request with its ``headers=``); else the server's ``CPERSONA_DEFAULT_AGENT`` (unset by default);
else the request is a 400 naming ``agent_id``. It is never guessed. It applies to every route whose
model has an ``agent_id`` (or a batch of ``records`` that each have one): the app declares each route's
models on its request (:func:`declare_models`), and :func:`json_object` and :func:`query_params` fill the
agent in as they read, so a route in any module gets it however it reads its request (:func:`read_body`
and :func:`read_query` also validate). :func:`caller_agent` is the one place that decides the fallback;
an API key bound to exactly one agent comes first in it (a client without scopes then needs nothing else),
and a header naming an agent the key is not bound to is refused (403 naming the header), never overridden.

With an API key in force (:mod:`.auth`), every agent a request names is checked against the key
(:func:`~cpersona.edges.http.access.permit`, 403 ``FORBIDDEN``): its ``agent_id`` (body or query string),
each of its ``records``' agents, and an ``agent_id`` in its path (checked when the app declares the
route's models, so before the handler runs). A route whose model may name no agent (the stats of every
agent) must name one under a key that is not an admin's. Routes that address a record by a path ref read
it within the agent of their query or body, so the check of that agent covers the ref.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, TypeVar, get_args

import anyio
import anyio.to_thread
import orjson

from cpersona.edges.http.access import AgentForbidden, key_agents, permit
from cpersona.edges.http.errors import UnsupportedMediaType
from cpersona.errors import ContentTooLarge, InvalidRequest
from cpersona.model.fields import RequestModel, validate
from cpersona.settings import Settings

if TYPE_CHECKING:
    from collections.abc import Mapping

    from starlette.requests import Request

__all__ = [
    "AGENT_HEADER",
    "AGENT_HEADER_PATTERN",
    "caller_agent",
    "declare_models",
    "json_object",
    "permit_named",
    "query_params",
    "read_body",
    "read_query",
    "refuse_repeated_keys",
    "takes_agent",
    "with_agent",
]

AGENT_HEADER = "X-Cpersona-Agent"
# Printable ASCII, not blank: the schema the OpenAPI document gives the header.
AGENT_HEADER_PATTERN = "[ -~]*[!-~][ -~]*"
"""The header naming the agent of a request that does not name one itself."""

_M = TypeVar("_M", bound=RequestModel)
# Where the app leaves the models of a request's route (ASGI scope keys are namespaced by convention).
_BODY_MODEL = "cpersona.body_model"
_QUERY_MODEL = "cpersona.query_model"
_NO_AGENT = (
    f"is required: name it in the request, or send the {AGENT_HEADER} header "
    "(or start the server with CPERSONA_DEFAULT_AGENT)"
)


def _settings(request: Request) -> Settings:
    settings = getattr(request.state.engine, "settings", None)
    if not isinstance(settings, Settings):  # pragma: no cover - the lifespan always puts an Engine there
        raise TypeError("request.state.engine has no settings")
    return settings


def caller_agent(request: Request) -> str | None:
    """The agent a request acts for when it names none: the one agent of its key, else its header, else
    the server's default agent."""
    agents = key_agents(request)
    header = agent_header(request)
    if header is not None:
        # The caller meant that agent: acting for the key's own one instead would write where it did not
        # ask, so another agent is refused as one named in the body is.
        permit(agents, header, AGENT_HEADER.lower())
    if agents is not None and len(agents) == 1:
        return next(iter(agents))
    return header if header is not None else _settings(request).default_agent


def agent_header(request: Request) -> str | None:
    """The request's agent header, checked as the OpenAPI document states it (``AGENT_HEADER_PATTERN``,
    at most CPERSONA_MAX_KEY_LENGTH characters): a bad one is refused even where the body names the
    agent, since the caller meant it."""
    header = request.headers.get(AGENT_HEADER)
    if header is None:
        return None
    # Header bytes are read as Latin-1, so UTF-8 would name another agent (``JÃ¼rgen``); an agent id
    # beyond ASCII goes in the request itself.
    if not header.isascii():
        raise InvalidRequest(AGENT_HEADER.lower(), "must be ASCII; name other agents in agent_id")
    if not re.fullmatch(AGENT_HEADER_PATTERN, header):
        raise InvalidRequest(AGENT_HEADER.lower(), "must be printable ASCII with a visible character")
    most = _settings(request).max_key_length
    if len(header) > most:
        raise InvalidRequest(AGENT_HEADER.lower(), f"must be at most {most} characters")
    return header


def with_agent(model: type[RequestModel], values: Mapping[str, Any], agent: str | None) -> dict[str, Any]:
    """``values`` with ``agent`` as the ``agent_id`` of the request (or of each of its ``records``) that
    names none; a request that must name one and cannot is a 400 naming ``agent_id``."""
    out = dict(values)
    fields = model.model_fields
    if "agent_id" in fields:
        if "agent_id" not in out:
            if agent is not None:
                out["agent_id"] = agent
            elif fields["agent_id"].is_required():
                raise InvalidRequest("agent_id", _NO_AGENT)
    elif _records_take_agent(model) and agent is not None and isinstance(out.get("records"), list):
        out["records"] = [
            {**item, "agent_id": agent} if isinstance(item, dict) and "agent_id" not in item else item
            for item in out["records"]
        ]
    return out


def permit_named(request: Request, model: type[RequestModel], values: Mapping[str, Any]) -> None:
    """Refuse (403) a request whose values name an agent its key is not bound to, or that names none
    where it could mean every agent. Nothing to check without a key in force, or with an admin's."""
    agents = key_agents(request)
    if agents is None:
        return
    field = model.model_fields.get("agent_id")
    if field is not None:
        named = values.get("agent_id")
        if named is not None:
            _permit_value(agents, named)
        elif not field.is_required() and model.unnamed_agent_is_every_agent:
            # Naming no agent means every agent here (the stats of all): not for a key bound to some.
            raise AgentForbidden("name an agent_id: this key may act only for its own agents")
    if _records_take_agent(model) and isinstance(values.get("records"), list):
        for item in values["records"]:
            if isinstance(item, dict) and "agent_id" in item:
                _permit_value(agents, item["agent_id"])


def _permit_value(agents: frozenset[str], named: object) -> None:
    # A value that is no string is no agent a key is bound to (validation would refuse it anyway).
    if not isinstance(named, str):
        raise AgentForbidden("this key may act only for its own agents")
    permit(agents, named)


def takes_agent(model: type[RequestModel]) -> bool:
    """Whether a request model names an agent (its own, or each of its records'): those read the header."""
    return "agent_id" in model.model_fields or _records_take_agent(model)


def _records_take_agent(model: type[RequestModel]) -> bool:
    # A batch: ``records`` of a model that has an agent_id (``Sequence[StoreRequest]``).
    field = model.model_fields.get("records")
    if field is None:
        return False
    return any(
        isinstance(kind, type) and issubclass(kind, RequestModel) and "agent_id" in kind.model_fields
        for kind in get_args(field.annotation)
    )


def _fallback(request: Request, model: type[RequestModel]) -> str | None:
    # A route whose agent is in its path (or that has none) never reads the header.
    return caller_agent(request) if takes_agent(model) else None


async def read_body(request: Request, model: type[_M]) -> _M:
    """The JSON body as ``model``, its agent filled in as the module says; errors name the field."""
    settings = _settings(request)
    raw = await json_object(request, request.app.state.max_body_bytes)
    values = with_agent(model, raw, _fallback(request, model))
    permit_named(request, model, values)
    return validate(model, values, settings)


def read_query(request: Request, model: type[_M]) -> _M:
    """The query string as ``model``, its agent filled in as the module says; errors name the field."""
    values = with_agent(model, query_params(request), _fallback(request, model))
    permit_named(request, model, values)
    return validate(model, values, _settings(request))


# Bodies above this size are parsed in a worker thread: orjson holds the event loop for about a
# millisecond per 100 KiB, and a 64 MiB batch would otherwise stall every other request.
PARSE_IN_THREAD_BYTES = 1024 * 1024


async def json_object(request: Request, limit: int) -> dict[str, Any]:
    """The request body as a JSON object; errors name ``body`` (or the header, or the repeated key).

    On a route the app mounted, the body's agent is filled in as the module says (its body model is
    declared on the request, :func:`declare_models`)."""
    _require_json(request.headers.get("content-type", ""))
    raw = await _read(request, limit)
    if not raw.strip():
        raise InvalidRequest("body", "is required: send a JSON object")
    if len(raw) > PARSE_IN_THREAD_BYTES:
        body = await anyio.to_thread.run_sync(_parse, raw)
    else:
        body = _parse(raw)
    if not isinstance(body, dict):
        raise InvalidRequest("body", f"must be a JSON object, got {_json_kind(body)}")
    return _with_declared_agent(request, _BODY_MODEL, body)


def declare_models(
    request: Request, *, body: type[RequestModel] | None, query: type[RequestModel] | None
) -> None:
    """Tell the readers of this request which models its route reads (the app does, for every route);
    an agent in the route's path is checked against the request's key here, before its handler runs."""
    request.scope[_BODY_MODEL] = body
    request.scope[_QUERY_MODEL] = query
    if any(takes_agent(model) for model in (body, query) if model is not None):
        agent_header(request)
    agents = key_agents(request)
    in_path = request.path_params.get("agent_id")
    if agents is not None and in_path is not None:
        _permit_value(agents, in_path)


def _with_declared_agent(request: Request, key: str, values: dict[str, Any]) -> dict[str, Any]:
    model = request.scope.get(key)
    if not (isinstance(model, type) and issubclass(model, RequestModel)):
        return values
    out = with_agent(model, values, _fallback(request, model))
    permit_named(request, model, out)
    return out


def _require_json(content_type: str) -> None:
    # A browser sends text/plain, form and multipart bodies cross-site without asking (a "simple"
    # request); insisting on application/json makes it ask first, which this server never grants.
    media = content_type.partition(";")[0].strip().lower()
    if media != "application/json":
        shown = f"is {media!r}" if media else "is missing"
        raise UnsupportedMediaType("content-type", f"{shown}; send the body as application/json")


async def _read(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise ContentTooLarge("body", f"is {declared} bytes; the limit is {limit}")
    chunks: list[bytes] = []
    size = 0
    # Counted as it arrives, so a body without a (truthful) length is dropped at the limit, not buffered.
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ContentTooLarge("body", f"is larger than the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _parse(raw: bytes) -> object:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        # orjson reports a byte that is not UTF-8 as a "surrogate", which tells a caller nothing.
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as bad:
            raise InvalidRequest(
                "body", f"is not UTF-8 (at byte {bad.start}); send the JSON encoded as UTF-8"
            ) from None
        raise InvalidRequest("body", f"is not valid JSON ({exc})") from None
    refuse_repeated_keys(raw)
    return body


def refuse_repeated_keys(raw: bytes) -> None:
    """Refuse JSON (already known to parse) in which an object gives a key twice, naming the key.

    orjson keeps the last of a repeated key, so {"agent_id": "bi", "agent_id": "bob"} would be bob's
    write; this second reading only looks for repeats."""
    try:
        json.loads(raw, object_pairs_hook=unique_keys)
    except RecursionError:
        # The stdlib parser recurses once a level and stops near Python's recursion limit, a little
        # short of orjson's 1024 levels; no request of this API nests anywhere near that deep.
        raise InvalidRequest("body", "nests too deeply to read") from None


def unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """The stdlib parser's ``object_pairs_hook`` that refuses an object giving a key twice, naming it."""
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise InvalidRequest(key, "is given more than once in one object")
        seen.add(key)
    return dict(pairs)


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


def query_params(request: Request) -> dict[str, Any]:
    """The query parameters, each given at most once (which ones a route knows, its model says); on a
    route the app mounted, the agent filled in as the module says."""
    params = request.query_params
    out: dict[str, Any] = {}
    for key in params:
        values = params.getlist(key)
        if len(values) > 1:
            raise InvalidRequest(key, "must be given once")
        out[key] = values[0]
    return _with_declared_agent(request, _QUERY_MODEL, out)
