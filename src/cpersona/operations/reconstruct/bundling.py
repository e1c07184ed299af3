"""Stage 4, bundling: the pool's rows joined into clusters by union-find, the lower index (the more
relevant row) always the root. The keys apply in this order, and the first key that joins a row is its
``why``:

* ``cluster:msg_id``: memories of the same project with the same non-empty ``msg_id`` (its versions);
* ``cluster:episode``: a memory whose time falls in a pool episode's [start, end], same project and
  channel;
* ``cluster:adjacent``: memories of the same source, project and channel within the adjacency window
  (60 s) of their burst's FIRST row: the window is anchored at that row, not chained from row to row, so
  a slow conversation does not fold into one cluster;
* ``cluster:relation``: a declared record relation with both ends in the pool.
"""

from __future__ import annotations

import bisect
import dataclasses
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from cpersona.operations.reconstruct.candidates import Candidate
    from cpersona.stores.protocols import RecordLinks

__all__ = ["KEYS", "Cluster", "bundle"]

KEYS = ("cluster:msg_id", "cluster:episode", "cluster:adjacent", "cluster:relation")


@dataclasses.dataclass(frozen=True, slots=True)
class Cluster:
    """Pool indices, most relevant first; ``why`` per joined row; ``reason`` the key that formed it
    (``None`` for a singleton)."""

    members: tuple[int, ...]
    why: Mapping[int, str]
    reason: str | None


class _Union:
    def __init__(self, n: int) -> None:
        self.parent = list(range(n))
        self.why: dict[int, str] = {}
        self.formed: dict[int, str] = {}

    def root(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def join(self, a: int, b: int, key: str) -> None:
        ra, rb = self.root(a), self.root(b)
        if ra == rb:
            return
        low, high = min(ra, rb), max(ra, rb)
        self.formed[low] = self.formed.get(low) or self.formed.get(high) or key
        self.parent[high] = low
        for i in (a, b):
            self.why.setdefault(i, key)


def _by_msg_id(pool: Sequence[Candidate], u: _Union) -> None:
    first: dict[tuple[str, str], int] = {}
    for i, c in enumerate(pool):
        if c.is_memory and c.msg_id:
            u.join(first.setdefault((c.project, c.msg_id), i), i, KEYS[0])


def _by_episode(pool: Sequence[Candidate], u: _Union) -> None:
    timed: dict[tuple[str, str], list[tuple[float, int]]] = {}
    for m, mem in enumerate(pool):
        if mem.is_memory and mem.ts is not None:
            timed.setdefault((mem.project, mem.channel), []).append((mem.ts, m))
    for rows in timed.values():
        rows.sort()
    for e, ep in enumerate(pool):
        rows = timed.get((ep.project, ep.channel), [])
        if ep.span is None or not rows:
            continue
        start, end = ep.span
        # The pool may be top_k = 10,000 rows: each episode reads only the memories inside its span.
        for _, m in rows[bisect.bisect_left(rows, (start, -1)) : bisect.bisect_right(rows, (end, len(pool)))]:
            u.join(e, m, KEYS[1])


def _by_adjacency(pool: Sequence[Candidate], u: _Union, seconds: float) -> None:
    groups: dict[tuple[object, ...], list[int]] = {}
    for i, c in enumerate(pool):
        if c.is_memory and c.ts is not None:
            groups.setdefault((c.source, c.project, c.channel), []).append(i)
    for members in groups.values():
        members.sort(key=lambda i: (pool[i].ts, i))
        anchor = members[0]
        for i in members[1:]:
            if (pool[i].ts or 0.0) - (pool[anchor].ts or 0.0) <= seconds:
                u.join(anchor, i, KEYS[2])
            else:
                anchor = i


def _by_relation(pool: Sequence[Candidate], u: _Union, links: Mapping[str, RecordLinks]) -> None:
    index = {c.ref: i for i, c in enumerate(pool)}
    for i, c in enumerate(pool):
        found = links.get(c.ref)
        for link in () if found is None else found.relations:
            if link.other in index:
                u.join(i, index[link.other], KEYS[3])


def bundle(
    pool: Sequence[Candidate], links: Mapping[str, RecordLinks], adjacency_seconds: float
) -> list[Cluster]:
    """The clusters, ordered by their best member's rank."""
    u = _Union(len(pool))
    _by_msg_id(pool, u)
    _by_episode(pool, u)
    _by_adjacency(pool, u, adjacency_seconds)
    _by_relation(pool, u, links)
    members: dict[int, list[int]] = {}
    for i in range(len(pool)):
        members.setdefault(u.root(i), []).append(i)
    return [
        Cluster(tuple(rows), {i: u.why[i] for i in rows if i in u.why and i != root}, u.formed.get(root))
        for root, rows in sorted(members.items())
    ]
