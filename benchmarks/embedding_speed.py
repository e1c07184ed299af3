"""How fast all-MiniLM-L6-v2 on onnxruntime (the default embedder when this was written) is, with one
intra-op thread beside ``--threads`` of them.

Both sessions run in one process on the same weights, alternating call by call (paired), so load on the
shared machine hits both alike; the 1-minute load average is read before and after. Written, with the
machine and the exact command, to ``benchmarks/results/embedding_speed.md``:

* query latency: one short query per call, query cache off, through the worker thread as recall does;
* batch throughput: 1,000 LoCoMo turns, sorted by length and cut into the engine's batches of 64, as
  ``OnnxEmbedder.embed`` does; each round times the whole corpus once per session;
* the largest difference between the two sessions' vectors over the corpus.

Run it from the repository root::

    .venv/bin/python -m benchmarks embedding_speed
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import numpy as np

from benchmarks import harness
from benchmarks.harness import percentile
from benchmarks.quality.locomo import load_locomo
from cpersona.settings import Settings
from cpersona.stores.embedding.base import DEFAULT_BATCH_SIZE
from cpersona.stores.embedding.embedders import OnnxEmbedder

RESULTS = Path(__file__).parent / "results" / "embedding_speed.md"

_QUERIES = [
    "when is the dentist appointment?",
    "what did Alice say about the budget?",
    "flight to Osaka",
    "who approved the migration",
    "lease renewal date",
    "birthday dinner plans",
]


MODEL = "all-MiniLM-L6-v2"
"""The model measured (its report's title says so)."""


def locomo_turns(count: int) -> list[str]:
    """The first ``count`` LoCoMo turns, as the engine stores them (speaker, text, caption)."""
    turns = [turn.content for conversation in load_locomo().conversations for turn in conversation.turns]
    return turns[:count]


async def measure(
    data_dir: Path, threads: int, queries: int, rounds: int, turns: list[str]
) -> dict[str, Any]:
    started = time.perf_counter()
    sides = {
        label: await OnnxEmbedder.open(
            Settings(
                data_dir=data_dir, embedding_model=MODEL, embedding_threads=count, embedding_cache_size=0
            )
        )
        for label, count in (("one", 1), ("many", threads))
    }
    figures: dict[str, Any] = {"open_secs": time.perf_counter() - started, "load_before": harness.load()}
    try:
        for query in _QUERIES:  # warm-up: the first runs allocate and plan
            for embedder in sides.values():
                await embedder.embed_query(query)
        query_ms: dict[str, list[float]] = {label: [] for label in sides}
        for index in range(queries):
            query = _QUERIES[index % len(_QUERIES)]
            for label, embedder in sides.items():
                start = time.perf_counter()
                await embedder.embed_query(query)
                query_ms[label].append((time.perf_counter() - start) * 1000.0)
        batch_secs: dict[str, list[float]] = {label: [] for label in sides}
        vectors: dict[str, Any] = {}
        for _ in range(rounds):
            for label, embedder in sides.items():
                start = time.perf_counter()
                vectors[label] = np.stack(await embedder.embed(turns))
                batch_secs[label].append(time.perf_counter() - start)
        figures["query"], figures["batch"] = query_ms, batch_secs
        figures["max_abs"] = float(np.abs(vectors["one"] - vectors["many"]).max())
    finally:
        for embedder in sides.values():
            await embedder.aclose()
    return figures


def _report(args: argparse.Namespace, figures: dict[str, Any], turns: list[str]) -> str:
    q, b = figures["query"], figures["batch"]
    count = len(turns)

    def ms(samples: list[float], scale: float = 1.0) -> str:
        return f"{percentile(samples, 0.5) * scale:.2f} / {min(samples) * scale:.2f}"

    rows = [
        (f"query latency, 1 short text, ms (p50 / min of {args.queries})", ms(q["one"]), ms(q["many"])),
        ("query latency p95, ms", f"{percentile(q['one'], 0.95):.2f}", f"{percentile(q['many'], 0.95):.2f}"),
        (
            f"{count} LoCoMo turns in batches of {DEFAULT_BATCH_SIZE}, s (p50 / min of {args.rounds})",
            ms(b["one"]),
            ms(b["many"]),
        ),
        (
            "throughput at the p50, texts/s",
            f"{count / percentile(b['one'], 0.5):.0f}",
            f"{count / percentile(b['many'], 0.5):.0f}",
        ),
    ]
    words = statistics.mean(len(text.split()) for text in turns)
    lines = [
        f"# Embedding speed: all-MiniLM-L6-v2 on onnxruntime, one intra-op thread beside {args.threads}",
        "",
        *harness.header(
            harness.command("embedding_speed"), load_start=figures["load_before"], packages=("onnxruntime",)
        ),
        f"- paired: each query and each round runs on both sessions in turn, in one process; the turns "
        f"average {words:.0f} words",
        f"- vectors over the {count} turns: max abs difference between the sessions {figures['max_abs']:.2e}",
        f"- open (both sessions, the graph built once): {figures['open_secs']:.2f} s",
        "",
        f"| measure | 1 thread | {args.threads} threads |",
        "|---|---|---|",
        *(f"| {name} | {one} | {many} |" for name, one, many in rows),
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=Settings().embedding_threads, help="embedding_threads")
    parser.add_argument("--queries", type=int, default=300, help="timed single-query calls per session")
    parser.add_argument("--rounds", type=int, default=5, help="timed passes over the turns per session")
    parser.add_argument("--turns", type=int, default=1000, help="LoCoMo turns per pass")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    turns = locomo_turns(args.turns)
    with tempfile.TemporaryDirectory(prefix="cpersona-bench-") as tmp:
        figures = anyio.run(measure, Path(tmp), args.threads, args.queries, args.rounds, turns)
    report = _report(args, figures, turns)
    print(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report, encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
