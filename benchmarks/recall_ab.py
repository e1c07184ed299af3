"""Paired A/B of recall latency between two versions of the engine, in one process, on one stored corpus.

The machines this project runs on are shared and noisy: two runs of ``recall_speed.py`` minutes apart
differ by more than most changes are worth. This script takes the noise out of the comparison instead:
it loads two source trees side by side (each imported under its own package name, ``cpersona_a`` and
``cpersona_b``), opens each on its own copy of a built store, and issues the same questions to both,
alternating which goes first, so that whatever load the machine carries falls on both alike. It reports
each side's p50 and mean latency, the median of the per-question ratio B/A, the process CPU time per recall
(steadier than wall time under load), throughput, and in how many recalls the vector arms (``vector_near``
and ``block``) returned different rows, which should be none for a change meant to keep answers. The final
rows are not compared: the embedded Redis of each copy rebuilds its BM25 statistics on its own schedule, so
the keyword arms of two copies of one store drift apart and the fused rows with them.

A version is a git revision (``HEAD~3``, a commit) or ``.`` for the working tree. The store is a data
directory built by ``recall_speed.py`` (under ``benchmarks/.cache/recall_speed/<key>/data``)::

    .venv/bin/python -m benchmarks recall_ab HEAD~1 . \\
        --store benchmarks/.cache/recall_speed/n10000-6791decaf741-v1/data --recalls 200

``--set-a``/``--set-b KEY=VALUE`` give one side a setting of its own, so ``. .`` compares the working tree
under two settings (``--set-b embedding_runtime=onnxruntime``).

Everything stays on this machine; the copies live in a temporary directory removed at the end.
"""

from __future__ import annotations

import argparse
import collections
import importlib
import json
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from benchmarks import harness
from benchmarks.cpu import process_cpu_ms, server_pid, vector_processes_cpu_ms

ROOT = Path(__file__).resolve().parents[1]
LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo10.json"
AGENT = "bench-agent"
LIMIT = 10
_WARMUP = 20
_READY_SECS = 600.0
_COMPARED_ARMS = ("vector_near", "block")


def export_tree(version: str, dest: Path) -> Path:
    """``src/`` and ``stages/`` of a git revision (or of the working tree for ``.``) under ``dest``."""
    dest.mkdir(parents=True)
    if version == ".":
        shutil.copytree(ROOT / "src", dest / "src")
        shutil.copytree(ROOT / "stages", dest / "stages")
        return dest
    archive = dest / "tree.tar"
    with archive.open("wb") as out:
        subprocess.run(["git", "archive", version, "src", "stages"], cwd=ROOT, stdout=out, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")
    archive.unlink()
    return dest


def rename_package(tree: Path, name: str) -> Path:
    """Make ``tree/src/cpersona`` importable as ``name`` next to another copy; return the path to add."""
    package = tree / "src" / name
    (tree / "src" / "cpersona").rename(package)
    for source in package.rglob("*.py"):
        text = source.read_text(encoding="utf-8")
        text = re.sub(r"\bfrom cpersona\b", f"from {name}", text)
        text = re.sub(r"\bimport cpersona\b", f"import {name}", text)
        text = re.sub(r"\bcpersona\.(?=_|open\b|Engine\b|Settings\b)", f"{name}.", text)
        source.write_text(text, encoding="utf-8")
    return tree / "src"


def load_sides(a: str, b: str, work: Path) -> dict[str, Any]:
    """Versions ``a`` and ``b`` (git revisions, or ``.``) imported side by side as ``cpersona_a`` and
    ``cpersona_b``, their trees exported under ``work``; by side, ``A`` and ``B``."""
    packages = {}
    for side, version in (("A", a), ("B", b)):
        name = f"cpersona_{side.lower()}"
        sys.path.insert(0, str(rename_package(export_tree(version, work / name), name)))
        packages[side] = importlib.import_module(name)
    return packages


def questions(path: Path) -> list[str]:
    if not path.is_file():
        raise SystemExit(f"{path} not found: the questions are LoCoMo's")
    return [str(qa["question"]) for sample in json.loads(path.read_bytes()) for qa in sample["qa"]]


def arms_of(result: Any) -> dict[str, Any]:
    """The arms' lists, read from the stage history the result carries."""
    node = result.final
    while node is not None and not hasattr(node, "arms"):
        node = getattr(node, "source", None)
    return {} if node is None else dict(node.arms)


def vector_rows(result: Any) -> list[tuple[object, ...]]:
    """Which rows the vector arms returned, in order (their scores are compared apart)."""
    arms = arms_of(result)
    return [
        (name, row.ref, row.rank, row.block_index)
        for name in _COMPARED_ARMS
        if name in arms
        for row in arms[name].rows
    ]


def vector_raws(result: Any) -> list[float]:
    arms = arms_of(result)
    return [row.raw for name in _COMPARED_ARMS if name in arms for row in arms[name].rows]


async def wait_ready(engine: Any) -> None:
    deadline = time.monotonic() + _READY_SECS
    while True:
        stats = await engine.stats(AGENT)
        if stats["memories"] and stats["memories"] == stats["vectors"] and not stats["vector_pending"]:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"store not ready after {_READY_SECS:.0f}s: {stats}")
        await anyio.sleep(0.5)


async def compare(packages: dict[str, Any], stores: dict[str, Path], asks: list[str], args: Any) -> None:
    latencies: dict[str, list[float]] = {"A": [], "B": []}
    cpu: dict[str, list[float]] = {"A": [], "B": []}
    redis_cpu: dict[str, list[float]] = {"A": [], "B": []}
    wall = {"A": 0.0, "B": 0.0}
    degraded = collections.Counter[str]()
    arm_ms: dict[str, dict[str, list[float]]] = {side: collections.defaultdict(list) for side in "AB"}
    differing = 0
    max_raw_gap = 0.0
    async with (
        packages["A"].open(settings(packages["A"], stores["A"], args.set_a), background=False) as engine_a,
        packages["B"].open(settings(packages["B"], stores["B"], args.set_b), background=False) as engine_b,
    ):
        engines = {"A": engine_a, "B": engine_b}
        for engine in engines.values():
            await wait_ready(engine)
            for question in asks[:_WARMUP]:
                await engine.recall(question, agent_id=AGENT, limit=LIMIT)
        rounds = args.recalls // args.callers
        for n in range(rounds):
            group = [asks[(n * args.callers + k) * 7 % len(asks)] for k in range(args.callers)]
            rows: dict[str, list[list[tuple[object, ...]]]] = {}
            raws: dict[str, list[list[float]]] = {}
            for side in ("A", "B") if n % 2 == 0 else ("B", "A"):
                results: list[Any] = [None] * len(group)

                async def one(k: int, question: str, out: list[Any] = results, side: str = side) -> None:
                    started = time.perf_counter()
                    out[k] = await engines[side].recall(question, agent_id=AGENT, limit=LIMIT)
                    latencies[side].append((time.perf_counter() - started) * 1000)

                began, cpu_began = time.perf_counter(), time.process_time()
                children_began = vector_processes_cpu_ms(engines[side])
                redis_began = redis_cpu_ms(engines[side])
                async with anyio.create_task_group() as tg:
                    for k, question in enumerate(group):
                        tg.start_soon(one, k, question)
                wall[side] += time.perf_counter() - began
                spent = (time.process_time() - cpu_began) * 1000
                spent += vector_processes_cpu_ms(engines[side]) - children_began
                cpu[side].append(spent / len(group))
                redis_cpu[side].append((redis_cpu_ms(engines[side]) - redis_began) / len(group))
                rows[side] = [vector_rows(r) for r in results]
                raws[side] = [vector_raws(r) for r in results]
                for r in results:
                    degraded[side] += bool(r.degraded)
                    for name, arm in arms_of(r).items():
                        arm_ms[side][name].append(arm.elapsed_ms)
            differing += sum(a != b for a, b in zip(rows["A"], rows["B"], strict=True))
            for a, b in zip(raws["A"], raws["B"], strict=True):
                if len(a) == len(b):
                    max_raw_gap = max([max_raw_gap, *(abs(x - y) for x, y in zip(a, b, strict=True))])
    for side in ("A", "B"):
        lat = latencies[side]
        arms = " ".join(f"{k} {statistics.mean(v):.1f}" for k, v in sorted(arm_ms[side].items()))
        print(
            f"{side} ({args.a if side == 'A' else args.b}): p50 {statistics.median(lat):.1f} ms, "
            f"mean {statistics.mean(lat):.1f} ms, {len(lat) / wall[side]:.1f} recalls/s, "
            f"CPU/recall p50 {statistics.median(cpu[side]):.1f} ms (engine) + "
            f"{statistics.mean(redis_cpu[side]):.1f} ms (redis-server, mean), degraded {degraded[side]}; "
            f"arms (mean ms): {arms}"
        )
    a, b = latencies["A"], latencies["B"]
    paired = statistics.median(y / x for x, y in zip(a, b, strict=True))
    print(
        f"B/A: p50 {statistics.median(b) / statistics.median(a):.3f}, "
        f"mean {statistics.mean(b) / statistics.mean(a):.3f}, "
        f"median paired ratio {paired:.3f}, throughput {(len(b) / wall['B']) / (len(a) / wall['A']):.3f}, "
        f"CPU/recall {statistics.median(cpu['B']) / statistics.median(cpu['A']):.3f} (engine), "
        f"{statistics.mean(redis_cpu['B']) / statistics.mean(redis_cpu['A']):.3f} (redis-server); "
        f"recalls whose vector arms returned other rows: {differing} of {rounds * args.callers} "
        f"(largest score gap where they agree {max_raw_gap:.1e}); "
        f"1-minute load {harness.load():.1f}"
    )


def redis_cpu_ms(engine: Any) -> float:
    """CPU time the engine's embedded redis-server has used so far, in ms."""
    return process_cpu_ms(server_pid(engine))


def settings(package: Any, data_dir: Path, overrides: list[str] | None = None) -> Any:
    # Query cache off, so that every recall embeds its question, as recall_speed.py measures.
    return package.Settings.from_env(
        {},
        data_dir=data_dir,
        embedding_cache_size=0,
        redis_startup_timeout_secs=600,
        **harness.setting_overrides(overrides or []),
    )


def add_setting_options(parser: argparse.ArgumentParser) -> None:
    """``--set-a``/``--set-b KEY=VALUE``: a setting for one side only, to compare one tree under two."""
    for side in ("a", "b"):
        parser.add_argument(
            f"--set-{side}",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help=f"a setting of side {side.upper()}",
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", help="version A: a git revision, or . for the working tree")
    parser.add_argument("b", help="version B: a git revision, or . for the working tree")
    parser.add_argument("--store", type=Path, required=True, help="a data directory built by recall_speed.py")
    parser.add_argument("--recalls", type=int, default=200, help="recalls per side")
    parser.add_argument("--callers", type=int, default=1, help="concurrent callers per round")
    parser.add_argument("--data", type=Path, default=LOCOMO, help="locomo10.json (the questions)")
    add_setting_options(parser)
    args = parser.parse_args()
    asks = questions(args.data)
    with tempfile.TemporaryDirectory(prefix="cpersona-ab-") as tmp:
        work = Path(tmp)
        packages = load_sides(args.a, args.b, work)
        stores = {side: work / f"store_{side.lower()}" for side in packages}
        for store in stores.values():
            shutil.copytree(args.store, store)
        anyio.run(compare, packages, stores, asks, args)


if __name__ == "__main__":
    main()
