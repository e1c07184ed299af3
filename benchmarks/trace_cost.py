"""What a requested recall trace costs (seed §1.4, readiness check 3).

The store is the 10k-memory store that ``benchmarks/recall_speed.py`` builds and caches under
``benchmarks/.cache/recall_speed/`` (same corpus, same settings: the engine's defaults with the
query-embedding cache off, so every recall embeds its question); it is copied to a temporary directory and
opened there, so the cache is never written to. One caller asks LoCoMo questions in pairs: the same
question once with ``trace=True`` and once without, the order alternating from pair to pair (traced first,
then untraced first), so drift in the machine's load and warm caches fall on both sides alike.

For each traced recall it reads:

* the recall's own time, ``timing_ms.total`` (the recall without its trace);
* the trace's own cost, ``timing_ms.trace`` (building the record from the stage sets) plus
  ``timing_ms.coverage`` (the coverage ledger, which reads the returned records' text);
* publishing, which is a separate step off the recall's path: ``Engine.recall`` only puts the finished
  trace on the publisher's bounded queue, and the publisher task serialises it (orjson) and ``PUBLISH``es
  it later. Here the engine runs without its background task and the queue is drained after each traced
  recall, outside the timed call, so the publish step (serialise + ``PUBLISH`` round trip to the embedded
  Redis, no subscriber) is timed on its own; serialising alone is timed too;

and for every recall the end-to-end time of the ``await`` (which includes the queue put for a traced one).
The headline ratio is trace cost / recall time, per recall (p50 and mean) and of the means; the seed's
target is a fifth, ours a tenth.

Run from the repository root::

    .venv/bin/python -m benchmarks trace_cost            # 10k memories, 400 pairs, the cached store
    .venv/bin/python -m benchmarks trace_cost --quick    # 1k memories built here, 30 pairs (CI smoke)

Without a cached store the full run builds it first (as ``recall_speed.py --build-only`` would; that takes
the better part of an hour on a busy machine).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio
import anyio.to_thread

import cpersona
from benchmarks import harness
from benchmarks.corpus import LOCOMO, build_corpus, load_texts
from benchmarks.harness import percentile
from benchmarks.recall_levels import AGENT, LIMIT
from benchmarks.store_cache import build_store, cached_store, collections, settings_for, wait_indexed
from cpersona.recall.trace.publisher import encode_trace

if TYPE_CHECKING:
    from collections.abc import Sequence

    from benchmarks.corpus import Texts

__all__ = ["WARMUP_PAIRS", "Run", "Sample", "main", "measure", "render", "summarise"]

HERE: Final = Path(__file__).resolve().parent
RESULTS: Final = HERE / "results" / "trace_cost.md"
QUICK_RESULTS: Final = HERE / ".cache" / "trace_cost_quick.md"
SEED_TARGET: Final = 1 / 5
OUR_TARGET: Final = 1 / 10
WARMUP_PAIRS: Final = 10
_QUICK_PROBES: Final = 5


@dataclasses.dataclass(frozen=True, slots=True)
class Sample:
    """One recall. Trace fields are zero for an untraced one."""

    pair: int
    traced: bool
    end_to_end_ms: float
    total_ms: float
    trace_ms: float = 0.0
    coverage_ms: float = 0.0
    encode_ms: float = 0.0
    publish_ms: float = 0.0
    trace_bytes: int = 0
    degraded: tuple[str, ...] = ()

    @property
    def trace_cost_ms(self) -> float:
        return self.trace_ms + self.coverage_ms


async def measure(
    memory: cpersona.Engine, questions: Sequence[str], pairs: int, *, offset: int = 0
) -> list[Sample]:
    """``pairs`` questions, each asked traced and untraced back to back, the order alternating."""
    samples: list[Sample] = []
    for pair in range(pairs):
        question = questions[(offset + pair) % len(questions)]
        for traced in (True, False) if pair % 2 == 0 else (False, True):
            started = time.perf_counter()
            result = await memory.recall(question, agent_id=AGENT, limit=LIMIT, trace=traced)
            end_to_end = (time.perf_counter() - started) * 1000
            timing = result.timing_ms
            degraded = tuple(f"{d.arm} {d.status}" for d in result.degraded)
            if not traced:
                samples.append(Sample(pair, False, end_to_end, timing["total"], degraded=degraded))
                continue
            if result.trace is None:
                raise RuntimeError(f"a traced recall of {question!r} came back without its trace")
            began = time.perf_counter()
            payload = encode_trace(result.trace)
            encoded = time.perf_counter()
            taken = await memory.drain_traces()
            published = time.perf_counter()
            if taken != 1:
                raise RuntimeError(f"expected one queued trace after a traced recall, found {taken}")
            samples.append(
                Sample(
                    pair,
                    True,
                    end_to_end,
                    timing["total"],
                    trace_ms=timing["trace"],
                    coverage_ms=timing["coverage"],
                    encode_ms=(encoded - began) * 1000,
                    publish_ms=(published - encoded) * 1000,
                    trace_bytes=len(payload),
                    degraded=degraded,
                )
            )
    return samples


def _stats(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {"p50": math.nan, "p95": math.nan, "mean": math.nan}
    return {
        "p50": percentile(values, 0.5),
        "p95": percentile(values, 0.95),
        "mean": statistics.mean(values),
    }


def summarise(samples: Sequence[Sample]) -> dict[str, Any]:
    """Every figure the report shows, as plain numbers."""
    traced = [s for s in samples if s.traced]
    plain = [s for s in samples if not s.traced]
    by_pair: dict[int, dict[bool, Sample]] = {}
    for s in samples:
        by_pair.setdefault(s.pair, {})[s.traced] = s
    paired = [(p[True], p[False]) for p in by_pair.values() if len(p) == 2]
    ratios = [s.trace_cost_ms / s.total_ms for s in traced if s.total_ms > 0]
    cost_mean = statistics.mean(s.trace_cost_ms for s in traced) if traced else math.nan
    total_mean = statistics.mean(s.total_ms for s in traced) if traced else math.nan
    return {
        "recalls": {"traced": len(traced), "untraced": len(plain), "pairs": len(paired)},
        "own_time_ms": {
            "traced": _stats([s.total_ms for s in traced]),
            "untraced": _stats([s.total_ms for s in plain]),
        },
        "trace_ms": _stats([s.trace_ms for s in traced]),
        "coverage_ms": _stats([s.coverage_ms for s in traced]),
        "trace_cost_ms": _stats([s.trace_cost_ms for s in traced]),
        "ratio": {
            "p50": percentile(ratios, 0.5) if ratios else math.nan,
            "mean": statistics.mean(ratios) if ratios else math.nan,
            "of_means": cost_mean / total_mean if traced and total_mean > 0 else math.nan,
        },
        "end_to_end_ms": {
            "traced": _stats([s.end_to_end_ms for s in traced]),
            "untraced": _stats([s.end_to_end_ms for s in plain]),
            "paired_difference": _stats([t.end_to_end_ms - u.end_to_end_ms for t, u in paired]),
        },
        "publish": {
            "encode_ms": _stats([s.encode_ms for s in traced]),
            "publish_ms": _stats([s.publish_ms for s in traced]),
            "trace_bytes": _stats([float(s.trace_bytes) for s in traced]),
            "publish_ratio_p50": (
                percentile([s.publish_ms / s.total_ms for s in traced if s.total_ms > 0], 0.5)
                if traced
                else math.nan
            ),
        },
        "degraded": dict(Counter(d for s in samples for d in s.degraded)),
    }


# ------------------------------------------------------------------------------------------ the run


@dataclasses.dataclass(frozen=True, slots=True)
class Run:
    size: int
    warmup: int
    quick: bool
    store: dict[str, Any]
    samples: tuple[Sample, ...]
    publisher: dict[str, int]
    summary: dict[str, Any]


async def _measure_store(
    data_dir: Path, size: int, questions: Sequence[str], pairs: int, warmup: int, expected: list[str]
) -> tuple[list[Sample], dict[str, int]]:
    # Without background tasks the trace queue is drained only where measure() drains it, so a publish
    # never lands inside another recall's timed window.
    async with cpersona.open(settings_for(data_dir), background=False) as memory:
        if expected:
            found = await anyio.to_thread.run_sync(collections, data_dir)
            if found != expected:
                raise SystemExit(
                    f"the cached store holds collections {found}, the engine opens {expected}: rebuild it "
                    "with `.venv/bin/python -m benchmarks recall_speed --build-only --rebuild --sizes "
                    f"{size}`"
                )
        await wait_indexed(memory, size)
        await measure(memory, questions, warmup, offset=len(questions) // 2)
        samples = await measure(memory, questions, pairs)
        return samples, memory.trace_stats().model_dump(mode="json")


async def run(
    texts: Texts, size: int, pairs: int, *, warmup: int = WARMUP_PAIRS, quick: bool, rebuild: bool
) -> Run:
    corpus = build_corpus(texts, size)
    questions = texts.questions
    tmp = Path(await anyio.to_thread.run_sync(functools.partial(tempfile.mkdtemp, prefix="cpersona-trace-")))
    try:
        data_dir = tmp / "data"
        if quick:
            store = await build_store(data_dir, corpus, 0, questions, _QUICK_PROBES)
            store["from_cache"] = False
            expected: list[str] = []
        else:
            home, store = await cached_store(corpus, [], questions, rebuild)
            await anyio.to_thread.run_sync(shutil.copytree, home / "data", data_dir)
            expected = list(store["collections"])
        samples, publisher = await _measure_store(data_dir, size, questions, pairs, warmup, expected)
    finally:
        await anyio.to_thread.run_sync(functools.partial(shutil.rmtree, tmp, ignore_errors=True))
    return Run(size, warmup, quick, store, tuple(samples), publisher, summarise(samples))


# ------------------------------------------------------------------------------------------ report


def _ms(stats: dict[str, float]) -> str:
    return f"{stats['p50']:.2f} / {stats['p95']:.2f} / {stats['mean']:.2f}"


def _verdict(ratio: float, target: float) -> str:
    return "met" if ratio < target else "**not met**"


def render(result: Run, texts: Texts, *, command: str, load_start: float) -> str:
    s = result.summary
    ratio = s["ratio"]
    e2e = s["end_to_end_ms"]
    pub = s["publish"]
    store = result.store
    source = (
        f"cached store built {store.get('built_at', '?')} at {store.get('built_commit', '?')}"
        if store.get("from_cache")
        else "built for this run"
    )
    lines = [
        "# The cost of a requested recall trace (seed §1.4, item 3)",
        "",
        *harness.header(command, load_start=load_start),
        f"- store: {result.size:,} memories of one agent ({texts.source}), {source}",
        f"- recalls: `limit={LIMIT}`, default policy and mode, query-embedding cache off; one caller; "
        f"{s['recalls']['pairs']} questions each asked traced and untraced back to back, the order "
        f"alternating per pair, after {result.warmup} warm-up pairs",
        "",
        *(
            [
                "**A quick run** (a small store built for the run, few recalls): a smoke check, not the "
                "figure. The measurement is `.venv/bin/python -m benchmarks trace_cost` (10k memories, 400 "
                "pairs, on the store `benchmarks/recall_speed.py` caches), on a quiet machine.",
                "",
            ]
            if result.quick
            else []
        ),
        "## The trace's cost against the recall's own time",
        "",
        "| per traced recall (ms) | p50 / p95 / mean |",
        "|---|---|",
        f"| recall's own time, `timing_ms.total` | {_ms(s['own_time_ms']['traced'])} |",
        f"| building the trace, `timing_ms.trace` | {_ms(s['trace_ms'])} |",
        f"| coverage ledger, `timing_ms.coverage` | {_ms(s['coverage_ms'])} |",
        f"| trace cost (trace + coverage) | {_ms(s['trace_cost_ms'])} |",
        "",
        f"- **ratio trace cost / recall time: p50 {ratio['p50']:.4f}, mean {ratio['mean']:.4f}** "
        f"(ratio of the means {ratio['of_means']:.4f}); our target (under 1/10): "
        f"{_verdict(ratio['p50'], OUR_TARGET)} at p50, {_verdict(ratio['mean'], OUR_TARGET)} on the mean; "
        f"the seed's target (at most 1/5): {_verdict(ratio['mean'], SEED_TARGET)} on the mean",
        f"- the untraced recalls' own time, for comparison: {_ms(s['own_time_ms']['untraced'])} ms "
        "(p50 / p95 / mean)",
        "",
        "## End to end (the whole `await memory.recall(...)`)",
        "",
        "| ms | p50 / p95 / mean |",
        "|---|---|",
        f"| traced | {_ms(e2e['traced'])} |",
        f"| untraced | {_ms(e2e['untraced'])} |",
        f"| traced minus untraced, same question, per pair | {_ms(e2e['paired_difference'])} |",
        "",
        "## Publishing on the live channel (a separate step, off the recall's path)",
        "",
        "`Engine.recall` puts the finished trace on the publisher's bounded queue and returns; the "
        "publisher task serialises it and `PUBLISH`es it to `<prefix>:trace:<agent>` later. Measured here "
        "by draining the queue after each traced recall, outside the timed call.",
        "",
        "| per trace | p50 / p95 / mean |",
        "|---|---|",
        f"| serialise (orjson), ms | {_ms(pub['encode_ms'])} |",
        f"| publish step (serialise + PUBLISH round trip, no subscriber), ms | {_ms(pub['publish_ms'])} |",
        f"| trace size, bytes | {pub['trace_bytes']['p50']:.0f} / {pub['trace_bytes']['p95']:.0f} / "
        f"{pub['trace_bytes']['mean']:.0f} |",
        "",
        f"- publish step / recall time, p50: {pub['publish_ratio_p50']:.4f}",
        f"- publisher counters at the end: {result.publisher}",
    ]
    if s["degraded"]:
        lines += [
            "",
            f"- degraded arm results (an arm failed or missed its deadline): {s['degraded']}; those recalls "
            "ran without that arm",
        ]
    return "\n".join(lines) + "\n"


# -------------------------------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1k memories built here, 30 pairs (CI smoke)")
    parser.add_argument("--size", type=int, help="memories (default 10000, or 1000 with --quick)")
    parser.add_argument("--pairs", type=int, help="questions asked traced and untraced (default 400)")
    parser.add_argument("--warmup", type=int, default=WARMUP_PAIRS, help="pairs asked before measuring")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the cached store")
    parser.add_argument("--data", type=Path, default=LOCOMO, help="locomo10.json")
    parser.add_argument("--out", type=Path, help="report path (default: results/, or .cache/ for --quick)")
    return parser


def main(argv: Sequence[str] | None = None) -> Run:
    args = build_parser().parse_args(argv)
    size = args.size or (1_000 if args.quick else 10_000)
    pairs = args.pairs or (30 if args.quick else 400)
    out = args.out or (QUICK_RESULTS if args.quick else RESULTS)
    command = harness.command("trace_cost", argv)
    load_start = harness.load()
    texts = load_texts(args.data)
    result = anyio.run(
        functools.partial(run, texts, size, pairs, warmup=args.warmup, quick=args.quick, rebuild=args.rebuild)
    )
    report = render(result, texts, command=command, load_start=load_start)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report, encoding="utf-8")
    print(report)
    print(f"wrote {out}", file=sys.stderr)
    return result


if __name__ == "__main__":
    main()
