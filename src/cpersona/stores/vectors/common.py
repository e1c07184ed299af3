"""The rules every vector-store adapter shares, kept in one place so they cannot drift.

Which payload fields are stored and indexed, how a :class:`~cpersona.stores.protocols.VectorFilter` reads as
conditions, how vectors and ids are checked, and how search results are ordered (best first, ties by
lower ``seq``, then ``block_index``, then id), including fetching past ``limit`` when a tie straddles it.
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import uuid
from typing import TYPE_CHECKING, Literal, TypeVar, cast

import numpy as np

from cpersona.stores.protocols import PointKind, VectorFilter, VectorHit, VectorPoint

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    import numpy.typing as npt

    from cpersona.stores.protocols import Vector

__all__ = [
    "BQ_OVERSAMPLING",
    "HIT_FIELDS",
    "PAYLOAD_INDEXES",
    "IndexKind",
    "MatchClause",
    "PreparedPoints",
    "TIE_EPSILON",
    "RangeClause",
    "chunked",
    "filter_clauses",
    "finite_timeout",
    "hit_from_payload",
    "matches_nothing",
    "open_tail_start",
    "point_id",
    "point_payload",
    "prepare_points",
    "query_vector",
    "stored_vector",
    "top_hits",
    "validate_collection",
]

_T = TypeVar("_T")

IndexKind = Literal["tenant", "keyword", "float", "integer"]

PAYLOAD_INDEXES: Mapping[str, IndexKind] = types.MappingProxyType(
    {
        # Every search and count is restricted to one agent, so the agent is the tenant key: Qdrant then
        # keeps each agent's points together and plans filtered searches per agent.
        "agent_id": "tenant",
        "project_id": "keyword",
        "channel": "keyword",
        "kind": "keyword",
        # No index for ``parent``: no filter reads it (a hit carries it back in its payload), and at a
        # million memories its index of a million distinct values cost 5-8% of every upsert and flush.
        "timestamp": "float",
        "seq": "integer",
    }
)
"""The payload indexes every collection gets, by field."""

HIT_FIELDS: tuple[str, ...] = ("kind", "parent", "seq", "timestamp", "block_index")
"""The payload fields a search reads back to build a :class:`VectorHit`."""

BQ_OVERSAMPLING = 4.0
"""With binary quantisation, how many candidates per requested hit the 1-bit pass keeps for rescoring.

A 1-bit code ranks coarsely, so true neighbours can sit well past ``limit`` by Hamming score; the
rescoring pass reads the original vectors of the candidates only. 4 is a starting point to tune with the
block-arm benchmarks, not a measured optimum."""

_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_KINDS: frozenset[str] = frozenset(("memory", "episode", "block"))


def validate_collection(name: str, dim: int) -> None:
    """Refuse a collection name that is not one safe path component, or a dimension below 1.

    The edge adapter uses the name as a directory name, so both adapters accept the same small alphabet.
    """
    if not _NAME.fullmatch(name) or name in {".", ".."}:
        raise ValueError(
            f"vector collection name {name!r} must be 1-128 characters of letters, digits, '_', '.', '-' "
            "and start with a letter or digit"
        )
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
        raise ValueError(f"vector dimension must be a positive integer, got {dim!r}")


def finite_timeout(timeout_secs: float) -> float:
    """Refuse a deadline that would let a call hang."""
    if not (isinstance(timeout_secs, int | float) and math.isfinite(timeout_secs) and timeout_secs > 0):
        raise ValueError(f"timeout_secs must be a positive finite number, got {timeout_secs!r}")
    return float(timeout_secs)


def point_id(value: str) -> str:
    """The canonical form (lowercase, hyphenated) of a point's UUID string.

    Both engines store UUIDs, not strings, and hand them back canonical; normalising on the way in
    makes ``existing()`` and search results comparable with what the caller passed.
    """
    if isinstance(value, str) and _CANONICAL_UUID.fullmatch(value):
        return value  # already canonical, as every id the engine makes is: no parse and print
    try:
        return str(uuid.UUID(value))
    except (ValueError, TypeError, AttributeError):
        raise ValueError(f"vector point id must be a UUID string, got {value!r}") from None


def _checked_vector(vector: object, dim: int, what: str) -> npt.NDArray[np.float32]:
    array = np.asarray(vector, dtype=np.float32)
    if array.shape != (dim,):
        raise ValueError(f"{what} must have shape ({dim},), got {array.shape}")
    if not bool(np.isfinite(array).all()):
        raise ValueError(f"{what} contains NaN or infinity")
    # Cosine similarity of a zero vector is undefined; the engines disagree on what to do with one
    # (Qdrant keeps it and scores 0, the local mode divides by zero), so neither gets one.
    if float(np.dot(array, array)) == 0.0:
        raise ValueError(f"{what} is all zeros, which has no direction for cosine similarity")
    return array


def query_vector(vector: Vector, dim: int) -> list[float]:
    """Check a query vector (length, finite, non-zero) and convert it for the client libraries."""
    return cast("list[float]", _checked_vector(vector, dim, "query vector").tolist())


def stored_vector(raw: object, dim: int) -> Vector:
    """A vector an engine handed back, as the protocol's float32 array of the collection's dimension.

    The collections hold one unnamed vector per point, so anything else (a named map, another length)
    means the collection is not one of ours, and is refused rather than guessed at.
    """
    array = np.asarray(raw, dtype=np.float32)
    if array.shape != (dim,):
        raise ValueError(f"the engine returned a vector of shape {array.shape}, not ({dim},)")
    return array


def point_payload(point: VectorPoint) -> tuple[str, dict[str, object]]:
    """The point's canonical id and its stored payload: the fields searches filter on or read back.

    ``parent`` left empty means the point is its own parent (a memory or episode vector), and is
    stored as the point's id so that the payload reads the same way for records and blocks. The id
    itself is the point's, not a payload field; ``block_index`` is stored only when it is not 0, which a
    hit reads when it is absent (a field costs the binding about 3 µs a point to take in, and a record's
    vector has no block).

    A hit also reads a missing ``parent`` as its own id (:func:`hit_from_payload`), though every point
    is still written with one: a record's upsert takes 65 µs a point without it against 75 with it,
    but a reader of an earlier release needs the field, so it can be left out only once every reader
    that may share the collection (a fleet's workers mid-upgrade, a rolled-back one) reads it this way.
    """
    if point.kind not in _KINDS:
        raise ValueError(f"vector point {point.id} has unknown kind {point.kind!r}")
    pid = point_id(point.id)
    payload: dict[str, object] = {
        "kind": point.kind,
        "agent_id": point.agent_id,
        "project_id": point.project_id,
        "channel": point.channel,
        "timestamp": float(point.timestamp),
        "seq": int(point.seq),
        "parent": point_id(point.parent) if point.parent else pid,
    }
    if point.block_index:
        payload["block_index"] = int(point.block_index)
    return pid, payload


@dataclasses.dataclass(frozen=True, slots=True)
class PreparedPoints:
    """Checked points, ready for either client library: ids, vectors and payloads in step.

    The vectors stay one float32 array (row ``k`` is point ``k``'s): a batch crosses to the shard's
    process as one buffer, and becomes Python floats only where a client library needs them.
    """

    ids: tuple[str, ...]
    vectors: npt.NDArray[np.float32]
    payloads: tuple[dict[str, object], ...]

    def __len__(self) -> int:
        return len(self.ids)

    def chunks(self, size: int) -> list[PreparedPoints]:
        """The batch cut into runs of at most ``size`` points (views of the vectors, not copies)."""
        return [
            PreparedPoints(self.ids[k : k + size], self.vectors[k : k + size], self.payloads[k : k + size])
            for k in range(0, len(self.ids), size)
        ]

    def rows(self) -> list[tuple[str, list[float], dict[str, object]]]:
        """(id, vector as floats, payload) per point."""
        return list(zip(self.ids, self.vectors.tolist(), self.payloads, strict=True))


def prepare_points(points: Sequence[VectorPoint], dim: int) -> PreparedPoints:
    """Check every point before anything is written, so a bad one cannot leave a batch half-applied.

    When an id occurs twice the later point wins, as if the points had been upserted one by one.
    """
    checked = _checked_vectors(points, dim)
    array = np.empty((len(points), dim), dtype=np.float32) if checked is None else checked
    ids: list[str] = []
    payloads: list[dict[str, object]] = []
    for k, point in enumerate(points):
        pid, payload = point_payload(point)
        ids.append(pid)
        payloads.append(payload)
        if checked is None:  # some vector failed the batch's checks: each is checked alone, to name it
            array[k] = _checked_vector(point.vector, dim, f"vector of point {pid}")
    # Later points win: each id keeps its last row, placed where that id came last.
    last = {pid: k for k, pid in enumerate(ids)}
    keep = sorted(last.values())
    if len(keep) == len(points):
        return PreparedPoints(tuple(ids), array, tuple(payloads))
    return PreparedPoints(tuple(ids[k] for k in keep), array[keep], tuple(payloads[k] for k in keep))


def _checked_vectors(points: Sequence[VectorPoint], dim: int) -> npt.NDArray[np.float32] | None:
    """The points' vectors checked as one array (one pass instead of one per point); ``None`` when any
    of them fails a check, so that each is checked alone and the error names the point."""
    try:
        array = np.asarray([p.vector for p in points], dtype=np.float32)
    except (ValueError, TypeError):  # ragged, or not numbers: each is checked alone
        return None
    if array.shape != (len(points), dim) or not bool(np.isfinite(array).all()):
        return None
    if bool((np.einsum("ij,ij->i", array, array) == 0.0).any()):
        return None
    return array


def chunked(items: Sequence[_T], size: int) -> list[Sequence[_T]]:
    """Split a batch so that no single backend call carries an unbounded amount of work."""
    return [items[start : start + size] for start in range(0, len(items), size)]


@dataclasses.dataclass(frozen=True, slots=True)
class MatchClause:
    """The payload field ``key`` equals one of ``values`` (never empty)."""

    key: str
    values: tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class RangeClause:
    """``gte <= payload[key] < lt``; a missing bound is open."""

    key: str
    gte: float | None
    lt: float | None


def matches_nothing(flt: VectorFilter) -> bool:
    """An empty accepted set (``project_ids=()`` and the like) matches no point at all.

    The adapters answer such a filter themselves rather than rely on how each engine reads an empty
    "match any", so the two cannot disagree on it.
    """
    return any(
        values is not None and len(values) == 0 for values in (flt.project_ids, flt.channels, flt.kinds)
    )


def filter_clauses(flt: VectorFilter) -> list[MatchClause | RangeClause]:
    """The conditions, all of which must hold, that a filter stands for.

    Call :func:`matches_nothing` first: an empty accepted set has no clause form.
    """
    clauses: list[MatchClause | RangeClause] = [MatchClause("agent_id", (flt.agent_id,))]
    for key, values in (("project_id", flt.project_ids), ("channel", flt.channels), ("kind", flt.kinds)):
        if values is not None:
            clauses.append(MatchClause(key, tuple(dict.fromkeys(values))))
    for key, low, high in (
        ("seq", flt.min_seq, flt.max_seq),
        ("timestamp", flt.min_timestamp, flt.max_timestamp),
    ):
        if low is not None or high is not None:
            clauses.append(
                RangeClause(key, None if low is None else float(low), None if high is None else float(high))
            )
    return clauses


def hit_from_payload(raw_id: object, score: float, payload: Mapping[str, object] | None) -> VectorHit:
    """Build a hit from what an engine returned for one scored point."""
    if payload is None:
        raise ValueError(f"the engine returned point {raw_id} without its payload")
    # The embedded engine hands ids back as UUID objects, whose text is already canonical.
    pid = str(raw_id) if isinstance(raw_id, uuid.UUID) else point_id(str(raw_id))
    return VectorHit(
        id=pid,
        score=float(score),
        kind=cast("PointKind", payload["kind"]),
        parent=str(payload.get("parent", pid)),
        seq=int(cast("int", payload["seq"])),
        timestamp=float(cast("float", payload["timestamp"])),
        block_index=int(cast("int", payload.get("block_index", 0))),
    )


TIE_EPSILON = 1e-6
"""Scores closer than this count as equal when ordering hits.

Identical vectors do not always score bit-identically: the local mode of qdrant-client scores a batch
with BLAS, whose rounding depends on a row's position, and the two adapters round differently. A
float32 cosine carries noise of well under 1e-6, far below any difference that means anything."""


def _tie_groups(hits: Sequence[VectorHit]) -> list[list[VectorHit]]:
    """Hits best first, in runs whose neighbouring scores are within :data:`TIE_EPSILON`.

    Each run is ordered by the tie rule: lower ``seq``, then lower ``block_index``, then id.
    """
    groups: list[list[VectorHit]] = []
    for hit in sorted(hits, key=lambda h: -h.score):
        if groups and groups[-1][-1].score - hit.score <= TIE_EPSILON:
            groups[-1].append(hit)
        else:
            groups.append([hit])
    for group in groups:
        if len(group) > 1:
            group.sort(key=lambda h: (h.seq, h.block_index, h.id))
    return groups


def open_tail_start(hits: Sequence[VectorHit]) -> int:
    """Where the last run of equal scores (within :data:`TIE_EPSILON`) begins in hits sorted best first.

    It is the part of an ``open_tail`` search that may differ from the complete answer; everything
    before it is exact.
    """
    start = len(hits) - 1
    while start > 0 and hits[start - 1].score - hits[start].score <= TIE_EPSILON:
        start -= 1
    return max(start, 0)


async def top_hits(
    fetch: Callable[[int], Awaitable[list[VectorHit]]], limit: int, *, open_tail: bool = False
) -> list[VectorHit]:
    """The best ``limit`` hits in protocol order, asking ``fetch(n)`` for the engine's best ``n``.

    An engine orders equal scores as it likes, so the ``limit``-th hit may tie with hits past the cut
    that have a lower ``seq``. One extra hit shows whether the tied run reaches the end of what was
    fetched; while it does, the window doubles until the run is complete. With ``open_tail`` that first
    window is put in protocol order and cut, as it is: the same hits as the complete answer whenever no
    run reaches its end (an approximate engine's answer depends on the size of the window asked).
    """
    if open_tail:
        return [hit for group in _tie_groups(await fetch(limit + 1)) for hit in group][:limit]
    fetch_n = limit + 1
    while True:
        hits = await fetch(fetch_n)
        groups = _tie_groups(hits)
        # The last run touches the end of the window, so it may continue past it; the runs before it
        # are complete.
        if len(hits) < fetch_n or sum(len(group) for group in groups[:-1]) >= limit:
            return [hit for group in groups for hit in group][:limit]
        fetch_n *= 2
