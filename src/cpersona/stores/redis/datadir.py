"""The embedded Redis's folder: the files of the server.

:class:`ServerLayout` names the files under ``<data_dir>/redis/`` (see :mod:`.server` for what each
holds), and the functions below write the config and read the files back. No process is started here.
The lock that gives one engine its data dir is :class:`~cpersona.stores.data_dir.DataDirLock`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import secrets
import urllib.parse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "ServerLayout",
    "config_text",
    "data_dir_password",
    "log_tail",
    "open_log",
    "read_pid",
    "read_text",
    "unlink",
    "with_password",
    "write_config",
]

# sun_path holds 108 bytes including the terminating NUL.
_UNIX_PATH_MAX = 107
_LOG_TAIL_LINES = 25


@dataclasses.dataclass(frozen=True, slots=True)
class ServerLayout:
    data_dir: Path
    redis_dir: Path

    @classmethod
    def prepare(cls, data_dir: Path) -> ServerLayout:
        # redis-server changes into its own dir, so every path given to it must be absolute.
        root = data_dir.expanduser().resolve()
        redis_dir = root / "redis"
        redis_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        return cls(root, redis_dir)

    @property
    def config(self) -> Path:
        return self.redis_dir / "redis.conf"

    @property
    def socket(self) -> Path:
        return self.redis_dir / "redis.sock"

    @property
    def pidfile(self) -> Path:
        return self.redis_dir / "redis.pid"

    @property
    def url_file(self) -> Path:
        return self.redis_dir / "redis.url"

    @property
    def logfile(self) -> Path:
        return self.redis_dir / "redis.log"

    @property
    def password_file(self) -> Path:
        return self.redis_dir / "redis.password"

    @property
    def socket_fits(self) -> bool:
        return len(os.fsencode(self.socket)) <= _UNIX_PATH_MAX


def _quote(value: str) -> str:
    # redis.conf reads double-quoted arguments with C-style escapes, so paths with spaces survive.
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"'


def data_dir_password(layout: ServerLayout) -> str:
    """The embedded server's password: made once per data dir (0600, never replaced), read after that.

    A TCP port on loopback is open to every local process, and a unix socket to every process of the
    user; with the password only one that can read this file (as the engine, ``trace tail`` and the CLI
    can, through the URL the server publishes) gets an answer."""
    path = layout.password_file
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        text = path.read_text().strip()
        if text:
            return text
        # An empty file is a start killed between creating and writing it: nothing used it yet.
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC)
    try:
        os.write(fd, secrets.token_hex(32).encode() + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    return path.read_text().strip()


def with_password(url: str, password: str) -> str:
    """``url`` carrying ``password`` (redis-py reads it from the URL for TCP and unix sockets alike)."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(netloc=f":{password}@{parts.netloc}"))


def config_text(
    layout: ServerLayout, modules: tuple[Path, ...], *, port: int, use_socket: bool, password: str
) -> str:
    lines = [
        "# Written by cpersona at every start of the embedded Redis; edits here are overwritten.",
        "daemonize no",
        "protected-mode yes",
        "bind 127.0.0.1",
        f"port {port}",
        f"requirepass {_quote(password)}",
    ]
    if use_socket:
        lines += [f"unixsocket {_quote(str(layout.socket))}", "unixsocketperm 700"]
    lines += [
        f"dir {_quote(str(layout.redis_dir))}",
        f"pidfile {_quote(str(layout.pidfile))}",
        f"logfile {_quote(str(layout.logfile))}",
        "appendonly yes",
        "appendfsync always",
        'save ""',
    ]
    search, json_module = modules
    # A query that runs past the search module's timeout must fail loudly: the default policy returns
    # partial results without saying so, which would silently drop recall candidates.
    lines += [
        f"loadmodule {_quote(str(search))} ON_TIMEOUT FAIL",
        f"loadmodule {_quote(str(json_module))}",
    ]
    return "\n".join(lines) + "\n"


def write_config(layout: ServerLayout, text: str, url: str) -> int:
    """Write the config and the URL; return the log's size so a failure shows only this start's lines."""
    # Both hold the password: readable by the owner only.
    _write_private(layout.config, text)
    # Written before the server starts, so that a start interrupted by a SIGKILL still leaves the way
    # to reach the server for the next engine. Only a help for that next engine: on a full disk the
    # server starts without it (the launcher's death signal still stops it with its engine, on Linux).
    try:
        _write_private(layout.url_file, url + "\n")
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
        unlink(layout.url_file)
    try:
        return layout.logfile.stat().st_size
    except FileNotFoundError:
        return 0


def _write_private(path: Path, text: str) -> None:
    data = text.encode()
    with contextlib.suppress(OSError):
        if path.read_bytes() == data and path.stat().st_mode & 0o777 == 0o600:
            # Unchanged since the last start: left alone, so a start on a full disk does not empty it.
            return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        # A file from before the password keeps its old mode through O_CREAT; narrow it.
        os.fchmod(fd, 0o600)
        os.write(fd, data)
    finally:
        os.close(fd)


def open_log(path: Path) -> int:
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)


def log_tail(path: Path, start: int) -> bytes:
    try:
        with path.open("rb") as file:
            size = file.seek(0, os.SEEK_END)
            file.seek(max(start, size - 16_384))
            data = file.read()
    except OSError:
        return b"(no log)"
    return b"\n".join(data.splitlines()[-_LOG_TAIL_LINES:])


def read_text(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def read_pid(path: Path) -> int | None:
    text = read_text(path)
    return int(text) if text is not None and text.isdigit() else None


def unlink(path: Path) -> None:
    path.unlink(missing_ok=True)
