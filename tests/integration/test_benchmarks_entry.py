"""``python -m benchmarks``: it lists the benchmarks, each listed one imports as ``benchmarks.NAME``, and
NAME runs the benchmark with its own arguments."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest
from benchmarks.harness import header, percentile

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def _listed() -> list[str]:
    done = _run()
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split("benchmarks:\n", 1)[1].splitlines()
    return [line.split()[0] for line in lines if line.strip()]


def test_the_listing_names_every_benchmark_and_each_imports() -> None:
    names = _listed()
    # The speed scripts, the quality command and one of its own benchmarks are all there; the shared
    # modules and the peers' worker scripts are not benchmarks.
    assert {
        "recall_speed",
        "speed_peers",
        "store_speed",
        "forget_ab",
        "quality",
        "quality.reconstruct_bench",
    } <= set(names)
    assert not {"harness", "corpus", "store_cache", "recall_levels", "cpu"} & set(names)
    assert not any(name.startswith("peers") for name in names)
    for name in names:
        module = importlib.import_module(f"benchmarks.{name}")
        if hasattr(module, "__path__"):  # a package runs through its own __main__
            module = importlib.import_module(f"benchmarks.{name}.__main__")
        assert callable(getattr(module, "main", None)), name


def test_a_benchmark_runs_with_its_own_arguments() -> None:
    done = _run("forget_ab", "--help")
    assert done.returncode == 0, done.stderr
    assert "--records" in done.stdout
    assert "Paired A/B of a forget by age" in done.stdout


def test_an_unknown_name_is_refused() -> None:
    done = _run("no_such_benchmark")
    assert done.returncode == 2
    assert "no_such_benchmark" in done.stderr


def test_no_benchmark_keeps_a_second_way_to_import() -> None:
    # Every benchmark imports its neighbours as ``benchmarks.x``; none switches to bare names when run as
    # a script.
    marker = "TYPE_CHECKING or " + "__package__"
    offenders = [
        p.name for p in (ROOT / "benchmarks").rglob("*.py") if marker in p.read_text(encoding="utf-8")
    ]
    assert offenders == []


@pytest.mark.parametrize(
    ("samples", "fraction", "expected"),
    [
        ([3.0, 1.0, 2.0], 0.5, 2.0),
        ([1.0, 2.0, 3.0, 4.0], 0.95, 4.0),
        ([5.0], 0.99, 5.0),
        ([1.0, 2.0], 0.0, 1.0),
    ],
)
def test_percentile_is_the_nearest_rank(samples: list[float], fraction: float, expected: float) -> None:
    assert percentile(samples, fraction) == expected


def test_the_header_names_command_commit_machine_and_load() -> None:
    lines = header("python -m benchmarks x --quick", load_start=1.25)
    assert lines[0] == "- command: `python -m benchmarks x --quick`"
    assert [line.split(":", 1)[0] for line in lines] == [
        "- command",
        "- date",
        "- git commit",
        "- machine",
        "- 1-minute load average",
    ]
    assert "BLAS " in lines[3]
    assert "Python " in lines[3]
    assert "1.25 at start" in lines[4]
