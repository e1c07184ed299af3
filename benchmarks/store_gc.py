"""What the garbage collector costs a batch store, with the heap frozen (as ``cpersona serve`` runs) or not.

One process, one engine on a fresh embedded store, the fleet benchmark's corpus (LoCoMo turns, caller
vectors; :mod:`benchmarks.fleet_speed`). Round after round, alternating which goes first, the heap is
frozen (``gc.freeze``, what :func:`cpersona.edges.heap.freeze_startup_heap` does once a server's engine is
open) or unfrozen again (``gc.unfreeze``), and ``--writers`` concurrent ``store_batch`` calls of
``--batch`` records are stored, each round on agents of its own. Per mode it reports records/s, the event
loop thread's CPU per record, and the time spent inside collections per record (``gc.callbacks``), by
generation::

    .venv/bin/python -m benchmarks store_gc --rounds 8 --batch 1000 --writers 2
"""

from __future__ import annotations

import argparse
import gc
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import anyio

import cpersona
from benchmarks import fleet_speed as fs
from benchmarks import harness
from benchmarks.corpus import LOCOMO, load_texts
from benchmarks.store_cache import settings_for
from cpersona.edges.heap import freeze_startup_heap

RESULTS = Path(__file__).resolve().parent / "results" / "store_gc.md"
WATCHED = ("src", "benchmarks/*.py")
"""The code whose edits change these figures: the engine and the harness."""
MODES = ("unfrozen", "frozen")


class CollectorClock:
    """Seconds spent inside the collector, by generation, while it is installed (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.secs: dict[int, float] = defaultdict(float)
        self._began = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
        else:
            self.secs[int(info["generation"])] += time.perf_counter() - self._began

    def __enter__(self) -> CollectorClock:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)


def set_mode(mode: str) -> None:
    if mode == "frozen":
        freeze_startup_heap()  # what a server does once its engine is open
    else:
        gc.unfreeze()
        gc.collect()


async def one_round(
    memory: cpersona.Engine, fleet: fs.Fleet, agents: list[int], batch: int, writers: int
) -> dict[str, float]:
    starts = iter(range(0, len(agents) * fleet.memories, batch))

    async def writer() -> None:
        for first in starts:
            await memory.store_batch(fleet.batch(agents, first, batch))

    records = len(agents) * fleet.memories
    with CollectorClock() as clock:
        began, loop_began = time.perf_counter(), time.thread_time()
        async with anyio.create_task_group() as tg:
            for _ in range(writers):
                tg.start_soon(writer)
        wall, loop = time.perf_counter() - began, time.thread_time() - loop_began
    return {
        "records_per_sec": records / wall,
        "loop_us": loop * 1e6 / records,
        **{f"gen{g}_us": clock.secs[g] * 1e6 / records for g in range(3)},
    }


async def measure(args: argparse.Namespace) -> dict[str, list[dict[str, float]]]:
    agents_per_round = max(1, args.records // fs.MEMORIES)
    total_agents = agents_per_round * (2 * args.rounds + 1)
    fleet = await fs.load_fleet(load_texts(args.data), total_agents, fs.MEMORIES)
    rounds: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    next_agent = iter(range(total_agents))

    def agents() -> list[int]:
        return [next(next_agent) for _ in range(agents_per_round)]

    with tempfile.TemporaryDirectory(prefix="store-gc-") as tmp:
        async with cpersona.open(settings_for(Path(tmp)), background=False) as memory:
            await one_round(memory, fleet, agents(), args.batch, args.writers)  # warm-up: files, caches
            for n in range(args.rounds):
                for mode in MODES if n % 2 == 0 else MODES[::-1]:
                    set_mode(mode)
                    rounds[mode].append(await one_round(memory, fleet, agents(), args.batch, args.writers))
    gc.unfreeze()
    return rounds


def report(rounds: dict[str, list[dict[str, float]]], args: argparse.Namespace, load_start: float) -> str:
    med = {
        mode: {k: statistics.median(r[k] for r in rounds[mode]) for k in rounds[mode][0]} for mode in MODES
    }
    rows = [
        ("records/s", "records_per_sec", ".0f"),
        ("event loop CPU per record (µs)", "loop_us", ".0f"),
        ("in young collections (gen 0) per record (µs)", "gen0_us", ".1f"),
        ("in gen 1 collections per record (µs)", "gen1_us", ".1f"),
        ("in full collections (gen 2) per record (µs)", "gen2_us", ".1f"),
    ]
    per_round = max(1, args.records // fs.MEMORIES) * fs.MEMORIES
    lines = [
        "# What the garbage collector costs a batch store: heap frozen or not",
        "",
        *harness.header(
            harness.command("store_gc"), load_start=load_start, watched=("src", "benchmarks/*.py")
        ),
        f"- {args.rounds} rounds per mode, alternating which goes first; each round {args.writers} "
        f"concurrent writers of `store_batch({args.batch})` over {per_round:,} LoCoMo turns of agents of its "
        "own, caller vectors; one engine on a fresh embedded store",
        "- frozen: `gc.collect(); gc.freeze()` before the round (what `cpersona serve` does once its engine "
        "is open); unfrozen: `gc.unfreeze()`. Figures are medians over the rounds.",
        "",
        "| | unfrozen | frozen | frozen / unfrozen |",
        "|---|---|---|---|",
    ]
    for label, key, fmt in rows:
        a, b = med["unfrozen"][key], med["frozen"][key]
        ratio = f"{b / a:.2f}" if a else "-"
        lines.append(f"| {label} | {a:{fmt}} | {b:{fmt}} | {ratio} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8, help="rounds per mode")
    parser.add_argument("--records", type=int, default=10_000, help="records per round (whole agents)")
    parser.add_argument("--batch", type=int, default=1_000, help="records per store_batch call")
    parser.add_argument("--writers", type=int, default=2, help="concurrent store_batch calls")
    parser.add_argument("--data", type=Path, default=LOCOMO, help="locomo10.json")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results file")
    args = parser.parse_args()
    if min(args.rounds, args.records, args.batch, args.writers) < 1:
        raise SystemExit("--rounds, --records, --batch and --writers must be at least 1")
    load_start = harness.load()
    rounds = anyio.run(measure, args)
    text = report(rounds, args, load_start)
    args.out.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
