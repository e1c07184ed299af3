"""A fleet store: many agents in one embedded engine, vectors given by the caller (issue 17, targets 3 and 4).

One run measures, on the engine's embedded defaults (embedded Redis, the embedded Qdrant engine on disk):

1. **Store throughput with caller vectors.** Each agent's memories are a deterministic sample of LoCoMo
   turns (:func:`agent_memories`), each distinct turn embedded once by the project's embedder and cached
   (:mod:`benchmarks.quality.embed_cache`); every record carries its vector as ``embedding``. A grid of
   batch sizes and concurrent writers (:data:`GRID`) runs on scratch stores, and the fleet is built with
   its fastest cell unless ``--batch`` / ``--writers`` say otherwise. The steps of a store are timed by
   wrapping the engine's own store methods (:class:`benchmarks.fleet_probe.PartTimer`).
2. **Bytes per record** in Redis (``used_memory``, ``FT.INFO``) and Qdrant (on disk, and the shards'
   counts), and the resident memory of this process and of the embedded redis-server.
3. **Recall in one agent's scope** on the fleet and on a lone store of that agent's memories built the
   same way, both open at once, each question asked of both in alternating order (paired), before and
   after ``Engine.optimize()``; the filtered vector search alone is timed the same way. Then shard
   configurations for a fleet are compared (:mod:`benchmarks.fleet_tenancy`).
4. **Cost growth** by store size, beside CPersona 2.6.14 (:mod:`benchmarks.fleet_report`).

Both engines open without background tasks, so no block worker runs: a store's block events stay queued
in Redis and the block collections empty in both alike (embedding a million records' clauses would take
hours and disturb every figure). The fleet is cached under ``benchmarks/.cache/fleet_speed/``
(gitignored; keyed by size, corpus and :data:`_CACHE_VERSION`) and measured on a copy. ``--quick`` is a
smoke run on a tiny fleet without the cache. Run from the repository root::

    .venv/bin/python -m benchmarks fleet_speed                    # 1,000 agents x 1,000 memories
    .venv/bin/python -m benchmarks fleet_speed --agents 20 --memories 200
    .venv/bin/python -m benchmarks fleet_speed --quick
    .venv/bin/python -m benchmarks fleet_speed --grid-only         # the store grid alone: fleet_grid.md
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from tqdm import tqdm

import cpersona
from benchmarks import fleet_probe as probe
from benchmarks import fleet_report as report
from benchmarks import fleet_tenancy as tenancy
from benchmarks import fleet_timeline as timeline
from benchmarks import harness
from benchmarks.corpus import LOCOMO, Texts, build_corpus, load_texts
from benchmarks.harness import git_commit, percentile
from benchmarks.quality.embed_cache import EmbeddingCache
from benchmarks.store_cache import corpus_key, settings_for
from cpersona.edges.heap import freeze_startup_heap
from cpersona.model.memory_request import StoreRequest

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy as np
    import numpy.typing as npt

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "fleet_speed.md"
GRID_RESULTS = HERE / "results" / "fleet_grid.md"
CACHE = HERE / ".cache" / "fleet_speed"
RAW = HERE / ".cache" / "fleet_speed_last.json"

_CACHE_VERSION = 1
"""Part of every cache key: bump it when a fleet built earlier no longer represents the engine."""

AGENTS = 1_000
MEMORIES = 1_000
GRID: tuple[tuple[int, int], ...] = (
    (256, 1), (1_000, 1), (256, 2), (1_000, 2), (500, 4), (1_000, 4), (500, 8),
)  # fmt: skip
"""(batch size, concurrent writers) cells of the store-throughput grid."""
_GRID_RECORDS = 20_000
_SEED = 20_261_201
CALLER_VECTORS = "embedding" in StoreRequest.model_fields
"""Whether this commit's store accepts a caller's vector; without it the engine embeds each record."""


# ------------------------------------------------------------------------------------------------ corpus


def agent_id(n: int) -> str:
    return f"fleet-{n:05d}"


def agent_memories(pool: Sequence[str], memories: int, n: int) -> list[str]:
    """Agent ``n``'s memories: a sample of the pool that depends on ``n`` only (distinct within the agent)."""
    return random.Random(f"{_SEED}-{n}").sample(list(pool), memories)


def distinct_texts(texts: Sequence[Sequence[str]]) -> list[str]:
    """The agents' texts, each once, in order of first appearance: the order of the fleet's vectors."""
    return list(dict.fromkeys(t for agent in texts for t in agent))


@dataclasses.dataclass(frozen=True, slots=True)
class Fleet:
    """What a fleet is made of: the agents' texts and every distinct text's vector."""

    agents: int
    memories: int
    texts: tuple[tuple[str, ...], ...]
    vectors: npt.NDArray[np.float32]
    row: dict[str, int]
    lists: tuple[list[float], ...]
    """Each distinct text's vector as the list of floats a caller sends, made once: converting a row per
    record was 8% of the event loop's time in the fleet's build, the caller's work rather than the store's."""

    @classmethod
    def of(
        cls, agents: int, memories: int, texts: tuple[tuple[str, ...], ...], vectors: npt.NDArray[np.float32]
    ) -> Fleet:
        """The fleet of these agents' texts; ``vectors`` row ``k`` is the ``k``-th distinct text's, in
        order of first appearance."""
        row = {t: i for i, t in enumerate(distinct_texts(texts))}
        return cls(agents, memories, texts, vectors, row, tuple(vectors.tolist()))

    @property
    def records(self) -> int:
        return self.agents * self.memories

    @property
    def measured(self) -> int:
        """The agent whose scope the recalls search (the middle one, neither first nor last written)."""
        return self.agents // 2

    def key(self) -> str:
        digest = corpus_key(self.texts[0] + self.texts[-1]).split("-")[1]
        vectors = "caller" if CALLER_VECTORS else "engine"
        return f"a{self.agents}-m{self.memories}-{digest}-{vectors}-v{_CACHE_VERSION}"

    def batch(self, agents: Sequence[int], first: int, size: int) -> list[dict[str, Any]]:
        """Records ``first`` to ``first + size`` of the given agents' memories, in agent order."""
        out: list[dict[str, Any]] = []
        for flat in range(first, min(first + size, len(agents) * self.memories)):
            n, i = divmod(flat, self.memories)
            text = self.texts[agents[n]][i]
            record: dict[str, Any] = {"agent_id": agent_id(agents[n]), "content": text}
            if CALLER_VECTORS:
                record["embedding"] = self.lists[self.row[text]]
            out.append(record)
        return out


async def load_fleet(texts: Texts, agents: int, memories: int) -> Fleet:
    # LoCoMo's turns, extended by recall_speed's generated memories when one agent needs more.
    pool = build_corpus(texts, max(memories, len(texts.turns)))
    chosen = tuple(tuple(agent_memories(pool, memories, n)) for n in range(agents))
    distinct = distinct_texts(chosen)
    async with EmbeddingCache() as cache:
        matrix = await cache.embed(distinct, desc="caller vectors")
    return Fleet.of(agents, memories, chosen, matrix)


# ----------------------------------------------------------------------------------------------- storing


async def store_all(
    memory: cpersona.Engine, fleet: Fleet, agents: Sequence[int], batch: int, writers: int, label: str
) -> dict[str, Any]:
    """Store the agents' memories through ``store_batch``, ``writers`` batches in flight at once."""
    timer = probe.PartTimer(memory)
    total = len(agents) * fleet.memories
    starts = iter(range(0, total, batch))
    calls: list[float] = []
    stored = skipped = 0

    async def writer(bar: tqdm[Any]) -> None:
        nonlocal stored, skipped
        for first in starts:
            records = fleet.batch(agents, first, batch)
            began = time.perf_counter()
            result = await memory.store_batch(records)
            calls.append(time.perf_counter() - began)
            stored += result.stored
            skipped += result.skipped
            sampler.note(stored + skipped)
            bar.update(len(records))

    sampler = timeline.BuildSampler(memory, total)
    server_before, began = await probe.command_usec(memory), time.perf_counter()
    with tqdm(total=total, desc=label, unit="rec", file=sys.stderr, mininterval=2.0) as bar:
        async with anyio.create_task_group() as outer:
            outer.start_soon(sampler.follow)
            async with anyio.create_task_group() as tg:
                for _ in range(writers):
                    tg.start_soon(writer, bar)
            wall = time.perf_counter() - began
    commands = probe.command_delta(server_before, await probe.command_usec(memory))
    if skipped:
        raise RuntimeError(f"{skipped} records were skipped as duplicates; an agent's sample must be unique")
    parts = dict(timer.secs)
    parts["validation, free-space check and the rest (Python)"] = max(0.0, sum(calls) - sum(parts.values()))
    return {
        "stored": stored,
        "batch": batch,
        "writers": writers,
        "wall_secs": wall,
        "records_per_sec": stored / wall if wall else 0.0,
        "batch_p50_ms": percentile(calls, 0.5) * 1000 if calls else 0.0,
        "parts_secs": parts,
        "redis_commands": commands,
        "caller_vectors": CALLER_VECTORS,
        "timeline": sampler.rows,
    }


async def throughput_grid(
    fleet: Fleet, cells: Sequence[tuple[int, int]], records: int
) -> list[dict[str, Any]]:
    """Each (batch, writers) cell on a fresh scratch store of about ``records`` records (whole agents, at
    most the fleet's)."""
    agents = list(range(max(1, min(fleet.agents, records // fleet.memories))))
    out = []
    for batch, writers in cells:
        with tempfile.TemporaryDirectory(prefix="fleet-grid-") as tmp:
            async with cpersona.open(settings_for(Path(tmp)), background=False) as memory:
                out.append(await store_all(memory, fleet, agents, batch, writers, f"grid {batch}x{writers}"))
    return out


async def build(
    data_dir: Path, fleet: Fleet, agents: Sequence[int], batch: int, writers: int, label: str
) -> dict[str, Any]:
    """Store the agents' memories into a new store at ``data_dir``; what it took and what it holds."""
    async with cpersona.open(settings_for(data_dir), background=False) as memory:
        empty = await probe.footprint(memory, data_dir)
        ingest = await store_all(memory, fleet, agents, batch, writers, label)
        full = await probe.footprint(memory, data_dir)
    return {
        "records": len(agents) * fleet.memories,
        "agents": len(agents),
        "ingest": ingest,
        "empty": empty,
        "full": full,
        "built_at": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "built_commit": git_commit(),
    }


async def cached_fleet(
    fleet: Fleet, batch: int, writers: int, *, quick: bool, rebuild: bool
) -> tuple[Path, dict[str, Any]]:
    """The directory of a built fleet store (built now unless cached; ``quick`` never caches)."""
    if quick:
        home = Path(await anyio.to_thread.run_sync(tempfile.mkdtemp)) / "fleet"
        meta = await build(home / "data", fleet, range(fleet.agents), batch, writers, "fleet")
        return home, {**meta, "from_cache": False}
    home = CACHE / fleet.key()
    meta_path = home / "meta.json"
    if not rebuild and meta_path.is_file():
        return home, {**json.loads(meta_path.read_text()), "from_cache": True}
    work = CACHE / f"{fleet.key()}.building"
    await anyio.to_thread.run_sync(lambda: shutil.rmtree(work, ignore_errors=True))
    meta = await build(work / "data", fleet, range(fleet.agents), batch, writers, "fleet")
    # meta.json last and the directory renamed into place: a build that dies never passes for a cached one.
    (work / "meta.json").write_text(json.dumps(meta, indent=2))
    await anyio.to_thread.run_sync(_install, work, home)
    return home, {**meta, "from_cache": False}


def _install(work: Path, home: Path) -> None:
    shutil.rmtree(home, ignore_errors=True)
    work.rename(home)


# --------------------------------------------------------------------------------------------- measuring


async def measure(
    fleet: Fleet, home: Path, lone_dir: Path, questions: Sequence[str], pairs: int, optimize: bool
) -> dict[str, Any]:
    """Open the fleet (a copy of ``home``) and the lone store together and measure them in pairs."""
    tmp = Path(await anyio.to_thread.run_sync(tempfile.mkdtemp, None, "fleet-measure-"))
    try:
        data = tmp / "fleet"
        await anyio.to_thread.run_sync(shutil.copytree, home / "data", data)
        began = time.perf_counter()
        async with (
            cpersona.open(settings_for(data), background=False) as big,
            cpersona.open(settings_for(lone_dir), background=False) as lone,
        ):
            scope = agent_id(fleet.measured)
            await probe.wait_ready(big, scope, fleet.memories, fleet.records)
            out: dict[str, Any] = {"reopen_secs": time.perf_counter() - began}
            out["blocks"] = await probe.block_state(big, lone)
            out["before"] = await probe.paired_round(big, lone, scope, questions, pairs)
            if optimize:
                out["optimize_secs"] = await probe.optimize_both(big, lone)
                out["after"] = await probe.paired_round(big, lone, scope, questions, pairs)
            out["shards"] = {"fleet": await probe.shard_info(big), "lone": await probe.shard_info(lone)}
            out["footprint"] = await probe.footprint(big, data)
    finally:
        await anyio.to_thread.run_sync(lambda: shutil.rmtree(tmp, ignore_errors=True))
    return out


# -------------------------------------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, help=f"agents in the fleet (default {AGENTS:,})")
    parser.add_argument("--memories", type=int, help=f"memories per agent (default {MEMORIES:,})")
    parser.add_argument("--batch", type=int, help="store_batch size for the fleet (default: the grid's best)")
    parser.add_argument("--writers", type=int, help="concurrent batch writers (default: the grid's best)")
    parser.add_argument("--grid-records", type=int, help=f"records per grid cell (default {_GRID_RECORDS:,})")
    parser.add_argument("--pairs", type=int, help="paired recalls per round (default 400)")
    parser.add_argument(
        "--tenant-agents", type=int, help="agents in the shard comparison (default 100; 0: none)"
    )
    parser.add_argument("--no-optimize", action="store_true", help="skip Engine.optimize and the round after")
    parser.add_argument(
        "--no-freeze",
        action="store_true",
        help="leave the heap unfrozen (by default, but for --quick, it is frozen once the fleet is loaded, "
        "as a server freezes its heap once its engine is open: cpersona.edges.heap)",
    )
    parser.add_argument("--quick", action="store_true", help="a tiny fleet, few recalls, no cache (CI)")
    parser.add_argument(
        "--grid-only",
        action="store_true",
        help=f"only the store-throughput grid: no fleet, no recall (default report {GRID_RESULTS.name})",
    )
    parser.add_argument("--rebuild", action="store_true", help="rebuild the cached fleet")
    parser.add_argument("--data", type=Path, default=LOCOMO, help="locomo10.json")
    parser.add_argument("--out", type=Path, help=f"results file (default {RESULTS.relative_to(HERE.parent)})")
    return parser


def settle(args: argparse.Namespace, argv: Sequence[str] | None) -> str:
    """Fill in the defaults (smaller under ``--quick``); returns the command line for the report."""
    quick = args.quick
    for name, small, full in (("agents", 4, AGENTS), ("memories", 30, MEMORIES), ("pairs", 10, 400)):
        if getattr(args, name) is None:
            setattr(args, name, small if quick else full)
    if args.grid_records is None:
        args.grid_records = 2 * args.memories if quick else _GRID_RECORDS
    if args.tenant_agents is None:
        args.tenant_agents = min(args.agents, 100)
    for name in ("memories", "grid_records", "pairs", "batch", "writers"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            raise SystemExit(f"--{name.replace('_', '-')} must be at least 1")
    if args.agents < 2:
        raise SystemExit("--agents must be at least 2 (a fleet beside its lone agent)")
    if not 0 <= args.tenant_agents <= args.agents:
        raise SystemExit("--tenant-agents must be between 0 and --agents")
    if args.out is None:
        args.out = (
            CACHE.parent / "fleet_speed_quick.md" if quick else GRID_RESULTS if args.grid_only else RESULTS
        )
    return harness.command("fleet_speed", argv)


async def run(args: argparse.Namespace, texts: Texts) -> dict[str, Any]:
    fleet = await load_fleet(texts, args.agents, args.memories)
    # Frozen as a server's heap is, unless asked not to; never in a quick run, which may share its
    # process with the tests.
    frozen = not (args.no_freeze or args.quick)
    if frozen:
        freeze_startup_heap()
    # The quick run keeps two cells: each cell opens an engine of its own, the bulk of a tiny run's time.
    cells = [(b, w) for b, w in (GRID[:4:3] if args.quick else GRID) if b <= cpersona.Settings().batch_max]
    grid = await throughput_grid(fleet, cells, args.grid_records)
    if args.grid_only:
        return {"grid": grid, "distinct_texts": len(fleet.row), "heap_frozen": frozen}
    best = max(grid, key=lambda cell: cell["records_per_sec"])
    batch = best["batch"] if args.batch is None else args.batch
    writers = best["writers"] if args.writers is None else args.writers
    home, built = await cached_fleet(fleet, batch, writers, quick=args.quick, rebuild=args.rebuild)
    lone_tmp = Path(await anyio.to_thread.run_sync(tempfile.mkdtemp, None, "fleet-lone-"))
    try:
        lone = await build(lone_tmp / "data", fleet, [fleet.measured], batch, writers, "lone")
        measured = await measure(
            fleet, home, lone_tmp / "data", texts.questions, args.pairs, optimize=not args.no_optimize
        )
    finally:
        await anyio.to_thread.run_sync(lambda: shutil.rmtree(lone_tmp, ignore_errors=True))
        if args.quick:
            await anyio.to_thread.run_sync(lambda: shutil.rmtree(home.parent, ignore_errors=True))
    return {
        "tenancy": await tenancy.compare(
            [(agent_id(n), fleet.texts[n]) for n in range(args.tenant_agents)],
            lambda text: fleet.vectors[fleet.row[text]],
            texts.questions,
            args.pairs,
        )
        if args.tenant_agents
        else [],
        "agents": fleet.agents,
        "memories": fleet.memories,
        "measured_agent": agent_id(fleet.measured),
        "distinct_texts": len(fleet.row),
        "grid": grid,
        "chosen": {
            "batch": batch,
            "writers": writers,
            "from_grid": args.batch is None and args.writers is None,
        },
        "fleet": built,
        "lone": lone,
        "measure": measured,
        "heap_frozen": frozen,
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = build_parser().parse_args(argv)
    command = settle(args, argv)
    load_start = harness.load()
    texts = load_texts(args.data)
    result = anyio.run(run, args, texts)
    result["command"] = command
    result["load"] = {"start": load_start, "end": harness.load()}
    result["source"] = texts.source
    out: Path = args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.grid_only:
        out.write_text(report.render_grid(result), encoding="utf-8")
        print(f"wrote {out}")
        return result
    raw = out.with_suffix(".json") if args.quick else RAW
    raw.parent.mkdir(parents=True, exist_ok=True)
    raw.write_text(json.dumps(result, indent=2, default=str))
    growth_chart = out.parent / ("cost_growth_quick.png" if args.quick else "cost_growth.png")
    fleet_chart = out.with_suffix(".png")
    points = report.cost_growth(result)
    report.write_growth_chart(points, growth_chart)
    report.write_fleet_chart(result, fleet_chart)
    text = report.render(
        result,
        points,
        chart=os.path.relpath(growth_chart, out.parent),
        fleet_chart=os.path.relpath(fleet_chart, out.parent),
    )
    out.write_text(text, encoding="utf-8")
    print(text)
    print(f"wrote {out}, {fleet_chart}, {growth_chart} and {raw}")
    return result


if __name__ == "__main__":
    main()
