"""The HTTP API, end to end against the real engine (the session's Redis, in-memory Qdrant).

Each test runs the app the way uvicorn does: the ASGI lifespan opens the engine and its state is handed
to every request, and httpx talks to the app in-process. Most tests run without an embedder (fast);
``test_onnx_embedder_embeds_what_the_api_stores`` uses the default ONNX model.
"""

from __future__ import annotations

import contextlib
import re
import time
import uuid
from typing import TYPE_CHECKING, Any

import anyio
import httpx
import pytest
from benchmarks.in_process import with_state
from starlette.types import Message

from cpersona.edges.http.app import create_app, openapi_document
from cpersona.engine.reads import ReadService
from cpersona.stores.redis.server import EmbeddedRedis

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from contextlib import AbstractAsyncContextManager
    from pathlib import Path

    from starlette.applications import Starlette

    from cpersona.settings import Settings
    from cpersona.stores.redis.connection import RedisClient

AGENT = "agent-a"
MISSING_REF = "mem:01900000-0000-7000-8000-000000000000"


@contextlib.asynccontextmanager
async def serving(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    """Run ``app``'s ASGI lifespan, give each request a copy of its state, and yield a client.

    This is what uvicorn does; use it inside a test body (it holds a task group).
    """
    state: dict[str, Any] = {}
    to_app, app_inbox = anyio.create_memory_object_stream[Message](1)
    app_outbox, from_app = anyio.create_memory_object_stream[Message](1)
    lifespan_scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": state}

    async with to_app, app_inbox, app_outbox, from_app, anyio.create_task_group() as tg:
        tg.start_soon(app, lifespan_scope, app_inbox.receive, app_outbox.send)
        await to_app.send({"type": "lifespan.startup"})
        started = await from_app.receive()
        assert started["type"] == "lifespan.startup.complete", started
        try:
            # The lifespan has filled ``state`` by now; each request gets a copy.
            transport = httpx.ASGITransport(app=with_state(app, state))
            async with httpx.AsyncClient(transport=transport, base_url="http://cpersona.test") as client:
                yield client
        finally:
            await to_app.send({"type": "lifespan.shutdown"})
            stopped = await from_app.receive()
            assert stopped["type"] == "lifespan.shutdown.complete", stopped


@pytest.fixture
def http_settings(settings: Settings, redis: RedisClient) -> Settings:
    # ``redis`` is requested so that this test's keys and indexes are dropped when it ends.
    return settings.with_(qdrant_url=":memory:", embedding_mode="none", max_content_length=200)


@pytest.fixture
async def http_client(
    http_settings: Settings,
    serve_asgi: Callable[[Starlette], AbstractAsyncContextManager[httpx.AsyncClient]],
) -> AsyncIterator[httpx.AsyncClient]:
    # pytest-asyncio sets a fixture up and tears it down in different tasks, so this fixture cannot
    # hold the task group that ``serving`` runs the ASGI lifespan in (see ``serve_asgi``).
    async with serve_asgi(create_app(http_settings, max_body_bytes=4096, background=False)) as c:
        yield c


# The top-level fields of Cerememory's envelope (CMP §1.1) that every error carries beside ours.
CMP_ENVELOPE = ("code", "message", "details", "retry_after")


def assert_error(response: httpx.Response, status: int, code: str, field: str | None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert body["ok"] is False
    assert set(body) == {"ok", "error", "request_id", *CMP_ENVELOPE}
    assert body["error"]["code"] == code, body
    assert body["error"]["field"] == field, body
    assert body["error"]["message"]
    # Cerememory's envelope beside ours says the same.
    assert (body["code"], body["message"]) == (code, body["error"]["message"])
    assert body["details"] == (None if field is None else {"field": field})
    assert body["request_id"] == response.headers["x-request-id"]
    return body


async def encode(
    client: httpx.AsyncClient, content: object = "the deploy key rotates on Fridays", **fields: Any
) -> Any:
    response = await client.post("/v1/encode", json={"content": content, "agent_id": AGENT, **fields})
    assert response.status_code == 200, response.text
    return response.json()


# ------------------------------------------------------------------------------------ health and docs


async def test_health_names_redis_version_and_modules(http_client: httpx.AsyncClient) -> None:
    response = await http_client.get("/health")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["ok"] is True
    assert body["status"] == "ok"
    assert re.fullmatch(r"\d+\.\d+\.\d+", body["redis"]["version"])
    assert {"search", "ReJSON"} <= set(body["redis"]["modules"])
    assert body["embedder"] is None


async def test_health_is_503_when_redis_stops_answering(tmp_path: Path, http_settings: Settings) -> None:
    server = EmbeddedRedis(http_settings.with_(data_dir=tmp_path / "own-redis"))
    await server.__aenter__()
    running = True
    try:
        settings = http_settings.with_(redis_url=server.url, redis_timeout_secs=1.0)
        async with serving(create_app(settings)) as client:
            assert (await client.get("/health")).status_code == 200
            await server.__aexit__(None, None, None)
            running = False
            response = await client.get("/health")
            body = assert_error(response, 503, "BACKEND_UNAVAILABLE", None)
            assert "redis" in body["error"]["message"]
    finally:
        if running:
            await server.__aexit__(None, None, None)


async def test_openapi_describes_every_route(http_settings: Settings) -> None:
    app = create_app(http_settings)
    document = openapi_document()
    assert document["openapi"].startswith("3.1")
    routed: set[tuple[str, str]] = set()
    for route in app.routes:
        path = re.sub(r"\{(\w+):\w+\}", r"{\1}", route.path)  # type: ignore[attr-defined]
        for method in route.methods - {"HEAD"}:  # type: ignore[attr-defined]
            routed.add((path, method.lower()))
    documented = {(path, method) for path, item in document["paths"].items() for method in item}
    assert routed == documented
    for path, method in routed:
        op = document["paths"][path][method]
        assert op["responses"]["500"]["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/Error"
        }
    error = document["components"]["schemas"]["Error"]
    assert set(error["required"]) == {"ok", "error", "request_id", *CMP_ENVELOPE}
    # Every $ref points at a schema that exists.
    refs: set[str] = set()

    def collect(node: object) -> None:
        if isinstance(node, dict):
            if "$ref" in node:
                refs.add(node["$ref"].removeprefix("#/components/schemas/"))
            for value in node.values():
                collect(value)
        elif isinstance(node, list):
            for value in node:
                collect(value)

    collect(document)
    assert refs
    assert refs <= set(document["components"]["schemas"])


async def test_openapi_is_served(http_client: httpx.AsyncClient, http_settings: Settings) -> None:
    response = await http_client.get("/openapi.json")
    assert response.status_code == 200
    # The served document shows the server's own limits (this app's content limit is 200).
    assert response.json() == openapi_document(http_settings)
    content = response.json()["components"]["schemas"]["EncodeRequest"]["properties"]["content"]
    assert '"maxLength": 200' in str(content).replace("'", '"')


# ------------------------------------------------------------------------------------------- encode


async def test_encode_plain_text_then_read_it_back(http_client: httpx.AsyncClient) -> None:
    stored = await encode(http_client, project_id="p1", channel="c1", metadata={"timestamp": 5}, id="m-1")
    assert stored["ok"] is True
    assert stored["result"] == "stored"
    assert stored["embedded"] is False
    assert stored["ref"] == f"mem:{stored['record_id']}"
    assert stored["id"] == "m-1"

    response = await http_client.get(f"/v1/records/{stored['ref']}", params={"agent_id": AGENT})
    assert response.status_code == 200
    record = response.json()["record"]
    assert record["ref"] == stored["ref"]
    assert record["kind"] == "memory"
    assert (record["agent_id"], record["project_id"], record["channel"]) == (AGENT, "p1", "c1")
    assert record["content"] == "the deploy key rotates on Fridays"
    assert record["msg_id"] == "m-1"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", record["timestamp"])
    assert record["created_at"].endswith("Z")
    assert record["fidelity"]["last_accessed_at"].endswith("Z")
    # Caller metadata is returned as given, never reinterpreted as a time.
    assert record["metadata"] == {"timestamp": 5}

    listed = (await http_client.get("/v1/records", params={"agent_id": AGENT, "project_id": "p1"})).json()
    assert listed["ok"] is True
    assert [r["ref"] for r in listed["records"]] == [stored["ref"]]
    assert listed["count"] == 1
    stats = (await http_client.get("/v1/introspect/stats", params={"agent_id": AGENT})).json()
    assert stats["ok"] is True
    assert stats["memories"] == 1


async def test_encode_accepts_cerememory_memory_content(http_client: httpx.AsyncClient) -> None:
    content = {"blocks": [{"modality": "text", "format": "text/plain", "data": list(b"Hello, blocks")}]}
    stored = await encode(http_client, content)
    record = (await http_client.get(f"/v1/records/{stored['ref']}", params={"agent_id": AGENT})).json()[
        "record"
    ]
    assert record["content"] == "Hello, blocks"


async def test_dedup_by_id_and_by_content_returns_the_first_ref(http_client: httpx.AsyncClient) -> None:
    first = await encode(http_client, "first text", id="msg-7")
    again_by_id = await encode(http_client, "different text, same id", id="msg-7")
    assert again_by_id["result"] == "skipped"
    assert again_by_id["ref"] == first["ref"]
    assert again_by_id["reason"] == "duplicate_id"
    again_by_content = await encode(http_client, "first text")
    assert again_by_content["result"] == "skipped"
    assert again_by_content["ref"] == first["ref"]
    assert again_by_content["reason"] == "duplicate_content"
    stats = (await http_client.get("/v1/introspect/stats", params={"agent_id": AGENT})).json()
    assert stats["memories"] == 1


async def test_future_timestamp_is_stored_with_a_warning(http_client: httpx.AsyncClient) -> None:
    stored = await encode(http_client, timestamp=time.time() + 3600)
    assert stored["result"] == "stored"
    assert stored["warnings"] == ["timestamp_ahead_of_clock"]
    assert "warnings" not in await encode(http_client, "on time", timestamp="2024-05-01T10:00:00Z")


async def test_encode_batch(http_client: httpx.AsyncClient) -> None:
    records = [{"content": f"batch item {i}", "agent_id": AGENT} for i in range(3)]
    records.append({"content": "batch item 0", "agent_id": AGENT})
    response = await http_client.post("/v1/encode/batch", json={"records": records})
    assert response.status_code == 200
    body = response.json()
    assert (body["ok"], body["stored"], body["skipped"]) == (True, 3, 1)
    assert body["results"][3]["ref"] == body["results"][0]["ref"]


async def test_encode_batch_is_validated_before_anything_is_written(http_client: httpx.AsyncClient) -> None:
    records = [{"content": "fine", "agent_id": AGENT}, {"content": "no agent"}]
    response = await http_client.post("/v1/encode/batch", json={"records": records})
    assert_error(response, 400, "VALIDATION_ERROR", "records[1].agent_id")
    assert_error(await http_client.post("/v1/encode/batch", json={}), 400, "VALIDATION_ERROR", "records")
    assert_error(
        await http_client.post("/v1/encode/batch", json={"records": [], "extra": 1}),
        400,
        "VALIDATION_ERROR",
        "extra",
    )
    stats = (await http_client.get("/v1/introspect/stats", params={"agent_id": AGENT})).json()
    assert stats["memories"] == 0


async def test_raw_entries_single_and_batch(http_client: httpx.AsyncClient) -> None:
    entry = {
        "content": "user: where is the key?",
        "agent_id": AGENT,
        "session_id": "s1",
        "source": "conversation",
        "speaker": "user",
        "visibility": "normal",
        "secrecy_level": "public",
    }
    one = await http_client.post("/v1/encode/raw", json=entry)
    assert one.status_code == 200, one.text
    ref = one.json()["ref"]
    assert ref.startswith("raw:")
    many = await http_client.post(
        "/v1/encode/raw/batch", json={"records": [entry, {**entry, "turn_id": "2"}]}
    )
    assert many.status_code == 200
    assert many.json()["stored"] == 2
    record = (await http_client.get(f"/v1/records/{ref}", params={"agent_id": AGENT})).json()["record"]
    assert (record["kind"], record["session_id"], record["speaker"]) == ("raw", "s1", "user")
    listed = (await http_client.get("/v1/records", params={"agent_id": AGENT, "kind": "raw"})).json()
    assert listed["count"] == 3
    missing = {k: v for k, v in entry.items() if k != "speaker"}
    assert_error(await http_client.post("/v1/encode/raw", json=missing), 400, "VALIDATION_ERROR", "speaker")


async def test_update_answers_with_the_updated_record(http_client: httpx.AsyncClient) -> None:
    stored = await encode(http_client, "old text")
    response = await http_client.patch(
        f"/v1/encode/{stored['ref']}", json={"agent_id": AGENT, "content": "new text", "metadata": {"k": 1}}
    )
    assert response.status_code == 200, response.text
    record = response.json()["record"]
    assert response.json()["ok"] is True
    assert (record["ref"], record["content"], record["metadata"], record["version"]) == (
        stored["ref"],
        "new text",
        {"k": 1},
        2,
    )
    # Cerememory sends the bare record id (and repeats it in the body).
    bare = await http_client.patch(
        f"/v1/encode/{stored['record_id']}",
        json={"agent_id": AGENT, "record_id": stored["record_id"], "store": "semantic"},
    )
    assert bare.status_code == 200, bare.text
    assert bare.json()["record"]["store"] == "semantic"
    assert bare.json()["record"]["content"] == "new text"

    url = f"/v1/encode/{stored['ref']}"
    assert_error(await http_client.patch(url, json={"content": "x"}), 400, "VALIDATION_ERROR", "agent_id")
    assert_error(await http_client.patch(url, json={"agent_id": AGENT}), 400, "VALIDATION_ERROR", "body")
    assert_error(
        await http_client.patch(url, json={"agent_id": AGENT, "channel": "c"}),
        400,
        "VALIDATION_ERROR",
        "channel",
    )
    assert_error(
        await http_client.patch(url, json={"agent_id": AGENT, "ref": "x"}), 400, "VALIDATION_ERROR", "ref"
    )
    assert_error(
        await http_client.patch(url, json={"agent_id": "someone-else", "content": "hijack"}),
        404,
        "RECORD_NOT_FOUND",
        "ref",
    )
    assert_error(
        await http_client.patch("/v1/encode/not-a-ref", json={"agent_id": AGENT, "content": "x"}),
        400,
        "VALIDATION_ERROR",
        "ref",
    )


async def test_episodes(http_client: httpx.AsyncClient) -> None:
    response = await http_client.post(
        "/v1/episodes",
        json={
            "summary": "We rotated the deploy key",
            "agent_id": AGENT,
            "keywords": ["deploy", "key"],
            "history": [{"timestamp": "2024-05-01T10:00:00Z"}, {"timestamp": "2024-05-01T11:00:00Z"}],
        },
    )
    assert response.status_code == 200, response.text
    ref = response.json()["ref"]
    assert ref.startswith("ep:")
    record = (await http_client.get(f"/v1/records/{ref}", params={"agent_id": AGENT})).json()["record"]
    assert record["kind"] == "episode"
    assert record["summary"] == "We rotated the deploy key"
    assert record["keywords"] == ["deploy", "key"]
    assert record["start_time"] == "2024-05-01T10:00:00.000000Z"
    assert record["end_time"] == "2024-05-01T11:00:00.000000Z"
    assert record["timestamp"] == record["start_time"]
    listed = (await http_client.get("/v1/records", params={"agent_id": AGENT, "kind": "episode"})).json()
    assert [r["ref"] for r in listed["records"]] == [ref]
    assert_error(
        await http_client.post("/v1/episodes", json={"agent_id": AGENT}), 400, "VALIDATION_ERROR", "summary"
    )


async def test_profile(http_client: httpx.AsyncClient) -> None:
    empty = await http_client.get(f"/v1/profile/{AGENT}")
    assert empty.status_code == 200
    assert empty.json() == {"ok": True, "profile": None}
    put = await http_client.put(f"/v1/profile/{AGENT}", json={"profile": "Terse. Prefers YAML."})
    assert put.status_code == 200, put.text
    assert put.json()["profile"]["content"] == "Terse. Prefers YAML."
    got = (await http_client.get(f"/v1/profile/{AGENT}")).json()["profile"]
    assert got["agent_id"] == AGENT
    assert got["content"] == "Terse. Prefers YAML."
    assert got["updated_at"].endswith("Z")
    # Agent ids are caller text: a '/' in one still addresses that agent.
    slashed = await http_client.put("/v1/profile/team/bot", json={"profile": "slashed"})
    assert slashed.json()["profile"]["agent_id"] == "team/bot"
    assert_error(await http_client.put(f"/v1/profile/{AGENT}", json={}), 400, "VALIDATION_ERROR", "profile")
    assert_error(
        await http_client.put(f"/v1/profile/{AGENT}", json={"profile": "p", "x": 1}),
        400,
        "VALIDATION_ERROR",
        "x",
    )


async def test_list_query_validation(http_client: httpx.AsyncClient) -> None:
    for i in range(3):
        await encode(http_client, f"memory {i}")
    newest = (await http_client.get("/v1/records", params={"agent_id": AGENT, "limit": "2"})).json()
    assert [r["content"] for r in newest["records"]] == ["memory 2", "memory 1"]
    assert_error(await http_client.get("/v1/records"), 400, "VALIDATION_ERROR", "agent_id")
    bad_kind = await http_client.get("/v1/records", params={"agent_id": AGENT, "kind": "dream"})
    assert_error(bad_kind, 400, "VALIDATION_ERROR", "kind")
    bad_limit = await http_client.get("/v1/records", params={"agent_id": AGENT, "limit": "ten"})
    assert_error(bad_limit, 400, "VALIDATION_ERROR", "limit")
    huge_limit = await http_client.get("/v1/records", params={"agent_id": AGENT, "limit": "100000"})
    assert_error(huge_limit, 400, "VALIDATION_ERROR", "limit")
    unknown = await http_client.get("/v1/records", params={"agent_id": AGENT, "agent": "x"})
    assert_error(unknown, 400, "VALIDATION_ERROR", "agent")
    twice = await http_client.get("/v1/records?agent_id=a&agent_id=b")
    assert_error(twice, 400, "VALIDATION_ERROR", "agent_id")


async def test_delete_record(http_client: httpx.AsyncClient) -> None:
    stored = await encode(http_client)
    url = f"/v1/records/{stored['ref']}"
    assert_error(await http_client.delete(url, params={"agent_id": "other"}), 404, "RECORD_NOT_FOUND", "ref")
    response = await http_client.delete(url, params={"agent_id": AGENT})
    assert response.status_code == 200
    assert response.json() == {"ok": True, "deleted": 1}
    assert_error(await http_client.delete(url, params={"agent_id": AGENT}), 404, "RECORD_NOT_FOUND", "ref")
    # The content claim went with the record, so the same text can be stored again.
    assert (await encode(http_client))["result"] == "stored"


async def test_delete_agent_needs_confirmation(http_client: httpx.AsyncClient) -> None:
    await encode(http_client, "one")
    await encode(http_client, "two")
    await http_client.put(f"/v1/profile/{AGENT}", json={"profile": "p"})
    assert_error(await http_client.delete(f"/v1/agents/{AGENT}"), 400, "FORGET_UNCONFIRMED", "confirm")
    # Only true (in any case) confirms, as before confirm was declared a boolean: no other word for yes.
    for word in ("false", "yes", "1", "on"):
        refused = await http_client.delete(f"/v1/agents/{AGENT}", params={"confirm": word})
        assert_error(refused, 400, "FORGET_UNCONFIRMED", "confirm")
    response = await http_client.delete(f"/v1/agents/{AGENT}", params={"confirm": "True"})
    assert response.status_code == 200
    assert response.json() == {"ok": True, "deleted": 2, "agent_id": AGENT}
    stats = (await http_client.get("/v1/introspect/stats", params={"agent_id": AGENT})).json()
    assert stats["memories"] == 0
    assert (await http_client.get(f"/v1/profile/{AGENT}")).json()["profile"] is None


# ------------------------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("body", "status", "code", "field"),
    [
        pytest.param({"content": "x"}, 400, "VALIDATION_ERROR", "agent_id", id="missing-agent"),
        pytest.param(
            {"content": "x", "agent_id": 5}, 400, "VALIDATION_ERROR", "agent_id", id="agent-not-text"
        ),
        pytest.param(
            {"content": "x", "agent_id": " "}, 400, "VALIDATION_ERROR", "agent_id", id="agent-blank"
        ),
        pytest.param({"agent_id": AGENT}, 400, "VALIDATION_ERROR", "content", id="missing-content"),
        pytest.param(
            {"content": 7, "agent_id": AGENT}, 400, "VALIDATION_ERROR", "content", id="content-number"
        ),
        pytest.param(
            {"content": "x" * 201, "agent_id": AGENT}, 413, "CONTENT_TOO_LARGE", "content", id="too-long"
        ),
        pytest.param(
            {"content": "x", "agent_id": AGENT, "colour": "red"},
            400,
            "VALIDATION_ERROR",
            "colour",
            id="unknown",
        ),
        pytest.param(
            {"content": "x", "agent_id": AGENT, "self": 1}, 400, "VALIDATION_ERROR", "self", id="self"
        ),
        pytest.param(
            {"content": "x", "agent_id": AGENT, "timestamp": "yesterday"},
            400,
            "VALIDATION_ERROR",
            "timestamp",
            id="bad-time",
        ),
        pytest.param(
            {"content": "x", "agent_id": AGENT, "emotion": {"joy": 2}},
            400,
            "VALIDATION_ERROR",
            "emotion.joy",
            id="nested-field",
        ),
        pytest.param(
            {"content": {"blocks": [{"modality": "image", "data": []}]}, "agent_id": AGENT},
            400,
            "MODALITY_UNSUPPORTED",
            "content.blocks[0].modality",
            id="image-block",
        ),
    ],
)
async def test_encode_errors_name_the_field(
    http_client: httpx.AsyncClient, body: dict[str, Any], status: int, code: str, field: str
) -> None:
    assert_error(await http_client.post("/v1/encode", json=body), status, code, field)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        pytest.param(b'{"content": "x", "agent_id": ', "not valid JSON", id="truncated"),
        pytest.param(b"\xff\xfe", "body: is not UTF-8 (at byte 0)", id="not-utf8"),
        pytest.param(b'{"agent_id": "a", "content": "caf\xe9"}', "is not UTF-8 (at byte 33)", id="latin-1"),
        pytest.param(b"", "required", id="empty"),
        pytest.param(b'["content", "x"]', "an array", id="array"),
        pytest.param(b'"just text"', "a string", id="string"),
    ],
)
async def test_malformed_bodies_are_400_naming_body(
    http_client: httpx.AsyncClient, content: bytes, problem: str
) -> None:
    response = await http_client.post(
        "/v1/encode", content=content, headers={"content-type": "application/json"}
    )
    body = assert_error(response, 400, "VALIDATION_ERROR", "body")
    assert problem in body["error"]["message"]


async def test_body_over_the_cap_is_413(http_client: httpx.AsyncClient) -> None:
    json_type = {"content-type": "application/json"}
    response = await http_client.post(
        "/v1/encode/batch", content=b"[" + b" " * 5000 + b"]", headers=json_type
    )
    assert_error(response, 413, "CONTENT_TOO_LARGE", "body")

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(5):
            yield b" " * 1000

    # Without a content-length the app counts what it reads.
    streamed = await http_client.post("/v1/encode/batch", content=chunks(), headers=json_type)
    assert_error(streamed, 413, "CONTENT_TOO_LARGE", "body")


async def test_refs_and_scopes_on_reads(http_client: httpx.AsyncClient) -> None:
    stored = await encode(http_client)
    assert_error(
        await http_client.get("/v1/records/mem:nope", params={"agent_id": AGENT}),
        400,
        "VALIDATION_ERROR",
        "ref",
    )
    assert_error(
        await http_client.get(f"/v1/records/{MISSING_REF}", params={"agent_id": AGENT}),
        404,
        "RECORD_NOT_FOUND",
        "ref",
    )
    other = await http_client.get(f"/v1/records/{stored['ref']}", params={"agent_id": "agent-b"})
    body = assert_error(other, 404, "RECORD_NOT_FOUND", "ref")
    assert "deploy" not in body["error"]["message"]
    assert_error(await http_client.get(f"/v1/records/{stored['ref']}"), 400, "VALIDATION_ERROR", "agent_id")


async def test_unknown_route_and_method_use_the_envelope(http_client: httpx.AsyncClient) -> None:
    assert_error(await http_client.get("/v2/nothing"), 404, "NOT_FOUND", None)
    assert_error(await http_client.get("/v1/encode"), 405, "METHOD_NOT_ALLOWED", None)


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("OPTIONS", f"/v1/records/{MISSING_REF}", {"GET", "HEAD", "DELETE"}),
        ("POST", f"/v1/profile/{AGENT}", {"GET", "HEAD", "PUT"}),
        ("POST", "/v1/profile/team/bot", {"GET", "HEAD", "PUT"}),
        ("GET", "/v1/recall/gate", {"PUT"}),
    ],
)
async def test_a_405_allows_every_method_the_path_has(
    http_client: httpx.AsyncClient, method: str, path: str, allowed: set[str]
) -> None:
    # One path with two operations is one route: its 405 names both, not only the first route tried.
    refused = await http_client.request(method, path)
    assert_error(refused, 405, "METHOD_NOT_ALLOWED", None)
    assert set(refused.headers["allow"].replace(" ", "").split(",")) == allowed


async def test_request_id_is_kept_or_made(http_client: httpx.AsyncClient) -> None:
    mine = await http_client.get("/health", headers={"x-request-id": "trace-123"})
    assert mine.headers["x-request-id"] == "trace-123"
    failed = await http_client.post("/v1/encode", json={}, headers={"x-request-id": "trace-456"})
    assert failed.headers["x-request-id"] == "trace-456"
    assert failed.json()["request_id"] == "trace-456"
    made = await http_client.get("/health")
    uuid.UUID(made.headers["x-request-id"])
    # An id that could not be safely echoed (too long, spaces) is replaced.
    replaced = await http_client.get("/health", headers={"x-request-id": "x" * 500})
    uuid.UUID(replaced.headers["x-request-id"])
    missing = await http_client.get("/nowhere", headers={"x-request-id": "trace-789"})
    assert missing.json()["request_id"] == "trace-789"


async def test_unexpected_errors_are_500_and_opaque(
    http_client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(self: ReadService, agent_id: object | None = None) -> dict[str, Any]:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(ReadService, "stats", broken)
    response = await http_client.get("/v1/introspect/stats", headers={"x-request-id": "boom-1"})
    body = assert_error(response, 500, "INTERNAL_ERROR", None)
    assert "secret" not in response.text
    assert body["request_id"] == "boom-1"
    assert any("boom-1" in r.getMessage() and r.exc_info for r in caplog.records)


# ------------------------------------------------------------------------------------------ embedder


async def test_onnx_embedder_embeds_what_the_api_stores(settings: Settings, redis: RedisClient) -> None:
    onnx = settings.with_(qdrant_url=":memory:", embedding_mode="onnx")
    async with serving(create_app(onnx)) as client:
        health = (await client.get("/health")).json()
        assert health["embedder"]["dim"] == 384
        assert health["vector_engine"]
        stored = await encode(client)
        assert stored["embedded"] is True
        batch = await client.post(
            "/v1/encode/batch", json={"records": [{"content": "second", "agent_id": AGENT}]}
        )
        assert batch.json()["results"][0]["embedded"] is True
        updated = await client.patch(
            f"/v1/encode/{stored['ref']}", json={"agent_id": AGENT, "content": "changed"}
        )
        assert updated.json()["record"]["embedded"] is True
        stats = (await client.get("/v1/introspect/stats", params={"agent_id": AGENT})).json()
        assert (stats["memories"], stats["vectors"], stats["vector_pending"]) == (2, 2, 0)


async def test_recall_over_http(http_client: httpx.AsyncClient) -> None:
    stored = await http_client.post(
        "/v1/encode",
        json={
            "content": "The staging database moved to eu-west-1.",
            "agent_id": "h",
            "timestamp": "2026-03-02",
        },
    )
    assert stored.status_code == 200, stored.text
    response = await http_client.post(
        "/v1/recall/query", json={"agent_id": "h", "query": "staging database region"}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["ok"] is True
    assert body["policy"]["process"] == "single-pass-v2"
    assert [row["ref"] for row in body["rows"]] == [stored.json()["ref"]]
    assert "time_cue" not in body


async def test_recall_over_http_with_a_time_cue(http_client: httpx.AsyncClient) -> None:
    for day in ("2026-03-02", "2026-06-15"):
        stored = await http_client.post(
            "/v1/encode",
            json={"content": f"Deploy notes written on {day}.", "agent_id": "h", "timestamp": day},
        )
        assert stored.status_code == 200, stored.text
    cue = {"after": "2026-06-01", "before": "2026-06-30", "confidence": "sure"}
    response = await http_client.post(
        "/v1/recall/query", json={"agent_id": "h", "query": "deploy notes", "time_cue": cue, "trace": True}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["policy"]["process"] == "cued-v0.5"
    assert body["time_cue"]["period"] == ["2026-06-01T00:00:00Z", "2026-07-01T00:00:00Z"]
    assert body["time_cue"]["confidence"] == "sure"
    assert [row["ref"] for row in body["trace"]["arms"]["cue"]] != []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"time_cue": {"ago": {"unit": "years", "value": 1}, "confidence": "sure"}}, "time_cue.ago.unit"),
        ({"time_cue": {"after": "2026-06-01"}}, "time_cue.confidence"),
        ({"time_cue": {"after": "2026-06-01", "confidence": "sure", "when": 1}}, "time_cue.when"),
        ({"time_cue": {"after": "2026-06-01", "confidence": "sure"}, "policy": "single-pass-v0"}, "time_cue"),
        ({"limit": 101}, "limit"),
    ],
)
async def test_recall_over_http_refuses_bad_input(
    http_client: httpx.AsyncClient, body: dict[str, Any], field: str
) -> None:
    response = await http_client.post("/v1/recall/query", json={"agent_id": "h", "query": "deploy", **body})
    assert_error(response, 400, "VALIDATION_ERROR", field)


async def test_update_with_a_null_resets_the_field(http_client: httpx.AsyncClient) -> None:
    stored = await encode(http_client, "with metadata", metadata={"k": 1}, emotion="joy")
    url = f"/v1/encode/{stored['ref']}"
    response = await http_client.patch(url, json={"agent_id": AGENT, "metadata": None, "emotion": None})
    assert response.status_code == 200, response.text
    record = response.json()["record"]
    assert record["metadata"] == {}
    assert record["emotion"]["joy"] == 0.0
    assert_error(
        await http_client.patch(url, json={"agent_id": AGENT, "content": None}),
        400,
        "VALIDATION_ERROR",
        "content",
    )
