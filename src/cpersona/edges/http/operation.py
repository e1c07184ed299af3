"""What one HTTP route is: its method and path, its handler, and the models of its request and answer.

The route table (:mod:`cpersona.edges.http.routes`) is a tuple of these; the app mounts it and the
OpenAPI document is generated from it. The two path convertors let an agent id take the rest of a path
(it may contain ``/`` and, to be refused by name, a newline) and keep a record id from taking the name of
a route beside it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from starlette.convertors import Convertor, register_url_convertor
from starlette.requests import Request
from starlette.responses import Response

from cpersona.model.fields import QueryModel, RequestModel

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["Handler", "NoQuery", "Operation"]

Handler = Callable[[Request], Awaitable[Response]]


class NoQuery(QueryModel):
    """A route that takes no query parameter."""


@dataclasses.dataclass(frozen=True, slots=True)
class Operation:
    """One route: where it is, what it does, and the models of its request and its 200 answer."""

    method: str
    path: str
    handler: Handler
    summary: str
    response: type[BaseModel] | None
    body: type[RequestModel] | None = None
    query: type[QueryModel] = NoQuery
    errors: tuple[int, ...] = (400, 503)
    description: str = ""
    # Path parameters that take the rest of the path (agent ids may contain '/').
    greedy: tuple[str, ...] = ()
    # Each path parameter's type (an annotated field type, with its description): what the engine checks.
    path_params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    # Path parameters that must not take the name of a route beside this one (``/v1/encode/batch``).
    not_a_sibling: tuple[str, ...] = ()
    # A second request shape the same route serves, with its answer (``recall.query`` with a ``cue``);
    # the document shows the body and the answer as one of the two.
    alternative: tuple[type[RequestModel], type[BaseModel]] | None = None
    # What a 200 answer is: JSON for every operation but the trace page (HTML) and its event stream.
    media_type: str = "application/json"

    @property
    def route_path(self) -> str:
        out = self.path
        for name in self.greedy:
            out = out.replace("{" + name + "}", "{" + name + ":" + _REST + "}")
        for name in self.not_a_sibling:
            out = out.replace("{" + name + "}", "{" + name + ":" + _NOT_ENCODE_SIBLING + "}")
        return out


class _Text(Convertor[str]):
    regex = ""

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


class _Rest(_Text):
    # Starlette's own ``path`` stops at a newline (``.`` without DOTALL), which made a request for an
    # agent id with a newline a 404 (no route) instead of the 400 that names the bad character.
    regex = "(?s:.+)"


class _NotEncodeSibling(_Text):
    # Without this, ``PATCH /v1/encode/batch`` is an update of the record "batch" (a 400), not the 405 of
    # a method ``/v1/encode/batch`` does not have.
    regex = "(?!(?:batch|raw)$)[^/]+"


_REST = "cpersona_rest"
_NOT_ENCODE_SIBLING = "cpersona_not_encode_sibling"
register_url_convertor(_REST, _Rest())
register_url_convertor(_NOT_ENCODE_SIBLING, _NotEncodeSibling())
