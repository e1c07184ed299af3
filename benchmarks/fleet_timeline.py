"""A store's build followed as it grows: for :mod:`benchmarks.fleet_speed`, what each tenth of the fleet's
records cost, so that a store that slows down with its size shows where.

:class:`BuildSampler` takes a snapshot whenever the records stored pass the next tenth of the total:
the wall clock, Redis's own time (``INFO commandstats``), the append-only file's rewrites (``INFO
persistence``), the CPU time of the engine's process, of its shard processes and of redis-server, and
the machine's ticks. A rewrite runs in a child of redis-server, outside its CPU time: it shows in the
machine's share and in the rewrites column.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any

import anyio

from benchmarks import fleet_probe as probe
from benchmarks.cpu import machine_shares, machine_ticks, process_cpu_ms, vector_processes_cpu_ms

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import cpersona

__all__ = ["BuildSampler", "timeline_table"]


@dataclasses.dataclass(frozen=True, slots=True)
class _Snapshot:
    at: float
    stored: int
    redis_usec: float  # every command but EXEC, whose time holds the commands it runs
    mset_usec: float
    rewrites: int
    rewriting: bool
    engine_ms: float
    shards_ms: float
    redis_ms: float
    ticks: tuple[int, ...]


class BuildSampler:
    """Rows of what a build's records cost, one each time the records done pass a tenth (or several at
    once, with big batches): :meth:`follow` runs beside the writers, which tell it with :meth:`note` how
    many records are done."""

    def __init__(self, memory: cpersona.Engine, total: int, parts: int = 10) -> None:
        self._memory = memory
        self._total = max(1, total)
        self._parts = parts
        self._done = 0
        self._taken = 0  # tenths already in a row
        self._passed = anyio.Event()
        self.rows: list[dict[str, Any]] = []

    def note(self, done: int) -> None:
        """``done`` records of the build are stored (or skipped) by now."""
        self._done = done
        if self._tenths(done) > self._taken:
            self._passed.set()

    def _tenths(self, done: int) -> int:
        return min(self._parts, done * self._parts // self._total)

    async def follow(self) -> None:
        """Snapshot each time the records done pass another tenth; returns after the last one."""
        last = await self._snapshot(0)
        while self._taken < self._parts:
            if self._tenths(self._done) <= self._taken:
                self._passed = anyio.Event()
                await self._passed.wait()
                continue
            now = await self._snapshot(self._done)
            self._taken = self._tenths(now.stored)
            self.rows.append(_row(last, now))
            last = now

    async def _snapshot(self, stored: int) -> _Snapshot:
        commands = await probe.command_usec(self._memory)
        persistence = await self._memory.backends.stores.redis.info("persistence")
        server = self._memory.backends.stores.server
        return _Snapshot(
            at=time.perf_counter(),
            stored=stored,
            redis_usec=sum(usec for name, (_, usec) in commands.items() if name.lower() != "exec"),
            mset_usec=commands.get("json.mset", (0, 0))[1],
            rewrites=int(persistence.get("aof_rewrites", 0)),
            rewriting=bool(int(persistence.get("aof_rewrite_in_progress", 0))),
            engine_ms=time.process_time() * 1000,
            shards_ms=vector_processes_cpu_ms(self._memory),
            redis_ms=process_cpu_ms(server.pid) if server is not None else 0.0,
            ticks=machine_ticks(),
        )


def _row(a: _Snapshot, b: _Snapshot) -> dict[str, Any]:
    n = max(1, b.stored - a.stored)
    secs = b.at - a.at
    return {
        "records": b.stored - a.stored,
        "upto": b.stored,
        "records_per_sec": (b.stored - a.stored) / secs if secs else 0.0,
        "redis_us": (b.redis_usec - a.redis_usec) / n,
        "mset_us": (b.mset_usec - a.mset_usec) / n,
        "engine_us": (b.engine_ms - a.engine_ms) * 1000 / n,
        "shards_us": (b.shards_ms - a.shards_ms) * 1000 / n,
        "redis_cpu_us": (b.redis_ms - a.redis_ms) * 1000 / n,
        "busy": machine_shares(tuple(y - x for x, y in zip(a.ticks, b.ticks, strict=True)))["busy"],
        "rewrites": b.rewrites - a.rewrites + (1 if b.rewriting else 0),
    }


def timeline_table(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The rows as a markdown table (empty when there are none: a build from before the sampler)."""
    if not rows:
        return []
    lines = [
        "The fleet's build by tenths of its records: records/s over that tenth (from one snapshot to the "
        "next); µs per record of Redis's own time (every command but `EXEC`) and of `json.mset` in it; "
        "CPU µs per record of the engine's process (its event loop and threads), of its shard processes "
        "and of redis-server; the machine's busy share; the append-only file's rewrites that ended or "
        "were running in that tenth (each in a child of redis-server, whose CPU counts in the busy "
        "share only).",
        "",
        "| records | records/s | Redis µs | `json.mset` µs | engine CPU µs | shards CPU µs | redis-server "
        "CPU µs | machine busy | AOF rewrites |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['upto']:,} | {r['records_per_sec']:,.0f} | {r['redis_us']:.0f} | {r['mset_us']:.0f} "
        f"| {r['engine_us']:.0f} | {r['shards_us']:.0f} | {r['redis_cpu_us']:.0f} | {r['busy']:.0%} "
        f"| {r['rewrites']} |"
        for r in rows
    ]
    return [*lines, ""]
