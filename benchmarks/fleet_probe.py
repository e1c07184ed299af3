"""Measurements of an open store for :mod:`benchmarks.fleet_speed`: what it costs (bytes, RSS), what its
shards report, and recall timed in pairs against a second store."""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from benchmarks.cpu import vector_process_ids
from benchmarks.harness import percentile
from benchmarks.recall_levels import LIMIT, WARMUP, arm_times
from benchmarks.store_cache import REOPEN_SECS
from cpersona.stores.protocols import VectorFilter
from cpersona.stores.redis.connection import command

if TYPE_CHECKING:
    from collections.abc import Sequence

    import cpersona

__all__ = [
    "PartTimer",
    "block_state",
    "command_delta",
    "command_usec",
    "footprint",
    "optimize_both",
    "paired_round",
    "shard_info",
    "wait_ready",
]


class PartTimer:
    """Seconds spent inside the engine's own store steps, summed over concurrent writers.

    It wraps bound methods of one open engine's record store, vector store and embedder, so the figures
    are the real calls' durations, nothing replaced.
    """

    def __init__(self, memory: cpersona.Engine) -> None:
        self.secs: dict[str, float] = defaultdict(float)
        self._wrap(memory.backends.records, "reserve_writes", "dedup claims (Redis)")
        self._wrap(memory.backends.records, "next_seq", "sequence numbers (Redis)")
        self._wrap(memory.backends.records, "put_memories", "document write (Redis transaction, durable)")
        if memory.backends.embedder is not None:
            self._wrap(memory.backends.embedder, "embed", "embedding")
        if memory.backends.vectors is not None and hasattr(memory.backends.vectors, "_run"):
            self._wrap_runs(memory.backends.vectors)

    def _wrap(self, owner: object, name: str, label: str) -> None:
        original = getattr(owner, name)

        async def timed(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                return await original(*args, **kwargs)
            finally:
                self.secs[label] += time.perf_counter() - began

        setattr(owner, name, timed)

    def _wrap_runs(self, vectors: object) -> None:
        # The embedded adapter runs each engine call through _run(what, ...): upsert chunks, then a flush.
        original = vectors._run  # type: ignore[attr-defined]
        labels = {"upsert": "vector upsert (qdrant-edge)", "flush": "vector flush (qdrant-edge)"}

        async def timed(what: str, *args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                return await original(what, *args, **kwargs)
            finally:
                self.secs[labels.get(what, f"vector {what}")] += time.perf_counter() - began

        vectors._run = timed  # type: ignore[attr-defined]


def _rss_kb(pid: int | str) -> int:
    """VmRSS of a process from /proc (psutil is not in the environment); 0 where /proc is absent."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    line = next((ln for ln in status.splitlines() if ln.startswith("VmRSS:")), "VmRSS: 0 kB")
    return int(line.split()[1])


def _dir_bytes(root: Path) -> int:
    """The bytes a directory takes on disk (allocated blocks: qdrant-edge preallocates sparse files)."""
    return sum(p.stat().st_blocks * 512 for p in root.rglob("*") if p.is_file()) if root.is_dir() else 0


def _ft_sizes(raw: Sequence[Any]) -> dict[str, float]:
    """The numeric sizes (``*_mb``, ``*_size``) and the document count of an ``FT.INFO`` reply."""
    out: dict[str, float] = {}
    for key, value in zip(raw[::2], raw[1::2], strict=False):
        name = key.decode() if isinstance(key, bytes) else str(key)
        if name == "num_docs" or name.endswith(("_mb", "_size")):
            try:
                out[name] = float(value.decode() if isinstance(value, bytes) else value)
            except (TypeError, ValueError):
                continue
    return out


async def footprint(memory: cpersona.Engine, data_dir: Path) -> dict[str, Any]:
    """What the store holds and costs now: Redis memory and indexes, Qdrant on disk, both processes' RSS."""
    info = await memory.backends.stores.redis.info("memory")
    server = await memory.backends.stores.redis.info("server")
    keys = memory.keys
    indexes = {
        kind: _ft_sizes(await command(memory.backends.stores.redis, "FT.INFO", name))
        for kind, name in (
            ("memory", keys.memory_index),
            ("episode", keys.episode_index),
            ("raw", keys.raw_index),
        )
    }
    qdrant = data_dir / "qdrant"
    names = sorted(p.name for p in qdrant.iterdir()) if qdrant.is_dir() else []
    on_disk = {name: await anyio.to_thread.run_sync(_dir_bytes, qdrant / name) for name in names}
    return {
        "redis_used_memory": int(info["used_memory"]),
        "redis_used_memory_rss": int(info["used_memory_rss"]),
        "redis_rss_kb": _rss_kb(int(server["process_id"])),
        "redis_dir_bytes": await anyio.to_thread.run_sync(_dir_bytes, data_dir / "redis"),
        "indexes": indexes,
        "block_events_queued": int(await memory.backends.stores.redis.xlen(keys.block_stream)),
        "qdrant_bytes": on_disk,
        "engine_rss_kb": _rss_kb("self"),
        "vector_rss_kb": sum(_rss_kb(pid) for pid in vector_process_ids(memory)),
    }


async def shard_info(memory: cpersona.Engine) -> dict[str, dict[str, int]]:
    """What each embedded shard reports of itself (it gives counts, not sizes)."""
    out = {}
    for name, store in (("memories", memory.backends.vectors), ("blocks", memory.backends.blocks)):
        if store is not None and hasattr(store, "shard_info"):
            out[name] = await store.shard_info()
    return out


async def block_state(*engines: cpersona.Engine) -> list[dict[str, int]]:
    """Block points built and block events waiting, per engine (no worker runs in this benchmark)."""
    out = []
    for memory in engines:
        built = await memory.backends.blocks.count_all() if memory.backends.blocks is not None else 0
        queued = int(await memory.backends.stores.redis.xlen(memory.keys.block_stream))
        out.append({"built": built, "queued": queued})
    return out


async def _timed(call: Any) -> float:
    began = time.perf_counter()
    await call
    return (time.perf_counter() - began) * 1000


async def _ask(
    memory: cpersona.Engine, question: str, scope: str, arms: dict[str, list[float]]
) -> tuple[float, list[str], list[str]]:
    """One recall: its latency, the contents of its rows in order, and its degraded arms."""
    began = time.perf_counter()
    result = await memory.recall(question, agent_id=scope, limit=LIMIT)
    elapsed = (time.perf_counter() - began) * 1000
    for arm, ms in arm_times(result).items():
        arms[arm].append(ms)
    return elapsed, [row.content for row in result.rows], [f"{d.arm} {d.status}" for d in result.degraded]


async def paired_round(
    big: cpersona.Engine, lone: cpersona.Engine, scope: str, questions: Sequence[str], pairs: int
) -> dict[str, Any]:
    """``pairs`` questions asked of both stores back to back, whichever went first alternating.

    The recall is the engine's normal one (the query embedded by the engine, its cache off); the
    filtered vector search alone gets the same treatment with the questions' vectors. Each pair's rows
    are compared: the same memories ranked the same way in both stores, or not.
    """
    times: dict[str, list[float]] = {"fleet": [], "lone": [], "fleet_search": [], "lone_search": []}
    arms: dict[str, dict[str, list[float]]] = {"fleet": defaultdict(list), "lone": defaultdict(list)}
    degraded: dict[str, int] = defaultdict(int)
    same_rows = 0
    assert big.backends.embedder is not None
    vectors = await big.backends.embedder.embed([questions[n % len(questions)] for n in range(pairs)])
    flt = VectorFilter(agent_id=scope)
    for question in questions[:WARMUP]:
        for memory in (big, lone):
            await memory.recall(question, agent_id=scope, limit=LIMIT)
    for n in range(pairs):
        order = (("fleet", big), ("lone", lone)) if n % 2 == 0 else (("lone", lone), ("fleet", big))
        rows = {}
        for name, memory in order:
            ms, rows[name], failed = await _ask(memory, questions[n % len(questions)], scope, arms[name])
            times[name].append(ms)
            for arm in failed:
                degraded[f"{name} {arm}"] += 1
        same_rows += rows["fleet"] == rows["lone"]
        for name, memory in order:
            assert memory.backends.vectors is not None
            times[f"{name}_search"].append(
                await _timed(memory.backends.vectors.search(vectors[n], flt, LIMIT))
            )
    summary = {
        name: {
            "p50_ms": percentile(ms, 0.5),
            "p95_ms": percentile(ms, 0.95),
            "samples": len(ms),
        }
        for name, ms in times.items()
    }
    arm_means = {name: {arm: sum(ms) / len(ms) for arm, ms in by.items()} for name, by in arms.items()}
    return {
        "summary": summary,
        "arms_mean_ms": arm_means,
        "same_rows": same_rows,
        "degraded": dict(degraded),
        "samples_ms": times,
    }


async def optimize_both(big: cpersona.Engine, lone: cpersona.Engine) -> dict[str, float]:
    """``Engine.optimize()`` on each store (the embedded engine has no background optimiser), timed."""
    out = {}
    for name, memory in (("fleet", big), ("lone", lone)):
        began = time.perf_counter()
        await memory.optimize()
        out[name] = time.perf_counter() - began
    return out


async def wait_ready(memory: cpersona.Engine, scope: str, memories: int, records: int) -> None:
    """Wait until the search index and the vectors hold every record (a reopened store re-indexes)."""
    deadline = time.monotonic() + REOPEN_SECS
    while True:
        stats = await memory.stats(scope)
        total = await memory.backends.vectors.count_all() if memory.backends.vectors is not None else 0
        if stats["memories"] == memories and stats["vectors"] == memories and total == records:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"store not ready after {REOPEN_SECS:.0f}s: {stats}, {total} vectors")
        await anyio.sleep(0.5)


async def command_usec(memory: cpersona.Engine) -> dict[str, tuple[int, int]]:
    """Redis's own count of calls and microseconds per command so far (``INFO commandstats``)."""
    stats = await memory.backends.stores.redis.info("commandstats")
    return {name.removeprefix("cmdstat_"): (int(v["calls"]), int(v["usec"])) for name, v in stats.items()}


def command_delta(
    before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]
) -> dict[str, dict[str, int]]:
    """The calls and server microseconds of each command between two readings."""
    out = {}
    for name, (calls, usec) in after.items():
        was_calls, was_usec = before.get(name, (0, 0))
        if calls > was_calls:
            out[name] = {"calls": calls - was_calls, "usec": usec - was_usec}
    return out
