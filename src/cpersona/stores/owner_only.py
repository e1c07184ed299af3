"""Everything under the data dir belongs to its owner alone: repaired when an engine takes the dir, and
created so by what runs there afterwards.

The data dir holds every agent's memories (Redis's append-only files, the vector shards), the password
of the embedded Redis and the key of sealed entries. :func:`repair` makes the dir and every directory
under it ``0700`` and takes the group's and others' bits off every file (``0600`` for all the engine
writes), so a dir made by an older version, or by hand as ``0755``, is closed the next time it is
opened. What is created afterwards is owner-only at birth: the engine's own files are opened ``0600``
and its folders made ``0700``, and the processes it starts there (``redis-server``, the vector shard
workers) run under :data:`UMASK`.

The umask is set in those child processes only, never in this one: a library caller's process keeps its
own umask for the files it makes elsewhere, and umask is process-wide, so setting it here around a write
would race with every other thread. The one writer this leaves out is a vector shard run in this
process's threads (``CPERSONA_QDRANT_PROCESS=false``): its new files are made under the caller's umask,
inside ``0700`` folders, so no one else can reach them, and the next open repairs their modes.
"""

from __future__ import annotations

import logging
import os
import stat
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["DIR_MODE", "UMASK", "repair"]

log = logging.getLogger("cpersona.datadir")

UMASK = 0o077
"""The umask of the processes the engine starts in the data dir: what they create is theirs alone."""
DIR_MODE = 0o700


def repair(root: Path) -> None:
    """Make ``root`` and every directory under it ``0700``, and take the group's and others' bits off
    every file under it. Blocking (a walk of the whole tree): run it in a worker thread.

    Symbolic links are neither followed nor changed (their targets are not the data dir's). A file this
    user cannot change is logged and left as it is.
    """
    _fix(root, directory=True)
    for folder, dirs, files in os.walk(root, onerror=_unreadable):
        for name in dirs:
            _fix(os.path.join(folder, name), directory=True)
        for name in files:
            _fix(os.path.join(folder, name), directory=False)


def _fix(path: str | Path, *, directory: bool) -> None:
    try:
        mode = os.lstat(path).st_mode
        if stat.S_ISLNK(mode):
            return
        # A file keeps its owner's bits (an owner's executable stays one); the engine's own are all rw-.
        wanted = DIR_MODE if directory else stat.S_IMODE(mode) & 0o700
        if stat.S_IMODE(mode) != wanted:
            os.chmod(path, wanted)
    except FileNotFoundError:
        return  # gone while the walk ran (a socket, a rewritten AOF): nothing of it is left to close
    except OSError as exc:
        log.warning("cannot make %s owner-only (%s); others may read it", path, exc.strerror)


def _unreadable(exc: OSError) -> None:
    log.warning("cannot walk %s to make it owner-only (%s)", exc.filename, exc.strerror)
