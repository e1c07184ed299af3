"""The write-journal role: what the store keeps of writes under way, so a crash between a record's vector
and its document can be swept and finished.

Two journals: writes in flight (begun with their content claims, not yet written, see
:mod:`~cpersona.engine.claims`) and records whose vector is still to write. Consumers: the engine's writes
(:mod:`~cpersona.engine.writes`, :mod:`~cpersona.engine.claims`), the archive's import and consolidation
(:mod:`~cpersona.engine.upkeep_archive`, :mod:`~cpersona.engine.upkeep_consolidate`), deletes
(:mod:`~cpersona.engine.deletes`) and the sweep and finish of :mod:`~cpersona.engine.vector_writes`. The
Redis adapter is :class:`~cpersona.stores.redis.write_journal.RedisWriteJournal`.

Every call raises :class:`~cpersona.BackendUnavailable` when the backend cannot serve.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cpersona.model.records import EpisodeRecord, MemoryRecord
    from cpersona.stores.record_values import ClaimHolder, InFlightWrite

__all__ = ["WriteJournal"]


@runtime_checkable
class WriteJournal(Protocol):
    """Writes in flight, and vectors still to write."""

    async def reserve_writes(
        self, writes: Sequence[InFlightWrite], *, ttl_secs: float
    ) -> list[ClaimHolder | None]:
        """Begin these writes, in one atomic step: for each, in order, either the holder of one of its
        claims (a memory that exists, or a write still in flight), and nothing is taken; or ``None``,
        and its claims are taken for ``ttl_secs`` and the write is marked in flight until its record is
        written (``put_memories``, ``put_episode``) or it is released."""
        ...

    async def release_writes(self, writes: Sequence[InFlightWrite]) -> list[InFlightWrite]:
        """Give up writes begun with :meth:`reserve_writes`. A write whose record was written after all
        only loses its in-flight mark; one never written drops the claims still its own, keeps its mark,
        and is returned (the caller deletes its vector, then :meth:`forget_writes` it)."""
        ...

    async def forget_writes(self, writes: Sequence[InFlightWrite]) -> None:
        """Drop the in-flight marks of these writes."""
        ...

    async def abandoned_writes(self, started_before: float) -> list[InFlightWrite]:
        """The writes begun before ``started_before`` (epoch seconds) whose record was never written."""
        ...

    async def mark_all_pending(self, *, queue_blocks: bool) -> int:
        """Mark every memory and episode as waiting for its vector (a re-embedding: the pending path
        writes them all), queuing a block event for each when ``queue_blocks``; return how many."""
        ...

    async def pending_refs(self) -> list[str]:
        """The refs of every record whose vector is still to be written, sorted."""
        ...

    async def load_pending(self, refs: Sequence[str]) -> list[MemoryRecord | EpisodeRecord]:
        """The records of these pending refs; refs whose record is gone lose their mark."""
        ...

    async def mark_vectors_written(
        self, records: Sequence[MemoryRecord | EpisodeRecord], model: str
    ) -> list[str]:
        """Record that these vectors are written; return the ids of records deleted meanwhile."""
        ...
