"""The interfaces the engine is written against, and the value types that cross them.

The engine and the recall graph import only these. Each backend (the embedded Qdrant engine, a Qdrant
server, the ONNX embedder, an HTTP embedder, ...) is an adapter that implements one protocol, and one
contract test suite per protocol runs against every adapter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from cpersona.stores.association_store import AssociationStore
from cpersona.stores.association_values import (
    DeclareCounts,
    EntityLinks,
    IndexedEntity,
    Link,
    RecordLinks,
)
from cpersona.stores.fence_store import FenceStore
from cpersona.stores.field_store import MemoryFieldStore
from cpersona.stores.memory_reads import MemoryReadStore, TimeRangeIds
from cpersona.stores.raw_journal_store import RawJournalStore
from cpersona.stores.record_values import (
    BlockParent,
    ClaimHolder,
    HydratedRecord,
    InFlightWrite,
    MemoryState,
    MemoryWrite,
    Period,
    RecordCounts,
    RecordKind,
    SearchedKind,
    SeqAt,
    StoredProfile,
)
from cpersona.stores.vector_values import (
    PointKind,
    Vector,
    VectorFilter,
    VectorHit,
    VectorPoint,
    scope_filter,
)

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from cpersona.model.candidates import ArmResult
    from cpersona.model.records import EpisodeRecord, MemoryRecord, ProfileRecord, RawRecord
    from cpersona.model.scope import ReadScope

__all__ = [
    "AssociationStore",
    "BlockParent",
    "ClaimHolder",
    "DeclareCounts",
    "Embedder",
    "EntityLinks",
    "HydratedRecord",
    "InFlightWrite",
    "IndexedEntity",
    "Link",
    "MemoryReadStore",
    "MemoryState",
    "MemoryWrite",
    "Period",
    "PointKind",
    "RecordCounts",
    "RecordKind",
    "RecordLinks",
    "RecordStore",
    "SearchedKind",
    "SeqAt",
    "StoredProfile",
    "TimeRangeIds",
    "TraceSink",
    "Vector",
    "VectorFilter",
    "VectorHit",
    "VectorPoint",
    "VectorStore",
    "scope_filter",
]


@runtime_checkable
class VectorStore(Protocol):
    """One Qdrant collection of fixed dimension and cosine similarity, with payload indexes on filter keys."""

    @property
    def engine_name(self) -> str:
        """A short label for ``/health``, e.g. ``qdrant-edge 0.9.0`` or ``qdrant-server http://...``."""
        ...

    async def upsert(self, points: Sequence[VectorPoint]) -> None:
        """Insert or replace points, durable when it returns. Every point is checked first (UUID id,
        vector of the collection's dimension, finite, not all zeros); a bad one raises ``ValueError``
        and nothing of the batch is written."""
        ...

    async def delete(self, ids: Sequence[str]) -> None:
        """Delete points by id; unknown ids are ignored."""
        ...

    async def delete_where(self, flt: VectorFilter) -> None:
        """Delete every point that matches the filter."""
        ...

    async def search(
        self, vector: Vector, flt: VectorFilter, limit: int, *, open_tail: bool = False
    ) -> list[VectorHit]:
        """The ``limit`` nearest points that match ``flt``, best first.

        Equal scores order by lower ``seq``, then lower ``block_index``, then id, so every adapter
        returns the same list for the same data. An engine orders equal scores as it likes, so when the
        last hits tie with points past ``limit`` the adapter fetches further to finish the run; with
        ``open_tail`` it does not, and that last run of equal scores (see :func:`open_tail_start`) may hold
        other points than the complete answer would. A caller that reads nothing of it saves the fetch.
        """
        ...

    async def existing(self, ids: Sequence[str]) -> set[str]:
        """Which of these ids have a point, in canonical (lowercase, hyphenated) UUID form."""
        ...

    async def vectors(self, ids: Sequence[str]) -> dict[str, Vector]:
        """The stored (unit-length) vectors of those of these ids that have a point, by canonical UUID."""
        ...

    async def count(self, flt: VectorFilter) -> int:
        """How many points match the filter (exact)."""
        ...

    async def count_all(self) -> int:
        """How many points the collection holds, of every agent (exact)."""
        ...

    async def aclose(self) -> None:
        """Flush and release the collection."""
        ...


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors. ``dim`` is known after the first call for remote backends."""

    @property
    def name(self) -> str:
        """The model label recorded with each vector, e.g. ``onnx:all-MiniLM-L6-v2``."""
        ...

    @property
    def dim(self) -> int:
        """The vector length."""
        ...

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        """Embed documents in order. Raises ``EmbedderUnavailable`` on a backend failure or deadline."""
        ...

    async def embed_query(self, text: str) -> Vector:
        """Embed one query, served from an in-process LRU cache when seen recently."""
        ...

    def is_cached(self, text: str) -> bool:
        """Whether :meth:`embed_query` would answer ``text`` from its cache, without the model."""
        ...

    async def aclose(self) -> None:
        """Release the backend (sessions, sessions' pools, thread limiters)."""
        ...


@runtime_checkable
class RecordStore(AssociationStore, RawJournalStore, MemoryFieldStore, MemoryReadStore, FenceStore, Protocol):
    """The records of one engine (memories, episodes, raw entries, profiles, claims, calibrations) and
    the searches the recall arms run over them. Refs are ``mem:<id>`` and ``ep:<id>``."""

    async def ensure_indexes(self) -> None:
        """Create the search indexes if missing and bring an older store's documents up to date."""
        ...

    async def collect_garbage(self) -> None:
        """Drop the index entries of superseded document versions now (best effort)."""
        ...

    async def ping(self) -> None:
        """Answer if the store is reachable within its deadline; raise ``RedisUnavailable`` if not."""
        ...

    # ---------------------------------------------------------------- searches of the recall arms

    async def memory_keyword(
        self,
        scope: ReadScope,
        query: str,
        fetch: int,
        *,
        extra_terms: Sequence[str] = (),
        period: Period | None = None,
    ) -> ArmResult:
        """BM25 over the memories of ``scope``, best first, with the whole-query fallback."""
        ...

    async def episode_fts(
        self,
        scope: ReadScope,
        query: str,
        fetch: int,
        *,
        extra_terms: Sequence[str] = (),
        period: Period | None = None,
    ) -> ArmResult:
        """BM25 over the episodes of ``scope``, best first."""
        ...

    async def seq_at(self, kind: SearchedKind, scope: ReadScope, rank: int) -> SeqAt:
        """The count of ``kind`` in ``scope`` (source ignored) and the ``seq`` at 0-based ``rank`` from
        the newest by insertion."""
        ...

    async def time_span(self, scope: ReadScope) -> Period | None:
        """``(oldest, newest)`` record time of the memories ``scope`` sees, exact; ``None`` when none."""
        ...

    async def memory_sources(self, ids: Sequence[str]) -> list[str | None]:
        """The ``source.id`` of each memory, in order (``None`` for one that does not exist)."""
        ...

    # ---------------------------------------------------------------- what a recall reads besides its arms

    async def hydrate(self, refs: Iterable[str]) -> dict[str, HydratedRecord]:
        """The fields a recall reads of each record behind ``refs``, by ref (deleted ones left out)."""
        ...

    async def recall_profile(self, agent_id: str) -> StoredProfile | None:
        """The agent's profile as a recall renders it, or ``None`` when it has none."""
        ...

    async def calibrated_gate(self, agent_id: str) -> float | None:
        """The agent's calibrated gate threshold, when a calibration selected one."""
        ...

    async def newest_episode_time(self, scope: ReadScope) -> float | None:
        """When the newest episode of ``scope`` (source ignored) was created; ``None`` when it has none."""
        ...

    async def newest_memory_time(self, scope: ReadScope) -> float | None:
        """The record time of the newest memory of ``scope`` (source ignored), to within 10 ms; ``None``
        when it has none."""
        ...

    # ---------------------------------------------------------------- records

    async def next_seq(self, count: int = 1) -> int:
        """Reserve ``count`` insertion sequence numbers; return the first."""
        ...

    async def live_claim(self, claims: Sequence[str]) -> ClaimHolder | None:
        """The first of ``claims`` held by a memory that still exists (claims of deleted ones are stale)."""
        ...

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

    async def delete(self, kind: RecordKind, record_id: str, claims: Sequence[str]) -> None:
        """Delete a record, its pending mark and ``claims``."""
        ...

    async def delete_many(self, kind: RecordKind, records: Sequence[tuple[str, Sequence[str]]]) -> int:
        """Delete records of one kind, each ``(record id, claims)`` as :meth:`delete` does, in one durable
        step; return how many of them were still there."""
        ...

    async def delete_agent(self, agent_id: str) -> int:
        """Delete every record, claim, profile and calibration of an agent; return the records deleted."""
        ...

    # ---------------------------------------------------------------- vectors still to write

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

    # ---------------------------------------------------------------- blocks

    async def block_parents(self, refs: Sequence[str]) -> list[BlockParent | None]:
        """What the block builder reads of each record (``None``: gone or unreadable)."""
        ...

    async def block_texts(self, refs: Sequence[str]) -> list[str | None]:
        """The current searchable text of each record (``None``: gone)."""
        ...

    # ---------------------------------------------------------------- per-agent documents

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

    async def profile(self, agent_id: str) -> ProfileRecord | None: ...

    async def put_profile(self, record: ProfileRecord) -> None: ...

    async def calibration(self, agent_id: str) -> Mapping[str, object] | None: ...

    async def put_calibration(self, agent_id: str, doc: Mapping[str, object]) -> None: ...

    async def select_calibration(self, agent_id: str, selected: bool) -> None:
        """Set the stored calibration's ``selected`` flag (it must exist)."""
        ...


@runtime_checkable
class TraceSink(Protocol):
    """Where finished recall traces go: one channel per agent, heard by whoever listens at that moment."""

    async def publish(self, agent_id: str, payload: bytes) -> None:
        """Publish one encoded trace on ``agent_id``'s channel, without waiting for any listener.

        Raises :class:`~cpersona.BackendUnavailable` when the backend refused the trace or did not answer.
        """
        ...
