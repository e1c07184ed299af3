"""The free-space floor: writes are refused before an embedded store's disk is full.

The embedded Qdrant engine maps its segments into memory, so a full disk under it kills the process with
SIGBUS instead of failing a call, and Redis answers MISCONF once its AOF cannot grow. Each write checks
first that every embedded store's file system (``<data_dir>/redis``, ``<data_dir>/qdrant``; a remote
store is not ours to watch) has at least ``CPERSONA_MIN_FREE_MB`` free, and refuses the write with
:class:`~cpersona.InsufficientStorage` otherwise. Reads never check. A reading of the disk is reused for
:data:`READING_SECS`, so a burst of stores stats it once, not per record; the stat runs in a worker
thread, as a slow disk must not stall the event loop.

A start on a full disk comes up read-only. Even a start writes a little: redis-server rewrites its AOF
manifest (and exits when it cannot), and each shard's child dirties a few pages of its files (about 16 KB
in all, measured on a tmpfs), which on a full disk is a SIGBUS. So the data dir keeps
:data:`RESERVE_BYTES` of room in a file of its own (``<data_dir>/disk.reserve``, made by a start with
room): a start that finds less than that free (:func:`prepare_start`) deletes the file, so that the
stores can open in the room it held, and the engine serves reads and refuses every write, at any floor,
even ``0``. The next write (or readiness probe) that finds :data:`RESUME_BYTES` free again makes the
reserve anew and lets writes through: no timer, as nothing but a write needs to know, and a write
checks the disk anyway.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import logging
import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal

import anyio

from cpersona.errors import InsufficientStorage

if TYPE_CHECKING:
    from cpersona.settings import Settings

__all__ = [
    "READING_SECS",
    "RESERVE_BYTES",
    "RESUME_BYTES",
    "WriteMode",
    "check_free_space",
    "end_start",
    "prepare_start",
    "watched_stores",
    "write_mode",
]

WriteMode = Literal["read-write", "read-only"]

log = logging.getLogger("cpersona.disk")

READING_SECS: Final = 1.0
"""How long one reading of a disk's free space is reused."""
_LOG_EVERY_SECS: Final = 60.0
_MB: Final = 1024 * 1024
RESERVE_BYTES: Final = _MB
"""The room the data dir keeps for a start on a full disk (a start needs about 16 KB)."""
RESUME_BYTES: Final = 2 * RESERVE_BYTES
"""The free space an engine that started read-only needs to make its reserve again and take writes."""
_RESERVE_NAME: Final = "disk.reserve"


@dataclasses.dataclass(slots=True)
class _Reading:
    free_bytes: int
    at: float


# Free space belongs to the file system, not to an engine: engines on one data dir share the readings.
_readings: dict[Path, _Reading] = {}
_last_logged: dict[Path, float] = {}
# The data dirs whose engine started on a full disk and has not had room since (one engine per data dir).
_started_full: set[Path] = set()


def watched_stores(settings: Settings) -> list[tuple[str, Path]]:
    """The embedded stores whose disks the floor watches, each with its directory."""
    stores: list[tuple[str, Path]] = []
    if settings.embedded_redis:
        stores.append(("embedded Redis", settings.data_dir / "redis"))
    if settings.embedded_qdrant and settings.embedding_mode != "none":
        stores.append(("embedded vector store", settings.data_dir / "qdrant"))
    return stores


async def prepare_start(settings: Settings) -> None:
    """Before the embedded stores open (the data dir locked): on a disk with less than the reserve free,
    give the stores the reserve's room and start read-only; else make sure the reserve is there."""
    if not watched_stores(settings):
        return
    data_dir = settings.data_dir
    if await anyio.to_thread.run_sync(_keep_reserve, data_dir):
        _started_full.discard(data_dir)
        return
    _started_full.add(data_dir)
    log.error(
        "the disk of the data dir %s is full: the engine starts read-only (reads are served, every write "
        "is refused with 507) until %d MB are free",
        data_dir,
        RESUME_BYTES // _MB,
    )


def end_start(settings: Settings) -> None:
    """Forget the engine's read-only start when it closes: the next start looks at the disk afresh."""
    _started_full.discard(settings.data_dir)


async def write_mode(settings: Settings) -> WriteMode:
    """Whether writes are accepted now (a readiness probe; it lifts a read-only start as a write does)."""
    try:
        await check_free_space(settings)
    except InsufficientStorage:
        return "read-only"
    return "read-write"


async def check_free_space(settings: Settings) -> None:
    """Raise :class:`~cpersona.InsufficientStorage` when a watched disk is under the floor, or when the
    engine started on a full disk that has not had room since."""
    if settings.data_dir in _started_full:
        await _check_room_again(settings)
    floor_mb = settings.min_free_mb
    if floor_mb == 0:
        return
    for store, directory in watched_stores(settings):
        free = await _free_bytes(directory)
        if free < floor_mb * _MB:
            _log_refusal(directory, store, free // _MB, floor_mb)
            raise InsufficientStorage(store, free // _MB, floor_mb)
        if _last_logged.pop(directory, None) is not None:
            log.warning("the disk of the %s has %d MB free again; writes are accepted", store, free // _MB)


async def _check_room_again(settings: Settings) -> None:
    data_dir = settings.data_dir
    free = await _free_bytes(data_dir)
    if free < RESUME_BYTES or not await anyio.to_thread.run_sync(_keep_reserve, data_dir):
        raise InsufficientStorage("data dir", free // _MB, RESUME_BYTES // _MB, started_full=True)
    _started_full.discard(data_dir)
    log.warning("the disk of the data dir has %d MB free again: writes are accepted", free // _MB)


def _keep_reserve(data_dir: Path) -> bool:
    """Make sure ``<data_dir>/disk.reserve`` holds its room; when the disk has too little for that,
    delete it (its room goes to the start) and return ``False``."""
    path = data_dir / _RESERVE_NAME
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    with contextlib.suppress(FileNotFoundError):
        if path.stat().st_blocks * 512 >= RESERVE_BYTES and _measure(data_dir) >= RESERVE_BYTES:
            return True
    if _measure(data_dir) + _held(path) < RESUME_BYTES:
        path.unlink(missing_ok=True)
        return False
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        # Allocated, not sparse: the blocks are the room a later start takes back.
        os.posix_fallocate(fd, 0, RESERVE_BYTES)
    except OSError as exc:
        path.unlink(missing_ok=True)
        # A file system that cannot allocate ahead (EOPNOTSUPP) just goes without a reserve.
        return exc.errno != errno.ENOSPC
    finally:
        os.close(fd)
    return True


def _held(path: Path) -> int:
    try:
        return path.stat().st_blocks * 512
    except FileNotFoundError:
        return 0


async def _free_bytes(directory: Path) -> int:
    now = time.monotonic()
    reading = _readings.get(directory)
    if reading is None or now - reading.at >= READING_SECS:
        free = await anyio.to_thread.run_sync(_measure, directory)
        reading = _readings[directory] = _Reading(free, now)
    return reading.free_bytes


def _measure(directory: Path) -> int:
    # Before a store first opens, its directory may not exist yet: its nearest parent is on the same disk.
    for path in (directory, *directory.parents):
        try:
            return shutil.disk_usage(path).free
        except FileNotFoundError:
            continue
    return shutil.disk_usage(Path.cwd()).free


def _log_refusal(directory: Path, store: str, free_mb: int, floor_mb: int) -> None:
    """Log a refusal when the disk first goes under the floor, then at most once a minute."""
    now = time.monotonic()
    last = _last_logged.get(directory)
    if last is not None and now - last < _LOG_EVERY_SECS:
        return
    _last_logged[directory] = now
    log.error(
        "writes are refused: the disk of the %s (%s) has %d MB free, under CPERSONA_MIN_FREE_MB=%d",
        store,
        directory,
        free_mb,
        floor_mb,
    )
