"""A ``cpersona serve --workers N`` in a subprocess, and a way to send a request to one chosen worker.

Any worker may take any request on the shared socket. :func:`only` stops the other workers with SIGSTOP
while it is open. A stopped process does not call ``accept``, so the kernel gives every new connection to
the worker left running. Send each request on a fresh connection (``Connection: close``), and keep it
shorter than :data:`REQUEST_SECS`. The supervisor kills a worker that has not answered its pings for
5 s (uvicorn's ``timeout_worker_healthcheck``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from serving import stop_serve

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["COMMAND", "REQUEST_SECS", "only", "running_serve", "worker_pids"]

_SCRIPT = Path(sys.executable).with_name("cpersona")
COMMAND = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "cpersona"]
"""How the tests run ``cpersona``: the venv's console script, else ``python -m cpersona``."""
REQUEST_SECS = 3.0
"""The longest one request sent under :func:`only` may take (well inside the supervisor's 5 s)."""
_WAIT_SECS = 120.0


@contextlib.contextmanager
def running_serve(env: dict[str, str], port: int, log: Path, *args: str) -> Iterator[subprocess.Popen[bytes]]:
    """``cpersona serve --port port *args``, up (every worker answered); stopped with SIGINT after."""
    with log.open("ab") as sink:
        proc = subprocess.Popen(
            [*COMMAND, "serve", "--port", str(port), *args], env=env, stdout=sink, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + _WAIT_SECS
        # "serving" is printed once every worker has opened its engine and answers.
        while "serving http://" not in log.read_text():
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, f"the server did not come up: {log.read_text()}"
            time.sleep(0.1)
        yield proc
    finally:
        stop_serve(proc)


def worker_pids(supervisor: subprocess.Popen[bytes]) -> list[int]:
    """The worker processes of a ``serve --workers`` (its children that run a server, not helpers)."""
    children = Path(f"/proc/{supervisor.pid}/task/{supervisor.pid}/children").read_text().split()
    return [int(pid) for pid in children if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()]


@contextlib.contextmanager
def only(worker: int, workers: list[int]) -> Iterator[None]:
    """While inside, new connections reach ``worker`` alone: the others are stopped (SIGSTOP)."""
    others = [pid for pid in workers if pid != worker]
    for pid in others:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in others:
            os.kill(pid, signal.SIGCONT)
