"""API keys on ``/mcp``: the SDK's client over streamable HTTP with real keys (the auth middleware, not a
stand-in): no key is refused before any tool runs; a key's tools act only for its agents, and nothing of
another agent's comes back; deleting an agent's data is an admin key's alone, as over REST."""

from __future__ import annotations

import contextlib
import json
import uuid
from typing import TYPE_CHECKING, Any

import httpx2
from benchmarks.in_process import running
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from cpersona.edges.http.app import create_app
from cpersona.keys import Keys
from cpersona.stores.redis.api_keys import ApiKeyStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from cpersona.settings import Settings
    from cpersona.stores.redis.connection import RedisClient


@contextlib.asynccontextmanager
async def _keyed_mcp(
    settings: Settings, token: str | None, agent_header: str | None = None
) -> AsyncIterator[Client]:
    app = create_app(
        settings.with_(qdrant_url=":memory:", embedding_mode="none", keys="on", rate_limit_per_sec=0),
        background=False,
    )
    headers = {"authorization": f"Bearer {token}"} if token else {}
    if agent_header is not None:
        headers["x-cpersona-agent"] = agent_header
    async with running(app) as (asgi, _):
        transport = httpx2.ASGITransport(app=asgi)
        async with (
            httpx2.AsyncClient(transport=transport, base_url="http://mcp.test", headers=headers) as http,
            Client(streamable_http_client("http://mcp.test/mcp", http_client=http)) as client,
        ):
            yield client


async def _call(client: Client, name: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    result = await client.call_tool(name, arguments)
    text = getattr(result.content[0], "text", "")
    answer: dict[str, Any] = json.loads(text)
    return answer, result.is_error


async def test_mcp_without_a_key_is_refused(settings: Settings, redis: RedisClient) -> None:
    # Refused by the middleware before the MCP session starts: the one envelope, as on every route.
    app = create_app(
        settings.with_(qdrant_url=":memory:", embedding_mode="none", keys="on"), background=False
    )
    async with running(app) as (asgi, _):
        transport = httpx2.ASGITransport(app=asgi)
        async with httpx2.AsyncClient(transport=transport, base_url="http://mcp.test") as http:
            hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
            answer = await http.post(
                "/mcp", json=hello, headers={"accept": "application/json, text/event-stream"}
            )
    assert answer.status_code == 401
    assert answer.json()["code"] == "UNAUTHORIZED"


async def test_mcp_tools_act_only_for_the_keys_agents(settings: Settings, redis: RedisClient) -> None:
    store = ApiKeyStore(redis, Keys(settings.key_prefix))
    ann, _ = await store.create(["ann"], admin=False, name=None)
    bob, _ = await store.create(["bob"], admin=False, name=None)
    root, _ = await store.create([], admin=True, name=None)
    async with _keyed_mcp(settings, bob) as client:
        _, failed = await _call(client, "store", {"agent_id": "bob", "content": "bob's boiler code is 4711"})
        assert not failed
    async with _keyed_mcp(settings, ann) as client:
        _, failed = await _call(client, "store", {"content": "ann waters the garden on friday"})
        assert not failed  # the key's one agent is the scope of a call that names none
        for name, arguments in (
            ("recall", {"agent_id": "bob", "query": "boiler code"}),
            ("list_memories", {"agent_id": "bob"}),
            ("store", {"agent_id": "bob", "content": "x"}),
        ):
            body, failed = await _call(client, name, arguments)
            assert failed, name
            assert body["error"]["code"] == "FORBIDDEN", (name, body)
        for name, arguments in (("recall", {"query": "boiler code 4711"}), ("list_memories", {})):
            body, failed = await _call(client, name, arguments)
            assert not failed, (name, body)
            assert "4711" not in json.dumps(body), (name, body)
        own, failed = await _call(client, "delete_agent_data", {"agent_id": "ann", "confirm": True})
        assert failed
        assert own["error"]["code"] == "FORBIDDEN"
    async with _keyed_mcp(settings, root) as client:
        gone, failed = await _call(client, "delete_agent_data", {"agent_id": "ann", "confirm": True})
        assert not failed, gone


async def test_a_header_naming_another_agent_is_refused_not_overridden(
    settings: Settings, redis: RedisClient
) -> None:
    ann, _ = await ApiKeyStore(redis, Keys(settings.key_prefix)).create(["ann"], admin=False, name=None)
    async with _keyed_mcp(settings, ann, agent_header="bob") as client:
        body, failed = await _call(client, "store", {"content": "meant for bob"})
        assert failed
        assert (body["error"]["code"], body["error"]["field"]) == ("FORBIDDEN", "x-cpersona-agent")
    async with _keyed_mcp(settings, ann) as client:
        listed, failed = await _call(client, "list_memories", {})
        assert not failed
        assert listed["count"] == 0


_WORDS = ("deploy", "key", "friday", "rotate", "green", "build")


def _read_tools(question: str, refs: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """Every read tool, naming no agent (the key's one agent is the scope); B's refs where it takes refs."""
    calls: list[tuple[str, dict[str, Any]]] = [
        ("recall", {"query": question, "limit": 50}),
        ("reconstruct", {"query": question}),
        ("query", {"cue": {"text": question}}),
        ("traverse", {"entity": question.split()[0]}),
        ("list_memories", {}),
        ("list_episodes", {}),
        ("get_profile", {}),
        ("raw_query", {}),
        ("timeline", {"range": {"start": 0, "end": "2100-01-01"}}),
        ("graph", {}),
        ("stats", {}),
        ("export_memories", {}),
    ]
    if refs:
        calls += [
            ("get_contents", {"refs": refs}),
            ("decay_forecast", {"record_ids": [r.removeprefix("mem:") for r in refs], "forecast_at": 2e9}),
        ]
        calls += [("associate", {"record_id": ref}) for ref in refs]
    return calls


@hsettings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    memories=st.lists(
        st.tuples(st.sampled_from(("a", "b")), st.lists(st.sampled_from(_WORDS), min_size=1, max_size=3)),
        min_size=1,
        max_size=6,
    ),
    question=st.lists(st.sampled_from(_WORDS), min_size=1, max_size=3),
)
async def test_a_key_for_a_never_sees_anything_of_b_through_any_tool(
    settings: Settings, redis: RedisClient, memories: list[tuple[str, list[str]]], question: list[str]
) -> None:
    run = uuid.uuid4().hex[:8]
    agents = {"a": f"ann-{run}", "b": f"bob-{run}"}
    store = ApiKeyStore(redis, Keys(settings.key_prefix))
    tokens = {
        side: (await store.create([agent], admin=False, name=None))[0] for side, agent in agents.items()
    }
    b_refs: list[str] = []
    marks: list[str] = []
    for i, (side, words) in enumerate(memories):
        mark = f"mark{side}{run}{i}"
        async with _keyed_mcp(settings, tokens[side]) as client:
            stored, failed = await _call(client, "store", {"content": " ".join([*words, mark])})
        assert not failed, stored
        if side == "b":
            b_refs.append(stored["ref"])
            marks.append(mark)
    leaks = [*marks, agents["b"]]
    async with _keyed_mcp(settings, tokens["a"]) as client:
        for name, arguments in _read_tools(" ".join(question), b_refs):
            body, failed = await _call(client, name, arguments)
            text = json.dumps(body)
            # A refusal may repeat the refs the call itself sent; nothing else of B's comes back.
            assert not [leak for leak in leaks if leak in text], (name, arguments, body)
            if failed:
                assert body["error"]["code"] in ("RECORD_NOT_FOUND", "VALIDATION_ERROR"), (name, body)
            sent = json.dumps(arguments)
            for bare in (ref.removeprefix("mem:") for ref in b_refs):
                if bare not in sent:
                    assert bare not in text, (name, body)
            named, refused = await _call(client, name, {**arguments, "agent_id": agents["b"]})
            assert refused, (name, named)
            assert named["error"]["code"] == "FORBIDDEN", (name, named)
