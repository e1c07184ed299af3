"""CPU time of a process by pid, read from ``/proc`` (Linux): what the embedded redis-server spends."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["process_cpu_ms"]

_TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")


def process_cpu_ms(pid: int) -> float:
    """User plus system CPU time the process ``pid`` has used so far, in ms (10 ms resolution)."""
    # The command name in field 2 may hold spaces or parentheses; the fields after it are fixed.
    fields = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * _TICK_MS
