"""The value types that cross the vector-store and embedder protocols: vectors, points, filters, hits.

:mod:`cpersona.stores.protocols` re-exports them beside the protocols that take them.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Literal

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from cpersona.model.scope import ReadScope

__all__ = ["PointKind", "Vector", "VectorFilter", "VectorHit", "VectorPoint", "scope_filter"]

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


def scope_filter(scope: ReadScope, kinds: tuple[PointKind, ...] | None = None) -> VectorFilter:
    """The Qdrant filter for ``scope``. ``source_id`` is not in the vector payload: callers check it on
    the hydrated records with :meth:`ReadScope.sees`."""
    return VectorFilter(
        agent_id=scope.agent_id, project_ids=scope.projects, channels=scope.channels, kinds=kinds
    )
