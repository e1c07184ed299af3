"""Store throughput of the engine on its embedded defaults, with and without embeddings.

Runs the real engine (embedded Redis, the embedded Qdrant engine, all-MiniLM-L6-v2 in numpy) in a
fresh temporary data directory and measures, side by side in one run:

* batch store throughput (records/s) through ``store_batch`` in batches of 256, embeddings on and off;
* single store latency (p50/p95 of ``store``), embeddings on and off;
* query-embedding latency (p50, cache off) and batch embedding rate, for comparison with the store rate.

Results go to ``benchmarks/results/store_speed.md`` with the machine, date, commit and command::

    .venv/bin/python -m benchmarks store_speed [--records 5000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

import cpersona
from benchmarks import harness
from benchmarks.corpus import sentences
from benchmarks.harness import percentile
from cpersona import Settings

RESULTS = Path(__file__).parent / "results" / "store_speed.md"
# Other work on a 2-core machine changes every figure here; the results say how busy it was.


async def _run(settings: Settings, records: int, singles: int) -> dict[str, float]:
    texts = sentences(records + singles, seed=11)
    out: dict[str, float] = {}
    async with cpersona.open(settings) as memory:
        start = time.perf_counter()
        for i in range(0, records, 256):
            chunk = [
                {"agent_id": "bench", "content": f"{n}. {t}"} for n, t in enumerate(texts[i : i + 256], i)
            ]
            await memory.store_batch(chunk)
        out["batch_rps"] = records / (time.perf_counter() - start)
        latencies = []
        for n in range(singles):
            t0 = time.perf_counter()
            await memory.store(f"single {n}. {texts[records + n]}", agent_id="bench")
            latencies.append((time.perf_counter() - t0) * 1000)
        out["single_p50_ms"] = statistics.median(latencies)
        out["single_p95_ms"] = percentile(latencies, 0.95)
        if memory.backends.embedder is not None:
            embedder = memory.backends.embedder
            queries = [f"what about item {n}?" for n in range(200)]
            q_lat = []
            for q in queries:
                t0 = time.perf_counter()
                await embedder.embed([q])
                q_lat.append((time.perf_counter() - t0) * 1000)
            out["query_embed_p50_ms"] = statistics.median(q_lat)
            t0 = time.perf_counter()
            await embedder.embed(texts[:512])
            out["embed_rate"] = 512 / (time.perf_counter() - t0)
    return out


async def main_async(records: int, singles: int, load_start: float) -> str:
    results: dict[str, dict[str, float]] = {}
    for mode in ("onnx", "none"):
        with tempfile.TemporaryDirectory(prefix="cpersona-bench-") as tmp:
            settings = Settings.from_env({}).with_(data_dir=Path(tmp), embedding_mode=mode)
            results[mode] = await _run(settings, records, singles)
            print(mode, results[mode], file=sys.stderr)
    on, off = results["onnx"], results["none"]
    lines = [
        "# Store speed: the engine on its embedded defaults",
        "",
        *harness.header(harness.command("store_speed"), load_start=load_start),
        f"- corpus: {records} synthetic sentences of about 20 words, one agent, batches of 256; "
        f"then {singles} single stores",
        "",
        "| measure | embeddings on (onnx) | embeddings off (none) |",
        "|---|---|---|",
        f"| batch store throughput | {on['batch_rps']:.0f} records/s | {off['batch_rps']:.0f} records/s |",
        f"| single store p50 | {on['single_p50_ms']:.1f} ms | {off['single_p50_ms']:.1f} ms |",
        f"| single store p95 | {on['single_p95_ms']:.1f} ms | {off['single_p95_ms']:.1f} ms |",
        f"| query embedding p50 (one short query, no cache) | {on['query_embed_p50_ms']:.1f} ms | n/a |",
        f"| batch embedding rate (512 texts) | {on['embed_rate']:.0f} texts/s | n/a |",
        "",
        f"With embeddings the store spends most of its time in the model: the batch store runs at "
        f"{on['batch_rps'] / on['embed_rate']:.0%} of the raw embedding rate.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5000)
    parser.add_argument("--singles", type=int, default=200)
    args = parser.parse_args()
    text = anyio.run(main_async, args.records, args.singles, harness.load())
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
