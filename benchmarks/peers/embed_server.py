"""A loopback HTTP server that hands a peer the same vectors every other system in the run gets.

A peer runs in its own interpreter, so it cannot call our embedder; it calls this server instead, in the
benchmark's own process and event loop. Two routes, one per contract a peer speaks:

* ``POST /embed`` with ``{"texts": [...]}`` answers ``{"embeddings": [[...], ...]}``: CPersona's HTTP
  embedding contract (reference ``cpersona-recall.md`` §6.1; no prefixes, vectors used as returned);
* ``POST /v1/embeddings`` with ``{"input": str | [str], "model": ...}`` answers the OpenAI-compatible
  shape (``data[i].index`` / ``.embedding``), for clients such as mem0's ``openai`` embedder. A
  ``dimensions`` field other than the width we serve is refused rather than ignored.

Anything else (``/capabilities``, ``/count_tokens`` ...) gets 404, which CPersona logs and tolerates.

Vectors come from an async ``source`` (texts to a float32 matrix): the quality harness passes
:meth:`EmbeddingCache.embed` (cached vectors, misses computed and cached), the speed benchmark an embedder
that computes every query afresh. Each float32 is sent as the exact decimal of its double widening, so the
peer parses back bit-identical float32 values.

The server speaks just enough HTTP/1.1 for these clients: keep-alive, ``Content-Length`` bodies (no
chunked requests), one request at a time per connection, every read under a deadline.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import TYPE_CHECKING, Any, Final

import anyio
import numpy as np
import orjson
from anyio.abc import SocketAttribute
from anyio.streams.buffered import BufferedByteReceiveStream

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

    import numpy.typing as npt

    Source = Callable[[Sequence[str]], Awaitable[npt.NDArray[np.float32]]]

__all__ = ["EmbedServer", "serve_embeddings"]

_MAX_HEADER_BYTES: Final = 64 * 1024
_MAX_BODY_BYTES: Final = 64 * 1024 * 1024
_IDLE_SECS: Final = 300.0
"""How long a kept-alive connection may sit between requests before the server closes it."""
_READ_SECS: Final = 60.0
_REASONS: Final = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Too Large",
}


class _BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclasses.dataclass
class EmbedServer:
    """The running server: its address and what it has served (counters for the report)."""

    host: str
    port: int
    model: str
    requests: int = 0
    texts: int = 0
    errors: int = 0

    @property
    def embed_url(self) -> str:
        """The URL for CPersona's ``CPERSONA_EMBEDDING_URL``."""
        return f"http://{self.host}:{self.port}/embed"

    @property
    def openai_base_url(self) -> str:
        """The base URL for an OpenAI-compatible client (it appends ``/embeddings``)."""
        return f"http://{self.host}:{self.port}/v1"


@contextlib.asynccontextmanager
async def serve_embeddings(
    source: Source, *, model: str, host: str = "127.0.0.1"
) -> AsyncIterator[EmbedServer]:
    """Serve ``source`` on a free loopback port for the duration of the ``async with`` block."""
    listener = await anyio.create_tcp_listener(local_host=host, local_port=0)
    server = EmbedServer(host, int(listener.extra(SocketAttribute.local_port)), model)
    # One embedding at a time: the source may compute misses and write the cache, and the embedder
    # itself runs one inference at a time anyway.
    lock = anyio.Lock()

    async def handle(stream: Any) -> None:
        async with stream:
            await _connection(stream, source, server, lock)

    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, handle)
        try:
            yield server
        finally:
            tg.cancel_scope.cancel()


async def _connection(stream: Any, source: Source, server: EmbedServer, lock: anyio.Lock) -> None:
    reader = BufferedByteReceiveStream(stream)
    while True:
        try:
            with anyio.fail_after(_IDLE_SECS):
                head = await reader.receive_until(b"\r\n\r\n", _MAX_HEADER_BYTES)
            method, path, headers = _parse_head(head)
            length = int(headers.get("content-length", "0") or "0")
            if length < 0 or length > _MAX_BODY_BYTES:
                raise _BadRequest(413, f"body of {length} bytes refused")
            with anyio.fail_after(_READ_SECS):
                body = await reader.receive_exactly(length) if length else b""
        except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError, TimeoutError):
            return
        except (anyio.DelimiterNotFound, ValueError, _BadRequest):
            await _reply(stream, 400, {"error": "malformed request"}, close=True)
            return
        server.requests += 1
        try:
            status, payload = await _route(method, path, body, source, server, lock)
        except _BadRequest as exc:
            server.errors += 1
            status, payload = exc.status, {"error": str(exc)}
        close = headers.get("connection", "").lower() == "close"
        try:
            await _reply(stream, status, payload, close=close)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            return
        if close:
            return


def _parse_head(head: bytes) -> tuple[str, str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    method, path, _version = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise ValueError(f"bad header line {line!r}")
        headers[name.strip().lower()] = value.strip()
    return method.upper(), path.split("?", 1)[0], headers


async def _route(
    method: str, path: str, body: bytes, source: Source, server: EmbedServer, lock: anyio.Lock
) -> tuple[int, Any]:
    if path not in ("/embed", "/v1/embeddings"):
        return 404, {"error": f"no route {path}"}
    if method != "POST":
        return 405, {"error": f"{path} takes POST"}
    try:
        request = orjson.loads(body or b"{}")
    except orjson.JSONDecodeError as exc:
        raise _BadRequest(400, f"body is not JSON: {exc}") from None
    if not isinstance(request, dict):
        raise _BadRequest(400, "body must be a JSON object")
    if path == "/embed":
        texts = _texts(request.get("texts"), "texts")
        return 200, {"embeddings": await _vectors(texts, source, server, lock)}
    raw = request.get("input")
    texts = _texts([raw] if isinstance(raw, str) else raw, "input")
    vectors = await _vectors(texts, source, server, lock)
    dims = request.get("dimensions")
    if dims is not None and vectors and dims != len(vectors[0]):
        raise _BadRequest(400, f"dimensions {dims!r} asked, this server serves {len(vectors[0])}")
    return 200, {
        "object": "list",
        "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)],
        "model": server.model,
        "usage": {"prompt_tokens": 0, "total_tokens": 0},
    }


def _texts(value: Any, field: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise _BadRequest(400, f"{field} must be a list of strings")
    return value


async def _vectors(
    texts: list[str], source: Source, server: EmbedServer, lock: anyio.Lock
) -> list[list[float]]:
    if not texts:
        return []
    async with lock:
        matrix = await source(texts)
    server.texts += len(texts)
    values = np.asarray(matrix, dtype=np.float32)
    if values.shape[0] != len(texts) or not np.isfinite(values).all():
        raise _BadRequest(
            400, f"the embedder gave {values.shape} for {len(texts)} texts, or a non-finite value"
        )
    # float64 widening is exact, so the decimal written is the float32 value itself.
    rows: list[list[float]] = values.astype(np.float64).tolist()
    return rows


async def _reply(stream: Any, status: int, payload: Any, *, close: bool) -> None:
    body = orjson.dumps(payload)
    head = (
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
        f"Connection: {'close' if close else 'keep-alive'}\r\n\r\n"
    )
    with anyio.fail_after(_READ_SECS):
        await stream.send(head.encode("latin-1") + body)
