"""The record-writes role: records, profiles and calibrations written and deleted, each in one durable
step, and the insertion sequence numbers and content claims the writes take.

Consumers: the engine's writes (:mod:`~cpersona.engine.writes`), deletes (:mod:`~cpersona.engine.deletes`),
the archive's import and consolidation (:mod:`~cpersona.engine.upkeep_archive`,
:mod:`~cpersona.engine.upkeep_consolidate`) and calibration (:mod:`~cpersona.engine.calibration`). The
Redis adapter is :class:`~cpersona.stores.redis.record_writes.RedisRecordWrites`.

Every record write raises :class:`~cpersona.AgentBeingDeleted` while its agent is fenced (see
:class:`~cpersona.stores.fence_store.FenceStore`), and every call raises
:class:`~cpersona.BackendUnavailable` when the backend cannot serve.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from cpersona.model.records import EpisodeRecord, MemoryRecord, ProfileRecord, RawRecord
    from cpersona.stores.record_values import ClaimHolder, MemoryWrite, RecordKind

__all__ = ["RecordWrites"]


@runtime_checkable
class RecordWrites(Protocol):
    """Writes and deletes of whole records, with their claims, pending marks and block events."""

    async def next_seq(self, count: int = 1) -> int:
        """Reserve ``count`` insertion sequence numbers; return the first."""
        ...

    async def live_claim(self, claims: Sequence[str]) -> ClaimHolder | None:
        """The first of ``claims`` held by a memory that still exists (claims of deleted ones are stale)."""
        ...

    async def put_memories(self, writes: Sequence[MemoryWrite], *, queue_blocks: bool) -> None:
        """Write memories with their claims, pending marks and block events in one transaction."""
        ...

    async def replace_memory(
        self,
        record: MemoryRecord,
        *,
        drop_claims: Sequence[str],
        add_claims: Sequence[str],
        queue_blocks: bool,
    ) -> None:
        """Overwrite a memory, move its claims and queue its blocks again, in one transaction."""
        ...

    async def put_episode(self, record: EpisodeRecord, *, queue_blocks: bool) -> None:
        """Write an episode with its pending mark and block event in one transaction."""
        ...

    async def put_raw(self, records: Sequence[RawRecord]) -> None:
        """Write raw journal entries in one transaction."""
        ...

    async def put_profile(self, record: ProfileRecord) -> None:
        """Write (or overwrite) the agent's profile."""
        ...

    async def put_calibration(self, agent_id: str, doc: Mapping[str, object]) -> None:
        """Write (or overwrite) the agent's calibration document."""
        ...

    async def select_calibration(self, agent_id: str, selected: bool) -> None:
        """Set the stored calibration's ``selected`` flag (it must exist)."""
        ...

    async def delete(self, kind: RecordKind, record_id: str, claims: Sequence[str]) -> None:
        """Delete a record, its pending mark and ``claims``."""
        ...

    async def delete_many(self, kind: RecordKind, records: Sequence[tuple[str, Sequence[str]]]) -> int:
        """Delete records of one kind, each ``(record id, claims)`` as :meth:`delete` does, in one durable
        step; return how many of them were still there."""
        ...
