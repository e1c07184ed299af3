"""Slow clients against a real ``cpersona serve`` on loopback, spoken to over raw sockets.

A client that sends half a request head (or trickles it) is disconnected once the header timeout has
passed; one that sends its headers and half a body is answered 408 in the error envelope and
disconnected, and so is one whose body the app answered without reading, once the body timeout has
passed; ordinary requests are not disturbed. A server capped at N connections serves N at once and
answers the next one 503, and serves again once one of the N has gone.

The deadlines are set short here so the tests are quick; each wait is bounded by a hang guard, never
measured.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import anyio
import httpx
import orjson
import pytest

from serving import free_port, start_serve, stop_serve_off_loop, wait_healthy

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping
    from pathlib import Path

    from anyio.abc import SocketStream

_HEAD_SECS = 1.5
_BODY_SECS = 1.5
_CAP = 3
# A hang guard for one exchange, far beyond any deadline the servers here are given.
_GUARD_SECS = 60
_POLL_SECS = 0.05


@contextlib.asynccontextmanager
async def _serving(data_dir: Path, settings: Mapping[str, str]) -> AsyncIterator[int]:
    port, log = free_port(), data_dir.parent / "serve.log"
    proc = start_serve(data_dir, port, log, embedding_mode="none", settings=settings)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as probe:
            await wait_healthy(probe, proc, log)
        yield port
    finally:
        await stop_serve_off_loop(proc)


@pytest.fixture(scope="module")
async def quick(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[int]:
    """A server with short header and body timeouts; yields its port."""
    settings = {
        "CPERSONA_HTTP_HEADER_TIMEOUT_SECS": str(_HEAD_SECS),
        "CPERSONA_HTTP_BODY_TIMEOUT_SECS": str(_BODY_SECS),
    }
    async with _serving(tmp_path_factory.mktemp("slow-clients") / "data", settings) as port:
        yield port


@pytest.fixture(scope="module")
async def capped(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[int]:
    """A server that holds at most ``_CAP`` connections, and waits long for a body; yields its port."""
    settings = {"CPERSONA_HTTP_MAX_CONNECTIONS": str(_CAP), "CPERSONA_HTTP_BODY_TIMEOUT_SECS": "600"}
    async with _serving(tmp_path_factory.mktemp("capped") / "data", settings) as port:
        yield port


def _head(port: int, request_line: str, *headers: str) -> bytes:
    lines = [request_line, f"Host: 127.0.0.1:{port}", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def _until_closed(stream: SocketStream) -> bytes:
    """Everything the server sends until it closes the connection."""
    received = bytearray()
    with anyio.fail_after(_GUARD_SECS):
        while True:
            try:
                received += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                return bytes(received)


async def _until_head_end(stream: SocketStream) -> bytes:
    """What the server sends up to the end of its first response head (or of a 100 Continue)."""
    received = bytearray()
    with anyio.fail_after(_GUARD_SECS):
        while b"\r\n\r\n" not in received:
            received += await stream.receive()
    return bytes(received)


def _response(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers, body


async def test_a_client_that_sends_half_a_head_is_disconnected(quick: int) -> None:
    async with await anyio.connect_tcp("127.0.0.1", quick) as stream:
        half = _head(quick, "POST /v1/encode HTTP/1.1", "Content-Type: application/json")[:40]
        await stream.send(half)
        # Nothing is answered (there is no request to answer); the connection is closed.
        assert await _until_closed(stream) == b""


async def test_a_client_that_trickles_its_head_is_disconnected(quick: int) -> None:
    # A byte every tenth of a second never lets the connection go idle, and the whole head would take
    # minutes: the head's deadline runs from the connection's opening, not from each byte.
    head = _head(quick, "GET /health HTTP/1.1", "X-Pad: " + "a" * 2_000)
    async with await anyio.connect_tcp("127.0.0.1", quick) as stream, anyio.create_task_group() as tg:
        tg.start_soon(_trickle, stream, head)
        assert await _until_closed(stream) == b""
        tg.cancel_scope.cancel()


async def _trickle(stream: SocketStream, data: bytes) -> None:
    """Send ``data`` a byte every tenth of a second, until it is sent or the server has closed."""
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
        for byte in data:
            await stream.send(bytes([byte]))
            await anyio.sleep(0.1)


async def test_a_body_that_stops_halfway_is_answered_408_and_disconnected(quick: int) -> None:
    head = _head(
        quick,
        "POST /v1/encode HTTP/1.1",
        "Content-Type: application/json",
        "Content-Length: 100",
        "X-Request-Id: slow-body",
    )
    async with await anyio.connect_tcp("127.0.0.1", quick) as stream:
        await stream.send(head + b'{"agent_id": "slow", "content": "')
        status, headers, body = _response(await _until_closed(stream))
    assert status == 408
    assert headers["connection"] == "close"
    envelope = orjson.loads(body)
    assert envelope["ok"] is False
    assert envelope["code"] == envelope["error"]["code"] == "REQUEST_TIMEOUT"
    assert envelope["error"]["field"] == "body"
    assert envelope["request_id"] == headers["x-request-id"] == "slow-body"


async def test_the_rest_of_a_body_the_app_did_not_read_is_not_waited_for(quick: int) -> None:
    # No route reads this body: the 404 is answered at once. The connection would then read the rest
    # of the body, to drop it, for as long as it trickles in (each byte keeps it from being idle); it is
    # closed once the body timeout has passed.
    head = _head(quick, "POST /v1/nowhere HTTP/1.1", "Content-Type: application/json", "Content-Length: 2000")
    async with await anyio.connect_tcp("127.0.0.1", quick) as stream, anyio.create_task_group() as tg:
        await stream.send(head + b"x" * 50)
        tg.start_soon(_trickle, stream, b"x" * 1_950)
        status, _, body = _response(await _until_closed(stream))
        tg.cancel_scope.cancel()
    assert status == 404
    assert orjson.loads(body)["code"] == "NOT_FOUND"


async def test_ordinary_requests_are_served_under_the_deadlines(quick: int) -> None:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{quick}", timeout=30) as client:
        stored = await client.post("/v1/encode", json={"agent_id": "prompt", "content": "the kettle is blue"})
        assert stored.status_code == 200, stored.text
        # The next request on the same connection: the head's deadline starts again after each response.
        read = await client.get(f"/v1/records/{stored.json()['ref']}", params={"agent_id": "prompt"})
        assert read.status_code == 200, read.text
        assert read.json()["record"]["content"] == "the kettle is blue"


async def _hold(port: int) -> SocketStream:
    """A connection whose request is being read by the app: its head sent, its body never.

    ``Expect: 100-continue`` makes the server say when the app begins to read the body, so the request is
    known to be in the app (and not refused) before this returns. A connection an earlier exchange left
    behind may still be counted for a moment after the client closed it, so a 503 is tried again.
    """
    head = _head(
        port,
        "POST /v1/encode HTTP/1.1",
        "Content-Type: application/json",
        "Content-Length: 10",
        "Expect: 100-continue",
    )
    with anyio.fail_after(_GUARD_SECS):
        while True:
            stream = await anyio.connect_tcp("127.0.0.1", port)
            await stream.send(head)
            status, _, _ = _response(await _until_head_end(stream))
            if status == 100:
                return stream
            await stream.aclose()
            assert status == 503, status
            await anyio.sleep(_POLL_SECS)


async def _health_status(port: int) -> int:
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        await stream.send(_head(port, "GET /health HTTP/1.1", "Connection: close"))
        status, _, _ = _response(await _until_closed(stream))
        return status


async def test_a_connection_beyond_the_cap_is_answered_503(capped: int) -> None:
    held = [await _hold(capped) for _ in range(_CAP)]
    try:
        assert await _health_status(capped) == 503
        await held.pop().aclose()
        # Once the server has seen that one go, a new connection is served.
        with anyio.fail_after(_GUARD_SECS):
            status = await _health_status(capped)
            while status == 503:
                await anyio.sleep(_POLL_SECS)
                status = await _health_status(capped)
        assert status == 200
    finally:
        for stream in held:
            await stream.aclose()
