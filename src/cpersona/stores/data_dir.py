"""The lock that gives one engine a data dir: an exclusive ``flock`` on ``<data_dir>/engine.lock``.

Whatever the engine keeps in the dir (the embedded Redis, the embedded vector shards) is its alone while
it holds the lock; ``cpersona serve`` takes a look at it before starting workers.
"""

from __future__ import annotations

import errno
import fcntl
import os
from typing import TYPE_CHECKING, Self

import anyio
import anyio.to_thread

from cpersona.errors import DataDirLocked
from cpersona.stores import owner_only

if TYPE_CHECKING:
    from pathlib import Path
    from types import TracebackType

__all__ = ["DataDirLock"]


class DataDirLock:
    """An exclusive ``flock`` on ``<data_dir>/engine.lock``, naming its holder's pid inside the file.

    ``async with`` (:meth:`take`) also repairs the dir's modes, as an engine opening it does; the bare
    :meth:`acquire` only locks (a look at whether the dir is free).

    ``acquire`` never blocks: when another process (or another lock object in this one) holds the
    lock it raises :class:`~cpersona.DataDirLocked`. The kernel drops the lock when the holder's file
    descriptor closes, so a killed engine never leaves the directory locked. The file itself is left
    in place: deleting it would let two processes lock two different files of the same name.
    """

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.path = data_dir / "engine.lock"
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock (creating the data dir if needed) or raise :class:`DataDirLocked`. Sync, quick."""
        if self._fd is not None:
            raise RuntimeError(f"{self.path} is already held by this lock object")
        self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        # O_CLOEXEC: redis-server must not inherit the lock, or a server outliving a killed engine would
        # keep the data dir locked against the very engine that has to shut it down.
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _lock_holder(fd)
            os.close(fd)
            raise DataDirLocked(str(self.data_dir), holder) from None
        except BaseException:
            os.close(fd)
            raise
        try:
            _name_holder(fd)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        """Drop the lock. Does nothing when it is not held."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            # Empty the file so that nobody reads a stale pid as the holder.
            os.ftruncate(fd, 0)
        except OSError:
            pass
        finally:
            os.close(fd)

    async def take(self) -> None:
        """:meth:`acquire`, then make everything under the dir owner-only (:func:`.owner_only.repair`):
        what an engine does when it opens the dir. Both run in worker threads."""
        await anyio.to_thread.run_sync(self.acquire)
        try:
            await anyio.to_thread.run_sync(owner_only.repair, self.data_dir)
        except BaseException:
            self.release()
            raise

    async def __aenter__(self) -> Self:
        await self.take()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()


def _name_holder(fd: int) -> None:
    """Write this process's pid into the lock file, for the message of an engine it refuses. On a full
    disk the file stays empty: the ``flock`` is the lock, the pid only names its holder, and an engine
    that cannot say who holds its data dir must still open it (read-only, see :mod:`cpersona.engine.disk`)."""
    os.ftruncate(fd, 0)
    try:
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise


def _lock_holder(fd: int) -> str:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        text = ""
    return f"pid {int(text)}" if text.isdigit() else "pid unknown"
