"""The vector arms and the scope statistics they need.

The near vector arm searches the newest ``scan_window`` memories and, separately, the newest
``scan_window`` episodes of the scope (by insertion sequence, not by the records' own time), keeps rows at
or above its cosine floor, and merges the two lists by score (a tie goes to the memory). The far arm ranks
the positions past the window up to the reach the same way; it is off unless the policy's reach exceeds the
window. Both reuse the one query vector the recall embedded.

Scope statistics — the pool size the gate scales with and the sequence numbers where the windows start —
cost a sorted search per index, so they are cached per scope for a minute (a slightly stale window only
admits a few more old rows, never fewer new ones: the threshold moves only forward).
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING

import anyio

from cpersona.model.candidates import ArmResult, ArmRow
from cpersona.model.scope import ReadScope
from cpersona.stores.protocols import scope_filter

if TYPE_CHECKING:
    from cpersona.stores.protocols import PointKind, RecallReads, SearchedKind, Vector, VectorHit, VectorStore

__all__ = ["ScopeStats", "ScopeStatsCache", "ranked_hits", "vector_far", "vector_near"]

_STATS_TTL_SECS = 60.0
_STATS_MAX_ENTRIES = 4096


@dataclasses.dataclass(frozen=True, slots=True)
class KindStats:
    total: int
    window_start: int | None  # lowest seq inside the scan window, None when the whole scope fits
    reach_start: int | None  # lowest seq inside the reach, None when the whole scope fits


@dataclasses.dataclass(frozen=True, slots=True)
class ScopeStats:
    memories: KindStats
    episodes: KindStats

    @property
    def pool(self) -> int:
        return self.memories.total + self.episodes.total


class ScopeStatsCache:
    """Per-engine cache of :class:`ScopeStats`, keyed by scope (source ignored) and window sizes."""

    def __init__(self, ttl: float = _STATS_TTL_SECS) -> None:
        self._ttl = ttl
        self._entries: dict[tuple[object, ...], tuple[float, ScopeStats]] = {}

    async def get(self, records: RecallReads, scope: ReadScope, window: int, reach: int) -> ScopeStats:
        unsourced = ReadScope(scope.agent_id, scope.project_id, scope.channel)
        key = (unsourced, window, reach)
        now = time.monotonic()
        hit = self._entries.get(key)
        if hit is not None and now - hit[0] < self._ttl:
            return hit[1]
        memories = await _kind_stats(records, "memory", unsourced, window, reach)
        episodes = await _kind_stats(records, "episode", unsourced, window, reach)
        stats = ScopeStats(memories, episodes)
        if len(self._entries) >= _STATS_MAX_ENTRIES:
            self._entries.clear()
        self._entries[key] = (now, stats)
        return stats

    def forget(self, agent_id: str) -> None:
        """Drop cached stats of an agent (after its data was deleted)."""
        for key in [k for k in self._entries if isinstance(k[0], ReadScope) and k[0].agent_id == agent_id]:
            del self._entries[key]


async def _kind_stats(
    records: RecallReads, kind: SearchedKind, scope: ReadScope, window: int, reach: int
) -> KindStats:
    near = await records.seq_at(kind, scope, max(0, window - 1))
    window_start = near.seq if near.total > window else None
    reach_start = None
    if reach > window and near.total > window:
        far = await records.seq_at(kind, scope, reach - 1)
        reach_start = far.seq if near.total > reach else None
    return KindStats(near.total, window_start, reach_start)


async def _search_kind(
    vectors: VectorStore,
    vector: Vector,
    scope: ReadScope,
    kind: PointKind,
    fetch: int,
    min_seq: int | None,
    max_seq: int | None,
) -> list[VectorHit]:
    flt = dataclasses.replace(scope_filter(scope, (kind,)), min_seq=min_seq, max_seq=max_seq)
    return await vectors.search(vector, flt, fetch)


async def _two_kinds(
    vectors: VectorStore,
    vector: Vector,
    scope: ReadScope,
    fetch: int,
    bounds: dict[PointKind, tuple[int | None, int | None]],
) -> list[VectorHit]:
    found: dict[str, list[VectorHit]] = {}

    async def one(kind: PointKind) -> None:
        lo, hi = bounds[kind]
        found[kind] = await _search_kind(vectors, vector, scope, kind, fetch, lo, hi)

    async with anyio.create_task_group() as tg:
        for kind in bounds:
            tg.start_soon(one, kind)
    # Memories first, so that the stable sort below gives a tie to the memory.
    merged = found.get("memory", []) + found.get("episode", [])
    return sorted(merged, key=lambda h: -h.score)


def ranked_hits(arm: str, hits: list[VectorHit], floor: float, fetch: int) -> tuple[ArmRow, ...]:
    """The first ``fetch`` hits at or above ``floor`` as an arm's ranked rows (the vector and cue arms)."""
    rows: list[ArmRow] = []
    for hit in hits:
        if hit.score < floor:
            break
        prefix = "mem:" if hit.kind == "memory" else "ep:"
        rows.append(ArmRow(prefix + hit.id, len(rows), hit.score))
        if len(rows) >= fetch:
            break
    return tuple(rows)


async def vector_near(
    vectors: VectorStore,
    vector: Vector,
    scope: ReadScope,
    stats: ScopeStats,
    *,
    fetch: int,
    floor: float,
    with_episodes: bool,
) -> ArmResult:
    """The near vector list: the newest window of memories and of episodes, at or above ``floor``."""
    bounds: dict[PointKind, tuple[int | None, int | None]] = {"memory": (stats.memories.window_start, None)}
    if with_episodes:
        bounds["episode"] = (stats.episodes.window_start, None)
    hits = await _two_kinds(vectors, vector, scope, fetch, bounds)
    return ArmResult("vector_near", ranked_hits("vector_near", hits, floor, fetch))


async def vector_far(
    vectors: VectorStore,
    vector: Vector,
    scope: ReadScope,
    stats: ScopeStats,
    *,
    fetch: int,
    floor: float,
    with_episodes: bool,
) -> ArmResult:
    """The far list: window positions past the scan window up to the reach."""
    bounds: dict[PointKind, tuple[int | None, int | None]] = {}
    if stats.memories.window_start is not None:
        bounds["memory"] = (stats.memories.reach_start, stats.memories.window_start)
    if with_episodes and stats.episodes.window_start is not None:
        bounds["episode"] = (stats.episodes.reach_start, stats.episodes.window_start)
    if not bounds:
        return ArmResult("vector_far")
    hits = await _two_kinds(vectors, vector, scope, fetch, bounds)
    return ArmResult("vector_far", ranked_hits("vector_far", hits, floor, fetch))
