"""Recall latency and throughput of the engine on its embedded defaults, at 10k and 100k memories.

The engine runs as a library in this process (embedded Redis, the embedded Qdrant engine on disk,
all-MiniLM-L6-v2 in numpy) with the query-embedding cache off, so every recall embeds its question.
``--embedding-model`` runs it with another registered model instead (``multilingual-e5-small``), so the
models can be compared on the same corpus: its stores are cached apart (their key names the model), and
its report and raw figures are written beside the default model's, never over them
(``results/recall_speed_<model>.md``).

For each corpus size the benchmark:

1. builds a store of that many memories for one agent through ``store_batch`` (batches of 256), then calls
   ``Engine.optimize()`` (the embedded engine has no background optimiser) and times it, with a short
   single-caller probe before and after, so the effect of the index build is visible;
2. copies the built store into a temporary directory and measures ``recall(limit=10)`` with 1, 8 and 64
   concurrent callers (an anyio task group, a fixed number of recalls per level): p50/p95/p99 latency,
   recalls per second, and how many recalls came back degraded (an arm failed or timed out);
3. reports where a single caller's time goes: the recall's own ``timing_ms`` (retrieval, then each stage),
   each arm's elapsed time, and the query embedding timed alone.

Memories are LoCoMo turns (``"<speaker>: <text>"``, image captions included) followed by generated ones,
each a LoCoMo speaker with two sentences drawn from LoCoMo turns and from :func:`benchmarks.corpus.sentences`,
kept only when new (the engine skips duplicate content). Questions are LoCoMo's, cycled. Without the
LoCoMo file both fall back to synthetic text. Corpus ``n`` is a prefix of every larger corpus, so a
larger store is grown from a cached smaller one (10k, then 90k more to reach 100k) and is optimised again.

Built stores are cached under ``benchmarks/.cache/recall_speed/`` (gitignored) by
:mod:`benchmarks.store_cache`; a cached store whose vector collections differ from what the current
engine opens is rebuilt. ``--rebuild`` forces
a build. ``--quick`` (1k memories, fewer recalls, no cache, under a minute) is for CI. Run it from the
repository root::

    .venv/bin/python -m benchmarks recall_speed            # 10k and 100k: ingest takes 15+ min uncached
    .venv/bin/python -m benchmarks recall_speed --quick
    .venv/bin/python -m benchmarks recall_speed --quick --embedding-model multilingual-e5-small

Everything stays in this process and on this machine; nothing goes over the network.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

import cpersona
from benchmarks import harness
from benchmarks.corpus import LOCOMO, Texts, build_corpus, load_texts
from benchmarks.harness import percentile
from benchmarks.recall_levels import AGENT, LIMIT, WARMUP, Level, run_level
from benchmarks.store_cache import (
    BATCH,
    CACHE,
    UNNAMED_MODEL,
    build_store,
    cached_store,
    collections,
    settings_for,
    wait_indexed,
)
from cpersona import Settings
from cpersona.embedding_models import DEFAULT_EMBEDDING_MODEL, EMBEDDING_MODELS
from cpersona.recall.policy import load_policies

if TYPE_CHECKING:
    from collections.abc import Sequence

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "recall_speed.md"
RAW = HERE / ".cache" / "recall_speed_last.json"

TARGET_P50_MS = 30.0
_EMBED_SAMPLES = 200


def _means(rows: Sequence[dict[str, float]]) -> dict[str, float]:
    sums: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        for key, value in row.items():
            sums[key].append(value)
    return {key: statistics.mean(values) for key, values in sums.items()}


async def embed_alone(memory: cpersona.Engine, questions: Sequence[str], count: int) -> dict[str, float]:
    """The query embedding on its own, sequential, same questions, cache off."""
    embedder = memory.backends.embedder
    assert embedder is not None
    samples = []
    for n in range(count):
        started = time.perf_counter()
        await embedder.embed_query(questions[n % len(questions)])
        samples.append((time.perf_counter() - started) * 1000)
    return {"mean_ms": statistics.mean(samples), "p50_ms": percentile(samples, 0.5)}


@dataclasses.dataclass(slots=True)
class SizeResult:
    size: int
    build: dict[str, Any]
    levels: list[Level]
    embed: dict[str, float]
    reopen_secs: float


def results_for(embedding_model: str) -> Path:
    """The committed results file of a run with ``embedding_model``: all-MiniLM-L6-v2's is
    ``recall_speed.md`` (as before there was a choice), any other's names the model."""
    if embedding_model == UNNAMED_MODEL:
        return RESULTS
    return RESULTS.with_name(f"{RESULTS.stem}_{embedding_model}.md")


def raw_for(embedding_model: str) -> Path:
    """Where a run's raw figures are kept; all-MiniLM-L6-v2's file is the one ``fleet_report`` reads."""
    return RAW if embedding_model == UNNAMED_MODEL else RAW.with_name(f"{RAW.stem}_{embedding_model}.json")


async def measure(
    data_dir: Path,
    size: int,
    questions: Sequence[str],
    plan: Sequence[tuple[int, int]],
    expected: list[str],
    embedding_model: str = DEFAULT_EMBEDDING_MODEL,
) -> tuple[list[Level], dict[str, float], float] | None:
    """Run every concurrency level on the store at ``data_dir`` (embedded with ``embedding_model``);
    ``None`` if its layout is stale."""
    began = time.perf_counter()
    async with cpersona.open(settings_for(data_dir, embedding_model)) as memory:
        if expected and await anyio.to_thread.run_sync(collections, data_dir) != expected:
            return None
        await wait_indexed(memory, size)
        reopen_secs = time.perf_counter() - began
        for question in questions[:WARMUP]:
            await memory.recall(question, agent_id=AGENT, limit=LIMIT)
        levels = []
        for callers, recalls in plan:
            level = await run_level(memory, questions, callers, recalls)
            levels.append(level)
            print(
                f"  {size:,} memories, {callers} caller(s), {recalls} recalls: p50 {level.pct(0.5):.1f} ms, "
                f"p95 {level.pct(0.95):.1f} ms, {level.throughput:.1f} recalls/s, CPU/recall "
                f"{level.engine_cpu_ms / recalls:.1f} + {level.redis_cpu_ms / recalls:.1f} ms, "
                f"load {harness.load():.1f}",
                file=sys.stderr,
            )
        embed = await embed_alone(memory, questions, _EMBED_SAMPLES)
    return levels, embed, reopen_secs


async def run_size(
    texts: Texts,
    size: int,
    smaller: Sequence[int],
    plan: Sequence[tuple[int, int]],
    quick: bool,
    rebuild: bool,
    embedding_model: str = DEFAULT_EMBEDDING_MODEL,
) -> SizeResult:
    corpus = build_corpus(texts, size)
    questions = texts.questions
    tmp = Path(await anyio.to_thread.run_sync(functools.partial(tempfile.mkdtemp, prefix="cpersona-recall-")))
    try:
        data_dir = tmp / "data"
        if quick:
            # CI: no cache, a fresh store every time.
            build = await build_store(data_dir, corpus, 0, questions, 30, embedding_model)
            build["from_cache"] = False
        else:
            home, build = await cached_store(corpus, smaller, questions, rebuild, embedding_model)
            await anyio.to_thread.run_sync(shutil.copytree, home / "data", data_dir)
        expected = [] if quick else build["collections"]
        measured = await measure(data_dir, size, questions, plan, expected, embedding_model)
        if measured is None:
            print(
                f"cached {size:,} store has other collections than the engine opens; rebuilding",
                file=sys.stderr,
            )
            await anyio.to_thread.run_sync(shutil.rmtree, data_dir)
            home, build = await cached_store(corpus, smaller, questions, True, embedding_model)
            await anyio.to_thread.run_sync(shutil.copytree, home / "data", data_dir)
            measured = await measure(data_dir, size, questions, plan, build["collections"], embedding_model)
            assert measured is not None
    finally:
        await anyio.to_thread.run_sync(functools.partial(shutil.rmtree, tmp, ignore_errors=True))
    levels, embed, reopen_secs = measured
    return SizeResult(size, build, levels, embed, reopen_secs)


# ------------------------------------------------------------------------------------------------ report


def _ms(value: float) -> str:
    return f"{value:.1f}"


def render(
    results: Sequence[SizeResult],
    texts: Texts,
    *,
    command: str,
    load_start: float,
    chart: str,
    embedding_model: str = DEFAULT_EMBEDDING_MODEL,
) -> str:
    default = embedding_model == DEFAULT_EMBEDDING_MODEL
    lines = [
        "# Recall speed: the engine on its embedded defaults"
        + ("" if default else f", embedding with {embedding_model}"),
        "",
        *harness.header(command, load_start=load_start),
        f"- embedding model: {embedding_model} (the ONNX embedder in process; "
        + ("the default" if default else f"the default is {DEFAULT_EMBEDDING_MODEL}")
        + "; stores and questions embedded with it)",
        f"- corpus: {texts.source}; one agent; stored through `store_batch` in batches of {BATCH}",
        f"- recall: `limit={LIMIT}`, default policy and mode, embeddings on, query-embedding cache off "
        f"(`embedding_cache_size=0`); questions: {len(texts.questions):,} "
        f"{'LoCoMo' if texts.turns else 'synthetic'} questions, cycled; {WARMUP} warm-up recalls first",
        "",
        "## Build",
        "",
        "| memories | ingested here | store throughput | block drain | optimize "
        "| 1-caller p50 before / after optimize | reopen | built |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        b = r.build
        grown = f" (grown from {b['grown_from']:,})" if b["grown_from"] else ""
        if b["ingest"].get("resumed_from", 0) > b["grown_from"]:
            grown += f" (resumed at {b['ingest']['resumed_from']:,}; figures for the rest)"
        probe = b["probe"]
        lines.append(
            f"| {r.size:,} | {b['ingest']['stored']:,}{grown} "
            f"| {b['ingest']['records_per_sec']:.0f} records/s "
            f"| {b['ingest']['drain_blocks_secs']:.1f} s | {b['optimize_secs']:.1f} s "
            f"| {_ms(probe['before_p50_ms'])} / {_ms(probe['after_p50_ms'])} ms ({probe['recalls']} recalls) "
            f"| {r.reopen_secs:.1f} s "
            f"| {'cache, ' if b.get('from_cache') else ''}{b['built_at']}, {b['built_commit']} |"
        )
    lines += [
        "",
        "Store throughput is `store_batch` alone (Redis write, embedding, vector upsert and flush), while "
        "the engine's background block worker (where the engine has one) embeds block vectors beside it; "
        "block drain is the block work still queued when the last batch returned. Reopen is the "
        "time from `cpersona.open` on a copy of the built store until its search index and vectors are "
        "complete (the embedded Redis replays its append-only file first).",
        "",
        "## Latency and throughput",
        "",
        f"![recall latency and throughput]({chart})",
        "",
        "CPU per recall is the engine's CPU time (its process: Python and the embedder's threads; and the "
        "child processes that hold the vector shards) and the embedded redis-server's, each over the "
        "level's wall time divided by its recalls; "
        "two cores give 2,000 ms of CPU per second, so their sum bounds the throughput.",
        "",
        "| memories | callers | recalls | p50 ms | p95 ms | p99 ms | mean ms | recalls/s "
        "| CPU/recall ms: engine + redis | degraded |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        for lv in r.levels:
            degraded = ", ".join(f"{k}: {v}" for k, v in sorted(lv.degraded.items())) or "0"
            lines.append(
                f"| {r.size:,} | {lv.callers} | {lv.recalls} | {_ms(lv.pct(0.5))} | {_ms(lv.pct(0.95))} "
                f"| {_ms(lv.pct(0.99))} | {_ms(statistics.mean(lv.latencies_ms))} | {lv.throughput:.1f} "
                f"| {lv.engine_cpu_ms / lv.recalls:.1f} + {lv.redis_cpu_ms / lv.recalls:.1f} | {degraded} |"
            )
    lines += ["", "## Where a single caller's time goes (means over the 1-caller run, ms)", ""]
    single = {r.size: next(lv for lv in r.levels if lv.callers == 1) for r in results if r.levels}
    timing = {size: _means(lv.timings) for size, lv in single.items()}
    arms = {size: _means(lv.arms) for size, lv in single.items()}
    lines += [
        "| part | " + " | ".join(f"{size:,}" for size in single) + " |",
        "|---|" + "---|" * len(single),
    ]

    def row(name: str, values: dict[int, float | None]) -> None:
        shown = ["-" if v is None else _ms(v) for v in values.values()]
        lines.append(f"| {name} | " + " | ".join(shown) + " |")

    row("**total** (`timing_ms.total`)", {s: timing[s].get("total") for s in single})
    row(
        "retrieve: all arms, in parallel (`timing_ms.retrieve`)",
        {s: timing[s].get("retrieve") for s in single},
    )
    arm_names = sorted({name for a in arms.values() for name in a})
    for name in arm_names:
        row(f"&nbsp;&nbsp;arm {name} (own elapsed)", {s: arms[s].get(name) for s in single})
    stage_names = [k for k in next(iter(timing.values()), {}) if k not in ("retrieve", "total")]
    row(
        "after retrieval: hydrate (JSON.MGET), filters, render",
        {
            s: timing[s]["total"] - timing[s]["retrieve"] - sum(timing[s].get(k, 0.0) for k in stage_names)
            for s in single
        },
    )
    for name in stage_names:
        row(f"stage {name}", {s: timing[s].get(name) for s in single})
    row(
        "query embedding alone, mean (`embed_query`, sequential)",
        {r.size: r.embed["mean_ms"] for r in results},
    )
    row("query embedding alone, p50", {r.size: r.embed["p50_ms"] for r in results})
    lines.append(
        "| query embedding share of the mean recall | "
        + " | ".join(f"{r.embed['mean_ms'] / timing[r.size]['total']:.0%}" for r in results)
        + " |"
    )
    lines += ["", "## Findings", "", *findings(results, timing, arms)]
    return "\n".join(lines) + "\n"


def findings(
    results: Sequence[SizeResult], timing: dict[int, dict[str, float]], arms: dict[int, dict[str, float]]
) -> list[str]:
    """Statements computed from the figures, so that they stay true when the figures change."""
    out: list[str] = []
    largest = max(results, key=lambda r: r.size)
    one = next(lv for lv in largest.levels if lv.callers == 1)
    p50 = one.pct(0.5)
    verdict = "met" if p50 < TARGET_P50_MS else "**not met**"
    out.append(
        f"- Target (p50 under {TARGET_P50_MS:.0f} ms for one caller at the largest size, embedding "
        f"included): {verdict} at {largest.size:,} memories, p50 {p50:.1f} ms."
    )
    for r in results:
        slowest = max(arms[r.size].items(), key=lambda kv: kv[1], default=None)
        if slowest is not None:
            total = timing[r.size]["total"]
            out.append(
                f"- At {r.size:,}: the slowest arm is {slowest[0]} ({slowest[1]:.1f} ms of a {total:.1f} ms "
                f"mean recall, retrieval {timing[r.size]['retrieve']:.1f} ms); the query embedding alone "
                f"takes {r.embed['mean_ms']:.1f} ms."
            )
    for r in results:
        by = {lv.callers: lv for lv in r.levels}
        if 1 not in by:
            continue
        base = by[1].throughput
        parts = [f"{c} callers {lv.throughput / base:.2f}x" for c, lv in sorted(by.items()) if c != 1]
        same = [(c, *lv.same_rows(by[1])) for c, lv in sorted(by.items()) if c != 1]
        out.append(
            f"- Scaling at {r.size:,} (throughput relative to one caller, {base:.1f} recalls/s): "
            + ", ".join(parts)
            + ". Same rows in the same order as the one caller got, for the questions both asked: "
            + ", ".join(
                f"{c} callers {equal} of {asked}" + (f" ({tied} more only inside near-ties)" if tied else "")
                for c, equal, tied, asked in same
            )
            + "."
        )
    hits = load_policies()[Settings().recall_policy].blocks.search_hits
    out.append(
        f"- This machine has {os.cpu_count()} CPUs. The query embedder runs one inference at a time "
        "(a capacity limiter of 1; numpy with one BLAS thread, a batch split over the embedding threads); "
        "the queries of concurrent recalls that queue behind a running batch are embedded together. "
        "The embedded Qdrant binding holds the GIL for most of a search (the block "
        f"arm reads {hits} hits), so its shards run in child processes of their own "
        "(`CPERSONA_QDRANT_PROCESS`) and the engine's interpreter is left to the event loop, the embedder "
        "and Redis replies; the cores are shared by the engine, its vector processes and redis-server."
    )
    for r in results:
        probe, grown = r.build["probe"], r.build["grown_from"]
        before = (
            f"{grown:,} indexed and {r.size - grown:,} in a brute-force segment"
            if grown
            else "every point in a brute-force segment"
        )
        out.append(
            f"- Index build at {r.size:,}: optimize took {r.build['optimize_secs']:.1f} s; the 1-caller "
            f"p50 went from {probe['before_p50_ms']:.1f} ms ({before}) to {probe['after_p50_ms']:.1f} ms "
            f"({probe['recalls']} recalls each, measured when the store was built)."
        )
    degraded = [(r.size, lv) for r in results for lv in r.levels if lv.degraded]
    for size, lv in degraded:
        total = sum(lv.degraded.values())
        out.append(
            f"- {total} degraded arm result(s) at {size:,} with {lv.callers} callers "
            f"({', '.join(f'{k}: {v}' for k, v in sorted(lv.degraded.items()))}): those recalls ran without "
            "that arm (its deadline is `recall_arm_timeout_ms`), so their latency understates a full recall."
        )
    return out


def write_chart(
    results: Sequence[SizeResult], path: Path, embedding_model: str = DEFAULT_EMBEDDING_MODEL
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for r in results:
        callers = [lv.callers for lv in r.levels]
        left.plot(callers, [lv.pct(0.5) for lv in r.levels], marker="o", label=f"{r.size:,} p50")
        left.plot(
            callers, [lv.pct(0.95) for lv in r.levels], marker="x", linestyle="--", label=f"{r.size:,} p95"
        )
        right.plot(callers, [lv.throughput for lv in r.levels], marker="o", label=f"{r.size:,} memories")
    for axis in (left, right):
        axis.set_xscale("log", base=2)
        axis.set_xlabel("concurrent callers")
        axis.grid(True, alpha=0.3)
        axis.legend(fontsize=8)
    left.set_yscale("log")
    left.set_ylabel("recall latency (ms)")
    left.axhline(TARGET_P50_MS, color="grey", linewidth=0.8, linestyle=":")
    right.set_ylabel("recalls/s")
    right.set_ylim(bottom=0)
    fig.suptitle(
        f"cpersona recall, limit {LIMIT}, embedded defaults, {embedding_model}, {os.cpu_count()} CPUs"
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -------------------------------------------------------------------------------------------------- main


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


DEFAULT_SIZES: tuple[int, ...] = (10_000, 100_000)
"""This benchmark's corpus sizes unless ``--sizes`` says otherwise."""


def add_size_arguments(
    parser: argparse.ArgumentParser,
    *,
    results: Path,
    rebuild_help: str,
    default_sizes: Sequence[int] = DEFAULT_SIZES,
) -> None:
    """The options every speed benchmark over corpus sizes takes (this one and ``speed_peers``)."""
    parser.add_argument("--quick", action="store_true", help="1k memories, few recalls, no cache (CI)")
    parser.set_defaults(default_sizes=list(default_sizes))
    sizes = ",".join(str(n) for n in default_sizes)
    parser.add_argument("--sizes", type=_ints, help=f"memories per store (default {sizes})")
    parser.add_argument("--callers", type=_ints, default=[1, 8, 64], help="concurrency levels")
    parser.add_argument("--recalls", type=_ints, help="recalls per level (default 300,800,1600)")
    parser.add_argument("--rebuild", action="store_true", help=rebuild_help)
    parser.add_argument("--data", type=Path, default=LOCOMO, help="locomo10.json")
    parser.add_argument("--out", type=Path, help=f"results file (default {results.relative_to(HERE.parent)})")


def settle_size_arguments(
    args: argparse.Namespace, argv: Sequence[str] | None, name: str, *, results: Path
) -> str:
    """Fill in the size options' defaults and check them; returns the command line for the report.

    A quick run writes beside the cache, so that it never overwrites the committed full results.
    """
    if args.sizes is None:
        args.sizes = [1_000] if args.quick else list(args.default_sizes)
    args.sizes = sorted(args.sizes)
    if args.recalls is None:
        args.recalls = [60, 120, 256] if args.quick else [300, 800, 1600]
    if len(args.recalls) != len(args.callers):
        raise SystemExit("--recalls needs one count per --callers level")
    if args.out is None:
        args.out = CACHE.parent / f"{results.stem}_quick.md" if args.quick else results
    return harness.command(name, argv)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_size_arguments(parser, results=RESULTS, rebuild_help="rebuild cached stores")
    # Not one of the shared size arguments: speed_peers measures CPersona 2.6.14 beside the engine with
    # the same MiniLM vectors, so it has no model to choose.
    parser.add_argument(
        "--embedding-model",
        choices=tuple(EMBEDDING_MODELS),
        default=DEFAULT_EMBEDDING_MODEL,
        help=f"the engine's embedding model (default {DEFAULT_EMBEDDING_MODEL}); another model's stores are "
        f"cached apart and its report is {results_for('<model>').relative_to(HERE.parent)}",
    )
    parser.add_argument(
        "--build-only",
        action="store_true",
        help="build and cache the stores, measure nothing (so the build can run while the machine is busy)",
    )
    return parser


async def run_all(args: argparse.Namespace, texts: Texts) -> list[SizeResult]:
    plan = list(zip(args.callers, args.recalls, strict=True))
    results: list[SizeResult] = []
    model: str = args.embedding_model
    if args.build_only:
        for n, size in enumerate(args.sizes):
            corpus = build_corpus(texts, size)
            await cached_store(corpus, args.sizes[:n], texts.questions, args.rebuild, model)
        return results
    for n, size in enumerate(args.sizes):
        results.append(await run_size(texts, size, args.sizes[:n], plan, args.quick, args.rebuild, model))
        # Saved after every size, so that a run stopped later still leaves what it measured.
        await anyio.to_thread.run_sync(save_raw, results, raw_for(model))
    return results


def save_raw(results: Sequence[SizeResult], path: Path = RAW) -> None:
    raw = {
        str(r.size): {
            "build": r.build,
            "embed": r.embed,
            "reopen_secs": r.reopen_secs,
            "levels": [lv.to_json() for lv in r.levels],
        }
        for r in results
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(raw, indent=2))


def main(argv: Sequence[str] | None = None) -> Path:
    args = build_parser().parse_args(argv)
    command = settle_size_arguments(args, argv, "recall_speed", results=results_for(args.embedding_model))
    load_start = harness.load()
    texts = load_texts(args.data)
    if args.build_only and args.quick:
        raise SystemExit("--build-only builds the cached stores; --quick uses none")
    results = anyio.run(run_all, args, texts)
    if args.build_only:
        print(f"built {', '.join(f'{n:,}' for n in args.sizes)}; measure with the same --sizes")
        return CACHE
    out: Path = args.out
    chart = out.with_suffix(".png")
    write_chart(results, chart, args.embedding_model)
    report = render(
        results,
        texts,
        command=command,
        load_start=load_start,
        chart=chart.name,
        embedding_model=args.embedding_model,
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report, encoding="utf-8")
    print(report)
    print(f"wrote {out} and {chart}")
    return out


if __name__ == "__main__":
    main()
