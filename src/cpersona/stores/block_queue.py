"""The block queue role: "build the blocks of this record" events, handed to the block workers.

A store queues an event in the step that writes the record, so an acknowledged record always has one;
an event stays pending at the worker that took it until that worker finishes it, and one left by a dead
worker is claimed by another. What a worker does with an event is the engine's
(:mod:`~cpersona.engine.workers.blocks`); the Redis adapter is
:class:`~cpersona.stores.redis.block_queue.RedisBlockQueue`.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["BlockEvent", "BlockQueue", "QueueLost", "event_order"]


class QueueLost(Exception):
    """The queue was deleted under the worker (a flush, a key cleanup); the worker makes it again."""


@dataclasses.dataclass(frozen=True, slots=True)
class BlockEvent:
    """One event: its id in the queue and the ref of the record it names (``None``: names no memory or
    episode)."""

    entry_id: bytes
    ref: str | None
    key: str | None


def event_order(entry_id: bytes | str) -> tuple[int, int]:
    """An event id (``<milliseconds>-<sequence>``) as a sortable pair."""
    text = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    ms, _, seq = text.partition("-")
    return int(ms), int(seq or 0)


@runtime_checkable
class BlockQueue(Protocol):
    """One worker's view of the queue. Every call has the backend's deadline and raises
    :class:`~cpersona.BackendUnavailable` when the backend cannot serve, :class:`QueueLost` when the queue
    is gone."""

    async def ensure_group(self) -> None:
        """Make the queue if absent, so that events written before any worker existed are delivered."""
        ...

    async def last_id(self) -> tuple[int, int] | None:
        """The order of the newest event (``None``: the queue is empty)."""
        ...

    async def claim(self, *, min_idle_ms: int) -> int:
        """Take over the events idle for ``min_idle_ms`` at other workers; how many were taken."""
        ...

    async def read(self, from_id: str, *, block_ms: int | None = None) -> list[BlockEvent]:
        """A batch of events: this worker's pending ones (``"0"``) or new ones (``">"``)."""
        ...

    async def deliveries(self, events: Sequence[BlockEvent]) -> dict[bytes, int]:
        """How many times each of this worker's pending ``events`` has been delivered."""
        ...

    async def finish(self, entry_ids: Sequence[bytes], *, requeue: Sequence[str] = ()) -> None:
        """Acknowledge and drop events, and queue the records ``requeue`` names again, at once."""
        ...

    async def release(self, timeout_secs: float) -> None:
        """Leave the queue if nothing is pending here; bounded, and never raises."""
        ...
