"""What one MCP tool is: its name, the request model its arguments are read into, the engine call it
makes, and the hints a client may act on.

A tool's arguments are the request model of the HTTP route that does the same thing (model/…), so the
two edges validate alike and a tool's input schema is that model's JSON schema. A route that reads part
of its request from its path (the record's ref, the agent of a profile) has a tool model that is the
route's model with those path parameters added as fields, of the very types the route checks them as
(:func:`route_arguments`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import create_model

from cpersona.edges.http.routes import OPERATIONS
from cpersona.edges.mcp.schema import compact
from cpersona.engine.facade import Engine
from cpersona.model.fields import RequestModel, schema_limits

if TYPE_CHECKING:
    from cpersona.errors import InvalidRequest
    from cpersona.settings import Settings

__all__ = ["Tool", "ToolCall", "acting_agents", "fixed", "input_schema", "route_arguments", "with_fields"]

_M = TypeVar("_M", bound=RequestModel)

ToolCall = Callable[[Engine, Any, "str | None"], Awaitable[Mapping[str, Any]]]
"""A tool's work: the engine's service given the validated request, answered as the route's JSON. The
third argument is the call's request id (the HTTP request's ``x-request-id``, or the fresh one the app
gave it; ``None`` over stdio), which only a tool that needs one reads."""


@dataclasses.dataclass(frozen=True, slots=True)
class Tool:
    """One tool: its name, the model its arguments are, its call, and the hints of what it does."""

    name: str
    model: type[RequestModel]
    call: ToolCall
    description: str
    # The MCP hints (ToolAnnotations). A client may ask before a destructive call or retry an idempotent
    # one on its own, so each says only what the engine really does.
    read_only: bool
    destructive: bool = False
    idempotent: bool = False
    # What a failure answers beside ``error``: the reference's empty result lists (a caller that reads
    # them without looking at ``ok`` sees nothing rather than a missing key).
    empty: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    # What a bad argument is refused as, when the route refuses it with a code of its own.
    refine: Callable[[InvalidRequest], InvalidRequest] | None = None
    # Whether a null argument means something of its own (a field of update_memory given as null is
    # reset), so that the schema offers it; elsewhere null is the same as leaving the field out.
    nulls: bool = False


def with_fields(base: type[_M], name: str, fields: Mapping[str, Any]) -> type[_M]:
    """``base`` plus the required fields ``fields`` (name to annotated type), as the model ``name``.

    The tool form of a route that reads those fields from its path: the same types, checked the same."""
    created: type[_M] = create_model(  # type: ignore[call-overload]
        name, __base__=base, __module__=__name__, **{key: (kind, ...) for key, kind in fields.items()}
    )
    return created


def route_arguments(method: str, path: str, name: str) -> type[RequestModel]:
    """The arguments of the HTTP route ``method path``: its body (or query) model, plus its path
    parameters as fields of the types the route checks them as (the model ``name``)."""
    op = next(op for op in OPERATIONS if (op.method, op.path) == (method, path))
    base: type[RequestModel] = op.body if op.body is not None else op.query
    return with_fields(base, name, op.path_params) if op.path_params else base


def fixed(base: type[_M], name: str, field: str, value: str) -> type[_M]:
    """``base`` whose ``field`` can only be ``value`` (its default): ``list_episodes`` is the list route
    with ``kind`` fixed to ``episode``."""
    created: type[_M] = create_model(  # type: ignore[call-overload]
        name, __base__=base, __module__=__name__, **{field: (Literal[value], value)}
    )
    return created


def input_schema(tool: Tool, settings: Settings) -> dict[str, Any]:
    """The tool model's JSON schema with the limits the server runs with (as the OpenAPI document shows),
    compacted for an agent's context (:func:`~cpersona.edges.mcp.schema.compact`)."""
    with schema_limits(settings):
        schema = tool.model.model_json_schema()
    return compact(schema, key_length=settings.max_key_length, nulls=tool.nulls)


def acting_agents(request: RequestModel) -> tuple[str | None, ...]:
    """The agents a request acts for: its ``agent_id`` (``None``: every agent, as stats may ask), each
    record's of a batch, or none at all (health)."""
    fields = type(request).model_fields
    if "agent_id" in fields:
        return (getattr(request, "agent_id", None),)
    records = getattr(request, "records", None) if "records" in fields else None
    if records is not None:
        return tuple(dict.fromkeys(getattr(record, "agent_id", None) for record in records))
    return ()
