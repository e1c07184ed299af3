"""The worker half of the JSON-lines protocol between the benchmark and a peer's own interpreter.

Imported by the worker scripts (``_cpersona_worker.py``, ``_mem0_worker.py``), which run under the peer's
virtual environment, so it uses only the standard library and anyio (a dependency of httpx, which both
peers install). The benchmark's half is :mod:`benchmarks.peers._process`.

Protocol: one JSON object per line. The worker first writes ``{"id": 0, "ok": true, ...}`` describing
itself; then each request ``{"id": n, "op": name, ...}`` gets exactly one reply ``{"id": n, "ok": true,
...}`` or ``{"id": n, "ok": false, "error": "<Type>: <message>", "traceback": "..."}``. Requests are
served concurrently (so callers can measure concurrency); end of input ends the worker and abandons
any request still being served.

A peer library may print to standard output. :func:`claim_stdout` keeps the real stdout for the protocol
and points file descriptor 1 (and ``sys.stdout``) at stderr, so stray prints land in the log instead of
corrupting a reply; it must run before the peer library is imported.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import IO, TYPE_CHECKING, Any

import anyio
import anyio.to_thread

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]

__all__ = ["claim_stdout", "serve"]


def claim_stdout() -> IO[bytes]:
    """The protocol channel (the original stdout); from now on fd 1 and ``sys.stdout`` go to stderr."""
    channel = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return channel


async def serve(channel: IO[bytes], hello: dict[str, Any], handlers: dict[str, Handler]) -> None:
    """Answer requests from stdin with ``handlers[op]`` until stdin ends."""
    lock = anyio.Lock()

    async def send(message: dict[str, Any]) -> None:
        data = json.dumps(message, ensure_ascii=False).encode() + b"\n"
        async with lock:
            await anyio.to_thread.run_sync(channel.write, data)

    async def answer(request: dict[str, Any]) -> None:
        rid = request.get("id")
        handler = handlers.get(str(request.get("op")))
        try:
            if handler is None:
                raise ValueError(f"unknown op {request.get('op')!r}")
            reply = await handler(request)
        except Exception as exc:  # the error is the reply: the benchmark reports it verbatim
            await send(
                {
                    "id": rid,
                    "ok": False,
                    "error": f"{type(exc).__name__}: {exc}",
                    "traceback": traceback.format_exc(),
                }
            )
            return
        await send({"id": rid, "ok": True, **reply})

    await send({"id": 0, "ok": True, **hello})
    stdin = sys.stdin.buffer
    async with anyio.create_task_group() as tg:
        while True:
            line = await anyio.to_thread.run_sync(stdin.readline)
            if not line:
                break
            if line.strip():
                tg.start_soon(answer, json.loads(line))
        # End of input means the benchmark is gone: nobody is left to read what is still being worked on.
        tg.cancel_scope.cancel()
