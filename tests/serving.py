"""A real ``cpersona serve`` in a subprocess, for the tests that kill it or its Redis.

The server gets none of the test run's own ``CPERSONA_*`` variables, only the data dir, the port and, if
given, the embedding mode; its output goes to ``log``, which a failure quotes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import anyio
import httpx
from benchmarks.in_process import with_state

from cpersona.edges.http.app import create_app

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from cpersona import Engine

__all__ = ["asked_over_http", "free_port", "start_serve", "stop_serve", "stop_serve_off_loop", "wait_healthy"]

# A hang guard for the start (the embedder's first load on a busy machine included), not a measurement.
_START_GUARD_SECS = 120


def environment_without_settings() -> dict[str, str]:
    """This process's environment without its ``CPERSONA_*`` variables: a child process (a server, the
    CLI) then reads only the settings its test gives it, and where the run keeps its built encoder graphs
    (``CPERSONA_MODELS_DIR``, see ``conftest.built_models``), which changes no answer."""
    return {k: v for k, v in os.environ.items() if not k.startswith("CPERSONA_") or k == _SHARED}


_SHARED = "CPERSONA_MODELS_DIR"


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_serve(
    data_dir: Path,
    port: int,
    log: Path,
    *,
    embedding_mode: str | None = None,
    settings: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``python -m cpersona serve`` on ``data_dir`` and ``port``, appending its output to ``log``;
    ``settings`` are more ``CPERSONA_*`` variables for it."""
    env = environment_without_settings() | dict(settings or {})
    env |= {"CPERSONA_DATA_DIR": str(data_dir), "CPERSONA_PORT": str(port)}
    if embedding_mode is not None:
        env["CPERSONA_EMBEDDING_MODE"] = embedding_mode
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "cpersona", "serve"], env=env, stdout=out, stderr=subprocess.STDOUT
        )


async def wait_healthy(client: httpx.AsyncClient, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Until ``GET /health`` answers 200; fails with the log's tail if the server exits first."""
    with anyio.fail_after(_START_GUARD_SECS):
        while True:
            if proc.poll() is not None:
                tail = (await anyio.Path(log).read_text())[-3000:]
                raise AssertionError(f"serve exited with {proc.returncode}:\n{tail}")
            with contextlib.suppress(httpx.TransportError):
                if (await client.get("/health")).status_code == 200:
                    return
            await anyio.sleep(0.1)


def stop_serve(proc: subprocess.Popen[bytes], *, timeout: float = 60) -> None:
    """Stop a server as a person would (Ctrl-C); one that does not end in ``timeout`` is killed, and the
    test fails on it."""
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise


async def stop_serve_off_loop(proc: subprocess.Popen[bytes]) -> None:
    """:func:`stop_serve` for an async test: the wait for the server to end runs in a worker thread, not
    on the event loop. It runs to its end when the test is being cancelled too (stop_serve's own timeout
    bounds it), so no server outlives its test."""
    with anyio.CancelScope(shield=True):
        await anyio.to_thread.run_sync(stop_serve, proc)


async def asked_over_http(memory: Engine, method: str, path: str, **kwargs: Any) -> httpx.Response:
    """One request answered by the HTTP app over an engine the test opened (the state the app's lifespan
    would give it), without a server process."""
    app = with_state(create_app(memory.settings, background=False), {"engine": memory})
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://cpersona.test") as client:
        return await client.request(method, path, **kwargs)
