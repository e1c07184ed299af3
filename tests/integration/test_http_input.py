"""Browser and bad-input hardening at the HTTP edge.

A web page may not write memories with a cross-site "simple" POST (bodies must be ``application/json``),
nor read them through DNS rebinding (a server bound to loopback answers only to a loopback Host); a body
says each key once; ids hold no control characters; the body limit is a setting and nothing past it is
read; query-string integers are ASCII digits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx
import pytest

from cpersona.edges.http.app import create_app, openapi_document
from test_http import assert_error as assert_envelope

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from contextlib import AbstractAsyncContextManager

    from starlette.applications import Starlette

    from cpersona.settings import Settings
    from cpersona.stores.redis.connection import RedisClient

AGENT = "agent-input"
PORT = 8123


@pytest.fixture
def input_settings(settings: Settings, redis: RedisClient) -> Settings:
    return settings.with_(qdrant_url=":memory:", embedding_mode="none", max_body_bytes=4096, port=PORT)


@pytest.fixture
async def input_client(
    input_settings: Settings,
    serve_asgi: Callable[[Starlette], AbstractAsyncContextManager[httpx.AsyncClient]],
) -> AsyncIterator[httpx.AsyncClient]:
    async with serve_asgi(create_app(input_settings, background=False)) as c:
        yield c


def assert_error(response: httpx.Response, status: int, code: str, field: str | None) -> str:
    """The envelope check of test_http, returning the error's message."""
    message: str = assert_envelope(response, status, code, field)["error"]["message"]
    return message


# ------------------------------------------------------------------------------------- media type


@pytest.mark.parametrize(
    "content_type",
    [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "json"],
)
async def test_a_body_that_is_not_application_json_is_415(
    input_client: httpx.AsyncClient, content_type: str | None
) -> None:
    headers = {} if content_type is None else {"content-type": content_type}
    body = b'{"agent_id": "a", "content": "x"}'
    response = await input_client.post("/v1/encode", content=body, headers=headers)
    message = assert_error(response, 415, "UNSUPPORTED_MEDIA_TYPE", "content-type")
    assert "application/json" in message
    listed = await input_client.get("/v1/records", params={"agent_id": "a"})
    assert listed.json()["records"] == []


@pytest.mark.parametrize("content_type", ["application/json", "Application/JSON; charset=utf-8"])
async def test_application_json_with_or_without_parameters_is_read(
    input_client: httpx.AsyncClient, content_type: str
) -> None:
    body = b'{"agent_id": "a", "content": "x"}'
    response = await input_client.post("/v1/encode", content=body, headers={"content-type": content_type})
    assert response.status_code == 200, response.text


# -------------------------------------------------------------------------------------- host check


@pytest.fixture
async def loopback(
    input_settings: Settings,
    serve_asgi: Callable[[Starlette], AbstractAsyncContextManager[httpx.AsyncClient]],
) -> AsyncIterator[httpx.AsyncClient]:
    # The request arrives on the loopback address the server is bound to, as uvicorn reports it.
    async with serve_asgi(create_app(input_settings, background=False)) as c:
        c.base_url = httpx.URL(f"http://127.0.0.1:{PORT}")
        yield c


@pytest.mark.parametrize(
    "host", [f"localhost:{PORT}", f"127.0.0.1:{PORT}", f"[::1]:{PORT}", f"LOCALHOST:{PORT}"]
)
async def test_a_loopback_host_with_the_port_is_served(loopback: httpx.AsyncClient, host: str) -> None:
    response = await loopback.get("/health", headers={"host": host})
    assert response.status_code == 200, response.text


@pytest.mark.parametrize(
    "host",
    ["attacker.example", f"attacker.example:{PORT}", "localhost", "localhost:9999", f"127.0.0.2:{PORT}"],
)
async def test_another_host_is_refused_when_bound_to_loopback(loopback: httpx.AsyncClient, host: str) -> None:
    for response in (
        await loopback.get("/health", headers={"host": host}),
        await loopback.post("/v1/encode", json={"agent_id": "a", "content": "x"}, headers={"host": host}),
    ):
        message = assert_error(response, 421, "HOST_NOT_ALLOWED", "host")
        assert f"localhost:{PORT}" in message
    assert (await loopback.get("/v1/records", params={"agent_id": "a"})).json()["records"] == []


async def test_a_server_on_another_loopback_address_answers_to_it(
    input_settings: Settings,
    serve_asgi: Callable[[Starlette], AbstractAsyncContextManager[httpx.AsyncClient]],
) -> None:
    async with serve_asgi(create_app(input_settings.with_(host="127.0.0.2"), background=False)) as c:
        c.base_url = httpx.URL(f"http://127.0.0.2:{PORT}")
        assert (await c.get("/health")).status_code == 200
        assert (await c.get("/health", headers={"host": f"localhost:{PORT}"})).status_code == 200
        refused = await c.get("/health", headers={"host": f"127.0.0.3:{PORT}"})
        assert_error(refused, 421, "HOST_NOT_ALLOWED", "host")


async def test_any_host_is_served_when_bound_to_every_interface(
    input_settings: Settings,
    serve_asgi: Callable[[Starlette], AbstractAsyncContextManager[httpx.AsyncClient]],
) -> None:
    async with serve_asgi(create_app(input_settings.with_(host="0.0.0.0"), background=False)) as c:
        c.base_url = httpx.URL(f"http://127.0.0.1:{PORT}")
        response = await c.get("/health", headers={"host": f"memory.internal:{PORT}"})
        assert response.status_code == 200, response.text


# ----------------------------------------------------------------------------------- duplicate keys


@pytest.mark.parametrize(
    ("body", "key"),
    [
        (b'{"agent_id": "bi", "agent_id": "bob", "content": "x"}', "agent_id"),
        (b'{"agent_id": "bi", "content": "x", "metadata": {"k": 1, "k": 2}}', "k"),
        (b'{"records": [{"agent_id": "bi", "content": "x", "content": "y"}]}', "content"),
    ],
)
async def test_a_key_given_twice_is_refused_naming_it(
    input_client: httpx.AsyncClient, body: bytes, key: str
) -> None:
    url = "/v1/encode/batch" if body.startswith(b'{"records"') else "/v1/encode"
    response = await input_client.post(url, content=body, headers={"content-type": "application/json"})
    message = assert_error(response, 400, "VALIDATION_ERROR", key)
    assert "more than once" in message
    for agent in ("bi", "bob"):
        assert (await input_client.get("/v1/records", params={"agent_id": agent})).json()["records"] == []


@pytest.mark.parametrize("depth", [1000, 1023])
async def test_a_body_nested_too_deeply_for_the_repeat_check_is_400(
    input_client: httpx.AsyncClient, depth: int
) -> None:
    body = b'{"agent_id": "a", "content": "x", "metadata": {"k": ' + b"[" * depth + b"]" * depth + b"}}"
    response = await input_client.post(
        "/v1/encode", content=body, headers={"content-type": "application/json"}
    )
    assert_error(response, 400, "VALIDATION_ERROR", "body")


# --------------------------------------------------------------------------------- ids and controls


@pytest.mark.parametrize("bad", ["a\x00b", "a\nb", "a\tb", "a\x1bb", "a\x7fb", "a\x85b"])
@pytest.mark.parametrize("field", ["agent_id", "project_id", "channel", "id", "msg_id", "source.id"])
async def test_a_control_character_in_an_id_is_refused(
    input_client: httpx.AsyncClient, bad: str, field: str
) -> None:
    outer, _, inner = field.partition(".")
    value: object = {inner: bad} if inner else bad
    response = await input_client.post("/v1/encode", json={"agent_id": AGENT, "content": "x", outer: value})
    message = assert_error(response, 400, "VALIDATION_ERROR", field)
    assert "control character" in message


@pytest.mark.parametrize(
    ("url", "body", "field"),
    [
        ("/v1/encode/raw", {"session_id": "s\x00"}, "session_id"),
        ("/v1/episodes", {"summary": "s", "channel": "c\x00"}, "channel"),
    ],
)
async def test_a_control_character_in_another_write_is_refused(
    input_client: httpx.AsyncClient, url: str, body: dict[str, Any], field: str
) -> None:
    raw = {"content": "user: hi", "session_id": "s1", "source": "conversation", "speaker": "user"}
    base = {"agent_id": AGENT, **(raw if url.endswith("raw") else {})}
    response = await input_client.post(url, json={**base, **body})
    assert_error(response, 400, "VALIDATION_ERROR", field)


async def test_a_control_character_in_an_id_on_a_read_is_refused(input_client: httpx.AsyncClient) -> None:
    read = await input_client.get("/v1/records", params={"agent_id": "a\x00b"})
    assert_error(read, 400, "VALIDATION_ERROR", "agent_id")
    recall = await input_client.post("/v1/recall/query", json={"agent_id": "a\x00b", "query": "x"})
    assert_error(recall, 400, "VALIDATION_ERROR", "agent_id")
    profile = await input_client.put("/v1/profile/a%00b", json={"profile": "x"})
    assert_error(profile, 400, "VALIDATION_ERROR", "agent_id")


async def test_the_schema_says_ids_hold_no_control_character(input_settings: Settings) -> None:
    props = openapi_document(input_settings)["components"]["schemas"]["EncodeRequest"]["properties"]
    no_control = "[^\\u0000-\\u001f\\u007f-\\u009f]"
    assert props["project_id"]["pattern"] == f"^{no_control}*$"
    # An agent id is not blank either: one character that is no space, and no control anywhere.
    spaces = "\\u0020\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000"
    not_space = f"[^\\u0000-\\u001f\\u007f-\\u009f{spaces}]"
    assert props["agent_id"]["pattern"] == f"^{no_control}*{not_space}{no_control}*$"


# -------------------------------------------------------------------------------------- body limit


async def test_the_body_limit_is_the_setting(input_client: httpx.AsyncClient) -> None:
    small = await input_client.post("/v1/encode", json={"agent_id": AGENT, "content": "x" * 100})
    assert small.status_code == 200, small.text
    big = await input_client.post(
        "/v1/encode/batch", json={"records": [{"agent_id": AGENT, "content": "x" * 5000}]}
    )
    message = assert_error(big, 413, "CONTENT_TOO_LARGE", "body")
    assert "4096" in message


async def test_nothing_past_the_limit_is_read(input_client: httpx.AsyncClient) -> None:
    sent = 0

    async def chunks() -> AsyncIterator[bytes]:
        nonlocal sent
        yield b'{"records": ['
        for _ in range(1000):  # 1 MB in all, far past the 4096-byte limit
            sent += 1
            yield b" " * 1000

    response = await input_client.post(
        "/v1/encode/batch", content=chunks(), headers={"content-type": "application/json"}
    )
    assert_error(response, 413, "CONTENT_TOO_LARGE", "body")
    assert sent <= 6


# --------------------------------------------------------------------------------- query integers


@pytest.mark.parametrize("limit", [" 5", "5 ", "+5", "\u0665", "\uff15", "5_0", "0x5", "5.0", ""])
async def test_a_query_integer_is_ascii_digits_only(input_client: httpx.AsyncClient, limit: str) -> None:
    response = await input_client.get("/v1/records", params={"agent_id": AGENT, "limit": limit})
    assert_error(response, 400, "VALIDATION_ERROR", "limit")


async def test_a_query_integer_in_digits_is_read(input_client: httpx.AsyncClient) -> None:
    response = await input_client.get("/v1/records", params={"agent_id": AGENT, "limit": "007"})
    assert response.status_code == 200, response.text


# ------------------------------------------------------------------------------------------ content


@pytest.mark.parametrize("content", [42, 4.5, True, None, ["x"]])
async def test_content_of_another_type_says_string_or_object(
    input_client: httpx.AsyncClient, content: object
) -> None:
    response = await input_client.post("/v1/encode", json={"agent_id": AGENT, "content": content})
    message = assert_error(response, 400, "VALIDATION_ERROR", "content")
    assert "must be a string or an object" in message


async def test_the_schema_documents_the_media_type_and_host_answers(input_settings: Settings) -> None:
    for path, item in openapi_document(input_settings)["paths"].items():
        for method, op in item.items():
            assert "421" in op["responses"], (method, path)
            assert ("415" in op["responses"]) == ("requestBody" in op), (method, path)


# ---------------------------------------------------------------------------------- error wording


async def test_a_whole_number_too_large_to_read_exactly_is_not_echoed_rounded(
    input_client: httpx.AsyncClient,
) -> None:
    # 1e23 is a float: read as an integer it would be 99999999999999991611392, which the caller never sent.
    body = b'{"agent_id": "a", "query": "x", "limit": 1e23}'
    response = await input_client.post(
        "/v1/recall/query", content=body, headers={"content-type": "application/json"}
    )
    message = assert_error(response, 400, "VALIDATION_ERROR", "limit")
    assert str(int(1e23)) not in response.text, message


async def test_a_bad_record_id_is_refused_in_words(input_client: httpx.AsyncClient) -> None:
    response = await input_client.post("/v1/recall/graph", json={"agent_id": "a", "center_id": "nope"})
    message = assert_error(response, 400, "VALIDATION_ERROR", "center_id")
    assert "UUID" in message
    assert "[0-9a-fA-F]" not in message
