"""The free-space floor: writes are refused before an embedded store's disk is full.

The embedded Qdrant engine maps its segments into memory, so a full disk under it kills the process with
SIGBUS instead of failing a call, and Redis answers MISCONF once its AOF cannot grow. Each write checks
first that every embedded store's file system (``<data_dir>/redis``, ``<data_dir>/qdrant``; a remote
store is not ours to watch) has at least ``CPERSONA_MIN_FREE_MB`` free, and refuses the write with
:class:`~cpersona.InsufficientStorage` otherwise. Reads never check. A reading of the disk is reused for
:data:`READING_SECS`, so a burst of stores stats it once, not per record; the stat runs in a worker
thread, as a slow disk must not stall the event loop.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Final

import anyio

from cpersona.errors import InsufficientStorage

if TYPE_CHECKING:
    from cpersona.settings import Settings

__all__ = ["READING_SECS", "check_free_space", "watched_stores"]

log = logging.getLogger("cpersona.disk")

READING_SECS: Final = 1.0
"""How long one reading of a disk's free space is reused."""
_LOG_EVERY_SECS: Final = 60.0
_MB: Final = 1024 * 1024


@dataclasses.dataclass(slots=True)
class _Reading:
    free_bytes: int
    at: float


# Free space belongs to the file system, not to an engine: engines on one data dir share the readings.
_readings: dict[Path, _Reading] = {}
_last_logged: dict[Path, float] = {}


def watched_stores(settings: Settings) -> list[tuple[str, Path]]:
    """The embedded stores whose disks the floor watches, each with its directory."""
    stores: list[tuple[str, Path]] = []
    if settings.embedded_redis:
        stores.append(("embedded Redis", settings.data_dir / "redis"))
    if settings.embedded_qdrant and settings.embedding_mode != "none":
        stores.append(("embedded vector store", settings.data_dir / "qdrant"))
    return stores


async def check_free_space(settings: Settings) -> None:
    """Raise :class:`~cpersona.InsufficientStorage` when a watched disk is under the floor."""
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
        store, directory, free_mb, floor_mb,
    )  # fmt: skip
