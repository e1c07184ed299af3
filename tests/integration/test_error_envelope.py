"""The error envelope speaks both protocols (issue 15, item 8): CPersona's ``ok``/``error`` and, beside it,
Cerememory's top-level ``code``/``message``/``details``/``retry_after``/``request_id`` (CMP §1.1), which the
Cerememory SDK turns into its typed exceptions. Every response carries ``x-request-id`` (CMP §1.2).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx
import pytest
from cerememory import errors as cmp_errors
from cerememory._transport import _parse_cmp_error
from hypothesis import given
from hypothesis import strategies as st

from cpersona.edges.http.app import create_app
from cpersona.edges.http.errors import NotImplementedHere, _error_response, error_envelope
from cpersona.errors import (
    ContentTooLarge,
    CpersonaError,
    EngineClosed,
    InsufficientStorage,
    InvalidRequest,
    RecordNotFound,
    RedisUnavailable,
)
from cpersona.model.responses import ErrorResponse

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from contextlib import AbstractAsyncContextManager

    from starlette.applications import Starlette

    from cpersona.settings import Settings

AGENT = "envelope-agent"
MISSING = "mem:01900000-0000-7000-8000-000000000000"


@pytest.fixture
async def capped_client(
    settings: Settings,
    redis: object,
    serve_asgi: Callable[[Starlette], AbstractAsyncContextManager[httpx.AsyncClient]],
) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(
        settings.with_(qdrant_url=":memory:", embedding_mode="none"), max_body_bytes=4096, background=False
    )
    async with serve_asgi(app) as c:
        yield c


def _sdk_error(response: httpx.Response) -> cmp_errors.CerememoryError:
    """What the SDK raises for this answer (its own parser, as its transport calls it)."""
    return _parse_cmp_error(response)


def _both_shapes_agree(response: httpx.Response) -> dict[str, Any]:
    body: dict[str, Any] = response.json()
    ErrorResponse.model_validate(body)
    assert body["ok"] is False
    assert (body["code"], body["message"]) == (body["error"]["code"], body["error"]["message"])
    field = body["error"]["field"]
    assert body["details"] == (None if field is None else {"field": field})
    assert body["request_id"] == response.headers["x-request-id"]
    return body


@given(
    code=st.from_regex(r"[A-Z][A-Z_]{0,30}", fullmatch=True),
    message=st.text(max_size=80),
    field=st.none() | st.text(min_size=1, max_size=20),
    request_id=st.none() | st.text(min_size=1, max_size=40),
    retry_after=st.none() | st.integers(min_value=0, max_value=3600),
)
def test_the_envelope_always_says_the_same_in_both_shapes(
    code: str, message: str, field: str | None, request_id: str | None, retry_after: int | None
) -> None:
    body = error_envelope(code, message, field, request_id, retry_after=retry_after)
    ErrorResponse.model_validate(body)
    assert body["error"] == {"code": code, "message": message, "field": field}
    assert (body["code"], body["message"], body["request_id"], body["retry_after"]) == (
        code,
        message,
        request_id,
        retry_after,
    )
    assert body["details"] == (None if field is None else {"field": field})


# Each refusal the HTTP edge answers, and the exception the SDK makes of it: a CMP code its subclass, one
# CMP has not its base class with our code (never InternalError, which says the server failed).
async def test_every_refusal_becomes_the_sdk_exception_of_its_code(capped_client: httpx.AsyncClient) -> None:
    base, validation = cmp_errors.CerememoryError, cmp_errors.ValidationError
    cases: list[tuple[httpx.Response, int, str, type[cmp_errors.CerememoryError]]] = [
        (await capped_client.post("/v1/encode", json={"content": "x"}), 400, "VALIDATION_ERROR", validation),
        (
            await capped_client.post("/v1/encode", json={"agent_id": AGENT, "content": "x" * 5000}),
            413,
            "CONTENT_TOO_LARGE",
            cmp_errors.ContentTooLargeError,
        ),
        (
            await capped_client.get(f"/v1/introspect/record/{MISSING}", params={"agent_id": AGENT}),
            404,
            "RECORD_NOT_FOUND",
            cmp_errors.RecordNotFoundError,
        ),
        (
            await capped_client.delete(f"/v1/agents/{AGENT}"),
            400,
            "FORGET_UNCONFIRMED",
            cmp_errors.ForgetUnconfirmedError,
        ),
        (await capped_client.get("/v1/no-such-route"), 404, "NOT_FOUND", base),
        (await capped_client.put("/v1/encode", json={}), 405, "METHOD_NOT_ALLOWED", base),
        (
            await capped_client.post("/v1/encode", content=b"{}", headers={"content-type": "text/plain"}),
            415,
            "UNSUPPORTED_MEDIA_TYPE",
            base,
        ),
        (await capped_client.get("/v1/introspect/evolution"), 501, "NOT_IMPLEMENTED", base),
        (
            await capped_client.put("/v1/lifecycle/mode", json={"mode": "perfect"}),
            501,
            "NOT_IMPLEMENTED",
            base,
        ),
    ]
    for response, status, code, kind in cases:
        assert response.status_code == status, response.text
        _both_shapes_agree(response)
        raised = _sdk_error(response)
        assert type(raised) is kind, (code, type(raised))
        assert (raised.code, raised.status_code) == (code, status)
        assert raised.request_id == response.headers["x-request-id"]
        assert raised.message == response.json()["error"]["message"]


async def test_a_request_id_the_caller_sent_is_the_one_in_the_error(capped_client: httpx.AsyncClient) -> None:
    mine = "req-1234"
    refused = await capped_client.post("/v1/encode", json={"content": "x"}, headers={"x-request-id": mine})
    assert refused.headers["x-request-id"] == mine
    assert _both_shapes_agree(refused)["request_id"] == mine
    assert _sdk_error(refused).request_id == mine
    # Without one, every answer (a success too) gets a fresh id.
    first, second = await capped_client.get("/readiness"), await capped_client.get("/readiness")
    assert first.status_code == 200, first.text
    assert first.headers["x-request-id"] != second.headers["x-request-id"]


@pytest.mark.parametrize(
    ("error", "status", "code", "retry_after"),
    [
        (RedisUnavailable("loading the dataset", code="REDIS_LOADING"), 503, "REDIS_LOADING", 1),
        (RedisUnavailable("busy", code="REDIS_BUSY"), 503, "REDIS_BUSY", 1),
        (RedisUnavailable("WAITAOF timed out", code="REDIS_NOT_DURABLE"), 503, "REDIS_NOT_DURABLE", 1),
        (RedisUnavailable("connection refused"), 503, "BACKEND_UNAVAILABLE", None),
        (InsufficientStorage("redis", 10, 256), 507, "INSUFFICIENT_STORAGE", None),
        (InvalidRequest("limit", "must be at least 1"), 400, "VALIDATION_ERROR", None),
        (ContentTooLarge("content", "is too long"), 413, "CONTENT_TOO_LARGE", None),
        (RecordNotFound(MISSING), 404, "RECORD_NOT_FOUND", None),
        (NotImplementedHere("lifecycle.dream_tick", "no summariser"), 501, "NOT_IMPLEMENTED", None),
    ],
)
def test_a_refusal_that_ends_by_itself_says_when_to_retry(
    error: CpersonaError, status: int, code: str, retry_after: int | None
) -> None:
    answer = _error_response(error, "rid")
    response = httpx.Response(answer.status_code, content=bytes(answer.body), headers=dict(answer.headers))
    body = response.json()
    ErrorResponse.model_validate(body)
    assert (response.status_code, body["code"], body["retry_after"]) == (status, code, retry_after)
    assert response.headers.get("retry-after") == (None if retry_after is None else str(retry_after))
    raised = _sdk_error(response)
    assert (raised.code, raised.retry_after, raised.request_id) == (code, retry_after, "rid")
    assert not isinstance(raised, cmp_errors.InternalError)


def test_only_a_server_fault_reads_as_the_sdk_internal_error() -> None:
    fault = _error_response(EngineClosed(), "rid")
    response = httpx.Response(fault.status_code, content=bytes(fault.body))
    assert response.status_code == 500
    assert "async with" not in response.text
    assert type(_sdk_error(response)) is cmp_errors.InternalError
