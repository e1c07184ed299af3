"""The value types that cross the vector-store and embedder protocols: vectors, points, filters, hits.

:mod:`cpersona.stores.protocols` re-exports them beside the protocols that take them.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

from cpersona.errors import InvalidRequest

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cpersona.model.scope import ReadScope

__all__ = [
    "PointKind",
    "Vector",
    "VectorFilter",
    "VectorHit",
    "VectorPoint",
    "caller_vector",
    "caller_vectors",
    "scope_filter",
]

Vector = npt.NDArray[np.float32]
"""A 1-d float32 array. Embedders return unit-length vectors unless their backend says otherwise."""

GivenVector = npt.NDArray[np.floating[Any]]
"""A caller's vector as an array of any float type (a draft holds the numbers sent, in float64)."""

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


def caller_vector(given: Sequence[float] | GivenVector, dim: int | None, field: str) -> Vector:
    """A vector a caller sent (a cue's or a store's ``embedding``), checked against the index, at unit
    length (as the engine's own embedder returns its vectors).

    ``dim`` is the vector index's dimension, ``None`` when the engine keeps no index; ``field`` names the
    request field in the 400. The request models already refuse NaN and infinity; they are checked here
    as well so that a direct caller cannot hand a point the vector stores would refuse mid-write.
    """
    if dim is None:
        raise InvalidRequest(field, "this server keeps no vector index (embedding_mode none)")
    if len(given) != dim:
        raise InvalidRequest(field, f"has {len(given)} dimensions; the vector index has {dim}")
    with np.errstate(over="ignore"):  # a number beyond float32 becomes infinite: refused just below
        vector = np.asarray(given, dtype=np.float32)
    if not bool(np.isfinite(vector).all()):
        raise InvalidRequest(field, "holds NaN or infinity (or a number beyond float32)")
    if not np.any(vector):
        raise InvalidRequest(field, "is all zeros: it has no direction for cosine similarity")
    # The length in float64: in float32 the squares of components beyond ~1e19 overflow and those
    # below ~1e-23 vanish, which would give an infinite or zero length to a vector that has a direction.
    wide = vector.astype(np.float64)
    length = float(np.linalg.norm(wide))
    unit = (wide / length).astype(np.float32)
    if not (math.isfinite(length) and length > 0.0 and np.any(unit) and bool(np.isfinite(unit).all())):
        raise InvalidRequest(field, "has components too large or too small for its length to be computed")
    return unit


def caller_vectors(
    given: Sequence[Sequence[float] | GivenVector | None], dim: int | None, fields: Sequence[str]
) -> list[Vector | None]:
    """:func:`caller_vector` of each vector of a batch (``None`` stays ``None``; ``fields[k]`` names
    vector ``k``), checked and scaled as one array: the same vectors bit for bit, in under half the time.

    When any check fails, the vectors are checked one by one, so the error is the one the first bad
    vector in order gives alone.
    """
    present = [(k, vector) for k, vector in enumerate(given) if vector is not None]
    out: list[Vector | None] = [None] * len(given)
    units = _units([vector for _, vector in present], dim) if present else None
    if units is None:
        for k, vector in present:
            out[k] = caller_vector(vector, dim, fields[k])
        return out
    for row, (k, _) in enumerate(present):
        out[k] = units[row]
    return out


def _units(
    vectors: Sequence[Sequence[float] | GivenVector], dim: int | None
) -> npt.NDArray[np.float32] | None:
    """The vectors at unit length, as rows; ``None`` unless every one passes every check of
    :func:`caller_vector`."""
    if dim is None or any(len(v) != dim for v in vectors):
        return None
    # A bad vector's NaN, overflow or division by zero is what the checks below catch, not a warning.
    with np.errstate(all="ignore"):
        narrow = np.asarray(vectors, dtype=np.float32)
        wide = narrow.astype(np.float64)
        # vecdot runs the dot product that np.linalg.norm runs on one vector: the same lengths exactly.
        lengths = np.sqrt(np.vecdot(wide, wide))
        units = (wide / lengths[:, None]).astype(np.float32)
    checks = (
        np.isfinite(narrow).all(),
        narrow.any(axis=1).all(),
        np.isfinite(lengths).all(),
        (lengths > 0.0).all(),
        units.any(axis=1).all(),
        np.isfinite(units).all(),
    )
    return units if all(bool(c) for c in checks) else None
