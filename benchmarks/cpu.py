"""CPU time of a process by pid, read from ``/proc`` (Linux): what the embedded redis-server and the
vector engine's child processes spend."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = [
    "MachineTicks",
    "machine_shares",
    "machine_ticks",
    "process_cpu_ms",
    "vector_process_ids",
    "vector_processes_cpu_ms",
]

_TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")


def process_cpu_ms(pid: int) -> float:
    """User plus system CPU time the process ``pid`` has used so far, in ms (10 ms resolution)."""
    # The command name in field 2 may hold spaces or parentheses; the fields after it are fixed.
    fields = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * _TICK_MS


MachineTicks = tuple[int, ...]
"""The whole machine's CPU ticks so far (``/proc/stat``): user, nice, system, idle, iowait, irq, softirq,
steal."""


def machine_ticks() -> MachineTicks:
    return tuple(
        int(n) for n in Path("/proc/stat").read_text(encoding="ascii").split("\n", 1)[0].split()[1:9]
    )


def machine_shares(ticks: MachineTicks) -> dict[str, float]:
    """The busy (user, nice, system, irq, softirq, steal), idle and iowait shares of some ticks (a
    difference of :func:`machine_ticks`): how much of both cores a run kept busy, and how much it left
    waiting on the disk."""
    user, nice, system, idle, iowait, irq, softirq, steal = ticks
    total = sum(ticks) or 1
    busy = user + nice + system + irq + softirq + steal
    return {"busy": busy / total, "idle": idle / total, "iowait": iowait / total}


def backends_of(engine: Any) -> Any:
    """What an engine opened: ``Engine.backends``, or, in the versions before that seam that the A/B
    scripts load beside the working tree, its private ``_b``."""
    return engine.backends if hasattr(type(engine), "backends") else engine._b


def server_pid(engine: Any) -> int:
    """The pid of an engine's embedded redis-server (in either version's layout)."""
    backends = backends_of(engine)
    server = backends.stores.server if hasattr(backends, "stores") else backends.server
    return int(server.pid)


def vector_process_ids(engine: Any) -> list[int]:
    """The child processes that hold an engine's vector shards (none in thread mode or with a Qdrant
    server)."""
    backends = backends_of(engine)
    stores = (backends.vectors, backends.blocks)
    return [pid for store in stores if (pid := getattr(store, "process_id", None)) is not None]


def vector_processes_cpu_ms(engine: Any) -> float:
    """CPU time so far of an engine's vector processes: part of the engine's own work, outside
    ``time.process_time()``."""
    return sum(process_cpu_ms(pid) for pid in vector_process_ids(engine))
