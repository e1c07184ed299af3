"""Keeping a backend's child process up: a task that restarts it when it dies under a running engine.

The embedded redis-server (:mod:`.redis.supervisor`) and each embedded vector shard
(:class:`~.vectors.edge.EdgeVectorStore` in its child process) are supervised alike. :func:`supervise`
runs in the engine's task group; while the child is down its calls fail fast with the backend's
:class:`~cpersona.errors.BackendUnavailable`, and once it is back an optional step finishes what the
outage left undone. Restarts back off: the first is at once, then each waits twice as long as the one
before, up to :data:`MAX_DELAY_SECS`; a child that stayed up for :data:`STABLE_SECS` starts the count
afresh. It stops when the owner stops the child, and cancellation passes through it untouched.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

import anyio

from cpersona.errors import BackendUnavailable

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from anyio.abc import TaskStatus

__all__ = ["FIRST_DELAY_SECS", "MAX_DELAY_SECS", "STABLE_SECS", "Child", "restart_delay", "supervise"]

log = logging.getLogger("cpersona.supervision")

FIRST_DELAY_SECS = 0.25
"""The pause before the second restart in a row (the first is at once)."""
MAX_DELAY_SECS = 10.0
"""The longest pause between two restarts."""
STABLE_SECS = 60.0
"""A child that ran this long before dying is restarted at once again."""


class Child(Protocol):
    """A backend process its owner can restart."""

    @property
    def pid(self) -> int | None: ...

    @property
    def stopping(self) -> bool:
        """Whether the owner is stopping the child (or has): an exit now is no crash."""
        ...

    async def wait_exited(self) -> int | None:
        """Wait until the child exits; its exit code."""
        ...

    async def restart(self) -> None:
        """Start the child again; raises :class:`~cpersona.errors.BackendUnavailable` when it would not."""
        ...


def restart_delay(failures: int) -> float:
    """The pause before the restart that follows ``failures`` deaths or failed starts in a row."""
    if failures <= 1:
        return 0.0
    return min(MAX_DELAY_SECS, FIRST_DELAY_SECS * 2.0 ** (failures - 2))


async def supervise(
    child: Child,
    what: str,
    *,
    recover: Callable[[], Awaitable[None]] | None = None,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Restart ``child`` (named ``what`` in the log) each time it exits on its own, until its owner stops
    it or this is cancelled; after each restart, run ``recover`` (retried with the same backoff while it
    fails with a backend outage)."""
    task_status.started()
    failures = 0
    restarted = False
    while True:
        up_since = anyio.current_time()
        async with anyio.create_task_group() as tg:
            if restarted and recover is not None:
                # Beside the wait: a child that dies again stops the recovery; its next restart runs it anew.
                tg.start_soon(_recover, child, what, recover)
            code = await child.wait_exited()
            tg.cancel_scope.cancel()
        if child.stopping:
            return
        failures = 1 if anyio.current_time() - up_since >= STABLE_SECS else failures + 1
        log.error("%s exited with code %s; restarting it", what, code)
        again = await _restart(child, what, failures)
        if again is None:
            return
        failures, restarted = again, True


async def _restart(child: Child, what: str, failures: int) -> int | None:
    """Start ``child`` again, retrying with the backoff; the failure count to go on with, or ``None``
    when the owner stopped the child meanwhile."""
    while True:
        await anyio.sleep(restart_delay(failures))
        if child.stopping:
            return None
        try:
            await child.restart()
        except BackendUnavailable as exc:
            failures += 1
            next_try = restart_delay(failures)
            log.error("restarting %s failed (next try in %.2fs): %s", what, next_try, exc)
            continue
        if child.stopping:
            return None
        log.warning("%s is serving again (pid %s)", what, child.pid)
        return failures


async def _recover(child: Child, what: str, recover: Callable[[], Awaitable[None]]) -> None:
    """Run ``recover`` until it succeeds, the child is stopped, or it fails otherwise than by an outage
    (logged: the next start finishes the work). Cancelled when the child dies again."""
    failures = 1
    while not child.stopping:
        try:
            await recover()
        except BackendUnavailable as exc:
            failures += 1
            next_try = restart_delay(failures)
            log.error("recovering after %s came back failed (next try in %.2fs): %s", what, next_try, exc)
            await anyio.sleep(next_try)
            continue
        except Exception:
            log.exception("recovering after %s came back failed; left to the next start", what)
        return
