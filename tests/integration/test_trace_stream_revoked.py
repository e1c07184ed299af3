"""A trace stream outlives its key's admission, not its key: revoked while open, it ends with an ``end``
event saying why and sends no trace after, whether traces keep coming or none does.

Against a real ``cpersona serve`` with keys on, on the session's Redis (the keys made there directly);
the key is revoked through the admin route, the trace made by a real recall.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import httpx
import orjson
import pytest

from cpersona.edges.http.trace_stream import KEY_CHECK_SECS
from cpersona.keys import Keys
from cpersona.stores.redis.api_keys import ApiKeyStore
from serving import free_port, start_serve, stop_serve_off_loop, wait_healthy

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from cpersona.stores.redis.connection import RedisClient

ANN = "ann"
# A hang guard for one event, not a measurement: a revoked idle stream ends within KEY_CHECK_SECS and a
# wait for a message.
_EVENT_SECS = 30.0 + KEY_CHECK_SECS


class _Server:
    def __init__(self, url: str, admin: str, ann: str, ann_id: str) -> None:
        self.url, self.admin, self.ann, self.ann_id = url, admin, ann, ann_id

    def client(self, token: str) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, headers={"authorization": f"Bearer {token}"}, timeout=60)

    async def recall(self, token: str) -> httpx.Response:
        async with self.client(token) as client:
            return await client.post(
                "/v1/recall/query", json={"query": "heat pump", "agent_id": ANN, "trace": True}
            )

    async def revoke(self) -> None:
        async with self.client(self.admin) as client:
            revoked = await client.delete(f"/v1/keys/{self.ann_id}")
        assert revoked.status_code == 200, revoked.text
        assert revoked.json()["revoked"] is True


@pytest.fixture
async def server(
    tmp_path: Path, redis: RedisClient, redis_url: str, key_prefix: str
) -> AsyncIterator[_Server]:
    store = ApiKeyStore(redis, Keys(key_prefix))
    admin, _ = await store.create([], admin=True, name="admin")
    ann, info = await store.create([ANN], admin=False, name="ann")
    port = free_port()
    settings = {
        "CPERSONA_REDIS_URL": redis_url,
        "CPERSONA_KEY_PREFIX": key_prefix,
        "CPERSONA_QDRANT_URL": ":memory:",
        "CPERSONA_KEYS": "on",
    }
    log = tmp_path / "serve.log"
    proc = start_serve(tmp_path, port, log, embedding_mode="none", settings=settings)
    try:
        url = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(base_url=url) as probe:
            await wait_healthy(probe, proc, log)
        found = _Server(url, admin, ann, info.key_id)
        async with found.client(ann) as client:
            stored = await client.post("/v1/encode", json={"content": "the heat pump hums", "agent_id": ANN})
        assert stored.status_code == 200, stored.text
        yield found
    finally:
        await stop_serve_off_loop(proc)


class _Events:
    """The stream's events as ``(name, data)``, each read under a deadline; ``None`` once it ended."""

    def __init__(self, response: httpx.Response) -> None:
        self._lines = response.aiter_lines()

    async def next(self) -> tuple[str, str] | None:
        event, data = "message", list[str]()
        with anyio.fail_after(_EVENT_SECS):
            async for line in self._lines:
                if line == "" and data:
                    return event, "\n".join(data)
                name, _, value = line.partition(": ")
                if name == "event":
                    event = value
                elif name == "data":
                    data.append(value)
        return None


@pytest.fixture
async def ann_stream(server: _Server) -> AsyncIterator[_Events]:
    async with server.client(server.ann) as client, client.stream("GET", "/v1/traces/stream") as response:
        assert response.status_code == 200
        events = _Events(response)
        first = await events.next()
        assert first is not None
        assert first[0] == "ready"
        yield events


async def test_a_revoked_key_gets_no_trace_after_and_an_end_saying_why(
    server: _Server, ann_stream: _Events
) -> None:
    # Live, the key's stream carries its agent's traces.
    assert (await server.recall(server.ann)).status_code == 200
    delivered = await ann_stream.next()
    assert delivered is not None
    assert delivered[0] == "trace"
    assert orjson.loads(delivered[1])["scope"]["agent_id"] == ANN

    await server.revoke()
    assert (await server.recall(server.ann)).status_code == 401
    # The admin's recall publishes on ann's channel; the stream must not pass it on.
    assert (await server.recall(server.admin)).status_code == 200
    ended = await ann_stream.next()
    assert ended == ("end", '{"reason":"key revoked"}')
    assert await ann_stream.next() is None


async def test_an_idle_stream_of_a_revoked_key_ends_too(server: _Server, ann_stream: _Events) -> None:
    await server.revoke()
    # No trace comes: the stream finds out by itself, within KEY_CHECK_SECS.
    assert await ann_stream.next() == ("end", '{"reason":"key revoked"}')
    assert await ann_stream.next() is None
