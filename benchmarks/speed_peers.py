"""Recall speed of cpersona and of CPersona 2.6.14 on the same corpus, in the same run, as ratios.

For each corpus size (1k with ``--quick``; 10k and 100k by default) the benchmark measures, one after
the other on the same machine:

1. **cpersona**, exactly as :mod:`recall_speed` does (its store cache, its ``run_size``: embedded
   defaults, ``limit=10``, query-embedding cache off, 1/8/64 concurrent callers);
2. **CPersona 2.6.14** (:class:`benchmarks.peers.cpersona_ref.CPersonaRef`: PyPI ``cpersona==2.6.14`` in
   its own venv, library calls in a worker subprocess, gate pinned to its heuristic regime, no blocks)
   on the same memories, stored in the same order for one agent, then asked the same questions with
   the same concurrency plan and ``limit=10``.

Both embed every question with the same ONNX MiniLM: cpersona in process, CPersona 2.6.14 through its
``/embed`` contract, answered by a loopback server in this process that runs the embedder afresh for
each request during the measurement (its own LRU is off, ``CPERSONA_EMBEDDING_CACHE_SIZE=0``). While
CPersona's store is built, the server answers from precomputed corpus vectors instead, so its ingest
figure is the store path alone. CPersona's latency is timed in this process, around the request to its
worker: that is the only clock that also sees a request waiting in the worker's queue under concurrency
(with 64 callers the call itself, timed inside the worker, was a quarter of it); it adds a JSON round
trip over a pipe (about 2 ms at one caller). The library call timed inside the worker is reported
beside it. Everything else is at 2.6.14's defaults, including its 10,000-row scan window (cpersona's
default window is the same size).

Ratios are CPersona 2.6.14 over cpersona for latency (above 1: cpersona is faster) and cpersona over
CPersona 2.6.14 for throughput (above 1: cpersona serves more).

Caches (gitignored): cpersona's stores under ``benchmarks/.cache/recall_speed/`` (shared with
:mod:`recall_speed`); CPersona's built databases under ``benchmarks/.cache/peers/cpersona-2.6.14/stores/``
and the corpus vectors under ``benchmarks/.cache/peers/corpus_vectors/``, keyed by the same corpus key.
``--quick`` uses no cache. Run from the repository root::

    .venv/bin/python benchmarks/speed_peers.py --quick     # 1k memories, under a few minutes
    .venv/bin/python benchmarks/speed_peers.py             # 10k and 100k: long (see recall_speed)
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import functools
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio
import anyio.to_thread
import numpy as np
from tqdm import tqdm

try:
    from benchmarks import recall_speed as rs
except ModuleNotFoundError:  # run as a script: benchmarks/ itself is on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benchmarks import recall_speed as rs

from benchmarks.peers._process import PeerError
from benchmarks.peers._venv import PEERS_CACHE
from benchmarks.peers.cpersona_ref import VERSION, CPersonaRef

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy.typing as npt

    from cpersona._protocols import Embedder

PEER: Final = f"cpersona-{VERSION}"
RESULTS: Final = rs.HERE / "results" / "speed_peers.md"
STORES: Final = PEERS_CACHE / PEER / "stores"
VECTORS: Final = PEERS_CACHE / "corpus_vectors"
_STORE_BATCH: Final = 100
_EMBED_BATCH: Final = 256


# ------------------------------------------------------------------------------------------ embeddings


class SwitchableSource:
    """What the loopback server answers from: the corpus vectors while building, the embedder afterwards.

    ``fresh`` is the measurement mode: every request runs the embedder, as cpersona's recall does with
    its query cache off.
    """

    def __init__(self, embedder: Embedder, corpus: Sequence[str], vectors: npt.NDArray[np.float32]) -> None:
        self._embedder = embedder
        self._row = {text: row for row, text in enumerate(corpus)}
        self._vectors = vectors
        self.fresh = False
        self.computed = 0

    async def __call__(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if not self.fresh:
            rows = [self._row.get(text) for text in texts]
            if all(row is not None for row in rows):
                return self._vectors[np.asarray(rows, dtype=np.int64)]
        self.computed += len(texts)
        return np.stack(await self._embedder.embed(texts)).astype(np.float32)


async def open_onnx_embedder() -> Embedder:
    """cpersona's ONNX MiniLM with its query cache off (the same model files as the engine's)."""
    from cpersona._embedding import open_embedder
    from cpersona._settings import Settings

    data_dir = rs.HERE / ".cache"
    settings = Settings.from_env({}, data_dir=data_dir, embedding_mode="onnx", embedding_cache_size=0)
    embedder = await open_embedder(settings)
    if embedder is None:
        raise RuntimeError("the ONNX embedder did not open")
    return embedder


async def corpus_vectors(
    embedder: Embedder, corpus: Sequence[str], *, cache: bool
) -> npt.NDArray[np.float32]:
    """The corpus's vectors in corpus order: from ``corpus_vectors/<key>.npy``, else computed (and saved)."""
    path = VECTORS / f"{rs.corpus_key(corpus)}.npy"
    if cache and await anyio.Path(path).is_file():
        loaded: npt.NDArray[np.float32] = await anyio.to_thread.run_sync(np.load, path)
        return loaded
    rows = []
    with tqdm(total=len(corpus), desc=f"embed corpus {len(corpus):,}", unit="text", file=sys.stderr) as bar:
        for start in range(0, len(corpus), _EMBED_BATCH):
            chunk = corpus[start : start + _EMBED_BATCH]
            rows.extend(await embedder.embed(chunk))
            bar.update(len(chunk))
    matrix = np.stack(rows).astype(np.float32)
    if cache:
        await anyio.to_thread.run_sync(_save_npy, path, matrix)
    return matrix


def _save_npy(path: Path, matrix: npt.NDArray[np.float32]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".tmp.npy")
    np.save(partial, matrix)
    os.replace(partial, path)


# ------------------------------------------------------------------------------------------ the peer


@dataclasses.dataclass
class PeerResult:
    size: int
    build: dict[str, Any]
    levels: list[rs.Level]
    """Latency as seen from this process: the request to the worker, its queue, the call, the reply."""
    inside_ms: dict[int, list[float]]
    """Callers -> the library call alone, timed inside the worker (``elapsed_ms``)."""
    rows: list[int]
    hello: dict[str, Any]


def _peer(source: SwitchableSource, work_dir: Path) -> CPersonaRef:
    return CPersonaRef(source, settings={"CPERSONA_EMBEDDING_CACHE_SIZE": "0"}, work_dir=work_dir)


async def ingest_peer(peer: CPersonaRef, corpus: Sequence[str]) -> dict[str, Any]:
    began = time.perf_counter()
    with tqdm(total=len(corpus), desc=f"{PEER} ingest {len(corpus):,}", unit="mem", file=sys.stderr) as bar:
        for start in range(0, len(corpus), _STORE_BATCH):
            chunk = corpus[start : start + _STORE_BATCH]
            reply = await peer.call("store", agent=rs.AGENT, records=[{"content": text} for text in chunk])
            skipped = [r for r in reply["results"] if r["result"] != "stored"]
            if skipped:
                raise PeerError(
                    f"{PEER} skipped {len(skipped)} memories (the corpus must be unique): {skipped[0]}"
                )
            bar.update(len(chunk))
    secs = time.perf_counter() - began
    return {"stored": len(corpus), "store_secs": secs, "records_per_sec": len(corpus) / secs if secs else 0.0}


async def build_peer_store(source: SwitchableSource, corpus: Sequence[str], home: Path) -> dict[str, Any]:
    """Build CPersona's database for ``corpus`` into ``home`` (renamed into place when complete)."""
    work = home.with_name(home.name + ".building")
    await anyio.to_thread.run_sync(functools.partial(shutil.rmtree, work, ignore_errors=True))
    peer = _peer(source, work)
    try:
        meta = {"size": len(corpus), "ingest": await ingest_peer(peer, corpus)}
        meta["stats"] = await peer.call("stats")
        meta["version"] = peer.hello.get("version")
    finally:
        await peer.aclose()
    meta["built_at"] = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    await anyio.to_thread.run_sync(_finish, work, home, meta)
    return meta


def _finish(work: Path, home: Path, meta: dict[str, Any]) -> None:
    (work / "meta.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")
    shutil.rmtree(home, ignore_errors=True)
    work.rename(home)


def _copy_db(home: Path, target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    for path in home.glob("cpersona.db*"):
        shutil.copy2(path, target / path.name)


async def run_peer_level(
    peer: CPersonaRef, questions: Sequence[str], callers: int, recalls: int
) -> tuple[rs.Level, list[float], list[int]]:
    """``recalls`` recalls shared among ``callers`` concurrent tasks, as :func:`recall_speed.run_level`."""
    level = rs.Level(callers, recalls, [], 0.0, {}, [], [])
    inside: list[float] = []
    rows: list[int] = []
    issued = 0

    async def caller() -> None:
        nonlocal issued
        while issued < recalls:
            question = questions[issued % len(questions)]
            issued += 1
            started = time.perf_counter()
            reply = await peer.call("recall", agent=rs.AGENT, query=question, limit=rs.LIMIT)
            level.latencies_ms.append((time.perf_counter() - started) * 1000)
            inside.append(float(reply["elapsed_ms"]))
            rows.append(len(reply["rows"]))

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(callers):
            tg.start_soon(caller)
    level.wall_secs = time.perf_counter() - started
    return level, inside, rows


async def measure_peer(
    embedder: Embedder,
    corpus: Sequence[str],
    questions: Sequence[str],
    plan: Sequence[tuple[int, int]],
    *,
    quick: bool,
    rebuild: bool,
) -> PeerResult:
    vectors = await corpus_vectors(embedder, corpus, cache=not quick)
    source = SwitchableSource(embedder, corpus, vectors)
    tmp = Path(await anyio.to_thread.run_sync(functools.partial(tempfile.mkdtemp, prefix="speed-peer-")))
    try:
        home = tmp / "built" if quick else STORES / rs.corpus_key(corpus)
        meta_path = anyio.Path(home / "meta.json")
        if quick or rebuild or not await meta_path.is_file():
            build = {**await build_peer_store(source, corpus, home), "from_cache": False}
        else:
            build = {**json.loads(await meta_path.read_text(encoding="utf-8")), "from_cache": True}
        work = tmp / "work"
        await anyio.to_thread.run_sync(_copy_db, home, work)
        source.fresh = True
        peer = _peer(source, work)
        try:
            stats = await peer.call("stats")
            if stats["memories"] != len(corpus):
                raise PeerError(f"{PEER}'s store holds {stats['memories']} memories, expected {len(corpus)}")
            for question in questions[: rs._WARMUP]:
                await peer.call("recall", agent=rs.AGENT, query=question, limit=rs.LIMIT)
            levels, inside, rows = [], {}, []
            for callers, recalls in plan:
                level, inside[callers], got = await run_peer_level(peer, questions, callers, recalls)
                levels.append(level)
                rows += got
                print(
                    f"  {PEER} {len(corpus):,} memories, {callers} caller(s): p50 {level.pct(0.5):.1f} ms "
                    f"(call alone {rs.percentile(inside[callers], 0.5):.1f}), "
                    f"{level.throughput:.1f} recalls/s, load {os.getloadavg()[0]:.1f}",
                    file=sys.stderr,
                )
            hello = peer.hello
        finally:
            await peer.aclose()
    finally:
        await anyio.to_thread.run_sync(functools.partial(shutil.rmtree, tmp, ignore_errors=True))
    return PeerResult(len(corpus), build, levels, inside, rows, hello)


# ------------------------------------------------------------------------------------------ report


def _cells(level: rs.Level) -> str:
    return f"{level.pct(0.5):.1f} / {level.pct(0.95):.1f} / {level.pct(0.99):.1f}"


def render(
    ours: Sequence[rs.SizeResult],
    theirs: Sequence[PeerResult],
    failures: dict[int, str],
    texts: rs.Texts,
    *,
    command: str,
    load_start: float,
    chart: str,
) -> str:
    lines = [
        f"# Recall speed: cpersona against CPersona {VERSION}, same corpus, same run",
        "",
        f"- command: `{command}`",
        f"- date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M UTC}",
        f"- git commit: {rs.git_commit()}",
        f"- machine: {platform.platform()}, {platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}",
        f"- 1-minute load average: {load_start:.2f} at start, {os.getloadavg()[0]:.2f} at the end (other "
        "work on the same cores skews every figure, and both systems alike only if the load stayed level)",
        f"- corpus: {texts.source}; one agent; questions: LoCoMo's, cycled; `limit={rs.LIMIT}`; "
        f"{rs._WARMUP} warm-up recalls per system",
        "- both systems embed every question with the same ONNX all-MiniLM-L6-v2: cpersona in process (query "
        f"cache off), CPersona {VERSION} over its `/embed` contract on loopback (its LRU off)",
        f"- CPersona {VERSION}: PyPI wheel in its own venv, library calls in a worker subprocess; "
        "`CPERSONA_FUSED_GATE_ENABLED=false`, `CPERSONA_AUTOCUT_ENABLED=false`, no task queue, no blocks; "
        "other settings at its defaults (rrf, scan window 10,000)",
        "",
        "## Latency (p50 / p95 / p99, ms) and throughput",
        "",
        f"![latency by corpus size and callers]({chart})",
        "",
        f"CPersona {VERSION}'s latency is timed in this process around each request to its worker, so it "
        "includes the wait in the worker's queue under concurrency and a JSON round trip over a pipe; "
        '"call alone" is its library call timed inside the worker (no queue, no pipe). Ratio = CPersona '
        "p50 / cpersona p50 (above 1: cpersona is faster); throughput ratio = cpersona / CPersona.",
        "",
        f"| memories | callers | recalls | cpersona | CPersona {VERSION} | call alone p50 | p50 ratio "
        f"| cpersona recalls/s | CPersona recalls/s | throughput ratio |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    peers = {r.size: r for r in theirs}
    for r in ours:
        peer = peers.get(r.size)
        for level in r.levels:
            other = next((lv for lv in peer.levels if lv.callers == level.callers), None) if peer else None
            if other is None or peer is None:
                lines.append(
                    f"| {r.size:,} | {level.callers} | {level.recalls} | {_cells(level)} | - | - | - "
                    f"| {level.throughput:.1f} | - | - |"
                )
                continue
            lines.append(
                f"| {r.size:,} | {level.callers} | {level.recalls} | {_cells(level)} | {_cells(other)} "
                f"| {rs.percentile(peer.inside_ms[level.callers], 0.5):.1f} "
                f"| **{other.pct(0.5) / level.pct(0.5):.2f}** | {level.throughput:.1f} "
                f"| {other.throughput:.1f} | **{level.throughput / other.throughput:.2f}** |"
            )
    if failures:
        lines += ["", f"## CPersona {VERSION} could not run", ""]
        lines += [f"- {size:,} memories: {error}" for size, error in failures.items()]
    lines += [
        "",
        "## Build",
        "",
        f"| memories | cpersona store throughput | CPersona {VERSION} store throughput | CPersona store |",
        "|---|---|---|---|",
    ]
    for r in ours:
        peer = peers.get(r.size)
        theirs_cell = f"{peer.build['ingest']['records_per_sec']:.0f} records/s" if peer else "-"
        cached = ("cache, " if peer.build.get("from_cache") else "") + peer.build["built_at"] if peer else "-"
        ours_cell = f"{r.build['ingest']['records_per_sec']:.0f} records/s"
        lines.append(f"| {r.size:,} | {ours_cell} | {theirs_cell} | {cached} |")
    lines += [
        "",
        f"cpersona's figure is `store_batch` with embedding; CPersona {VERSION}'s is one `store` per memory "
        "with its vector served from precomputed corpus vectors over loopback (no embedding cost), so the "
        "two are not like for like: the recall figures are the comparison.",
        "",
        "## Findings",
        "",
        *findings(ours, theirs),
    ]
    return "\n".join(lines) + "\n"


def findings(ours: Sequence[rs.SizeResult], theirs: Sequence[PeerResult]) -> list[str]:
    """Statements computed from the figures."""
    out = []
    peers = {r.size: r for r in theirs}
    for r in ours:
        peer = peers.get(r.size)
        if peer is None:
            continue
        one = next(lv for lv in r.levels if lv.callers == 1)
        other = next(lv for lv in peer.levels if lv.callers == 1)
        ratio = other.pct(0.5) / one.pct(0.5)
        verdict = "faster" if ratio > 1 else "slower"
        out.append(
            f"- {r.size:,} memories, one caller: cpersona p50 {one.pct(0.5):.1f} ms, CPersona {VERSION} "
            f"{other.pct(0.5):.1f} ms: cpersona is {max(ratio, 1 / ratio):.2f}x {verdict}."
        )
        out.append(
            f"- {r.size:,} memories: CPersona {VERSION} returned {statistics.mean(peer.rows):.1f} rows on "
            f"average (of {rs.LIMIT} asked) over {len(peer.rows)} measured recalls."
        )
    return out


def write_chart(ours: Sequence[rs.SizeResult], theirs: Sequence[PeerResult], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axis = plt.subplots(figsize=(6.5, 4))
    for r in ours:
        axis.plot(
            [lv.callers for lv in r.levels],
            [lv.pct(0.5) for lv in r.levels],
            marker="o",
            label=f"cpersona, {r.size:,}",
        )
    for p in theirs:
        axis.plot(
            [lv.callers for lv in p.levels],
            [lv.pct(0.5) for lv in p.levels],
            marker="x",
            linestyle="--",
            label=f"CPersona {VERSION}, {p.size:,}",
        )
    axis.set_xscale("log", base=2)
    axis.set_yscale("log")
    axis.set_xlabel("concurrent callers")
    axis.set_ylabel("recall p50 (ms)")
    axis.grid(True, alpha=0.3)
    axis.legend(fontsize=8)
    fig.suptitle(f"recall p50, limit {rs.LIMIT}, {os.cpu_count()} CPUs")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------------------------------ main


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    rs.add_size_arguments(parser, results=RESULTS, rebuild_help="rebuild cached stores of both systems")
    return parser


async def run_all(
    args: argparse.Namespace, texts: rs.Texts
) -> tuple[list[rs.SizeResult], list[PeerResult], dict[int, str]]:
    plan = list(zip(args.callers, args.recalls, strict=True))
    ours: list[rs.SizeResult] = []
    theirs: list[PeerResult] = []
    failures: dict[int, str] = {}
    embedder = await open_onnx_embedder()
    try:
        for n, size in enumerate(args.sizes):
            ours.append(await rs.run_size(texts, size, args.sizes[:n], plan, args.quick, args.rebuild))
            corpus = rs.build_corpus(texts, size)
            try:
                theirs.append(
                    await measure_peer(
                        embedder, corpus, texts.questions, plan, quick=args.quick, rebuild=args.rebuild
                    )
                )
            except PeerError as exc:
                # A peer that cannot run is reported with its error; cpersona's figures still stand.
                print(f"{PEER} at {size:,}: {exc}", file=sys.stderr)
                failures[size] = str(exc)
    finally:
        await embedder.aclose()
    return ours, theirs, failures


def main(argv: Sequence[str] | None = None) -> Path:
    args = build_parser().parse_args(argv)
    command = rs.settle_size_arguments(args, argv, __file__, results=RESULTS)
    load_start = os.getloadavg()[0]
    texts = rs.load_texts(args.data)
    ours, theirs, failures = anyio.run(run_all, args, texts)
    chart = args.out.with_suffix(".png")
    write_chart(ours, theirs, chart)
    report = render(ours, theirs, failures, texts, command=command, load_start=load_start, chart=chart.name)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report, encoding="utf-8")
    print(report)
    print(f"wrote {args.out} and {chart}")
    return args.out


if __name__ == "__main__":
    main()
