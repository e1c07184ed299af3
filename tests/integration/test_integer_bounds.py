"""Every integer a request may carry has a lower and an upper bound, shown in the OpenAPI document and
held at validation on every route (issue 31, item 4).

An integer beyond what a response can hold (``budget: 2**64``, ``count: 1e30``) once reached the engine
and failed only when its answer was serialised: a 500 over HTTP, a bare JSON-RPC error over MCP. The
document is walked for every integer of every request body and query, and a value just beyond each
bound (or far beyond it) is sent to the real app: a 4xx naming the field, never a 5xx.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from cpersona.edges.http.app import openapi_document
from cpersona.edges.http.openapi import ROUTES
from cpersona.settings import Settings
from test_mcp import call, mcp_client
from test_schema import AGENT, CASES

if TYPE_CHECKING:
    from collections.abc import Iterator

    import httpx

    from cpersona.stores.redis.connection import RedisClient

DOC = openapi_document(Settings())
SCHEMAS: dict[str, Any] = DOC["components"]["schemas"]
_REF = "#/components/schemas/"
# A valid request of a schema that is not its route's usual one (the route's case in test_schema is).
BASES: dict[str, dict[str, Any]] = {"RecallCueRequest": {"agent_id": AGENT, "cue": {"text": "kettle"}}}
# What an object on the way to an integer needs besides it, when the base request does not hold one.
SEEDS: dict[str, dict[str, Any]] = {"TimeCueBody": {"confidence": "likely"}, "AgoBody": {"unit": "days"}}

Place = tuple[str | int, ...]
Found = tuple[Place, tuple[str, ...], dict[str, Any]]
"""An integer's place, the schema names of the objects on the way to it, and its own schema."""
Case = tuple[tuple[str, str], bool, Place, tuple[str, ...], dict[str, Any]]
"""The route, whether the integer is in its body (else its query), and the integer as found."""


def _integers(node: dict[str, Any], at: Place, kinds: tuple[str, ...]) -> Iterator[Found]:
    """Each integer under ``node``."""
    ref = node.get("$ref")
    if ref is not None:
        name = ref.removeprefix(_REF)
        if name in kinds:  # a recursive schema (JSON values) holds no integer of its own
            return
        yield from _integers(SCHEMAS[name], at, (*kinds, name))
        return
    types = node.get("type")
    if types == "integer" or (isinstance(types, list) and "integer" in types):
        yield at, kinds, node
    for branch in (*node.get("anyOf", ()), *node.get("oneOf", ())):
        yield from _integers(branch, at, kinds)
    for name, field in node.get("properties", {}).items():
        yield from _integers(field, (*at, name), kinds)
    if isinstance(node.get("items"), dict):
        yield from _integers(node["items"], (*at, 0), kinds)
    for i, item in enumerate(node.get("prefixItems", ())):
        yield from _integers(item, (*at, i), kinds)


def _request_integers() -> list[Case]:
    """Every integer a request can hold."""
    found: list[Case] = []
    for op in ROUTES:
        documented = DOC["paths"][op.path][op.method.lower()]
        route = (op.method, op.path)
        body = documented.get("requestBody")
        if body is not None:
            for place, kinds, node in _integers(body["content"]["application/json"]["schema"], (), ()):
                found.append((route, True, place, kinds, node))
        for parameter in documented.get("parameters", ()):
            if parameter["in"] == "query":
                for place, kinds, node in _integers(parameter["schema"], (parameter["name"],), ()):
                    found.append((route, False, place, kinds, node))
    return found


INTEGERS = _request_integers()


def _named(place: Place) -> str:
    out = ""
    for part in place:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def _request(route: tuple[str, str], kinds: tuple[str, ...], place: Place, value: object) -> dict[str, Any]:
    """The route's valid request with ``value`` at ``place`` (and what the objects on the way need)."""
    top = kinds[0] if kinds else ""
    body: dict[str, Any] = copy.deepcopy(BASES.get(top) or CASES[route][0])
    holder: Any = body
    for depth, part in enumerate(place[:-1]):
        # kinds[0] is the request's own schema; kinds[depth + 1] is the object this part leads into.
        seed = SEEDS.get(kinds[depth + 1], {}) if depth + 1 < len(kinds) else {}
        if isinstance(part, int):
            while len(holder) <= part:
                holder.append(copy.deepcopy(seed))
        elif not isinstance(holder.get(part), dict | list):
            holder[part] = copy.deepcopy(seed)
        holder = holder[part]
    holder[place[-1]] = value
    return body


def test_the_document_holds_integers_of_requests() -> None:
    # The walk finds what it is for (a nested one too), so the tests below cannot pass on nothing.
    named = {(route[1], _named(place)) for route, _, place, _, _ in INTEGERS}
    assert ("/v1/reconstruct", "budget") in named
    assert ("/v1/reconstruct", "time_cue.ago.value") in named
    assert ("/v1/records", "limit") in named


@pytest.mark.parametrize(
    ("route", "place", "node"),
    [(route, place, node) for route, _, place, _, node in INTEGERS],
    ids=[f"{route[0]} {route[1]} {_named(place)}" for route, _, place, _, _ in INTEGERS],
)
def test_every_integer_of_a_request_has_both_bounds(
    route: tuple[str, str], place: Place, node: dict[str, Any]
) -> None:
    assert isinstance(node.get("minimum"), int), (route, place, node)
    assert isinstance(node.get("maximum"), int), (route, place, node)
    # A bound the document states must be one every JSON reader holds exactly.
    assert -(2**53) < node["minimum"] <= node["maximum"] < 2**53


# How far beyond the bound: just past it, or past what 64 bits or a double hold exactly.
_EXCESS = st.one_of(st.just(1), st.integers(min_value=2, max_value=2**80))


@hsettings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=st.sampled_from(INTEGERS), above=st.booleans(), excess=_EXCESS, as_float=st.booleans())
async def test_an_integer_beyond_its_bound_is_refused_naming_it(
    client: httpx.AsyncClient,
    case: Case,
    above: bool,
    excess: int,
    as_float: bool,
) -> None:
    route, in_body, place, kinds, node = case
    beyond = node["maximum"] + excess if above else node["minimum"] - excess
    method, path = route
    url = path.replace("{ref}", "mem:01900000-0000-7000-8000-000000000000").replace("{agent_id}", AGENT)
    url = url.replace("{record_id}", "01900000-0000-7000-8000-000000000000")
    if in_body:
        # JSON has numbers, not integers: 1e30 is as much an integer to the caller as its digits.
        value: object = float(beyond) if as_float else beyond
        response = await client.request(method, url, json=_request(route, kinds, place, value))
    else:
        response = await client.request(method, url, params={**CASES[route][0], _named(place): str(beyond)})
    assert 400 <= response.status_code < 500, (route, place, beyond, response.text)
    assert response.json()["error"]["field"] == _named(place), (route, place, beyond, response.text)


@pytest.mark.parametrize(
    ("field", "value"),
    [("budget", 18446744073709551616), ("budget", 1e30), ("count", 2**70), ("count", -(2**70))],
)
async def test_reconstruct_refuses_an_integer_past_its_bound_on_every_edge(
    client: httpx.AsyncClient, settings: Settings, redis: RedisClient, field: str, value: object
) -> None:
    body = {"agent_id": AGENT, "query": "keys", field: value}
    response = await client.post("/v1/reconstruct", json=body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["field"] == field
    async with mcp_client(settings) as mcp:
        answer, failed = await call(mcp, "reconstruct", body)
    assert failed
    assert (answer["error"]["code"], answer["error"]["field"]) == ("VALIDATION_ERROR", field)
