"""The trace stream (``GET /v1/traces/stream``) and the page's route, in process on the session's Redis.

The stream is driven as raw ASGI (httpx's ASGI transport waits for a whole body, and this one never ends):
the test reads its events as they are sent, publishes traces on the channels itself, then hangs up and
checks that the subscription is gone from Redis, so no connection or task outlives the client.
"""

from __future__ import annotations

import contextlib
import os
import signal
from typing import TYPE_CHECKING, Any

import anyio
import orjson
import pytest
from benchmarks.in_process import running
from hypothesis import given
from hypothesis import strategies as st

from cpersona.edges.http.access import AgentForbidden, permit
from cpersona.edges.http.app import create_app
from cpersona.edges.http.trace_stream import _targets
from cpersona.keys import Keys
from cpersona.stores.redis.api_keys import ApiKeyStore
from traced import recall_trace

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    import httpx
    from starlette.applications import Starlette
    from starlette.types import Message, Scope

    from cpersona.settings import Settings
    from cpersona.stores.redis.connection import RedisClient

_WAIT_SECS = 20.0


def _trace(agent: str, project: str | None, ref: str) -> bytes:
    scope = {"agent_id": agent, "project_id": project, "channel": None, "source_id": ""}
    arms = {"memory_keyword": [{"ref": ref, "rank": 0, "raw": None}]}
    return recall_trace(scope=scope, arms=arms).model_dump_json().encode()


class _Stream:
    """One request to the app as a browser makes it: events read as they come, a hang-up on demand."""

    def __init__(self) -> None:
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.body = b""
        self.gone = anyio.Event()
        self._more = anyio.Event()
        self._asked = False

    async def receive(self) -> Message:
        if not self._asked:
            self._asked = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = {k.decode(): v.decode() for k, v in message.get("headers", ())}
        elif message["type"] == "http.response.body":
            self.body += message.get("body", b"")
        self._more.set()

    def events(self) -> list[tuple[str, str]]:
        out = []
        for block in self.body.decode().replace("\r\n", "\n").split("\n\n"):
            fields = dict(line.split(": ", 1) for line in block.split("\n") if ": " in line)
            if "data" in fields:
                out.append((fields.get("event", "message"), fields["data"]))
        return out

    async def until(self, predicate: Any) -> None:
        with anyio.fail_after(_WAIT_SECS):
            while not predicate(self):
                self._more = anyio.Event()
                await self._more.wait()


@contextlib.asynccontextmanager
async def _app(settings: Settings, agents: frozenset[str] | None) -> AsyncIterator[Any]:
    """An app on the shared Redis whose requests carry ``agents`` as their key's agents."""
    quiet = settings.with_(qdrant_url=":memory:", embedding_mode="none")
    app: Starlette = create_app(quiet, background=False)
    async with running(app, None if agents is None else {"key_agents": agents}) as (asgi, _):
        yield asgi


def _scope(query: str, token: str | None = None) -> Scope:
    headers = [(b"host", b"cpersona.test")]
    if token is not None:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/v1/traces/stream",
        "raw_path": b"/v1/traces/stream",
        "query_string": query.encode(),
        "headers": headers,
        "client": ("127.0.0.1", 5000),
        "server": ("cpersona.test", 80),
    }


async def _subscribers(redis: RedisClient, keys: Keys) -> int:
    numsub = await redis.pubsub_numsub(keys.trace_channel("ann"), keys.trace_channel("bo"))
    patterns = await redis.pubsub_numpat()
    return sum(int(n) for _, n in numsub) + int(patterns)


@pytest.mark.parametrize(
    ("query", "agents", "seen"),
    [
        # No key in force: every agent, filtered by project.
        ("project_id=ops", None, ["mem:a-ops", "mem:b-ops"]),
        # A key for ann: only ann's traces, though the request names no agent.
        ("", frozenset({"ann"}), ["mem:a-ops", "mem:a-dev"]),
        ("agent_id=bo", None, ["mem:b-ops"]),
    ],
)
async def test_the_stream_forwards_the_traces_it_may_and_ends_with_the_client(
    settings: Settings, redis: RedisClient, query: str, agents: frozenset[str] | None, seen: list[str]
) -> None:
    keys = Keys(settings.key_prefix)
    stream = _Stream()
    async with _app(settings, agents) as app, anyio.create_task_group() as tg:
        tg.start_soon(app, _scope(query), stream.receive, stream.send)
        await stream.until(lambda s: any(e == "ready" for e, _ in s.events()))
        assert stream.status == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        for agent, project, ref in (
            ("ann", "ops", "mem:a-ops"),
            ("bo", "ops", "mem:b-ops"),
            ("ann", "dev", "mem:a-dev"),
        ):
            await redis.publish(keys.trace_channel(agent), _trace(agent, project, ref))
        await redis.publish(keys.trace_channel("ann"), b"not json")
        # A marker every stream sees last: ann's, in project ops.
        await redis.publish(keys.trace_channel("ann"), _trace("ann", "ops", "mem:end"))
        if "agent_id=bo" in query:
            await redis.publish(keys.trace_channel("bo"), _trace("bo", "ops", "mem:end"))
        await stream.until(lambda s: any("mem:end" in d for _, d in s.events()))
        traces = [orjson.loads(d) for e, d in stream.events() if e == "trace"]
        refs = [t["arms"]["memory_keyword"][0]["ref"] for t in traces]
        assert refs[:-1] == seen
        assert await _subscribers(redis, keys) >= 1
        stream.gone.set()
    # The response's call returned (the task group is done) and its subscription is gone from Redis.
    assert await _subscribers(redis, keys) == 0


async def test_a_key_of_several_agents_follows_them_all_without_naming_one(
    settings: Settings, redis: RedisClient
) -> None:
    # Real keys in force (the auth middleware, not a stand-in): the README's "follows only the agents the
    # request's key may act for", with no agent_id, is each of the key's agents and no other.
    keys = Keys(settings.key_prefix)
    token, _ = await ApiKeyStore(redis, keys).create(["ann", "bo"], admin=False, name=None)
    stream = _Stream()
    async with (
        _app(settings.with_(keys="on", rate_limit_per_sec=0), None) as app,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(app, _scope("", token), stream.receive, stream.send)
        await stream.until(lambda s: s.status not in (None, 200) or any(e == "ready" for e, _ in s.events()))
        assert stream.status == 200, stream.body
        ready = next(orjson.loads(d) for e, d in stream.events() if e == "ready")
        assert ready == {"agent_id": None, "project_id": None, "agents": ["ann", "bo"]}
        for agent, ref in (("ann", "mem:a"), ("cy", "mem:c"), ("bo", "mem:b"), ("ann", "mem:end")):
            await redis.publish(keys.trace_channel(agent), _trace(agent, None, ref))
        await stream.until(lambda s: any("mem:end" in d for _, d in s.events()))
        traces = [orjson.loads(d) for e, d in stream.events() if e == "trace"]
        assert [t["arms"]["memory_keyword"][0]["ref"] for t in traces] == ["mem:a", "mem:b", "mem:end"]
        # Its own channels, never the pattern of every agent.
        assert await redis.pubsub_numpat() == 0
        stream.gone.set()
    assert await _subscribers(redis, keys) == 0


async def test_another_agents_stream_is_refused_before_anything_is_subscribed(
    settings: Settings, redis: RedisClient
) -> None:
    stream = _Stream()
    async with _app(settings, frozenset({"ann"})) as app:
        with anyio.fail_after(_WAIT_SECS):
            await app(_scope("agent_id=bo"), stream.receive, stream.send)
    assert stream.status == 403
    assert orjson.loads(stream.body)["error"]["code"] == "FORBIDDEN"
    assert await _subscribers(redis, Keys(settings.key_prefix)) == 0


@pytest.mark.parametrize("path", ["/v1/traces/stream", "/traces"])
async def test_an_unknown_or_bad_filter_is_a_400_naming_it(client: httpx.AsyncClient, path: str) -> None:
    unknown = await client.get(path, params={"agent": "ann"})
    assert unknown.status_code == 400
    assert unknown.json()["error"]["field"] == "agent"
    control = await client.get(path, params={"project_id": "a\x07b"})
    assert control.status_code == 400
    assert control.json()["error"]["field"] == "project_id"


async def test_the_page_is_self_contained_and_allows_only_its_own_script(client: httpx.AsyncClient) -> None:
    page = await client.get("/traces", params={"agent_id": "ann"})
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy
    assert "connect-src 'self'" in policy
    assert "script-src 'sha256-" in policy
    assert "unsafe-inline" not in policy
    # Nothing is fetched from elsewhere, and nothing of a trace is inserted as markup.
    assert "http://" not in page.text
    assert "https://" not in page.text
    assert "innerHTML" not in page.text
    assert "/v1/traces/stream" in page.text


_AGENT = st.text(st.characters(min_codepoint=33, max_codepoint=0x2FF), min_size=1, max_size=12)


@given(agents=st.frozensets(_AGENT, max_size=4), asked=st.one_of(st.none(), _AGENT))
def test_a_keys_stream_subscribes_to_its_own_agents_channels_only(
    agents: frozenset[str], asked: str | None
) -> None:
    keys = Keys("p")
    try:
        if asked is not None:
            permit(agents, asked)
    except AgentForbidden:
        assert asked not in agents
        return
    channels, pattern = _targets(keys, asked, agents)
    # Never the pattern of every agent, and never a channel of an agent the key is not bound to.
    assert pattern is None
    assert set(channels) <= {keys.trace_channel(a) for a in agents}
    wanted = {asked} if asked is not None else agents
    assert set(channels) == {keys.trace_channel(a) for a in wanted}


async def test_a_dropped_connection_is_subscribed_again(settings: Settings, redis: RedisClient) -> None:
    keys = Keys(settings.key_prefix)
    stream = _Stream()
    async with _app(settings, None) as app, anyio.create_task_group() as tg:
        tg.start_soon(app, _scope("agent_id=ann"), stream.receive, stream.send)
        await stream.until(lambda s: any(e == "ready" for e, _ in s.events()))
        await redis.client_kill_filter(_type="pubsub")
        # redis-py reconnects and subscribes again on its next read; until then a publish reaches nobody.
        with anyio.fail_after(_WAIT_SECS):
            while True:
                if await redis.publish(keys.trace_channel("ann"), _trace("ann", "ops", "mem:again")):
                    break
                await anyio.sleep(0.05)
        await stream.until(lambda s: any("mem:again" in d for _, d in s.events()))
        assert not any(e == "lost" for e, _ in stream.events())
        stream.gone.set()
    assert await _subscribers(redis, keys) == 0


async def test_a_redis_that_stops_answering_ends_the_stream_with_a_lost_event(
    settings: Settings, redis: RedisClient
) -> None:
    stream = _Stream()
    pid = int((await redis.info("server"))["process_id"])
    async with _app(settings.with_(redis_timeout_secs=1.0), None) as app, anyio.create_task_group() as tg:
        tg.start_soon(app, _scope("agent_id=ann"), stream.receive, stream.send)
        await stream.until(lambda s: any(e == "ready" for e, _ in s.events()))
        # A Redis that hangs (stopped, not gone): the stream's next wait misses its deadline.
        os.kill(pid, signal.SIGSTOP)
        try:
            await stream.until(lambda s: any(e == "lost" for e, _ in s.events()))
        finally:
            os.kill(pid, signal.SIGCONT)
        stream.gone.set()
    lost = [orjson.loads(d) for e, d in stream.events() if e == "lost"]
    assert "lost the trace subscription" in lost[0]["error"]
    # The browser reconnects after the pause the stream named.
    assert "retry: 2000" in stream.body.decode()
    # The stream closed its connection; the resumed Redis notices the close as it works through its queue.
    with anyio.fail_after(_WAIT_SECS):
        while True:
            if not await _subscribers(redis, Keys(settings.key_prefix)):
                break
            await anyio.sleep(0.05)


async def test_a_worker_serves_at_most_its_limit_of_streams(settings: Settings, redis: RedisClient) -> None:
    first, second, third = _Stream(), _Stream(), _Stream()
    async with _app(settings.with_(trace_streams_max=1), None) as app:
        async with anyio.create_task_group() as tg:
            tg.start_soon(app, _scope("agent_id=ann"), first.receive, first.send)
            await first.until(lambda s: any(e == "ready" for e, _ in s.events()))
            with anyio.fail_after(_WAIT_SECS):
                await app(_scope("agent_id=ann"), second.receive, second.send)
            first.gone.set()
        # The first stream's seat is free again once it ended.
        async with anyio.create_task_group() as tg:
            tg.start_soon(app, _scope("agent_id=ann"), third.receive, third.send)
            await third.until(lambda s: any(e == "ready" for e, _ in s.events()))
            third.gone.set()
    assert second.status == 503
    error = orjson.loads(second.body)["error"]
    assert error["code"] == "TRACE_STREAMS_FULL"
    assert "CPERSONA_TRACE_STREAMS_MAX" in error["message"]
    assert await _subscribers(redis, Keys(settings.key_prefix)) == 0
