"""Cerememory's ``introspect.stats`` fields (CMP §7), computed from the state of every memory.

Only what this engine can say honestly: the counts by store (the four stores it has; ``working`` is not
one of them), the outbound edges, the mean *current* fidelity (:mod:`~cpersona.model.fidelity`, at the
moment of the call, never the stored anchor), the oldest and newest memory by its own time, and how many
reconsolidating recalls the memories had. The reference engine always answers ``total_recall_count: 0``
and null times; these are real.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import TYPE_CHECKING, Any, get_args

from cpersona.model.fidelity import FidelityCurve, current_fidelity
from cpersona.model.records import EmotionVector, Fidelity, StoreKind, format_time

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["STORES", "MemoryState", "cmp_stats"]

STORES: tuple[str, ...] = get_args(StoreKind)


@dataclasses.dataclass(frozen=True, slots=True)
class MemoryState:
    """What the statistics read of one memory: no text."""

    store: str
    timestamp: float
    fidelity: Fidelity
    emotion: EmotionVector
    associations: int


def cmp_stats(
    states: Sequence[MemoryState], raw_entries: int, now: float, curve: FidelityCurve
) -> dict[str, Any]:
    """The CMP statistics of ``states`` (every memory of the scope) at ``now``."""
    by_store = Counter(s.store for s in states)
    fidelity_sum: dict[str, float] = dict.fromkeys(by_store, 0.0)
    for s in states:
        fidelity_sum[s.store] += current_fidelity(s.fidelity, s.emotion, now, curve=curve)
    total = len(states)
    times = [s.timestamp for s in states]
    return {
        "total_records": total,
        "records_by_store": {store: by_store.get(store, 0) for store in STORES},
        "total_associations": sum(s.associations for s in states),
        "avg_fidelity": sum(fidelity_sum.values()) / total if total else 0.0,
        "avg_fidelity_by_store": {
            store: fidelity_sum[store] / count for store, count in sorted(by_store.items()) if count
        },
        "oldest_record": format_time(min(times)) if times else None,
        "newest_record": format_time(max(times)) if times else None,
        "total_recall_count": sum(s.fidelity.access_count for s in states),
        "raw_journal_records": raw_entries,
    }
