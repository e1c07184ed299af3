"""Stage 5, item order: clusters by their best member's rank. The window is the first ``count``
clusters holding at least one row the recall ranked; the held clusters (rows that only a held seat
brought, block or keyword) follow it, marked ``admission: "reservation"``, and never take a window place."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cpersona.operations.reconstruct.bundling import Cluster
    from cpersona.operations.reconstruct.candidates import Candidate

__all__ = ["Ordered", "order_items"]


@dataclasses.dataclass(frozen=True, slots=True)
class Ordered:
    window: tuple[Cluster, ...]
    held: tuple[Cluster, ...]
    dropped: int  # ranked clusters past the window

    @property
    def items(self) -> tuple[Cluster, ...]:
        return self.window + self.held


def order_items(clusters: Sequence[Cluster], pool: Sequence[Candidate], count: int) -> Ordered:
    window: list[Cluster] = []
    held: list[Cluster] = []
    dropped = 0
    for cluster in clusters:
        if all(pool[i].reserved for i in cluster.members):
            held.append(cluster)
        elif len(window) < count:
            window.append(cluster)
        else:
            dropped += 1
    return Ordered(tuple(window), tuple(held), dropped)
