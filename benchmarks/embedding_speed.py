"""How fast the default embedder (all-MiniLM-L6-v2 on onnxruntime) is on this machine.

Measures two things and writes them, with the machine and the exact command, to
``benchmarks/results/embedding_speed.md``:

* query latency: one short query per call, query cache off, reported as p50 and p95 over many calls;
* batch rate: texts per second when embedding batches of 64 sentences of about 20 words.

The ONNX file is built into a temporary data directory first (not timed). Run it from the repository root::

    .venv/bin/python benchmarks/embedding_speed.py
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import random
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import onnxruntime

from cpersona.settings import Settings
from cpersona.stores.embedding.embedders import OnnxEmbedder

RESULTS = Path(__file__).parent / "results" / "embedding_speed.md"

_SUBJECTS = ["the agent", "my manager", "the new intern", "our landlord", "the support team", "Alice"]
_WHEN = ["last week", "this morning", "on Tuesday", "two days ago", "after lunch", "yesterday evening"]
_VERBS = ["moved", "cancelled", "confirmed", "forgot about", "rescheduled", "asked about", "approved"]
_OBJECTS = [
    "the quarterly budget review",
    "the dentist appointment",
    "the flight to Osaka",
    "the deploy of the billing service",
    "the birthday dinner for Sam",
    "the lease renewal",
    "the database migration",
]
_TAILS = [
    "because the weather forecast looked bad for the whole weekend",
    "after a long discussion in the team channel yesterday afternoon",
    "and promised to send the updated notes before Friday morning",
    "since nobody could find the signed contract in the shared folder",
    "so we should remind everyone again on Monday before the standup",
]
_QUERIES = [
    "when is the dentist appointment?",
    "what did Alice say about the budget?",
    "flight to Osaka",
    "who approved the migration",
    "lease renewal date",
    "birthday dinner plans",
]


def sentences(count: int, seed: int) -> list[str]:
    """Deterministic, realistic-looking memory sentences of roughly 20 words."""
    rng = random.Random(seed)
    return [
        f"{rng.choice(_WHEN).capitalize()} {rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} "
        f"{rng.choice(_OBJECTS)} {rng.choice(_TAILS)}."
        for _ in range(count)
    ]


def _git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).parent,
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip()


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


async def measure(data_dir: Path, threads: int, queries: int, batches: int) -> dict[str, float]:
    settings = Settings(data_dir=data_dir, embedding_threads=threads, embedding_cache_size=0)
    started = time.perf_counter()
    embedder = await OnnxEmbedder.open(settings)
    build_secs = time.perf_counter() - started
    try:
        for query in _QUERIES:  # warm-up: the first runs allocate and plan
            await embedder.embed_query(query)
        latencies = []
        for index in range(queries):
            query = _QUERIES[index % len(_QUERIES)]
            start = time.perf_counter()
            await embedder.embed_query(query)
            latencies.append((time.perf_counter() - start) * 1000.0)

        batch = sentences(64, seed=7)
        words = statistics.mean(len(text.split()) for text in batch)
        await embedder.embed(batch)
        start = time.perf_counter()
        for _ in range(batches):
            await embedder.embed(batch)
        batch_secs = time.perf_counter() - start
    finally:
        await embedder.aclose()
    return {
        "build_secs": build_secs,
        "p50_ms": _percentile(latencies, 0.50),
        "p95_ms": _percentile(latencies, 0.95),
        "mean_ms": statistics.mean(latencies),
        "texts_per_sec": 64 * batches / batch_secs,
        "ms_per_batch": batch_secs * 1000.0 / batches,
        "words_per_text": words,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="Measure the ONNX embedder's query latency and batch rate.")
    parser.add_argument("--threads", type=int, default=Settings().embedding_threads, help="embedding_threads")
    parser.add_argument("--queries", type=int, default=300, help="timed single-query calls")
    parser.add_argument("--batches", type=int, default=20, help="timed batches of 64 texts")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    command = shlex.join([os.path.relpath(sys.executable), *sys.argv])
    # Other work on the same cores skews every figure below; the load average at the start says how much.
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    with tempfile.TemporaryDirectory(prefix="cpersona-bench-") as tmp:
        figures = anyio.run(measure, Path(tmp), args.threads, args.queries, args.batches)

    rows = [
        (
            f"query latency p50 (single short query, cache off, {args.queries} calls)",
            f"{figures['p50_ms']:.2f} ms",
        ),
        ("query latency p95", f"{figures['p95_ms']:.2f} ms"),
        ("query latency mean", f"{figures['mean_ms']:.2f} ms"),
        (
            f"batch rate (batches of 64 texts, ~{figures['words_per_text']:.0f} words each, "
            f"{args.batches} batches)",
            f"{figures['texts_per_sec']:.0f} texts/s",
        ),
        ("time per batch of 64", f"{figures['ms_per_batch']:.1f} ms"),
        (
            "open: build the ONNX file into an empty data dir and load it (not timed above)",
            f"{figures['build_secs']:.1f} s",
        ),
    ]
    lines = [
        "# Embedding speed: all-MiniLM-L6-v2 on onnxruntime",
        "",
        f"- command: `{command}`",
        f"- date: {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- git commit: {_git_commit()}",
        f"- machine: {platform.platform()}, {platform.machine()}, {os.cpu_count()} CPUs",
        f"- python {platform.python_version()}, onnxruntime {onnxruntime.__version__}",
        f"- embedding_threads={args.threads}; 1-minute load average at start: {load:.2f}",
        "",
        "| measure | value |",
        "|---|---|",
        *(f"| {name} | {value} |" for name, value in rows),
    ]
    report = "\n".join(lines) + "\n"
    print(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report, encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
