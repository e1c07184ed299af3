"""Cost growth for :mod:`benchmarks.fleet_speed` (issue 17 target 4): one caller's recall by store size.

It puts one caller's recall p50/p95 at every size side by side: the lone store of this run (one agent's
memories), ``recall_speed``'s last 10k and 100k figures (its raw JSON if present, else its committed
results table), this run's fleet, and CPersona 2.6.14's figures from ``speed_peers``' committed results
(it runs up to 100k). A size with no figure is left as a visible gap, never filled in.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.recall_levels import LIMIT

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = ["GrowthPoint", "cost_growth", "measured_round", "section", "write_chart"]

HERE = Path(__file__).resolve().parent
FLEET_SOURCE = "this run, fleet"
RECALL_RESULTS = HERE / "results" / "recall_speed.md"
RECALL_RAW = HERE / ".cache" / "recall_speed_last.json"
PEER_RESULTS = HERE / "results" / "speed_peers.md"
_ROW = re.compile(r"^\|\s*([\d,]+)\s*\|\s*1\s*\|\s*\d+\s*\|\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|")
_PEER_ROW = re.compile(r"^\|\s*([\d,]+)\s*\|\s*1\s*\|\s*\d+\s*\|[^|]+\|\s*([\d.]+)\s*/\s*([\d.]+)\s*/")


@dataclasses.dataclass(frozen=True, slots=True)
class GrowthPoint:
    system: str
    records: int
    p50_ms: float | None
    p95_ms: float | None
    source: str


def _recall_speed_points(raw: Path, table: Path) -> dict[int, GrowthPoint]:
    """``recall_speed``'s one-caller figures: its committed results table, else its last raw JSON (the
    table is what a reader can check; the raw file is a local cache)."""
    found: dict[int, GrowthPoint] = {}
    if table.is_file():
        for line in table.read_text(encoding="utf-8").splitlines():
            if m := _ROW.match(line):
                size = int(m[1].replace(",", ""))
                found[size] = GrowthPoint("cpersona", size, float(m[2]), float(m[3]), table.name)
    if raw.is_file():
        for size, entry in json.loads(raw.read_text()).items():
            one = next((lv for lv in entry.get("levels", []) if lv.get("callers") == 1), None)
            if one is not None and int(size) not in found:
                found[int(size)] = GrowthPoint(
                    "cpersona",
                    int(size),
                    one["p50_ms"],
                    one["p95_ms"],
                    f"{raw.name} ({entry['build'].get('built_commit', '?')})",
                )
    return found


def _peer_points(table: Path) -> dict[int, GrowthPoint]:
    """CPersona 2.6.14's one-caller p50/p95 (seen from the benchmark) from ``speed_peers``' results."""
    found: dict[int, GrowthPoint] = {}
    if table.is_file():
        for line in table.read_text(encoding="utf-8").splitlines():
            if m := _PEER_ROW.match(line):
                size = int(m[1].replace(",", ""))
                found[size] = GrowthPoint("CPersona 2.6.14", size, float(m[2]), float(m[3]), table.name)
    return found


def measured_round(result: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    measured = result["measure"]
    return (
        ("after optimize", measured["after"])
        if "after" in measured
        else ("not optimized", measured["before"])
    )


def cost_growth(result: Mapping[str, Any], *, raw: Path = RECALL_RAW) -> list[GrowthPoint]:
    """One caller's p50/p95 by store size for cpersona and CPersona 2.6.14 (``None`` where not measured)."""
    state, measured = measured_round(result)
    lone = measured["summary"]["lone"]
    fleet = measured["summary"]["fleet"]
    ours = _recall_speed_points(raw, RECALL_RESULTS)
    memories, records = int(result["memories"]), int(result["agents"]) * int(result["memories"])
    ours[memories] = GrowthPoint(
        "cpersona", memories, lone["p50_ms"], lone["p95_ms"], f"this run, lone store, {state}"
    )
    fleet_point = GrowthPoint(
        "cpersona", records, fleet["p50_ms"], fleet["p95_ms"], f"{FLEET_SOURCE}, {state}"
    )
    peers = _peer_points(PEER_RESULTS)
    sizes = sorted({1_000, 10_000, 100_000, memories} | set(peers))
    points = [ours.get(n, GrowthPoint("cpersona", n, None, None, "not measured")) for n in sizes]
    points = sorted([*points, fleet_point], key=lambda p: p.records)
    for n in sorted({*sizes, records}):
        default = GrowthPoint("CPersona 2.6.14", n, None, None, "not run (its benchmark goes up to 100k)")
        points.append(peers.get(n, default))
    return points


def write_chart(points: Sequence[GrowthPoint], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axis = plt.subplots(figsize=(7, 4.2))
    for system, colour in (("cpersona", "tab:blue"), ("CPersona 2.6.14", "tab:orange")):
        shown = [(p.records, p.p50_ms, p.p95_ms) for p in points if p.system == system]
        measured = [(n, p50, p95) for n, p50, p95 in shown if p50 is not None and p95 is not None]
        xs = [n for n, _, _ in measured]
        axis.plot(xs, [p50 for _, p50, _ in measured], marker="o", color=colour, label=f"{system} p50")
        axis.plot(
            xs,
            [p95 for _, _, p95 in measured],
            marker="x",
            linestyle="--",
            color=colour,
            label=f"{system} p95",
        )
    for p in points:
        if p.source.startswith(FLEET_SOURCE) and p.p50_ms is not None:
            axis.annotate(
                "fleet, one agent's scope",
                (p.records, p.p50_ms),
                fontsize=8,
                xytext=(4, 6),
                textcoords="offset points",
            )
    axis.set_xscale("log")
    axis.set_yscale("log")
    axis.set_xlabel("records in the store")
    axis.set_ylabel("one caller's recall latency (ms)")
    axis.grid(True, alpha=0.3)
    axis.legend(fontsize=8)
    fig.suptitle(f"Recall cost by store size, limit {LIMIT}, {os.cpu_count()} CPUs")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def section(points: Sequence[GrowthPoint], chart: str) -> list[str]:
    lines = [
        "## Cost growth: one caller's recall by store size",
        "",
        f"![cost growth]({chart})",
        "",
        "| system | records | p50 ms | p95 ms | from |",
        "|---|---|---|---|---|",
    ]
    for p in points:
        lines.append(f"| {p.system} | {p.records:,} | {_ms(p.p50_ms)} | {_ms(p.p95_ms)} | {p.source} |")
    lines += [
        "",
        "The 10k and 100k cpersona figures come from `recall_speed` (one agent, blocks built, the store "
        "optimised, background tasks on); this run's lone and fleet figures have no blocks built. "
        "CPersona 2.6.14's come from `speed_peers` (one agent; its 1-caller p50 / p95 seen from the "
        "benchmark); it was not run on a fleet.",
        "",
    ]
    return lines


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"
