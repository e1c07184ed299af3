"""Keeping the embedded Redis up: a task that restarts the server when it dies under a running engine.

:func:`supervise` runs in the engine's task group (:meth:`cpersona.Engine.run_background`). While the
server is down every Redis call fails fast with :class:`~cpersona.RedisUnavailable` (HTTP 503); the server
comes back at the same address, replays its append-only file (every acknowledged write was written to it
before the reply went out) and the engine's client reconnects on its next call. Restarts back off: the
first is at once, then each waits twice as long as the one before, up to :data:`MAX_DELAY_SECS`; a server
that stayed up for :data:`STABLE_SECS` starts the count afresh. It stops when the owner stops the server,
and cancellation passes through it untouched.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio

from cpersona.errors import RedisUnavailable

if TYPE_CHECKING:
    from anyio.abc import TaskStatus

    from cpersona.stores.redis.server import EmbeddedRedis

__all__ = ["FIRST_DELAY_SECS", "MAX_DELAY_SECS", "STABLE_SECS", "restart_delay", "supervise"]

log = logging.getLogger("cpersona.redis")

FIRST_DELAY_SECS = 0.25
"""The pause before the second restart in a row (the first is at once)."""
MAX_DELAY_SECS = 10.0
"""The longest pause between two restarts."""
STABLE_SECS = 60.0
"""A server that ran this long before dying is restarted at once again."""


def restart_delay(failures: int) -> float:
    """The pause before the restart that follows ``failures`` deaths or failed starts in a row."""
    if failures <= 1:
        return 0.0
    return min(MAX_DELAY_SECS, FIRST_DELAY_SECS * 2.0 ** (failures - 2))


async def supervise(
    server: EmbeddedRedis, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    """Restart ``server`` each time it exits on its own, until its owner stops it or this is cancelled."""
    task_status.started()
    failures = 0
    while True:
        up_since = anyio.current_time()
        code = await server.wait_exited()
        if server.stopping:
            return
        failures = 1 if anyio.current_time() - up_since >= STABLE_SECS else failures + 1
        log.error("the embedded redis-server exited with code %s; restarting it", code)
        restarted = await _restart(server, failures)
        if restarted is None:
            return
        failures = restarted


async def _restart(server: EmbeddedRedis, failures: int) -> int | None:
    """Start ``server`` again, retrying with the backoff; the failure count to go on with, or ``None``
    when the owner stopped the server meanwhile."""
    while True:
        await anyio.sleep(restart_delay(failures))
        if server.stopping:
            return None
        try:
            await server.restart()
        except RedisUnavailable as exc:
            failures += 1
            next_try = restart_delay(failures)
            log.error("restarting the embedded redis-server failed (next try in %.2fs): %s", next_try, exc)
            continue
        if server.stopping:
            return None
        log.warning("the embedded redis-server is serving again (pid %d)", server.pid)
        return failures
