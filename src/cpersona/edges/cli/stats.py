"""``cpersona stats [--agent A]``: the record counts as a table to be read (the counts, then the memories
of each store with their mean fidelity), or with ``--json`` the HTTP API's JSON as it is."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cpersona.edges.cli.outcomes import show

if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterator, Mapping

    from cpersona.edges.cli.service import Service

__all__ = ["render_stats", "stats_command"]


async def stats_command(service: Service, args: argparse.Namespace) -> int:
    return show(await service.stats(args.agent), as_json=args.json, render=render_stats)


def _fidelity(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def render_stats(stats: Mapping[str, Any]) -> Iterator[str]:
    """The answer of ``/v1/introspect/stats`` as two aligned tables: totals, then one row per store."""
    vectors = stats.get("vectors")
    # Cerememory's shape answers 0 for the mean of no memory; shown as none (-).
    none = stats["memories"] == 0
    rows: list[tuple[str, str]] = [
        ("memories", str(stats["memories"])),
        ("episodes", str(stats["episodes"])),
        ("raw entries", str(stats["raw_entries"])),
        ("vectors", "- (no embedder)" if vectors is None else str(vectors)),
        ("vectors pending", str(stats["vector_pending"])),
        ("associations", str(stats["total_associations"])),
        ("recalls", str(stats["total_recall_count"])),
        ("mean fidelity", "-" if none else _fidelity(stats["avg_fidelity"])),
        ("oldest memory", stats.get("oldest_record") or "-"),
        ("newest memory", stats.get("newest_record") or "-"),
    ]
    label = max(len(name) for name, _ in rows)
    for name, value in rows:
        yield f"{name:<{label}}  {value}"
    by_store: Mapping[str, int] = stats.get("records_by_store") or {}
    if not by_store:
        return
    fidelity: Mapping[str, float] = stats.get("avg_fidelity_by_store") or {}
    width = max(len("store"), *(len(store) for store in by_store))
    yield ""
    yield f"{'store':<{width}}  {'memories':>8}  {'mean fidelity':>13}"
    for store, count in by_store.items():
        yield f"{store:<{width}}  {count:>8}  {_fidelity(fidelity.get(store)):>13}"
