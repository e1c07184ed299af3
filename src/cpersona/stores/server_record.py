"""Where a running ``cpersona serve`` answers: ``<data_dir>/server.url``, beside the engine's lock.

The server writes its URL there once it listens and removes the file when it stops, so that a command
started on the same data dir talks to it over HTTP instead of failing on the engine lock. The file is
also ``flock``-ed by the server for as long as it runs: a server killed without a chance to remove it
leaves a file nobody holds, which :func:`running_server_url` reads as no server at all.
"""

from __future__ import annotations

import fcntl
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["ServerRecord", "running_server_url"]

_FILE = "server.url"


class ServerRecord:
    """A server's claim on ``<data_dir>/server.url``: written by ``publish``, removed by ``withdraw``."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / _FILE
        self._fd: int | None = None

    def publish(self, url: str) -> bool:
        """Record ``url``; ``False`` (and nothing written) when another live server holds the record."""
        if self._fd is not None:
            raise RuntimeError(f"{self.path} is already published by this object")
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{url}\n".encode(), 0)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return True

    def withdraw(self) -> None:
        """Remove the record (while still holding it, so no reader sees a half-gone server)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            self.path.unlink(missing_ok=True)
        finally:
            os.close(fd)


def running_server_url(data_dir: Path) -> str | None:
    """The URL of the server that holds ``data_dir`` now, or ``None`` when none does."""
    try:
        fd = os.open(data_dir / _FILE, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            # Held: its server is alive.
            text = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
            return text or None
        # Nobody holds it: the server that wrote it is gone (killed before it could remove it).
        return None
    finally:
        os.close(fd)
