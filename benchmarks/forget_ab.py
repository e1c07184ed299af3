"""Paired A/B of a forget by age between two versions of the engine, in one run.

Each side (two source trees loaded side by side, as ``store_ab.py`` does) opens a fresh embedded store: its
own redis-server and qdrant-edge shards, blocks on. Round after round, alternating which side goes first,
each side stores ``--records`` memories of a new agent (caller vectors, so nothing is embedded), builds
their blocks, lets them age past one second, and times ``forget(agent, confirm=True,
older_than_seconds=1)``: every memory goes, with its claims, vector and blocks. It checks the count and
that the agent has no memory left, and prints seconds, memories/s and B/A::

    .venv/bin/python -m benchmarks forget_ab 01ed718 . --records 570 --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from benchmarks import harness
from benchmarks.corpus import sentences
from benchmarks.recall_ab import load_sides
from benchmarks.store_ab import settings, unit_vectors

_AGE_SECS = 1


async def one_round(engine: Any, agent: str, count: int, seed: int) -> float:
    """Seconds the forget of ``count`` fresh memories of ``agent`` took."""
    texts, vectors = sentences(count, seed=seed), unit_vectors(count, seed=seed)
    batch = [
        {"agent_id": agent, "content": f"{agent} {n}. {text}", "embedding": vector}
        for n, (text, vector) in enumerate(zip(texts, vectors, strict=True))
    ]
    stored = await engine.store_batch(batch)
    assert all(r.result == "stored" for r in stored.results), "every memory must be new"
    await engine.drain_blocks()
    await anyio.sleep(_AGE_SECS + 0.1)
    began = time.perf_counter()
    result = await engine.forget(agent, confirm=True, older_than_seconds=_AGE_SECS)
    secs = time.perf_counter() - began
    assert result.records_deleted == count, (result.records_deleted, count)
    assert (await engine.stats(agent_id=agent))["memories"] == 0
    return secs


async def compare(packages: dict[str, Any], work: Path, args: argparse.Namespace) -> None:
    secs: dict[str, list[float]] = {"A": [], "B": []}
    async with (
        packages["A"].open(settings(packages["A"], work / "store_a"), background=False) as engine_a,
        packages["B"].open(settings(packages["B"], work / "store_b"), background=False) as engine_b,
    ):
        engines = {"A": engine_a, "B": engine_b}
        for side, engine in engines.items():  # warm-up: the first writes create files and indexes
            await one_round(engine, f"warm-{side}", min(args.records, 50), seed=1)
        for n in range(args.rounds):
            order = "AB" if n % 2 == 0 else "BA"
            for side in order:
                agent = f"round{n}-{side}"
                secs[side].append(await one_round(engines[side], agent, args.records, seed=n + 2))
            load = harness.load()
            print(
                f"round {n}: A {secs['A'][-1]:.2f} s, B {secs['B'][-1]:.2f} s, load {load:.1f}",
                file=sys.stderr,
            )
    a, b = statistics.median(secs["A"]), statistics.median(secs["B"])
    print(f"forget of {args.records} memories, median of {args.rounds} rounds:")
    print(f"  A ({args.a}): {a:.2f} s, {args.records / a:,.0f} memories/s")
    print(f"  B ({args.b}): {b:.2f} s, {args.records / b:,.0f} memories/s")
    print(f"  B/A time {b / a:.3f} ({a / b:.1f}x faster)")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("a", help="version A: a git revision, or . for the working tree")
    parser.add_argument("b", help="version B: a git revision, or . for the working tree")
    parser.add_argument("--records", type=int, default=570, help="memories forgotten per round and side")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per side, after a warm-up")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cpersona-forget-ab-") as tmp:
        work = Path(tmp)
        anyio.run(compare, load_sides(args.a, args.b, work), work, args)


if __name__ == "__main__":
    main()
