"""Stopping a redis-server without losing an acknowledged write, whether it is our child or one a killed
engine left running on the data dir: ``SHUTDOWN`` first (it fsyncs the AOF), then SIGTERM (which does
too), then SIGKILL, each step with a deadline.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.abc
import anyio.to_thread
import redis.exceptions

from cpersona.errors import RedisUnavailable
from cpersona.stores.redis.connection import close_redis, new_client
from cpersona.stores.redis.datadir import read_pid, read_text

if TYPE_CHECKING:
    from cpersona.settings import Settings
    from cpersona.stores.redis.datadir import ServerLayout

__all__ = ["pid_gone", "request_shutdown", "retire_leftover", "stop_child"]

_POLL_SECS = 0.05
# After SIGKILL the kernel frees a process at once unless it is stuck in the kernel; past this, give up.
_KILL_WAIT_SECS = 5.0


async def stop_child(process: anyio.abc.Process, url: str | None, settings: Settings) -> None:
    """Stop our own child: ``SHUTDOWN``, then SIGTERM, then SIGKILL, each with a deadline."""
    if (
        process.returncode is None
        and url is not None
        and await request_shutdown(url, settings.redis_timeout_secs, expect_pid=process.pid)
    ):
        # SHUTDOWN fsyncs the AOF before exiting; give it the startup allowance to finish. A refused
        # SHUTDOWN goes straight to SIGTERM instead of waiting for an exit that is not coming.
        with anyio.move_on_after(settings.redis_startup_timeout_secs):
            await process.wait()
    for sig, wait_secs in (
        (signal.SIGTERM, settings.redis_timeout_secs),
        (signal.SIGKILL, _KILL_WAIT_SECS),
    ):
        if process.returncode is not None:
            break
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(sig)
        with anyio.move_on_after(wait_secs):
            await process.wait()
    if process.returncode is None:
        raise RedisUnavailable(f"the embedded redis-server (pid {process.pid}) did not exit after SIGKILL")
    await process.aclose()


async def retire_leftover(layout: ServerLayout, settings: Settings) -> None:
    """Stop a redis-server that a killed engine left running on this data dir, losing nothing."""
    pid = await anyio.to_thread.run_sync(read_pid, layout.pidfile)
    if pid is None or not await anyio.to_thread.run_sync(_is_our_server, pid, layout.redis_dir):
        return
    url = await anyio.to_thread.run_sync(read_text, layout.url_file)
    if url and await request_shutdown(url, settings.redis_timeout_secs, expect_pid=pid):
        with anyio.move_on_after(settings.redis_startup_timeout_secs):
            await _wait_gone(pid)
    # Not answering (or refusing SHUTDOWN): SIGTERM still makes Redis fsync its AOF and exit.
    for sig, wait_secs in (
        (signal.SIGTERM, settings.redis_startup_timeout_secs),
        (signal.SIGKILL, _KILL_WAIT_SECS),
    ):
        if await anyio.to_thread.run_sync(pid_gone, pid):
            return
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        with anyio.move_on_after(wait_secs):
            await _wait_gone(pid)
    if not await anyio.to_thread.run_sync(pid_gone, pid):
        raise RedisUnavailable(
            f"a redis-server left over from an earlier engine (pid {pid}) on {layout.redis_dir} "
            "would not exit; stop it by hand"
        )


async def request_shutdown(url: str, wait_secs: float, *, expect_pid: int) -> bool:
    """Send ``SHUTDOWN`` to the server at ``url`` if it is the process ``expect_pid``; True if it went."""
    client = new_client(url, timeout=wait_secs, retries=0, map_errors=False)
    try:
        with anyio.fail_after(wait_secs):
            info = await client.info("server")
            if int(info.get("process_id", -1)) != expect_pid:
                return False
            # redis-py treats the connection closing (rather than a reply) as success; an error reply
            # (e.g. the AOF could not be fsynced) raises, and the caller falls back to signals.
            await client.shutdown()
            return True
    except (redis.exceptions.RedisError, TimeoutError):
        return False
    finally:
        await close_redis(client)


async def _wait_gone(pid: int) -> None:
    # Not our child (its parent was the killed engine), so there is no wait(): poll its pid.
    while True:
        if await anyio.to_thread.run_sync(pid_gone, pid):
            return
        await anyio.sleep(_POLL_SECS)


def pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    # A zombie has exited and only waits for its parent to reap it; orphans are reaped by PID 1, which in
    # some containers never does.
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat_line.rpartition(b")")[2].split()[:1] == [b"Z"]


def _is_our_server(pid: int, redis_dir: Path) -> bool:
    """Whether ``pid`` is a live redis-server running in ``redis_dir`` (Linux ``/proc``)."""
    if pid == os.getpid() or pid_gone(pid):
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        # Gone meanwhile, not ours to read, or no /proc: a process we cannot identify is left alone.
        return False
    # A stale pidfile may name a pid reused by an unrelated process: both checks must hold.
    return b"redis-server" in cmdline and Path(cwd) == redis_dir
