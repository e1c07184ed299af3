"""The interfaces the engine is written against, and the value types that cross them.

The engine and the recall graph import only these. Each backend (the embedded Qdrant engine, a Qdrant
server, the ONNX embedder, an HTTP embedder, ...) is an adapter that implements one protocol, and one
contract test suite per protocol runs against every adapter.

The records are cut by role, one protocol module each, named for what it serves and listing its
consumers: :mod:`.recall_reads`, :mod:`.memory_reads`, :mod:`.record_reads`, :mod:`.record_writes`,
:mod:`.write_journal`, :mod:`.field_store`, :mod:`.raw_journal_store`, :mod:`.association_store`,
:mod:`.fence_store` and :mod:`.store_admin`; :class:`RecordStore` is their union. Beside them:
:mod:`.cue_store` (the cue query's reads), :mod:`.key_store` (keys and limits), :mod:`.block_queue`,
:mod:`.trace_subscription` and :class:`TraceSink` here (traces).
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
from cpersona.stores.recall_reads import RecallReads
from cpersona.stores.record_reads import RecordReads
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
from cpersona.stores.record_writes import RecordWrites
from cpersona.stores.store_admin import StoreAdmin
from cpersona.stores.vector_values import (
    PointKind,
    Vector,
    VectorFilter,
    VectorHit,
    VectorPoint,
    scope_filter,
)
from cpersona.stores.write_journal import WriteJournal

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cpersona.embedding_models import GateScale

__all__ = [
    "AssociationStore",
    "BlockParent",
    "ClaimHolder",
    "DeclareCounts",
    "Embedder",
    "EntityLinks",
    "FenceStore",
    "HydratedRecord",
    "InFlightWrite",
    "IndexedEntity",
    "Link",
    "MemoryFieldStore",
    "MemoryReadStore",
    "MemoryState",
    "MemoryWrite",
    "Period",
    "PointKind",
    "RawJournalStore",
    "RecallReads",
    "RecordCounts",
    "RecordKind",
    "RecordLinks",
    "RecordReads",
    "RecordStore",
    "RecordWrites",
    "SearchedKind",
    "SeqAt",
    "StoreAdmin",
    "StoredProfile",
    "TimeRangeIds",
    "TraceSink",
    "Vector",
    "VectorFilter",
    "VectorHit",
    "VectorPoint",
    "VectorStore",
    "WriteJournal",
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

    query_prefix: str
    passage_prefix: str
    """What the model reads before a query and before a stored text (empty for a model without them)."""

    @property
    def name(self) -> str:
        """The model label recorded with each vector, e.g. ``onnx:all-MiniLM-L6-v2``."""
        ...

    @property
    def dim(self) -> int:
        """The vector length."""
        ...

    @property
    def gate_scale(self) -> GateScale:
        """Where the recall gate's heuristic thresholds sit in this model's cosines
        (:attr:`~cpersona.embedding_models.EmbeddingModel.gate_scale`); ``(0, 1)`` for a model the project
        has not measured (a remote one)."""
        ...

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        """Embed stored texts (passages) in order, each after the model's passage prefix, if it has one.
        Raises ``EmbedderUnavailable`` on a backend failure or deadline."""
        ...

    async def embed_queries(self, texts: Sequence[str]) -> list[Vector]:
        """Embed texts as queries, in order and as one batch, without the query cache. Raises
        ``EmbedderUnavailable`` as :meth:`embed` does."""
        ...

    async def embed_query(self, text: str) -> Vector:
        """Embed one query (after the model's query prefix, if it has one), served from an in-process LRU
        cache, keyed by the bare query, when seen recently."""
        ...

    def is_cached(self, text: str) -> bool:
        """Whether :meth:`embed_query` would answer ``text`` from its cache, without the model."""
        ...

    async def aclose(self) -> None:
        """Release the backend (sessions, sessions' pools, thread limiters)."""
        ...


@runtime_checkable
class RecordStore(
    RecallReads,
    MemoryReadStore,
    RecordReads,
    RecordWrites,
    WriteJournal,
    MemoryFieldStore,
    RawJournalStore,
    AssociationStore,
    FenceStore,
    StoreAdmin,
    Protocol,
):
    """Every role of the records of one engine (memories, episodes, raw entries, profiles, claims,
    calibrations, associations), as the engine holds them: it declares nothing of its own.

    A consumer is typed against the role it uses, not against this; the engine holds the aggregate
    only because it hands each step the roles that step needs.
    """


@runtime_checkable
class TraceSink(Protocol):
    """Where finished recall traces go: one channel per agent, heard by whoever listens at that moment."""

    async def publish(self, agent_id: str, payload: bytes) -> None:
        """Publish one encoded trace on ``agent_id``'s channel, without waiting for any listener.

        Raises :class:`~cpersona.BackendUnavailable` when the backend refused the trace or did not answer.
        """
        ...
