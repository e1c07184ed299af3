"""The OpenAPI 3.1 document, generated from the route table and the request and response models.

Nothing here is written by hand but the prose: each path comes from a route, each schema from the model
the route validates with or answers with, and every limit and default from the settings the server runs
with (``CPERSONA_MAX_KEY_LENGTH``, ``CPERSONA_BATCH_MAX``…), the policy names from the policies it loaded
and the version from the package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import TypeAdapter
from pydantic.json_schema import models_json_schema

from cpersona.edges.http.auth import OPEN_PATHS, admin_only
from cpersona.edges.http.errors import ORJSONResponse
from cpersona.edges.http.operation import NoQuery, Operation
from cpersona.edges.http.reading import AGENT_HEADER, AGENT_HEADER_PATTERN, query_params, takes_agent
from cpersona.edges.http.routes import HTTP_MAX_LIMIT, OPERATIONS
from cpersona.edges.http.state import engine_of
from cpersona.model.fields import schema_limits, validate
from cpersona.model.recall_query import RecallQuery
from cpersona.model.responses import ErrorResponse
from cpersona.recall.policy import load_policies
from cpersona.settings import Settings
from cpersona.version import __version__

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pydantic import BaseModel
    from starlette.requests import Request
    from starlette.responses import Response

    from cpersona.recall.policy import Policy

__all__ = ["ROUTES", "openapi_document"]

_PREFIX = "#/components/schemas/"
_ERROR_TEXT = {
    400: "Bad input (VALIDATION_ERROR; MODALITY_UNSUPPORTED for a recall cue no model here reads; or "
    "FORGET_UNCONFIRMED); `error.field` names the field, or the key a body gives more than once",
    401: "Keys are in force (CPERSONA_KEYS) and the request has no `Authorization: Bearer <key>`, or a key "
    "that is unknown or revoked (UNAUTHORIZED)",
    403: "The request's key is not bound to the agent it names, or the route needs an admin key (FORBIDDEN)",
    404: "No such record in this agent's scope (RECORD_NOT_FOUND), no API key of that id (KEY_NOT_FOUND), "
    "or no such route (NOT_FOUND)",
    408: "The body did not arrive whole within CPERSONA_HTTP_BODY_TIMEOUT_SECS of the request's head; the "
    "connection is closed (REQUEST_TIMEOUT)",
    409: "A write to an agent whose data is being deleted, or was deleted since the write began; nothing "
    "of it was kept, and sent again once the delete has finished it is stored (AGENT_BEING_DELETED); "
    "lifecycle.import: a record id the import would write, even as a copy, is taken outside this agent "
    "(ids are unique in the store); one fixed answer, naming no record (IMPORT_CONFLICT)",
    413: "Content, metadata or the body (CPERSONA_MAX_BODY_BYTES) is over its limit (CONTENT_TOO_LARGE)",
    415: "The body is not `application/json` (UNSUPPORTED_MEDIA_TYPE)",
    421: "A server bound to loopback answers only to `Host: localhost`, `127.0.0.1` or `[::1]` with its "
    "port (HOST_NOT_ALLOWED)",
    422: "reconstruct: not even the first passage with its head claim fits the mode's token cap "
    "(CAP_BELOW_MINIMUM, `error.field` is `mode`)",
    429: "The key is over its rate limit (RATE_LIMITED); `Retry-After` and `retry_after` say when to retry",
    500: "Unexpected server error (INTERNAL_ERROR, opaque message; details are logged)",
    501: "A Cerememory operation this engine does not offer (NOT_IMPLEMENTED); the message says why",
    503: "A backend did not answer within its deadline (BACKEND_UNAVAILABLE)",
    507: "An embedded store's disk has less free space than CPERSONA_MIN_FREE_MB; the write is refused "
    "(INSUFFICIENT_STORAGE)",
}
_REQUEST_ID = {
    "name": "x-request-id",
    "in": "header",
    "required": False,
    "description": "Echoed in the response header (and `request_id` of errors) when it is 1 to 128 "
    "printable ASCII characters; any other value, or none, is replaced by a fresh UUID",
    # Any text is accepted (an unusable id is replaced, never refused), so the schema limits nothing.
    "schema": {"type": "string"},
}


async def _openapi(request: Request) -> Response:
    engine = engine_of(request)
    validate(NoQuery, query_params(request), engine.settings)
    # The document depends only on the settings and the policies, fixed for the app's life; building it
    # takes some 20 ms of the event loop, so it is built once.
    state = request.app.state
    if getattr(state, "openapi", None) is None:
        state.openapi = openapi_document(engine.settings, engine.policies)
    return ORJSONResponse(state.openapi)


ROUTES: tuple[Operation, ...] = (
    *OPERATIONS,
    Operation("GET", "/openapi.json", _openapi, "This document", None, errors=()),
)
"""Every route of the app, this document's own included."""


def openapi_document(
    settings: Settings | None = None, policies: Mapping[str, Policy] | None = None
) -> dict[str, Any]:
    """The OpenAPI description of every route, with the limits of ``settings`` (default: the defaults)."""
    settings = Settings() if settings is None else settings
    policies = load_policies() if policies is None else policies
    schemas = _agent_from_header(_with_policy_rules(_schemas(settings), settings, policies))
    paths: dict[str, dict[str, Any]] = {}
    for op in ROUTES:
        paths.setdefault(op.path, {})[op.method.lower()] = _operation(op, settings, policies)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "cpersona",
            "version": __version__,
            "description": "Agent memory: write memories, episodes and raw journal entries; read them back. "
            "Every response carries `x-request-id`; every error is the `Error` envelope. Unknown fields "
            "are refused (400 naming the field).",
        },
        "paths": paths,
        "components": {"schemas": schemas},
    }


def _agent_from_header(schemas: dict[str, Any]) -> dict[str, Any]:
    """Request bodies whose ``agent_id`` the agent header (or the default agent, or a key bound to one
    agent) may give: there it is optional, as the server reads it (edges/http/reading.py)."""
    bodies = [
        model
        for op in ROUTES
        for model in (op.body, op.alternative[0] if op.alternative else None)
        if model is not None and takes_agent(model)
    ]
    names = [_ref(model)["$ref"].removeprefix(_PREFIX) for model in bodies]
    for name in list(names):
        records = schemas[name].get("properties", {}).get("records", {}).get("items", {})
        if "$ref" in records:
            names.append(records["$ref"].removeprefix(_PREFIX))
    for name in set(names):
        required = schemas[name].get("required")
        if required and "agent_id" in required:
            schemas[name]["required"] = [field for field in required if field != "agent_id"]
    return schemas


def _models() -> list[tuple[type[BaseModel], Literal["validation", "serialization"]]]:
    out: list[tuple[type[BaseModel], Literal["validation", "serialization"]]] = [
        (ErrorResponse, "serialization")
    ]
    for op in ROUTES:
        if op.body is not None and (op.body, "validation") not in out:
            out.append((op.body, "validation"))
        if op.response is not None and (op.response, "serialization") not in out:
            out.append((op.response, "serialization"))
        if op.alternative is not None:
            out.extend([(op.alternative[0], "validation"), (op.alternative[1], "serialization")])
    return out


def _schemas(settings: Settings) -> dict[str, Any]:
    with schema_limits(settings):
        _, top = models_json_schema(_models(), ref_template=_PREFIX + "{model}")
    defs: dict[str, Any] = top.get("$defs", {})
    # A model's title is its name in the document, so the engine's own names (``RecallRequest``, the
    # internal request; ``StoreResult``, the library's result) can stay what they are in Python.
    titles = [schema.get("title", name) for name, schema in defs.items()]
    shared = sorted({title for title in titles if titles.count(title) > 1})
    if shared:
        # Two models of one title would silently become one schema below.
        raise RuntimeError(f"two models share the OpenAPI name {shared}; give one a title of its own")
    renames = {name: schema["title"] for name, schema in defs.items() if schema.get("title", name) != name}
    renamed = {renames.get(name, name): schema for name, schema in defs.items()}
    out: dict[str, Any] = _rewrite_refs(
        renamed, {_PREFIX + old: _PREFIX + new for old, new in renames.items()}
    )
    return out


def _with_policy_rules(
    schemas: dict[str, Any], settings: Settings, policies: Mapping[str, Policy]
) -> dict[str, Any]:
    """The recall request as this server reads it: the policies it loaded, the largest limit every one of
    them allows over HTTP, and that a time cue needs a policy that takes one (each refused with 400)."""
    name = str(RecallQuery.model_config.get("title") or RecallQuery.__name__)
    recall = schemas[name]
    properties = dict(recall["properties"])
    properties["policy"] = {**properties["policy"], "enum": sorted(policies)}
    top = min(HTTP_MAX_LIMIT, settings.recall_max_limit, *(p.depth.max for p in policies.values()))
    properties["limit"] = {**properties["limit"], "maximum": top}
    cued = sorted(name for name, p in policies.items() if p.cue is not None)
    no_cue = {"anyOf": [{"type": "null"}, {"type": "object", "maxProperties": 0}]}
    rule = {"anyOf": [{"properties": {"policy": {"enum": cued}}}, {"properties": {"time_cue": no_cue}}]}
    return {**schemas, name: {**recall, "properties": properties, **rule}}


def _rewrite_refs(node: Any, refs: Mapping[str, str]) -> Any:
    if isinstance(node, dict):
        return {
            key: refs.get(value, value) if key == "$ref" else _rewrite_refs(value, refs)
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [_rewrite_refs(value, refs) for value in node]
    return node


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": _PREFIX + str(model.model_config.get("title") or model.__name__)}


def _operation(op: Operation, settings: Settings, policies: Mapping[str, Policy]) -> dict[str, Any]:
    out: dict[str, Any] = {"summary": op.summary}
    description = _description(op, settings, policies)
    if description:
        out["description"] = description
    out["parameters"] = [*_parameters(op, settings), *_agent_header(op, settings), _REQUEST_ID]
    if op.body is not None:
        body = (
            _ref(op.body) if op.alternative is None else {"oneOf": [_ref(op.body), _ref(op.alternative[0])]}
        )
        out["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
    ok: dict[str, Any] = _ref(op.response) if op.response is not None else {"type": "object"}
    if op.alternative is not None:
        ok = {"oneOf": [ok, _ref(op.alternative[1])]}
    if op.media_type != "application/json":
        ok = {"type": "string"}
    success: dict[str, Any] = {"description": "Success", "content": {op.media_type: {"schema": ok}}}
    links = _links(op)
    if links:
        success["links"] = links
    out["responses"] = {
        "200": success,
        **{
            str(status): {
                "description": _ERROR_TEXT[status],
                "content": {"application/json": {"schema": _ref(ErrorResponse)}},
            }
            for status in _statuses(op)
        },
    }
    return out


# Where an answer leads: the record a write stored can be read, updated (a memory) and deleted by its ref
# and its agent; a profile set can be read and its agent's data deleted. A client (and schemathesis'
# stateful phase) follows these instead of guessing refs that never exist.
_BY_REF = {"ref": "$response.body#/ref", "agent_id": "$request.body#/agent_id"}
_BY_AGENT = {"agent_id": "$request.path.agent_id"}
# An update names its agent in the body.
_SAME_AGENT = {"agent_id": "$request.body#/agent_id"}
_NO_BODY: dict[str, str] = {}
_LINKS: dict[tuple[str, str], tuple[tuple[str, str, str, Mapping[str, str], Mapping[str, str]], ...]] = {
    ("POST", "/v1/encode"): (
        ("GetRecord", "GET", "/v1/records/{ref}", _BY_REF, _NO_BODY),
        ("UpdateMemory", "PATCH", "/v1/encode/{ref}", {"ref": "$response.body#/ref"}, _SAME_AGENT),
        ("DeleteRecord", "DELETE", "/v1/records/{ref}", _BY_REF, _NO_BODY),
    ),
    ("POST", "/v1/encode/raw"): (
        ("GetRecord", "GET", "/v1/records/{ref}", _BY_REF, _NO_BODY),
        ("DeleteRecord", "DELETE", "/v1/records/{ref}", _BY_REF, _NO_BODY),
    ),
    ("POST", "/v1/episodes"): (
        ("GetRecord", "GET", "/v1/records/{ref}", _BY_REF, _NO_BODY),
        ("DeleteRecord", "DELETE", "/v1/records/{ref}", _BY_REF, _NO_BODY),
    ),
    ("PUT", "/v1/profile/{agent_id}"): (
        ("GetProfile", "GET", "/v1/profile/{agent_id}", _BY_AGENT, _NO_BODY),
    ),
}


def _links(op: Operation) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, method, path, parameters, body in _LINKS.get((op.method, op.path), ()):
        pointer = path.replace("~", "~0").replace("/", "~1")
        link = {"operationRef": f"#/paths/{pointer}/{method.lower()}", "parameters": dict(parameters)}
        out[name] = {**link, "requestBody": dict(body)} if body else link
    return out


def _statuses(op: Operation) -> list[int]:
    # Every route may meet the Host check; every route that reads a body, the media-type check and the
    # body's deadline.
    own = {*op.errors, 421, 500} | ({408, 415} if op.body is not None else set())
    if op.path not in OPEN_PATHS:
        # With API keys in force (edges/http/auth.py): no live key, or over its limit; and another
        # agent's scope where the route names an agent, or a key that is no admin's where it needs one.
        own |= {401, 429}
        names_agent = "agent_id" in op.path_params or takes_agent(op.query)
        if names_agent or (op.body is not None and takes_agent(op.body)) or admin_only(op.method, op.path):
            own.add(403)
    return sorted(own)


def _description(op: Operation, settings: Settings, policies: Mapping[str, Policy]) -> str:
    if op.path != "/v1/recall/query":
        return op.description
    return (
        f"{op.description} Policies: {', '.join(sorted(policies))}; the default is "
        f"{settings.recall_policy}, or {settings.recall_cue_policy} with a time cue."
    )


def _agent_header(op: Operation, settings: Settings) -> list[dict[str, Any]]:
    # Offered where the request names an agent; the reading is edges/http/reading.py's.
    if not any(takes_agent(model) for model in (op.body, op.query) if model is not None):
        return []
    return [
        {
            "name": AGENT_HEADER,
            "in": "header",
            "required": False,
            "description": "The agent of a request that names none itself (`agent_id`), as a client "
            "without scopes (the Cerememory SDK) sends it; without either, CPERSONA_DEFAULT_AGENT, else 400",
            "schema": {
                "type": "string",
                "pattern": f"^{AGENT_HEADER_PATTERN}$",
                "maxLength": settings.max_key_length,
            },
        }
    ]


def _parameters(op: Operation, settings: Settings) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    with schema_limits(settings):
        for name, kind in op.path_params.items():
            path_schema = TypeAdapter(kind).json_schema()
            description = path_schema.pop("description", "")
            where = {"name": name, "in": "path", "required": True, "description": description}
            out.append({**where, "schema": path_schema})
        schema = op.query.model_json_schema()
    required = set(schema.get("required", ()))
    for name, prop in schema.get("properties", {}).items():
        prop = dict(prop)
        prop.pop("title", None)
        # An agent the query leaves out is the agent header's, or the default agent (reading.py).
        needed = name in required and not (name == "agent_id" and takes_agent(op.query))
        param: dict[str, Any] = {"name": name, "in": "query", "required": needed}
        if "description" in prop:
            param["description"] = prop.pop("description")
        param["schema"] = _no_null(prop)
        out.append(param)
    return out


def _no_null(schema: dict[str, Any]) -> dict[str, Any]:
    # A query string cannot carry a null: an optional parameter's ``X | None`` is one left out.
    branches = schema.get("anyOf")
    if not isinstance(branches, list):
        return schema
    kept = [branch for branch in branches if branch != {"type": "null"}]
    rest = {key: value for key, value in schema.items() if key != "anyOf"}
    if rest.get("default", 0) is None:
        del rest["default"]
    if len(kept) == 1:
        return {**kept[0], **rest}
    return {**rest, "anyOf": kept}
