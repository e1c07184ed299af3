"""The interfaces the engine is written against, and the value types that cross them.

The engine and the recall graph import only these. Each backend (the embedded Qdrant engine, a Qdrant
server, the ONNX embedder, an HTTP embedder, ...) is an adapter that implements one protocol, and one
contract test suite per protocol runs against every adapter.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cpersona.model.scope import ReadScope

__all__ = [
    "Embedder",
    "PointKind",
    "Vector",
    "VectorFilter",
    "VectorHit",
    "VectorPoint",
    "VectorStore",
    "scope_filter",
]

Vector = npt.NDArray[np.float32]
"""A 1-d float32 array. Embedders return unit-length vectors unless their backend says otherwise."""

PointKind = Literal["memory", "episode", "block"]


@dataclasses.dataclass(frozen=True, slots=True)
class VectorPoint:
    """One vector with the payload the search filters need.

    ``id`` is the record's UUID string (for blocks: a UUID derived from the parent and the block index).
    ``parent`` is the owning record's UUID for a block, else the same as ``id`` (left empty, the adapters
    store ``id``).
    """

    id: str
    vector: Vector
    kind: PointKind
    agent_id: str
    project_id: str
    channel: str
    timestamp: float
    seq: int
    parent: str = ""
    block_index: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class VectorFilter:
    """A search restriction. Every field that is not ``None`` must match.

    ``project_ids`` and ``channels`` are sets of accepted values (the caller adds the global pool ``''``
    itself: isolation rules live in the engine, not in the adapters). An empty tuple accepts nothing, so
    the filter matches no point. Ranges are inclusive on ``min_*`` and exclusive on ``max_*``.
    """

    agent_id: str
    project_ids: tuple[str, ...] | None = None
    channels: tuple[str, ...] | None = None
    kinds: tuple[PointKind, ...] | None = None
    min_seq: int | None = None
    max_seq: int | None = None
    min_timestamp: float | None = None
    max_timestamp: float | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class VectorHit:
    """A search result: the point's id, its similarity (higher is better) and its payload."""

    id: str
    score: float
    kind: PointKind
    parent: str
    seq: int
    timestamp: float
    block_index: int = 0


@runtime_checkable
class VectorStore(Protocol):
    """One Qdrant collection of fixed dimension and cosine similarity, with payload indexes on filter keys."""

    @property
    def engine_name(self) -> str:
        """A short label for ``/health``, e.g. ``qdrant-edge 0.9.0`` or ``qdrant-server http://...``."""
        ...

    async def upsert(self, points: Sequence[VectorPoint]) -> None:
        """Insert or replace points. Durable when it returns.

        Every point is checked first (UUID id, vector of the collection's dimension, finite, not all
        zeros); a bad one raises ``ValueError`` and nothing of the batch is written.
        """
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

    async def count(self, flt: VectorFilter) -> int:
        """How many points match the filter (exact)."""
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

    async def aclose(self) -> None:
        """Release the backend (sessions, sessions' pools, thread limiters)."""
        ...


def scope_filter(scope: ReadScope, kinds: tuple[PointKind, ...] | None = None) -> VectorFilter:
    """The Qdrant filter for ``scope``. ``source_id`` is not in the vector payload: callers check it on
    the hydrated records with :meth:`ReadScope.sees`."""
    return VectorFilter(
        agent_id=scope.agent_id, project_ids=scope.projects, channels=scope.channels, kinds=kinds
    )
