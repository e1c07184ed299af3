"""Paired A/B of batch store throughput with caller vectors between two versions of the engine, in one run.

Like ``recall_ab.py``, it loads two source trees side by side (``cpersona_a`` and ``cpersona_b``), so the
load of a shared machine falls on both alike. Each side opens a fresh embedded store (its own redis-server
and qdrant-edge shard, in a temporary directory); then, round after round, alternating which side goes
first, each stores ``--writers`` concurrent ``store_batch`` calls of ``--batch`` records carrying random
unit vectors (the vector values do not matter for write cost, and nothing is embedded; with ``--embed``
the records carry none and the engine embeds them); with ``--store``
each side writes into its own copy of an existing store instead (a million-record fleet, say, to measure
the store at that size). It reports per side
records/s, the engine process's CPU per record and redis-server's CPU per record, and the ratios B/A::

    .venv/bin/python -m benchmarks store_ab HEAD~1 . --records 4000 --batch 500 --writers 2

Once both engines are open and warm, the heap is frozen (``gc.freeze``): the sides share one garbage
collector, and a full collection walks everything alive for whichever side triggers it. At the end it
checks that both sides stored the same documents (one record read back from each, minus
the fields that differ by design: ids, times and sequence numbers).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

import anyio
import anyio.to_thread
import numpy as np

from benchmarks import harness
from benchmarks.corpus import sentences
from benchmarks.cpu import machine_shares, machine_ticks, process_cpu_ms, server_pid, vector_processes_cpu_ms
from benchmarks.recall_ab import add_setting_options, load_sides
from cpersona.edges.heap import freeze_startup_heap

AGENT = "bench-store"
_DIM = 384


def unit_vectors(n: int, seed: int) -> list[list[float]]:
    raw = np.random.default_rng(seed).standard_normal((n, _DIM))
    return (raw / np.linalg.norm(raw, axis=1, keepdims=True)).tolist()  # type: ignore[no-any-return]


def batches(
    side: str, rounds: int, writers: int, size: int, *, embed: bool
) -> list[list[list[dict[str, Any]]]]:
    """Per round, per writer, one batch; texts distinct across the run (dedup claims them all). With
    ``embed`` the records carry no vector, so the engine embeds each text."""
    total = rounds * writers * size
    texts = sentences(total, seed=11)
    vectors = unit_vectors(total, seed=7)
    it = iter(range(total))
    return [
        [
            [
                {"agent_id": AGENT, "content": f"{side}{n}. {texts[n]}"}
                | ({} if embed else {"embedding": vectors[n]})
                for n in (next(it) for _ in range(size))
            ]
            for _ in range(writers)
        ]
        for _ in range(rounds)
    ]


class Round(NamedTuple):
    """One round of a side: wall seconds, engine CPU ms (all threads and the vector engine's child
    processes), the event loop thread's CPU ms, the child processes' CPU ms, redis-server's CPU ms, and
    the machine's CPU ticks."""

    secs: float
    cpu_ms: float
    loop_ms: float
    shard_ms: float
    redis_ms: float
    machine: tuple[int, ...]


async def one_round(engine: Any, group: list[list[dict[str, Any]]]) -> Round:
    """What the group's concurrent batches took."""
    ticks_began = machine_ticks()
    began, cpu_began, loop_began = time.perf_counter(), time.process_time(), time.thread_time()
    redis_began, children_began = redis_cpu_ms(engine), vector_processes_cpu_ms(engine)
    async with anyio.create_task_group() as tg:
        for records in group:
            tg.start_soon(engine.store_batch, records)
    children_ms = vector_processes_cpu_ms(engine) - children_began
    return Round(
        time.perf_counter() - began,
        (time.process_time() - cpu_began) * 1000 + children_ms,
        (time.thread_time() - loop_began) * 1000,
        children_ms,
        redis_cpu_ms(engine) - redis_began,
        tuple(b - a for a, b in zip(ticks_began, machine_ticks(), strict=True)),
    )


def redis_cpu_ms(engine: Any) -> float:
    return process_cpu_ms(server_pid(engine))


async def compare(packages: dict[str, Any], work: Path, args: Any) -> None:
    rounds = max(1, args.records // (args.batch * args.writers))
    per_round = args.batch * args.writers
    data = {side: batches(side, rounds + 1, args.writers, args.batch, embed=args.embed) for side in "AB"}
    wall: dict[str, list[float]] = {"A": [], "B": []}
    cpu: dict[str, list[float]] = {"A": [], "B": []}
    loop: dict[str, list[float]] = {"A": [], "B": []}
    shard: dict[str, list[float]] = {"A": [], "B": []}
    redis: dict[str, list[float]] = {"A": [], "B": []}
    machine: dict[str, list[int]] = {"A": [0] * 8, "B": [0] * 8}
    for side in "AB" if args.store else ():
        print(f"copying {args.store} for side {side} ...", file=sys.stderr)
        await anyio.to_thread.run_sync(shutil.copytree, args.store, work / f"store_{side.lower()}")
    async with (
        packages["A"].open(
            settings(packages["A"], work / "store_a", args.set_a), background=False
        ) as engine_a,
        packages["B"].open(
            settings(packages["B"], work / "store_b", args.set_b), background=False
        ) as engine_b,
    ):
        engines = {"A": engine_a, "B": engine_b}
        for side, engine in engines.items():  # warm-up round: first writes create files and indexes
            await one_round(engine, data[side][0])
        # The two sides share one collector: frozen, the rounds' data, both engines and what start-up
        # loaded are left out of every full collection, which would otherwise walk them (a thousand
        # lists of 384 floats a batch) for whichever side happened to trigger it.
        freeze_startup_heap()
        for n in range(rounds):
            for side in ("A", "B") if n % 2 == 0 else ("B", "A"):
                done = await one_round(engines[side], data[side][n + 1])
                wall[side].append(done.secs)
                cpu[side].append(done.cpu_ms / per_round)
                loop[side].append(done.loop_ms / per_round)
                shard[side].append(done.shard_ms / per_round)
                redis[side].append(done.redis_ms / per_round)
                machine[side] = [a + b for a, b in zip(machine[side], done.machine, strict=True)]
        same = await same_documents(engines)
    rate = {side: per_round * rounds / sum(wall[side]) for side in "AB"}
    for side in "AB":
        shares = machine_shares(tuple(machine[side]))
        print(
            f"{side} ({args.a if side == 'A' else args.b}): {rate[side]:.0f} records/s, "
            f"CPU/record p50 {statistics.median(cpu[side]):.3f} ms (engine; event loop thread "
            f"{statistics.median(loop[side]):.3f}, shard processes {statistics.median(shard[side]):.3f}) + "
            f"{statistics.median(redis[side]):.3f} ms (redis-server); the machine's two cores "
            f"{shares['busy']:.0%} busy, {shares['iowait']:.0%} waiting on the disk, "
            f"{shares['idle']:.0%} idle"
        )
    print(
        f"B/A: throughput {rate['B'] / rate['A']:.3f}, "
        f"CPU/record {statistics.median(cpu['B']) / statistics.median(cpu['A']):.3f} (engine), "
        f"{statistics.median(loop['B']) / statistics.median(loop['A']):.3f} (event loop), "
        f"{statistics.median(redis['B']) / statistics.median(redis['A']):.3f} (redis-server); "
        f"{rounds} rounds of {args.writers} x {args.batch}; documents alike: {same}; "
        f"1-minute load {harness.load():.1f}"
    )


_PROBE = "The probe record: one text and one vector, stored alike on both sides."


async def same_documents(engines: dict[str, Any]) -> bool:
    """Whether one record stored alike on both sides reads back alike as JSON, but for the values that
    differ by design (its id, times and sequence number)."""
    docs = []
    for engine in engines.values():
        (result,) = (
            await engine.store_batch([{"agent_id": AGENT, "content": _PROBE, "embedding": _VEC}])
        ).results
        key = engine.keys.memory(str(result.ref).split(":")[-1])
        got = await engine.backends.stores.redis.execute_command("JSON.GET", key, "$")
        doc = json.loads(got)[0] if isinstance(got, (str, bytes)) else got[0]
        docs.append(_masked(doc, str(result.ref).split(":")[-1]))
    if docs[0] != docs[1]:
        print("documents differ:", docs, file=sys.stderr)
    return bool(docs[0] == docs[1])


_VEC = unit_vectors(1, seed=3)[0]


def _masked(value: Any, record_id: str) -> Any:
    """``value`` with the record id, and the numbers that are times or sequence numbers, masked."""
    if isinstance(value, dict):
        return {k: "<t>" if _timeish(k) else _masked(v, record_id) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v, record_id) for v in value]
    if isinstance(value, str):
        return value.replace(record_id, "<id>")
    return value


def _timeish(key: str) -> bool:
    return key in ("seq", "ts", "timestamp", "pk") or key.endswith(("_at", "_tick", "_time"))


def settings(package: Any, data_dir: Path, overrides: list[str] | None = None) -> Any:
    return package.Settings.from_env(
        {}, data_dir=data_dir, redis_startup_timeout_secs=600, **harness.setting_overrides(overrides or [])
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", help="version A: a git revision, or . for the working tree")
    parser.add_argument("b", help="version B: a git revision, or . for the working tree")
    parser.add_argument(
        "--records", type=int, default=4000, help="records per side (after one warm-up round)"
    )
    parser.add_argument("--batch", type=int, default=500, help="records per store_batch call")
    parser.add_argument("--writers", type=int, default=2, help="concurrent store_batch calls per round")
    parser.add_argument(
        "--store",
        type=Path,
        help="a store's data directory (e.g. the fleet's, under benchmarks/.cache/fleet_speed/): each "
        "side writes into its own copy of it instead of a fresh store",
    )
    parser.add_argument(
        "--embed", action="store_true", help="records without vectors: the engine embeds every text"
    )
    add_setting_options(parser)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cpersona-store-ab-") as tmp:
        work = Path(tmp)
        anyio.run(compare, load_sides(args.a, args.b, work), work, args)


if __name__ == "__main__":
    main()
