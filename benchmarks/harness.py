"""What every benchmark records about its own run: the machine, the load, the commit, and its percentiles.

A results file opens with :func:`header` (command, date, commit, machine, load), so two runs can be told
apart and a figure traced back to the code and the machine that made it. The machine is shared, so the
load average is read at the start and at the end of a run; :func:`load` is the one place it is read.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Final

from threadpoolctl import threadpool_info

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "PACKAGES",
    "blas",
    "command",
    "setting_overrides",
    "git_commit",
    "header",
    "load",
    "machine",
    "percentile",
    "versions",
]

ROOT: Final = Path(__file__).resolve().parents[1]
"""The repository root: commands are shown, and git is asked, from here."""

PACKAGES: Final = ("numpy", "qdrant-edge-py", "redis")
"""The installed packages whose versions decide the engine's speed, named in every header."""


def percentile(samples: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile (``fraction`` in 0..1) of ``samples``; NaN when there are none."""
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def load() -> float:
    """The 1-minute load average: other work on the same cores skews every figure taken beside it."""
    return os.getloadavg()[0]


def git_commit(*watched: str) -> str:
    """HEAD's short commit, marked when the paths whose code decides the figures have uncommitted changes.

    ``watched`` are paths from the repository root (default ``src``): a harness whose own code shapes
    its figures names its folders too, so a report never passes off edited code as the commit.
    """
    paths = watched or ("src",)

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], capture_output=True, text=True, check=True, cwd=ROOT
        ).stdout.strip()

    try:
        head = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no", "--", *paths)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head} (with uncommitted changes under {', '.join(paths)})" if dirty else head


def versions(packages: Sequence[str] = PACKAGES) -> str:
    """``name version`` of each installed package, comma-separated; one not installed is left out."""
    found = []
    for name in packages:
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            continue
    return ", ".join(found)


def blas() -> str:
    """The BLAS that numpy's matrix products run on: library, version, CPU kernel and thread count."""
    import numpy  # noqa: F401 - threadpoolctl reports only the libraries already loaded

    found = [
        f"{pool['internal_api']} {pool.get('version') or '?'} "
        f"({pool.get('architecture') or 'generic'}, {pool['num_threads']} threads)"
        for pool in threadpool_info()
        if pool["user_api"] == "blas"
    ]
    return ", ".join(found) or "none found"


def machine(packages: Sequence[str] = PACKAGES) -> str:
    """Platform, CPUs, Python, the packages' versions and the BLAS kernel, on one line."""
    system = f"{platform.platform()}, {platform.machine()}, {os.cpu_count()} CPUs"
    parts = [f"{system}, Python {platform.python_version()}", versions(packages), f"BLAS {blas()}"]
    return "; ".join(part for part in parts if part)


def command(name: str, argv: Sequence[str] | None = None) -> str:
    """The command line that reruns benchmark ``name`` with ``argv`` (default: this process's arguments)."""
    args = sys.argv[1:] if argv is None else list(argv)
    return shlex.join([os.path.relpath(sys.executable), "-m", "benchmarks", name, *args])


def header(
    command: str,
    *,
    load_start: float | None,
    load_end: float | None = None,
    watched: Sequence[str] = ("src",),
    packages: Sequence[str] = PACKAGES,
) -> list[str]:
    """The lines a results file opens with: command, date, commit, machine and the load around the run.

    ``load_start`` is :func:`load` read before the measurement (``None`` if the run did not read it);
    ``load_end`` is read here unless the run recorded it. ``watched`` goes to :func:`git_commit`.
    """
    loads = f"{load() if load_end is None else load_end:.2f} at the end"
    if load_start is not None:
        loads = f"{load_start:.2f} at start, {loads}"
    return [
        f"- command: `{command}`",
        f"- date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M UTC}",
        f"- git commit: {git_commit(*watched)}",
        f"- machine: {machine(packages)}",
        f"- 1-minute load average: {loads} (other work on the same cores skews every figure)",
    ]


def setting_overrides(pairs: Sequence[str]) -> dict[str, str]:
    """``KEY=VALUE`` command-line pairs as keyword overrides of :meth:`cpersona.Settings.from_env`, for A/B
    runs of one tree under two settings."""
    overrides = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"a setting override must read KEY=VALUE, got {pair!r}")
        overrides[key] = value
    return overrides
