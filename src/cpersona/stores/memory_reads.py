"""The memory-reads role: memories by their own time and by id, within a read's scope.

Consumers: the timeline (:mod:`~cpersona.operations.timeline`) and the graph
(:mod:`~cpersona.operations.graph`). The Redis adapter is
:class:`~cpersona.stores.redis.memory_reads.RedisMemoryReads`.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cpersona.model.records import EmotionVector, Fidelity, MemoryRecord
    from cpersona.model.scope import ReadScope

__all__ = ["MemoryReadStore", "TimeRangeIds"]


@dataclasses.dataclass(frozen=True, slots=True)
class TimeRangeIds:
    """The ids of the memories in a time range, oldest first (at most what was asked for), and how many
    the range holds in all."""

    ids: tuple[str, ...]
    total: int


@runtime_checkable
class MemoryReadStore(Protocol):
    """Memories read by time and by id; a read sees only its scope (:meth:`ReadScope.sees`)."""

    async def memory_ids_in_time(self, scope: ReadScope, start: float, end: float, most: int) -> TimeRangeIds:
        """The ids of the memories with ``start <= timestamp <= end``, oldest first, at most ``most``; read
        from the time index (never a scan of every record)."""
        ...

    async def memories_by_id(self, scope: ReadScope, ids: Sequence[str]) -> dict[str, MemoryRecord]:
        """The memories of ``ids`` (bare ids) that exist and that ``scope`` sees, by id."""
        ...

    async def memory_vitals(self, ids: Sequence[str]) -> list[tuple[EmotionVector, Fidelity] | None]:
        """Each memory's emotion and fidelity state (``None`` where it is gone), without the rest of the
        record: what a filter on them reads before the records that pass are loaded. No scope check:
        the caller holds ids its scope's index gave it, and loads the records through one."""
        ...
