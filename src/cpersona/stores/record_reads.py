"""The record-reads role: whole records and an agent's documents, read back as they were written.

Consumers: the engine's reads (:mod:`~cpersona.engine.reads`: a record, the newest, the counts, the
memory states, the profile), the writes that read before they write (:mod:`~cpersona.engine.writes`,
the upkeep in :mod:`~cpersona.engine.upkeep` and :mod:`~cpersona.engine.upkeep_consolidate`), the archive
(:mod:`~cpersona.engine.upkeep_archive`), calibration (:mod:`~cpersona.engine.calibration`), the block
builder (:mod:`~cpersona.engine.workers.blocks`: a record's block parent and current text), reconstruct's
candidates (:mod:`~cpersona.operations.reconstruct.candidates`) and the graph's start
(:mod:`~cpersona.operations.graph`). The Redis adapter is
:class:`~cpersona.stores.redis.record_reads.RedisRecordReads`.

Every call raises :class:`~cpersona.BackendUnavailable` when the backend cannot serve.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from cpersona.model.records import EpisodeRecord, MemoryRecord, ProfileRecord, RawRecord
    from cpersona.model.scope import ReadScope
    from cpersona.stores.record_values import BlockParent, MemoryState, RecordCounts, RecordKind

__all__ = ["RecordReads"]


@runtime_checkable
class RecordReads(Protocol):
    """Records by id, by scope and by agent; an agent's profile and calibration."""

    async def get(self, kind: RecordKind, record_id: str) -> MemoryRecord | EpisodeRecord | RawRecord | None:
        """One record, or ``None``."""
        ...

    async def newest(
        self, kind: RecordKind, scope: ReadScope, limit: int
    ) -> list[MemoryRecord | EpisodeRecord | RawRecord]:
        """The newest records of ``kind`` in ``scope`` (insertion order; raw entries by time)."""
        ...

    async def counts(self, agent_id: str | None) -> RecordCounts:
        """Record counts of one agent (or of all) and the number of pending vector writes."""
        ...

    async def memory_ids(self, agent_id: str) -> list[str]:
        """Every memory id of the agent, in insertion order."""
        ...

    async def record_ids(self, kind: RecordKind, agent_id: str) -> list[str]:
        """Every id of ``kind`` of the agent: memories and episodes in insertion order, raw entries by id
        (UUIDv7, so by creation)."""
        ...

    async def memory_samples(self, ids: Sequence[str]) -> list[tuple[str, float]]:
        """``(content, timestamp)`` of each memory that still exists, in order."""
        ...

    async def memory_states(self, agent_id: str | None) -> list[MemoryState]:
        """The store, time, fidelity, emotion and edge count of every memory (of the agent, or all)."""
        ...

    async def block_parents(self, refs: Sequence[str]) -> list[BlockParent | None]:
        """What the block builder reads of each record (``None``: gone or unreadable)."""
        ...

    async def block_texts(self, refs: Sequence[str]) -> list[str | None]:
        """The current searchable text of each record (``None``: gone)."""
        ...

    async def profile(self, agent_id: str) -> ProfileRecord | None:
        """The agent's profile, or ``None`` when it has none."""
        ...

    async def calibration(self, agent_id: str) -> Mapping[str, object] | None:
        """The agent's stored calibration document, or ``None`` when it has none."""
        ...
