"""One level of recall load: a number of concurrent callers sharing a fixed number of recalls.

:func:`run_level` times each recall as one await, counts the degraded arms, keeps the stage and arm
timings and the rows each question got, and charges the CPU the engine's process, its vector processes
and the embedded redis-server spent over the level.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections import defaultdict
from typing import TYPE_CHECKING, Any, Final

import anyio

from benchmarks.cpu import process_cpu_ms, vector_processes_cpu_ms
from benchmarks.harness import percentile
from benchmarks.same_rows import Ranked, compare, ranked

if TYPE_CHECKING:
    from collections.abc import Sequence

    import cpersona

__all__ = ["AGENT", "LIMIT", "WARMUP", "Level", "arm_times", "run_level"]

AGENT: Final = "bench-agent"
LIMIT: Final = 10
WARMUP: Final = 20
"""Recalls asked before a measurement, so that the first ones' allocations are not timed."""


@dataclasses.dataclass(slots=True)
class Level:
    callers: int
    recalls: int
    latencies_ms: list[float]
    wall_secs: float
    degraded: dict[str, int]
    timings: list[dict[str, float]]
    arms: list[dict[str, float]]
    engine_cpu_ms: float = 0.0
    redis_cpu_ms: float = 0.0
    rows: dict[int, Ranked] = dataclasses.field(default_factory=dict)
    """The refs (and cosines) each question got, by its index in the question list (the last time it was
    asked)."""

    def same_rows(self, alone: Level) -> tuple[int, int, int]:
        """Of the questions both levels asked: how many got the same refs in the same order as ``alone``,
        how many more differ only inside near-ties of cosine (see :mod:`benchmarks.same_rows`), and how
        many there were."""
        shared = self.rows.keys() & alone.rows.keys()
        verdicts = [compare(self.rows[q], alone.rows[q]) for q in shared]
        return verdicts.count("same"), verdicts.count("tied"), len(shared)

    @property
    def throughput(self) -> float:
        return self.recalls / self.wall_secs

    def pct(self, fraction: float) -> float:
        return percentile(self.latencies_ms, fraction)

    def to_json(self) -> dict[str, Any]:
        return {
            "callers": self.callers,
            "recalls": self.recalls,
            "p50_ms": self.pct(0.50),
            "p95_ms": self.pct(0.95),
            "p99_ms": self.pct(0.99),
            "mean_ms": statistics.mean(self.latencies_ms),
            "recalls_per_sec": self.throughput,
            "engine_cpu_ms_per_recall": self.engine_cpu_ms / self.recalls,
            "redis_cpu_ms_per_recall": self.redis_cpu_ms / self.recalls,
            "degraded": dict(self.degraded),
        }


def arm_times(result: Any) -> dict[str, float]:
    """Each arm's elapsed time, read from the stage history that the result carries."""
    node = result.final
    while node is not None and not hasattr(node, "arms"):
        node = getattr(node, "source", None)
    if node is None:
        return {}
    return {name: float(arm.elapsed_ms) for name, arm in node.arms.items()}


async def run_level(
    memory: cpersona.Engine, questions: Sequence[str], callers: int, recalls: int, offset: int = 0
) -> Level:
    """``recalls`` recalls shared among ``callers`` concurrent tasks; each latency is one await."""
    level = Level(callers, recalls, [], 0.0, defaultdict(int), [], [])
    issued = 0

    async def caller() -> None:
        nonlocal issued
        while issued < recalls:
            index = (offset + issued) % len(questions)
            issued += 1
            started = time.perf_counter()
            result = await memory.recall(questions[index], agent_id=AGENT, limit=LIMIT)
            level.latencies_ms.append((time.perf_counter() - started) * 1000)
            level.rows[index] = ranked(result, key=lambda row: row.ref)
            level.timings.append(dict(result.timing_ms))
            level.arms.append(arm_times(result))
            for degraded in result.degraded:
                level.degraded[f"{degraded.arm} {degraded.status}"] += 1

    server = memory.backends.stores.server
    redis_began = process_cpu_ms(server.pid) if server is not None else 0.0
    children_began = vector_processes_cpu_ms(memory)
    cpu_began, started = time.process_time(), time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(callers):
            tg.start_soon(caller)
    level.wall_secs = time.perf_counter() - started
    # The engine's figure is this whole process (its Python, the embedder's threads and this loop's own
    # small bookkeeping) plus the vector engine's child processes; Redis runs in a process of its own.
    level.engine_cpu_ms = (time.process_time() - cpu_began) * 1000
    level.engine_cpu_ms += vector_processes_cpu_ms(memory) - children_began
    level.redis_cpu_ms = process_cpu_ms(server.pid) - redis_began if server is not None else 0.0
    return level
