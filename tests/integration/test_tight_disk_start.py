"""An engine started on a full disk comes up read-only: it serves reads, refuses every write with 507,
says so in readiness and the log, and takes writes again once the disk has room. On a real tmpfs (it
needs root and a kernel that lets the test mount one), with the real Redis and shard processes.

The data dir is opened once more before the disk is filled: on a tmpfs a shard's first open after
writes pages in the holes of its memory-mapped files (about 150 MB here), where a disk would read them
as zeros; the full-disk start under test is the one after that, as on a disk.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import subprocess
from typing import TYPE_CHECKING, BinaryIO

import anyio
import anyio.to_thread
import pytest

import cpersona
from serving import asked_over_http

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from cpersona.engine.facade import Engine

AGENT = "tight-disk"
_TMPFS_MB = 512
_GUARD_SECS = 120  # a hang guard, not a measurement


@contextlib.contextmanager
def _tmpfs(path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    path.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={_TMPFS_MB}m", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"mounting a tmpfs was refused: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=True)


def _fill(path: Path) -> None:
    """Write zeros to ``path`` until the disk is full."""
    with path.open("wb", buffering=0) as filler:
        for size in (1024 * 1024, 4096):
            assert _write_until_refused(filler, size) == errno.ENOSPC


def _write_until_refused(filler: BinaryIO, size: int) -> int | None:
    """Append blocks of ``size`` zeros until a write fails; its errno."""
    try:
        while True:
            filler.write(bytes(size))
    except OSError as exc:
        return exc.errno


async def _until_writable(memory: Engine) -> None:
    # A disk's reading is reused for a second (cpersona.engine.disk): a probe after that sees the room.
    while True:
        if (await memory.readiness()).mode == "read-write":
            return
        await anyio.sleep(0.05)


async def test_a_start_on_a_full_disk_serves_reads_and_takes_writes_once_there_is_room(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with _tmpfs(tmp_path / "disk") as disk:
        data_dir = disk / "data"
        async with cpersona.open(data_dir=data_dir, min_free_mb=0) as memory:
            refs = {(await memory.store(f"parcel {n} left the depot", agent_id=AGENT)).ref for n in range(8)}
        async with cpersona.open(data_dir=data_dir, min_free_mb=0):
            pass
        filler = disk / "filler"
        await anyio.to_thread.run_sync(_fill, filler)
        caplog.set_level(logging.WARNING, logger="cpersona.disk")
        async with cpersona.open(data_dir=data_dir, min_free_mb=0) as memory:
            ready = await memory.readiness()
            assert ready.ready
            assert ready.mode == "read-only"
            assert set(ready.components.values()) == {"up"}
            recalled = await memory.recall("parcel depot", agent_id=AGENT, limit=20)
            assert {row.ref for row in recalled.rows} == refs
            assert recalled.degraded == ()
            some = next(iter(refs))
            assert (await memory.get(some, agent_id=AGENT)).ref == some
            with pytest.raises(cpersona.InsufficientStorage) as refused:
                await memory.store("one parcel too many", agent_id=AGENT)
            assert refused.value.status == 507
            encode = await asked_over_http(
                memory, "POST", "/v1/encode", json={"agent_id": AGENT, "content": "more"}
            )
            assert encode.status_code == 507, encode.text
            assert encode.json()["error"]["code"] == "INSUFFICIENT_STORAGE"
            probe = await asked_over_http(memory, "GET", "/readiness")
            assert probe.status_code == 200, probe.text
            assert probe.json()["mode"] == "read-only"

            await anyio.to_thread.run_sync(filler.unlink)
            with anyio.fail_after(_GUARD_SECS):
                await _until_writable(memory)
            stored = await memory.store("the depot has room again", agent_id=AGENT)
            assert stored.result == "stored"
            assert not stored.vector_pending
            probe = await asked_over_http(memory, "GET", "/readiness")
            assert probe.json()["mode"] == "read-write"
        assert (data_dir / "disk.reserve").stat().st_blocks > 0
    messages = [r.getMessage() for r in caplog.records if r.name == "cpersona.disk"]
    assert any("starts read-only" in m for m in messages), messages
    assert any("writes are accepted" in m for m in messages), messages
