"""Whose request it is, at the HTTP edge (issue 15, item 8): the ``agent_id`` the request names, else the
``X-Cpersona-Agent`` header, else ``CPERSONA_DEFAULT_AGENT``, else a 400 naming ``agent_id`` — never a
guess. One rule for every route whose model takes an agent (``edges/http/reading.py``).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest
from cerememory import types as cmp
from cerememory._async_client import AsyncCerememoryClient
from hypothesis import given
from hypothesis import strategies as st
from starlette.requests import Request

from cpersona.edges.http.app import create_app, openapi_document
from cpersona.edges.http.reading import AGENT_HEADER, declare_models, json_object, query_params, with_agent
from cpersona.errors import InvalidRequest, InvalidSetting
from cpersona.model.agent_requests import ProfileRequest
from cpersona.model.memory_request import BatchRequest, StoreRequest
from cpersona.model.record_queries import ListQuery, StatsQuery
from cpersona.settings import Settings

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from contextlib import AbstractAsyncContextManager

    import httpx
    from starlette.applications import Starlette

BODY, HEADER, DEFAULT = "body-agent", "header-agent", "default-agent"


def _app(settings: Settings, **changes: Any) -> Starlette:
    return create_app(
        settings.with_(qdrant_url=":memory:", embedding_mode="none", **changes), background=False
    )


@pytest.fixture
async def undefaulted(
    settings: Settings,
    redis: object,
    serve_asgi: Callable[[Starlette], AbstractAsyncContextManager[httpx.AsyncClient]],
) -> AsyncIterator[httpx.AsyncClient]:
    async with serve_asgi(_app(settings)) as c:
        yield c


@pytest.fixture
async def defaulted(
    settings: Settings,
    redis: object,
    serve_asgi: Callable[[Starlette], AbstractAsyncContextManager[httpx.AsyncClient]],
) -> AsyncIterator[httpx.AsyncClient]:
    async with serve_asgi(_app(settings, default_agent=DEFAULT)) as c:
        yield c


async def _owner(client: httpx.AsyncClient, ref: str) -> str | None:
    """The agent whose scope holds ``ref`` (of the three this module writes as), read by ``agent_id``."""
    for agent in (BODY, HEADER, DEFAULT):
        found = await client.get(f"/v1/records/{ref}", params={"agent_id": agent})
        if found.status_code == 200:
            owner: str = found.json()["record"]["agent_id"]
            assert owner == agent
            return owner
    return None


async def test_the_body_names_the_agent_even_beside_the_header(undefaulted: httpx.AsyncClient) -> None:
    stored = await undefaulted.post(
        "/v1/encode", json={"agent_id": BODY, "content": "named in the body"}, headers={AGENT_HEADER: HEADER}
    )
    assert stored.status_code == 200, stored.text
    assert await _owner(undefaulted, stored.json()["ref"]) == BODY


async def test_the_header_names_the_agent_of_bodies_and_query_strings(undefaulted: httpx.AsyncClient) -> None:
    headers = {AGENT_HEADER: HEADER}
    stored = await undefaulted.post("/v1/encode", json={"content": "named by the header"}, headers=headers)
    assert stored.status_code == 200, stored.text
    ref = stored.json()["ref"]
    assert await _owner(undefaulted, ref) == HEADER
    # A query string without agent_id reads as the header's agent too.
    got = await undefaulted.get(f"/v1/records/{ref}", headers=headers)
    assert got.status_code == 200, got.text
    stats = await undefaulted.get("/v1/introspect/stats", headers=headers)
    assert (stats.json()["memories"], stats.json()["total_records"]) == (1, 1)
    elsewhere = await undefaulted.get("/v1/introspect/stats", headers={AGENT_HEADER: "nobody"})
    assert elsewhere.json()["total_records"] == 0


async def test_each_record_of_a_batch_without_an_agent_gets_the_header(
    undefaulted: httpx.AsyncClient,
) -> None:
    records = [{"content": "the header's"}, {"content": "the body's", "agent_id": BODY}]
    stored = await undefaulted.post(
        "/v1/encode/batch", json={"records": records}, headers={AGENT_HEADER: HEADER}
    )
    assert stored.status_code == 200, stored.text
    refs = [r["ref"] for r in stored.json()["results"]]
    assert [await _owner(undefaulted, ref) for ref in refs] == [HEADER, BODY]


async def test_without_body_agent_or_header_the_default_agent_owns_it(defaulted: httpx.AsyncClient) -> None:
    stored = await defaulted.post("/v1/encode", json={"content": "nobody named an agent"})
    assert stored.status_code == 200, stored.text
    assert await _owner(defaulted, stored.json()["ref"]) == DEFAULT
    # The header still comes before the default.
    named = await defaulted.post(
        "/v1/encode", json={"content": "the header did"}, headers={AGENT_HEADER: HEADER}
    )
    assert await _owner(defaulted, named.json()["ref"]) == HEADER


async def test_with_no_agent_anywhere_the_request_is_refused_naming_agent_id(
    undefaulted: httpx.AsyncClient,
) -> None:
    for refused in (
        await undefaulted.post("/v1/encode", json={"content": "whose?"}),
        await undefaulted.get("/v1/records/mem:01900000-0000-7000-8000-000000000000"),
    ):
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["field"] == "agent_id"
    missing = (await undefaulted.post("/v1/encode", json={"content": "whose?"})).json()["message"]
    assert AGENT_HEADER in missing
    assert "CPERSONA_DEFAULT_AGENT" in missing
    # Nothing was stored for anyone.
    assert (await undefaulted.get("/v1/introspect/stats")).json()["total_records"] == 0


async def test_a_route_whose_agent_is_in_its_path_ignores_the_header(undefaulted: httpx.AsyncClient) -> None:
    put = await undefaulted.put(
        f"/v1/profile/{BODY}", json={"profile": "Terse."}, headers={AGENT_HEADER: HEADER}
    )
    assert put.status_code == 200, put.text
    assert put.json()["profile"]["agent_id"] == BODY


async def test_the_sdk_without_a_header_writes_as_the_default_agent(defaulted: httpx.AsyncClient) -> None:
    sdk = AsyncCerememoryClient("http://cpersona.test", http_client=defaulted)
    block = cmp.ContentBlock(modality=cmp.Modality.TEXT, format="text/plain", data=b"the SDK's memory")
    stored = await sdk.encode_store(cmp.EncodeStoreRequest(content=cmp.MemoryContent(blocks=[block])))
    record = await sdk.introspect_record(stored.record_id)
    assert str(record.id) == str(stored.record_id)
    assert await _owner(defaulted, f"mem:{stored.record_id}") == DEFAULT
    # Another agent's header does not see it (with its own http_client the SDK sends no headers= of its
    # own, so the header goes by hand here).
    other = await defaulted.get(f"/v1/introspect/record/{stored.record_id}", headers={AGENT_HEADER: HEADER})
    assert other.status_code == 404, other.text


_agents = st.none() | st.sampled_from([BODY, HEADER, DEFAULT, "x/y"])


@given(body=_agents, header=_agents, default=_agents)
def test_the_agent_is_the_first_named_of_body_header_and_default(
    body: str | None, header: str | None, default: str | None
) -> None:
    # What caller_agent passes on: the header, else the default.
    fallback = header if header is not None else default
    values: dict[str, Any] = {"content": "c"} if body is None else {"content": "c", "agent_id": body}
    expected = body if body is not None else fallback
    if expected is None:
        with pytest.raises(InvalidRequest) as refused:
            with_agent(StoreRequest, values, fallback)
        assert refused.value.field == "agent_id"
    else:
        assert with_agent(StoreRequest, values, fallback)["agent_id"] == expected
    # An optional agent (stats) is filled the same way, and left out when nothing names one.
    stats = with_agent(StatsQuery, {} if body is None else {"agent_id": body}, fallback)
    assert stats.get("agent_id") == expected
    # A model without an agent is never given one.
    assert "agent_id" not in with_agent(ProfileRequest, {"profile": "p"}, fallback)
    # Each record of a batch as if it were alone.
    batch = with_agent(BatchRequest, {"records": [values, {"content": "d"}]}, fallback)
    assert [r.get("agent_id") for r in batch["records"]] == [expected, fallback]


async def test_a_header_beyond_ascii_is_refused_not_read_as_latin_1(undefaulted: httpx.AsyncClient) -> None:
    utf8 = "Jürgen".encode()
    refused = await undefaulted.post(
        "/v1/encode", json={"content": "whose?"}, headers={AGENT_HEADER.encode(): utf8}
    )
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["field"] == AGENT_HEADER.lower()
    # The same agent named in the body is fine.
    stored = await undefaulted.post("/v1/encode", json={"content": "mine", "agent_id": "Jürgen"})
    assert stored.status_code == 200, stored.text
    # A route that takes no agent from the request never reads the header.
    profile = await undefaulted.put(
        "/v1/profile/ann", json={"profile": "Terse."}, headers={AGENT_HEADER.encode(): utf8}
    )
    assert profile.status_code == 200, profile.text


@pytest.mark.parametrize("bad", [" ", "a\nb", "x" * 300])
def test_a_default_agent_no_request_could_use_stops_the_start(bad: str) -> None:
    with pytest.raises(InvalidSetting) as refused:
        Settings.from_env({"CPERSONA_DEFAULT_AGENT": bad})
    assert refused.value.name == "CPERSONA_DEFAULT_AGENT"
    assert Settings.from_env({"CPERSONA_DEFAULT_AGENT": "ops-bot"}).default_agent == "ops-bot"


def test_the_document_offers_the_header_where_a_request_names_an_agent() -> None:
    document = openapi_document()
    offered = {
        (path, method)
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if any(p["name"] == AGENT_HEADER and p["in"] == "header" for p in operation["parameters"])
    }
    assert ("/v1/encode", "post") in offered
    assert ("/v1/encode/batch", "post") in offered
    assert ("/v1/introspect/stats", "get") in offered
    assert ("/v1/introspect/record/{record_id}", "get") in offered
    assert ("/v1/profile/{agent_id}", "put") not in offered
    assert ("/health", "get") not in offered


def _request(body: bytes, headers: dict[str, str]) -> Request:
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/any",
        "query_string": b"limit=3",
        "headers": [(b"content-type", b"application/json")]
        + [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        # What the lifespan puts there, as far as the readers look: the engine's settings.
        "state": {"engine": SimpleNamespace(settings=Settings())},
    }
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return Request(scope, receive)


async def test_a_route_reading_its_body_by_hand_gets_the_agent_too() -> None:
    # How a route in another module reads its request: json_object/query_params, then its model. The
    # app declares each route's models on the request, so the agent is filled in there as well.
    request = _request(b'{"content": "by hand"}', {AGENT_HEADER: HEADER})
    declare_models(request, body=StoreRequest, query=ListQuery)
    assert (await json_object(request, 1000))["agent_id"] == HEADER
    assert query_params(request) == {"limit": "3", "agent_id": HEADER}
    elsewhere = _request(b'{"profile": "Terse."}', {AGENT_HEADER: HEADER})
    declare_models(elsewhere, body=ProfileRequest, query=None)
    assert await json_object(elsewhere, 1000) == {"profile": "Terse."}
    # A request no route declared (a handler called on its own) is read as it came.
    undeclared = _request(b'{"content": "as sent"}', {AGENT_HEADER: HEADER})
    assert await json_object(undeclared, 1000) == {"content": "as sent"}


@pytest.mark.parametrize(
    ("header", "why"),
    [
        ("a" * 257, "at most 256"),
        ("", "visible character"),
        ("   ", "visible character"),
        ("a\tb", "printable"),
    ],
)
async def test_a_header_the_schema_refuses_is_refused_even_beside_a_body_agent(
    undefaulted: httpx.AsyncClient, header: str, why: str
) -> None:
    # The body names the agent, so the header would not be used: it is still the caller's mistake.
    answer = await undefaulted.post(
        "/v1/encode", json={"agent_id": BODY, "content": "x"}, headers={AGENT_HEADER: header}
    )
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["field"] == AGENT_HEADER.lower()
    assert why in answer.json()["error"]["message"]
    listed = await undefaulted.get("/v1/records", params={"agent_id": BODY}, headers={AGENT_HEADER: header})
    assert listed.status_code == 400
