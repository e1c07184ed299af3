"""Keeping the embedded Redis up: a task that restarts the server when it dies under a running engine.

:func:`supervise` runs in the engine's task group (:meth:`cpersona.Engine.run_background`), on the
supervision loop every embedded child shares (:mod:`cpersona.stores.supervision`: the first restart at
once, then a bounded backoff). While the server is down every Redis call fails fast with
:class:`~cpersona.RedisUnavailable` (HTTP 503); the server comes back at the same address, replays its
append-only file (every acknowledged write was written to it before the reply went out) and the engine's
client reconnects on its next call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from cpersona.stores import supervision
from cpersona.stores.supervision import MAX_DELAY_SECS, restart_delay

if TYPE_CHECKING:
    from anyio.abc import TaskStatus

    from cpersona.stores.supervision import Child

__all__ = ["MAX_DELAY_SECS", "restart_delay", "supervise"]


async def supervise(server: Child, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
    """Restart ``server`` each time it exits on its own, until its owner stops it or this is cancelled."""
    await supervision.supervise(server, "the embedded redis-server", task_status=task_status)
