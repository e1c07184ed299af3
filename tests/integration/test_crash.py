"""Nothing acknowledged is lost when the server is killed mid-import.

A real ``cpersona serve`` runs on its embedded defaults (embedded Redis, the Qdrant edge engine on disk,
the ONNX model). A client streams batches of memories at it; while batches are in flight the server is
killed with SIGKILL. The server is started again on the same data directory, and every record whose batch
was acknowledged must be readable, must carry its vector mark cleared, and must have its vector in the
on-disk Qdrant shard; and no vector may be left whose record was never written.
"""

from __future__ import annotations

import contextlib
import os
import signal
from typing import TYPE_CHECKING

import anyio
import httpx
import pytest

import cpersona
from cpersona import MemoryRecord
from serving import free_port, start_serve, wait_healthy

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytestmark = pytest.mark.slow

BATCH = 16


@pytest.fixture
def server_dir(tmp_path: Path) -> Iterator[Path]:
    data = tmp_path / "data"
    yield data
    # A killed server leaves its redis-server child running; stop it so the test leaves nothing behind.
    pidfile = data / "redis" / "redis.pid"
    if pidfile.exists():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pidfile.read_text().strip()), signal.SIGKILL)


def _records(start: int, count: int) -> list[dict[str, object]]:
    return [
        {"agent_id": "crash", "content": f"memory {n}: the courier delivered parcel {n * 7919 % 10007}"}
        for n in range(start, start + count)
    ]


async def test_sigkill_mid_import_loses_no_acknowledged_record(server_dir: Path, tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "server.log"
    acknowledged: list[str] = []
    proc = start_serve(server_dir, port, log)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
        await wait_healthy(client, proc, log)

        enough = anyio.Event()

        async def send_batches() -> None:
            n = 0
            while True:
                try:
                    reply = await client.post("/v1/encode/batch", json={"records": _records(n, BATCH)})
                except httpx.TransportError:
                    return  # the server died under this request: it was never acknowledged
                assert reply.status_code == 200, reply.text
                acknowledged.extend(r["ref"] for r in reply.json()["results"])
                n += BATCH
                if len(acknowledged) >= 10 * BATCH:
                    enough.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(send_batches)
            # Kill while batches are in flight, after a good number have been acknowledged.
            with anyio.fail_after(180):
                await enough.wait()
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        killed_at = len(acknowledged)
        assert killed_at >= 10 * BATCH

        proc = start_serve(server_dir, port, log)
        try:
            await wait_healthy(client, proc, log)
            for ref in acknowledged:
                reply = await client.get(f"/v1/records/{ref}", params={"agent_id": "crash"})
                assert reply.status_code == 200, (ref, reply.text)
                assert reply.json()["record"]["embedded"] is True, ref
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=60)

    # The server is down: open the same data dir in-process and look at the Qdrant shard itself.
    async with cpersona.open(data_dir=server_dir) as memory:
        assert memory.backends.vectors is not None
        ids = [ref.partition(":")[2] for ref in acknowledged]
        assert await memory.backends.vectors.existing(ids) == set(ids)
        assert await memory.backends.stores.redis.scard(memory.keys.vector_pending) == 0
        # The batches in flight when the server died wrote vectors of records never written: the start
        # swept them, so every vector has its record.
        stats = await memory.stats(None)
        assert stats["vectors"] == stats["memories"] >= len(acknowledged)
        sample = await memory.get(acknowledged[-1], agent_id="crash")
        assert isinstance(sample, MemoryRecord)
        assert sample.embedded
