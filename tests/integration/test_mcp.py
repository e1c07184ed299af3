"""The MCP tools over streamable HTTP, with the SDK's own client on the app in-process (the real Redis).

The app is the one ``cpersona serve`` runs (REST routes and ``/mcp`` side by side); the client is the
SDK's ``Client`` over its streamable HTTP transport, on an ``httpx2`` client that calls the app in this
process. tests/integration/test_mcp_transports.py runs the same session over a real server and over stdio.
"""

from __future__ import annotations

import base64
import contextlib
import json
import time
from typing import TYPE_CHECKING, Any

import httpx2
import pytest
from benchmarks.in_process import running
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from cpersona.edges.http.app import create_app
from cpersona.edges.http.routes import OPERATIONS
from cpersona.edges.mcp.errors import failure
from cpersona.edges.mcp.server import TOOLS
from cpersona.edges.mcp.tool import input_schema
from cpersona.errors import InvalidRequest, RecordNotFound

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from cpersona.engine.facade import Engine
    from cpersona.settings import Settings
    from cpersona.stores.redis.connection import RedisClient

# Named as the reference server names them (cpersona-recall.md §2).
REFERENCE_NAMES = {
    "store", "recall", "reconstruct", "archive_episode", "declare_associations", "traverse",
    "get_contents", "get_profile", "update_profile", "list_memories", "list_episodes", "delete_memory",
    "delete_agent_data", "calibrate_threshold",
}  # fmt: skip
FACTS = (
    "The harbour office moved to the old customs house on Pier Street",
    "Mira keeps the spare keys of the boat in a blue tin under the sink",
    "The ferry to the island leaves at seven every morning except Sundays",
)


_ROUTE_MODELS = {
    model for op in OPERATIONS for model in (op.body, op.query, *(op.alternative or ())) if model is not None
}


def _app_settings(settings: Settings, *, lexical: bool = True) -> Settings:
    """``settings`` with an in-memory vector store, and (``lexical``) without an embedder."""
    return settings.with_(qdrant_url=":memory:", **({"embedding_mode": "none"} if lexical else {}))


@contextlib.asynccontextmanager
async def app_http(
    settings: Settings,
    *,
    key_agents: frozenset[str] | None = None,
    headers: dict[str, str] | None = None,
    max_body_bytes: int | None = None,
    lexical: bool = True,
) -> AsyncIterator[tuple[httpx2.AsyncClient, Engine]]:
    """An ``httpx2`` client (the SDK's HTTP client) on an app over ``settings``, in this process, and the
    app's engine;
    ``key_agents`` stands for the key the API-key layer would have found (the access seam's
    ``request.state.key_agents``); ``lexical: False`` keeps the embedder (give ``settings`` the session's
    ``model_dir`` as data dir, so the model is built once)."""
    app = create_app(
        _app_settings(settings, lexical=lexical), background=False, max_body_bytes=max_body_bytes
    )
    async with running(app, None if key_agents is None else {"key_agents": key_agents}) as (asgi, state):
        transport = httpx2.ASGITransport(app=asgi)
        async with httpx2.AsyncClient(
            transport=transport, base_url="http://mcp.test", headers=headers
        ) as http:
            yield http, state["engine"]


@contextlib.asynccontextmanager
async def mcp_client(
    settings: Settings,
    *,
    key_agents: frozenset[str] | None = None,
    mode: str = "auto",
    headers: dict[str, str] | None = None,
) -> AsyncIterator[Client]:
    """The SDK's client on ``/mcp`` of an app over ``settings`` (see :func:`app_http`)."""
    async with app_http(settings, key_agents=key_agents, headers=headers) as (http, _):
        transport = streamable_http_client("http://mcp.test/mcp", http_client=http)
        async with Client(transport, mode=mode) as client:
            yield client


async def call(client: Client, name: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """A tool's structured answer (the same JSON as its text) and whether it is marked an error."""
    result = await client.call_tool(name, arguments)
    assert isinstance(result.structured_content, dict)
    text = result.content[0]
    assert json.loads(getattr(text, "text", "")) == result.structured_content
    return result.structured_content, result.is_error


# ------------------------------------------------------------------------------------------ listing


async def test_every_tool_is_listed_with_its_models_schema(settings: Settings, redis: RedisClient) -> None:
    async with mcp_client(settings) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(listed) >= REFERENCE_NAMES
        assert set(listed) == {tool.name for tool in TOOLS}
        for tool in TOOLS:
            assert listed[tool.name].input_schema == input_schema(tool, _app_settings(settings)), tool.name
            assert listed[tool.name].input_schema["type"] == "object"
        # The model is a route's own (or that model with the route's path parameters as fields).
        assert any(issubclass(tool.model, model) for model in _ROUTE_MODELS), tool.name


async def test_a_client_of_the_handshake_era_is_served_too(settings: Settings, redis: RedisClient) -> None:
    async with mcp_client(settings, mode="legacy") as client:
        assert client.protocol_version == "2025-11-25"
        assert {tool.name for tool in (await client.list_tools()).tools} == {tool.name for tool in TOOLS}
        body, failed = await call(client, "store", {"agent_id": "old", "content": FACTS[0]})
        assert (failed, body["result"]) == (False, "stored")


async def test_hints_say_what_each_tool_does(settings: Settings, redis: RedisClient) -> None:
    async with mcp_client(settings) as client:
        hints = {tool.name: tool.annotations for tool in (await client.list_tools()).tools}
        for name in ("delete_memory", "delete_agent_data", "forget"):
            hint = hints[name]
            assert hint is not None
            assert hint.destructive_hint is True, name
            assert hint.read_only_hint is False, name
        for name in ("recall", "reconstruct", "traverse", "get_contents", "list_memories", "get_profile"):
            hint = hints[name]
            assert hint is not None
            assert hint.read_only_hint is True, name
            # The protocol reads the other hints only of a tool that writes: they are not claimed here.
            assert (hint.destructive_hint, hint.idempotent_hint) == (None, None), name
        store = hints["store"]
        assert store is not None
        assert (store.read_only_hint, store.destructive_hint, store.idempotent_hint) == (False, False, True)


async def test_recall_descriptions_say_when_to_pass_a_time_cue(
    settings: Settings, redis: RedisClient
) -> None:
    async with mcp_client(settings) as client:
        described = {tool.name: tool.description or "" for tool in (await client.list_tools()).tools}
        for name in ("recall", "reconstruct"):
            assert "only when the request itself names a time" in described[name].lower(), name
            assert "today's date" in described[name], name


# ------------------------------------------------------------------------------------------ a session


async def test_store_recall_with_a_trace_and_reconstruct(settings: Settings, redis: RedisClient) -> None:
    async with mcp_client(settings) as client:
        refs = []
        for fact in FACTS:
            body, failed = await call(client, "store", {"agent_id": "skipper", "content": fact})
            assert not failed
            assert body["ok"] is True
            assert body["result"] == "stored"
            refs.append(body["ref"])
        again, _ = await call(client, "store", {"agent_id": "skipper", "content": FACTS[0]})
        assert (again["result"], again["ref"]) == ("skipped", refs[0])

        recalled, failed = await call(
            client,
            "recall",
            {"agent_id": "skipper", "query": "where are the spare keys of the boat", "trace": True},
        )
        assert not failed
        assert recalled["rows"][0]["ref"] == refs[1]
        trace = json.dumps(recalled["trace"])
        assert refs[1] in trace
        # The trace carries refs, ranks and scores, never the stored text (nor a word only the text has).
        for fact in FACTS:
            assert fact not in trace
        for word in ("customs", "sink", "Sundays"):
            assert word not in trace

        rebuilt, failed = await call(
            client, "reconstruct", {"agent_id": "skipper", "query": "spare keys boat"}
        )
        assert not failed
        assert rebuilt["items"]
        assert rebuilt["items"][0]["head_ref"] == refs[1]
        assert FACTS[1] in rebuilt["items"][0]["content"]

        contents, _ = await call(client, "get_contents", {"agent_id": "skipper", "refs": [refs[2], refs[0]]})
        assert [record["content"] for record in contents["records"]] == [FACTS[2], FACTS[0]]
        assert contents["not_found"] == []


async def test_tools_and_routes_share_one_engine(settings: Settings, redis: RedisClient) -> None:
    # What a tool stores, a route reads: the same engine answers both.
    app = create_app(_app_settings(settings), background=False)
    async with running(app) as (asgi, _):
        http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=asgi), base_url="http://mcp.test")
        async with http, Client(streamable_http_client("http://mcp.test/mcp", http_client=http)) as client:
            body, _ = await call(client, "store", {"agent_id": "both", "content": FACTS[2]})
            answer = await http.get(f"/v1/records/{body['ref']}", params={"agent_id": "both"})
    assert answer.status_code == 200
    assert answer.json()["record"]["content"] == FACTS[2]


async def test_the_recall_operations(settings: Settings, redis: RedisClient) -> None:
    async with mcp_client(settings) as client:
        tin, _ = await call(client, "store", {"agent_id": "cue", "content": FACTS[1]})
        edge = {"target_id": tin["ref"], "type": "causal", "weight": 0.9}
        office, _ = await call(
            client, "store", {"agent_id": "cue", "content": FACTS[0], "associations": [edge]}
        )
        found, failed = await call(
            client,
            "query",
            {"agent_id": "cue", "cue": {"text": "customs house"}, "recall_mode": "perfect", "trace": True},
        )
        assert not failed, found
        # Text first: the memory's text as text (perfect mode: exact), its ref, score and why.
        best = found["memories"][0]
        assert (best["ref"], best["text"], best["reason"]) == (office["ref"], FACTS[0], {"signal": "cue"})
        assert best["score"] > 0
        assert "data" not in json.dumps(found)
        assert "customs" not in json.dumps(found["trace"])
        reached, failed = await call(client, "associate", {"agent_id": "cue", "record_id": office["ref"]})
        assert not failed, reached
        assert [(m["ref"], m["text"]) for m in reached["memories"]] == [(tin["ref"], FACTS[1])]
        assert reached["memories"][0]["reason"] == {
            "signal": "activation",
            "path": [office["ref"], tin["ref"]],
        }
        refused, failed = await call(client, "query", {"agent_id": "cue", "cue": {"spatial": [1, 2]}})
        assert failed
        assert (refused["error"]["code"], refused["memories"]) == ("MODALITY_UNSUPPORTED", [])

        now = time.time()
        period = {"start": now - 3600, "end": now + 60}
        line, failed = await call(
            client, "timeline", {"agent_id": "cue", "range": period, "granularity": "day"}
        )
        assert not failed, line
        assert line["count"] == 2
        around, failed = await call(client, "graph", {"agent_id": "cue", "center_id": office["ref"]})
        assert not failed, around
        assert len(around["nodes"]) == 2
        assert len(around["edges"]) == 1
        backwards = {"start": now + 60, "end": now - 3600}
        refused, failed = await call(
            client, "timeline", {"agent_id": "cue", "range": backwards, "granularity": "day"}
        )
        assert failed
        assert refused["error"]["field"].startswith("range")


async def test_a_querys_request_id_keys_its_reconsolidation(settings: Settings, redis: RedisClient) -> None:
    async with app_http(settings) as (http, engine):
        stored = await engine.store(FACTS[1], agent_id="tea")
        for request_id in ("retry-me", "retry-me", "another"):
            http.headers["x-request-id"] = request_id
            transport = streamable_http_client("http://mcp.test/mcp", http_client=http)
            async with Client(transport) as client:
                body, failed = await call(client, "query", {"agent_id": "tea", "cue": {"text": "spare keys"}})
                assert not failed, body
        assert await engine.drain_reconsolidations() == 3
        cues = engine.backends.stores.cues
        assert cues is not None
        found = await cues.stored_fidelity(stored.ref[4:])
        assert found is not None
        assert found["reinforcement_count"] == 2  # the retry counted once


async def test_a_call_without_an_agent_takes_the_callers_as_a_route_does(
    settings: Settings, redis: RedisClient
) -> None:
    async with mcp_client(settings, headers={"X-Cpersona-Agent": "from-header"}) as client:
        body, failed = await call(client, "store", {"content": FACTS[2]})
        assert not failed, body
        listed, _ = await call(client, "list_memories", {})
        assert [record["agent_id"] for record in listed["records"]] == ["from-header"]
    async with mcp_client(settings) as client:
        body, failed = await call(client, "list_memories", {})
        assert failed
        assert body["error"]["field"] == "agent_id"


async def test_a_message_over_the_apps_body_limit_is_refused(settings: Settings, redis: RedisClient) -> None:
    # CPERSONA_MAX_BODY_BYTES holds for /mcp as for the routes (the SDK's own limit is 4 MiB).
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"pad": "x" * 5000}}
    accept = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25"}
    async with app_http(settings, max_body_bytes=4096) as (http, _):
        refused = await http.post("/mcp", json=message, headers=accept)
        assert refused.status_code == 413
        message["params"] = {}
        listed = await http.post("/mcp", json=message, headers=accept)
        assert listed.status_code == 200, listed.text
        assert len(listed.json()["result"]["tools"]) == len(TOOLS)


async def test_a_body_a_browser_sends_cross_site_unasked_is_refused(
    settings: Settings, redis: RedisClient
) -> None:
    # A page may POST text/plain to any origin without asking first (a "simple" request); the transport
    # answers only application/json, which a browser sends cross-site only after a preflight this server
    # never grants.
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "stats", "arguments": {}},
    }
    async with app_http(settings) as (http, _):
        refused = await http.post(
            "/mcp",
            content=json.dumps(message),
            headers={"content-type": "text/plain", "accept": "application/json, text/event-stream"},
        )
        # The SDK refuses it before reading the message (a 400 naming the Content-Type).
        assert refused.status_code == 400
        assert "content-type" in refused.text.lower()
        preflight = await http.options("/mcp", headers={"origin": "http://evil.test"})
        assert "access-control-allow-origin" not in preflight.headers


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        # The SDK keeps the last of a repeated key: this would store for "bob", not "ann".
        (
            b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "store", "arguments": '
            b'{"agent_id": "ann", "content": "meant for ann", "agent_id": "bob"}}}',
            "agent_id: is given more than once",
        ),
        (b'{"jsonrpc": "2.0", "id": 1, "id": 2, "method": "tools/list"}', "id: is given more than once"),
        # An id that is no string or integer: the SDK took it for a notification and answered 202.
        (
            b'{"jsonrpc": "2.0", "id": {}, "method": "tools/call", "params": {"name": "store", "arguments": '
            b'{"agent_id": "bob", "content": "meant for no one"}}}',
            "id: must be a string or an integer",
        ),
        (b'{"jsonrpc": "2.0", "id": true, "method": "tools/list"}', "id: must be a string or an integer"),
        (b'{"jsonrpc": "2.0", "id": null, "method": "tools/list"}', "id: must be a string or an integer"),
        (b'{"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}', "id: must be a string or an integer"),
        # A NaN elsewhere in the body (which orjson refuses and the SDK reads) does not hide a repeat.
        (
            b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "store", "arguments": '
            b'{"agent_id": "ann", "content": "meant for ann", "agent_id": "bob", "x": NaN}}}',
            "agent_id: is given more than once",
        ),
    ],
)
@pytest.mark.parametrize("content_type", ["application/json", "application/json, text/plain"])
async def test_a_message_the_routes_would_refuse_is_a_json_rpc_error(
    settings: Settings, redis: RedisClient, raw: bytes, said: str, content_type: str
) -> None:
    headers = {
        "content-type": content_type,
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2025-11-25",
    }
    async with app_http(settings) as (http, engine):
        refused = await http.post("/mcp", content=raw, headers=headers)
        assert refused.status_code == 400, refused.text
        answer = refused.json()
        assert answer["jsonrpc"] == "2.0"
        assert answer["id"] is None
        assert answer["error"]["code"] == -32600
        assert said in answer["error"]["message"]
        # Nothing ran: no tool stored anything for either agent.
        for agent in ("ann", "bob"):
            assert await engine.list(agent_id=agent) == []
        # The body was read here and handed on whole: a good message on the same app still works.
        good = b'{"jsonrpc": "2.0", "id": "a", "method": "tools/list"}'
        listed = await http.post("/mcp", content=good, headers=headers)
        assert listed.status_code == 200, listed.text
        assert len(listed.json()["result"]["tools"]) == len(TOOLS)


# ------------------------------------------------------------------------------------------ failures


async def test_a_bad_argument_is_refused_naming_the_field(settings: Settings, redis: RedisClient) -> None:
    async with mcp_client(settings) as client:
        body, failed = await call(client, "recall", {"agent_id": "skipper", "query": "keys", "limit": "ten"})
        assert failed
        assert body["ok"] is False
        assert body["error"]["code"] == "VALIDATION_ERROR"
        assert body["error"]["field"] == "limit"
        assert body["rows"] == []
        body, failed = await call(client, "reconstruct", {"agent_id": "skipper", "query": "keys", "top_k": 0})
        assert failed
        assert (body["error"]["field"], body["items"], body["returned_count"]) == ("top_k", [], 0)
        body, failed = await call(client, "store", {"agent_id": "skipper", "content": "x", "colour": "red"})
        assert failed
        assert body["error"]["field"] == "colour"


async def test_a_cue_that_cannot_be_read_names_its_part(settings: Settings, redis: RedisClient) -> None:
    async with mcp_client(settings) as client:
        body, failed = await call(
            client,
            "recall",
            {
                "agent_id": "skipper",
                "query": "ferry",
                "time_cue": {"ago": {"unit": "fortnights", "value": 2}},
            },
        )
        assert failed
        assert body["error"]["field"].startswith("time_cue")


async def test_deleting_an_agent_needs_its_confirmation(settings: Settings, redis: RedisClient) -> None:
    async with mcp_client(settings) as client:
        await call(client, "store", {"agent_id": "gone", "content": FACTS[0]})
        # confirm is a boolean, as forget's: left out or false, nothing is deleted.
        for unconfirmed in ({}, {"confirm": False}, {"confirm": "yes"}):
            body, failed = await call(client, "delete_agent_data", {"agent_id": "gone", **unconfirmed})
            assert failed
            assert (body["error"]["code"], body["error"]["field"]) == ("FORGET_UNCONFIRMED", "confirm")
        listed, _ = await call(client, "list_memories", {"agent_id": "gone"})
        assert listed["count"] == 1
        schemas = {tool.name: tool.input_schema for tool in (await client.list_tools()).tools}
        for name in ("delete_agent_data", "forget"):
            assert schemas[name]["properties"]["confirm"]["type"] == "boolean", name
        body, failed = await call(client, "delete_agent_data", {"agent_id": "gone", "confirm": True})
        assert not failed
        assert body["deleted"] >= 1
        listed, _ = await call(client, "list_memories", {"agent_id": "gone"})
        assert listed["count"] == 0
        # The text the schema asked for before confirm was a boolean still confirms.
        await call(client, "store", {"agent_id": "older-client", "content": FACTS[1]})
        body, failed = await call(
            client, "delete_agent_data", {"agent_id": "older-client", "confirm": "true"}
        )
        assert (failed, body["deleted"]) == (False, 1)


async def test_an_archive_goes_out_and_back_in_as_base64_text(settings: Settings, redis: RedisClient) -> None:
    async with mcp_client(settings) as client:
        for fact in FACTS[:2]:
            await call(client, "store", {"agent_id": "mover", "content": fact})
        exported, failed = await call(client, "export_memories", {"agent_id": "mover"})
        assert not failed, exported
        # Text, not a JSON number per byte: the archive's lines are in it as written.
        archive = base64.b64decode(exported["archive_data"], validate=True)
        assert len(archive) == exported["size_bytes"]
        assert FACTS[0].encode() in archive
        await call(client, "delete_agent_data", {"agent_id": "mover", "confirm": True})
        imported, failed = await call(
            client, "import_memories", {"agent_id": "mover", "archive_data": exported["archive_data"]}
        )
        assert not failed, imported
        assert imported["records_imported"] == 2
        listed, _ = await call(client, "list_memories", {"agent_id": "mover"})
        assert sorted(record["content"] for record in listed["records"]) == sorted(FACTS[:2])


async def test_a_missing_record_names_the_ref(settings: Settings, redis: RedisClient) -> None:
    async with mcp_client(settings) as client:
        missing = "mem:00000000-0000-7000-8000-000000000000"
        body, failed = await call(client, "delete_memory", {"agent_id": "skipper", "ref": missing})
        assert failed
        assert (body["error"]["code"], body["error"]["field"]) == ("RECORD_NOT_FOUND", "ref")


async def test_an_unknown_tool_is_a_protocol_error(settings: Settings, redis: RedisClient) -> None:
    async with mcp_client(settings) as client:
        with pytest.raises(Exception, match="no tool named"):
            await client.call_tool("summon", {})


# ------------------------------------------------------------------------------------------ agent access


async def test_a_key_acts_only_for_its_agents(settings: Settings, redis: RedisClient) -> None:
    async with mcp_client(settings) as open_client:
        await call(open_client, "store", {"agent_id": "other", "content": FACTS[1]})
    async with mcp_client(settings, key_agents=frozenset({"mine"})) as client:
        body, failed = await call(client, "store", {"agent_id": "mine", "content": FACTS[0]})
        assert not failed
        for name, arguments in (
            ("recall", {"agent_id": "other", "query": "spare keys"}),
            ("list_memories", {"agent_id": "other"}),
            ("delete_agent_data", {"agent_id": "other", "confirm": True}),
        ):
            body, failed = await call(client, name, arguments)
            assert failed, name
            assert body["error"]["code"] == "FORBIDDEN", name
        _, failed = await call(client, "stats", {"agent_id": "mine"})
        assert not failed
        # A key bound to one agent names the scope of a call that names none: its agent's stats.
        own, failed = await call(client, "stats", {})
        assert not failed
        assert own["memories"] == 1
    async with mcp_client(settings, key_agents=frozenset({"mine", "yours"})) as client:
        # "Every agent" is more than a key bound to some agents may see.
        body, failed = await call(client, "stats", {})
        assert failed
        assert body["error"]["code"] == "FORBIDDEN"
    async with mcp_client(settings) as open_client:
        left, _ = await call(open_client, "list_memories", {"agent_id": "other"})
    assert left["count"] == 1


# ------------------------------------------------------------------------------------------ properties

_FIELD = st.from_regex(r"[a-z][a-z_]{0,20}", fullmatch=True)


@given(field=_FIELD, problem=st.text(min_size=1, max_size=40))
def test_failure_names_the_field_of_any_bad_input(field: str, problem: str) -> None:
    body = failure(InvalidRequest(field, problem), "store")
    assert body["ok"] is False
    assert body["error"] == {"code": "VALIDATION_ERROR", "message": f"{field}: {problem}", "field": field}


@given(ref=st.text(min_size=1, max_size=40))
def test_failure_of_a_missing_record_names_the_ref(ref: str) -> None:
    assert failure(RecordNotFound(ref), "get_contents")["error"]["field"] == "ref"


def test_an_unexpected_failure_says_nothing_of_itself() -> None:
    body = failure(RuntimeError("/secret/path exploded"), "recall")
    assert body == {
        "ok": False,
        "error": {"code": "INTERNAL_ERROR", "message": "An internal error occurred", "field": None},
    }


_AGENT_TOOLS = sorted(tool.name for tool in TOOLS if "agent_id" in tool.model.model_fields)
_REQUIRED = {tool.name: set(tool.model.model_json_schema().get("required", ())) for tool in TOOLS}


_CALLS = st.lists(
    st.tuples(st.sampled_from(_AGENT_TOOLS), _FIELD.map(lambda name: "x_" + name)), min_size=1, max_size=8
)


# One app per example (each opens an engine), several calls in each.
@hsettings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(calls=_CALLS)
async def test_every_tool_refuses_an_unknown_argument_by_name(
    settings: Settings, redis: RedisClient, calls: list[tuple[str, str]]
) -> None:
    async with mcp_client(settings) as client:
        for name, field in calls:
            body, failed = await call(client, name, {"agent_id": "skipper", field: 1})
            assert failed
            assert body["ok"] is False
            # The first wrong field is named: the unknown one, or a required one the call left out.
            assert body["error"]["field"] in {field} | (_REQUIRED[name] - {"agent_id"})
            assert body["error"]["code"] in ("VALIDATION_ERROR", "FORGET_UNCONFIRMED")
