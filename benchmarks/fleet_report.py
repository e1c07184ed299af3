"""The report of :mod:`benchmarks.fleet_speed`: its markdown, its chart, and the cost growth by store
size (issue 17 target 4).

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

from benchmarks import fleet_tenancy as tenancy
from benchmarks import harness
from benchmarks.fleet_timeline import timeline_table
from benchmarks.recall_levels import LIMIT, WARMUP

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = [
    "GrowthPoint",
    "cost_growth",
    "measured_round",
    "render",
    "render_grid",
    "write_fleet_chart",
    "write_growth_chart",
]

HERE = Path(__file__).resolve().parent
TARGET_STORE_RPS = 5_000.0
TARGET_RATIO = 1.5
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


def write_growth_chart(points: Sequence[GrowthPoint], path: Path) -> None:
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


def growth_section(points: Sequence[GrowthPoint], chart: str) -> list[str]:
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


def write_fleet_chart(result: Mapping[str, Any], path: Path) -> None:
    """Left: the paired recall latencies of fleet and lone store; right: the store-throughput grid."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    rounds = [(k, result["measure"][k]) for k in ("before", "after") if k in result["measure"]]
    for key, measured in rounds:
        for name, style in (("fleet", "-"), ("lone", ":")):
            ms = sorted(measured["samples_ms"][name])
            left.plot(
                ms, [(i + 1) / len(ms) for i in range(len(ms))], linestyle=style, label=f"{name}, {key}"
            )
    left.set_xscale("log")
    left.set_xlabel("recall latency (ms)")
    left.set_ylabel("fraction of recalls")
    left.legend(fontsize=8)
    left.grid(True, alpha=0.3)
    grid = result["grid"]
    labels = [f"{c['batch']}x{c['writers']}" for c in grid]
    right.bar(labels, [c["records_per_sec"] for c in grid], color="tab:blue")
    right.axhline(TARGET_STORE_RPS, color="grey", linestyle=":", linewidth=0.8)
    right.set_xlabel("batch size x concurrent writers")
    right.set_ylabel("records/s")
    fig.suptitle(f"Fleet of {result['agents']:,} agents x {result['memories']:,} memories")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------- report


def _per(value: float, count: int) -> str:
    return f"{value / count:,.0f}" if count else "-"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _header(result: Mapping[str, Any]) -> list[str]:
    runs = [result["fleet"]["ingest"]] if "fleet" in result else result["grid"]
    vectors = (
        "given by the caller (`embedding`), computed once per distinct text by the engine's embedder "
        "and cached (benchmarks/quality/embed_cache.py)"
        if all(run["caller_vectors"] for run in runs)
        else "**embedded by the engine** (this commit's store takes no caller vector)"
    )
    title = (
        f"Fleet speed: {result['agents']:,} agents x {result['memories']:,} memories in one engine"
        if "fleet" in result
        else "Fleet store throughput: the grid alone (`--grid-only`; no fleet built, no recall measured)"
    )
    return [
        f"# {title}",
        "",
        *harness.header(
            result["command"],
            load_start=result["load"]["start"],
            load_end=result["load"]["end"],
            watched=("src", "benchmarks/*.py", "benchmarks/quality"),
        ),
        f"- corpus: {result['source']}; each agent's memories a deterministic sample of the LoCoMo turns "
        f"({result['distinct_texts']:,} distinct texts in all); vectors {vectors}",
        "- both engines opened without background tasks (no block worker, no trace publisher); "
        f"recall `limit={LIMIT}`, default policy, query-embedding cache off",
        "- heap: "
        + (
            "frozen once the fleet was loaded (`gc.freeze`, as `cpersona serve` freezes its heap once the "
            "engine is open: src/cpersona/edges/heap.py)"
            if result.get("heap_frozen")
            else "not frozen (`--no-freeze`)"
        ),
        "",
    ]


def _store_section(result: Mapping[str, Any]) -> list[str]:
    lines = [
        "## Store throughput",
        "",
        "Each grid cell is a fresh scratch store; records/s is the wall clock over all writers.",
        "",
        "| batch | writers | records | records/s | batch p50 ms |",
        "|---|---|---|---|---|",
    ]
    for c in result["grid"]:
        lines.append(
            f"| {c['batch']:,} | {c['writers']} | {c['stored']:,} | {c['records_per_sec']:,.0f} "
            f"| {c['batch_p50_ms']:.1f} |"
        )
    if "fleet" not in result:
        best = max(c["records_per_sec"] for c in result["grid"])
        verdict = "met" if best >= TARGET_STORE_RPS else "**not met**"
        lines += [
            "",
            f"Best cell: **{best:,.0f} records/s**. Target (≥ {TARGET_STORE_RPS:,.0f}): {verdict}.",
            "",
        ]
        return [*lines, *_steps_table([(f"{c['batch']}x{c['writers']}", c) for c in result["grid"]]), ""]
    built, chosen = result["fleet"], result["chosen"]
    ingest = built["ingest"]
    # A cached fleet was built with the batch and writers of its own run, not necessarily this grid's.
    how = "the grid's fastest cell" if chosen["from_grid"] else "given on the command line"
    cached = (
        f"cached, built {built['built_at']} at {built['built_commit']}" if built.get("from_cache") else how
    )
    verdict = "met" if ingest["records_per_sec"] >= TARGET_STORE_RPS else "**not met**"
    lines += [
        "",
        f"The fleet: {ingest['stored']:,} records in {ingest['wall_secs']:.1f} s, "
        f"**{ingest['records_per_sec']:,.0f} records/s**, batches of {ingest['batch']:,} with "
        f"{ingest['writers']} concurrent writer(s) ({cached}). Target (≥ {TARGET_STORE_RPS:,.0f} "
        f"records/s): {verdict}.",
        "",
        "Where the store time went: µs per record inside each step of `store_batch`, summed over the "
        "writers (so with several writers a step's figure includes the time it waited for the others; "
        "a one-writer column adds up to its wall time per record).",
        "",
    ]
    lines += _steps_table(
        [(f"{c['batch']}x{c['writers']}", c) for c in result["grid"]] + [("**fleet**", ingest)]
    )
    # EXEC's time includes the commands it runs, which Redis also counts one by one: left out of the sum.
    server = sorted(
        ((n, c) for n, c in ingest["redis_commands"].items() if n.lower() != "exec"),
        key=lambda kv: -kv[1]["usec"],
    )
    busy = sum(c["usec"] for _, c in server)
    shown = ", ".join(f"`{name}` {_per(c['usec'], ingest['stored'])}" for name, c in server[:5])
    lines += [
        "",
        "Redis's own time for the fleet (`INFO commandstats`, every command but `EXEC`, whose time holds "
        f"the commands it runs): {_per(busy, ingest['stored'])} µs per record, most in {shown}; its one "
        f"thread alone would cap the store at {ingest['stored'] / (busy / 1e6 or 1):,.0f} records/s.",
        "",
    ]
    return [*lines, *timeline_table(ingest.get("timeline", []))]


def _steps_table(runs: Sequence[tuple[str, Mapping[str, Any]]]) -> list[str]:
    """µs per record in each step of ``store_batch``, a column per run, steps by the last run's share."""
    last = runs[-1][1]["parts_secs"]
    steps = sorted({k for _, run in runs for k in run["parts_secs"]}, key=lambda k: -last.get(k, 0.0))
    lines = [
        "| step | " + " | ".join(label for label, _ in runs) + " |",
        "|---|" + "---|" * len(runs),
    ]
    for step in steps:
        cells = [_per(run["parts_secs"].get(step, 0.0) * 1e6, run["stored"]) for _, run in runs]
        lines.append(f"| {step} | " + " | ".join(cells) + " |")
    walls = [_per(run["wall_secs"] * 1e6, run["stored"]) for _, run in runs]
    lines.append("| wall time per record | " + " | ".join(walls) + " |")
    return lines


def _row(what: str, total: str, per_record: str) -> str:
    return f"| {what} | {total} | {per_record} |"


def _mib(value: float) -> str:
    return f"{value / 2**20:,.1f} MiB"


def _bytes_section(result: Mapping[str, Any]) -> list[str]:
    empty, full = result["fleet"]["empty"], result["fleet"]["full"]
    n = int(result["fleet"]["records"])
    index = full["indexes"]["memory"]
    sizes = {k: v for k, v in index.items() if k.endswith("_mb") and k != "total_index_memory_sz_mb"}
    total_index = index.get("total_index_memory_sz_mb", sum(sizes.values())) * 2**20
    used = full["redis_used_memory"] - empty["redis_used_memory"]
    lines = [
        "## Bytes per record",
        "",
        "| what | total | bytes per record |",
        "|---|---|---|",
        _row("Redis `used_memory` (over the empty store)", _mib(used), _per(used, n)),
        _row(
            "&nbsp;&nbsp;of which the memory index (`FT.INFO` total)", _mib(total_index), _per(total_index, n)
        ),
    ]
    for name, value in sorted(sizes.items()):
        if value:
            lines.append(
                _row(f"&nbsp;&nbsp;&nbsp;&nbsp;`{name}`", _mib(value * 2**20), _per(value * 2**20, n))
            )
    queued = f"{full['block_events_queued']:,} entries"
    lines.append(
        _row("&nbsp;&nbsp;block events queued (one stream entry per record, no worker ran)", queued, "-")
    )
    disk = full["redis_dir_bytes"]
    lines.append(_row("Redis append-only file and snapshot on disk", _mib(disk), _per(disk, n)))
    for name, size in sorted(full["qdrant_bytes"].items()):
        lines.append(_row(f"Qdrant `{name}` on disk (allocated)", _mib(size), _per(size, n)))
    for what, key in (
        ("redis-server", "redis_rss_kb"),
        ("the engine process (this benchmark)", "engine_rss_kb"),
        ("the vector engine's child processes", "vector_rss_kb"),
    ):
        if key not in full:  # a result from before the shards ran in child processes
            continue
        grown = (full[key] - empty[key]) * 1024
        lines.append(
            _row(
                f"RSS of {what}",
                f"{_mib(full[key] * 1024)} (empty: {_mib(empty[key] * 1024)})",
                _per(grown, n),
            )
        )
    after = result["measure"]["footprint"]
    lines += [
        "",
        "The engine's RSS is this process: it also holds the caller vectors of the distinct texts and the "
        "corpus; qdrant-edge memory-maps its segments, so their pages count where they are resident (in "
        "the child processes that hold the shards, `CPERSONA_QDRANT_PROCESS`, or here in thread mode). "
        f"After the fleet was reopened for measuring (with the lone store open beside it), the process held "
        f"{_mib(after['engine_rss_kb'] * 1024)} and redis-server {_mib(after['redis_rss_kb'] * 1024)}. "
        "Qdrant reports counts, not sizes (`EdgeShard.info()`, after the last round):",
        "",
        "| store | collection | points | indexed vectors | segments |",
        "|---|---|---|---|---|",
    ]
    for store, shards in result["measure"]["shards"].items():
        for name, s in shards.items():
            lines.append(
                f"| {store} | {name} | {s['points']:,} | {s['indexed_vectors']:,} | {s['segments']} |"
            )
    return [*lines, ""]


def _recall_section(result: Mapping[str, Any]) -> list[str]:
    measured = result["measure"]
    scope = result["measured_agent"]
    lines = [
        "## Recall in one agent's scope: the fleet beside a lone store",
        "",
        f"Agent `{scope}` holds the same {result['memories']:,} memories in both stores. Both are open in "
        "this process at once; each question goes to one and then the other, whichever first alternating, "
        "and then the memory collection's filtered vector search alone (that agent's filter, the question's "
        f"vector, `limit={LIMIT}`) is timed the same way. {WARMUP} warm-up recalls on each first.",
        "",
        "| round | store | recalls | recall p50 ms | recall p95 ms | fleet / lone p50 "
        "| vector search p50 ms | vector search p95 ms | fleet / lone search p50 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for key, label in (("before", "not optimized"), ("after", "after `Engine.optimize()`")):
        if key not in measured:
            continue
        s = measured[key]["summary"]
        ratio = s["fleet"]["p50_ms"] / s["lone"]["p50_ms"]
        search = s["fleet_search"]["p50_ms"] / s["lone_search"]["p50_ms"]
        for name in ("fleet", "lone"):
            cells = (
                f"**{ratio:.2f}**" if name == "fleet" else "",
                f"**{search:.2f}**" if name == "fleet" else "",
            )
            r, v = s[name], s[f"{name}_search"]
            lines.append(
                f"| {label} | {name} | {r['samples']} | {_ms(r['p50_ms'])} | {_ms(r['p95_ms'])} "
                f"| {cells[0]} | {_ms(v['p50_ms'])} | {_ms(v['p95_ms'])} | {cells[1]} |"
            )
        degraded = measured[key]["degraded"]
        if degraded:
            lines.append(
                f"| {label} | degraded arms | {', '.join(f'{k}: {v}' for k, v in sorted(degraded.items()))} |"
            )
    lines += ["", *_arm_table(measured), ""]
    fleet_blocks, lone_blocks = measured["blocks"]
    lines += [
        "",
        f"Blocks: none built in either store (block points: fleet {fleet_blocks['built']:,}, lone "
        f"{lone_blocks['built']:,}); the block events every store queues wait in the stream (fleet "
        f"{fleet_blocks['queued']:,}, lone {lone_blocks['queued']:,}). So the block arm searches an empty "
        "collection in both alike, and the figures are the memory arms' (vector, keyword, episode).",
        f"Reopening the fleet (a copy of the built store) until its index and vectors were complete took "
        f"{measured['reopen_secs']:.1f} s.",
    ]
    if "optimize_secs" in measured:
        o = measured["optimize_secs"]
        lines.append(
            f"`Engine.optimize()` took {o['fleet']:.1f} s on the fleet and {o['lone']:.1f} s on the lone "
            "store."
        )
    return [*lines, ""]


def _arm_table(measured: Mapping[str, Any]) -> list[str]:
    """Each arm's mean elapsed time in each store and round, and how often both stores gave the same rows."""
    rounds = [(k, measured[k]) for k in ("before", "after") if k in measured]
    names = sorted({arm for _, r in rounds for by in r["arms_mean_ms"].values() for arm in by})
    heads = [f"{store}, {key}" for key, _ in rounds for store in ("fleet", "lone")]
    lines = [
        "Each arm's own elapsed time (mean ms, read from the recall's stage history), and the recalls whose "
        "rows (contents, in order) were the same in both stores:",
        "",
        "| arm | " + " | ".join(heads) + " |",
        "|---|" + "---|" * len(heads),
    ]
    for arm in names:
        cells = [_ms(r["arms_mean_ms"][store].get(arm)) for _, r in rounds for store in ("fleet", "lone")]
        lines.append(f"| {arm} | " + " | ".join(cells) + " |")
    same = [f"{r['same_rows']} of {r['summary']['fleet']['samples']}" for _, r in rounds]
    # one figure per round, shown under both of its columns
    lines.append("| same rows in both | " + " | ".join(c for c in same for _ in ("fleet", "lone")) + " |")
    return lines


def _findings(result: Mapping[str, Any]) -> list[str]:
    state, measured = measured_round(result)
    s = measured["summary"]
    ratio = s["fleet"]["p50_ms"] / s["lone"]["p50_ms"]
    verdict = "met" if ratio <= TARGET_RATIO else "**not met**"
    out = [
        f"- Target (fleet p50 within {TARGET_RATIO}x of the lone store, {state}): {verdict}, "
        f"{s['fleet']['p50_ms']:.1f} ms against {s['lone']['p50_ms']:.1f} ms ({ratio:.2f}x).",
    ]
    before = result["measure"]["before"]["summary"]
    after = result["measure"].get("after", {}).get("summary")
    if before and after:
        out.append(
            "- The filtered vector search in one agent's scope: p50 "
            f"{before['fleet_search']['p50_ms']:.2f} ms on the fleet before the index build, "
            f"{after['fleet_search']['p50_ms']:.2f} ms after (lone store "
            f"{before['lone_search']['p50_ms']:.2f} / {after['lone_search']['p50_ms']:.2f} ms)."
        )
    if measured["same_rows"] < s["fleet"]["samples"]:
        out.append(
            f"- The fleet and the lone store returned the same rows in {measured['same_rows']} of "
            f"{s['fleet']['samples']} recalls. The memory keyword arm ranks with BM25 over the whole search "
            "index (document counts and frequencies of every agent), so an agent's keyword scores depend on "
            "the other agents' memories; the vector arms score the same in both."
        )
    ingest = result["fleet"]["ingest"]
    parts = ingest["parts_secs"]
    slowest = max(parts.items(), key=lambda kv: kv[1])
    out.append(
        f"- Store: {ingest['records_per_sec']:,.0f} records/s; the largest step is {slowest[0]} "
        f"({slowest[1] / (sum(parts.values()) or 1):.0%} of the time inside `store_batch`)."
    )
    single = [c for c in result["grid"] if c["writers"] == 1]
    if single:
        best = max(single, key=lambda c: c["records_per_sec"])
        steps = sorted(best["parts_secs"].items(), key=lambda kv: -kv[1])[:3]
        shown = ", ".join(f"{name} {secs * 1e6 / best['stored']:,.0f}" for name, secs in steps)
        top = max(result["grid"], key=lambda c: c["records_per_sec"])
        out.append(
            f"- One writer, batches of {best['batch']:,}: {best['records_per_sec']:,.0f} records/s, per "
            f"record (µs) {shown}; the grid's best ({top['batch']:,} x {top['writers']}) is "
            f"{top['records_per_sec'] / best['records_per_sec']:.2f}x that."
        )
    return out


def render_grid(result: Mapping[str, Any]) -> str:
    """The report of a ``--grid-only`` run: the header and the store-throughput grid with its steps."""
    return "\n".join([*_header(result), *_store_section(result)]) + "\n"


def render(result: Mapping[str, Any], points: Sequence[GrowthPoint], *, chart: str, fleet_chart: str) -> str:
    lines = [
        *_header(result),
        f"![fleet recall and store throughput]({fleet_chart})",
        "",
        *_store_section(result),
        *_bytes_section(result),
        *_recall_section(result),
        *tenancy.section(result.get("tenancy", [])),
        *growth_section(points, chart),
        "## Findings",
        "",
        *_findings(result),
    ]
    return "\n".join(lines) + "\n"
