"""Recall speed of cpersona and of CPersona 2.6.14 on the same corpus, in the same run, as ratios.

For each corpus size (1k with ``--quick``; 1k, 10k and 100k by default) the benchmark measures, one after
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

After its concurrency levels, each system (same store, one caller) also prices two request options,
**a requested trace** and **a time cue**: the same questions are asked plain, traced and cued, one recall
at a time, the order of the three rotating from question to question so that drift in the machine's
load falls on all of them alike (:func:`interleave`). The figures are ratios within a system, traced (or
cued) p50 and p95 over plain p50 and p95. cpersona runs ``Engine.recall(..., trace=True)`` (engine opened
without background tasks; the queued trace is published after each traced recall, outside its timed
call, and that step is timed on its own) and ``time_cue=...``; CPersona 2.6.14 runs
``memory_handlers.do_recall(..., trace=True)`` (its trace stays in the worker) and ``time_cue=...``. Both
get the same cue, ``{"ago": {"unit": "weeks", "value": N}, "confidence": "likely"}`` ("about N weeks
ago"), where N is the age of cpersona's newest memory in whole weeks (:func:`time_cue_for`): the stores
hold no timestamps of their own (every memory is stamped when it was stored), so a cue both systems read
the same way has to be relative to the shared clock, and this one's period holds every memory of
stores built within a few days of each other. Each system's account of the cue (used or ignored, seats,
the period it searched) is reported beside its figures.

Caches (gitignored): cpersona's stores under ``benchmarks/.cache/recall_speed/`` (shared with
:mod:`recall_speed`); CPersona's built databases under ``benchmarks/.cache/peers/cpersona-2.6.14/stores/``
and the corpus vectors under ``benchmarks/.cache/peers/corpus_vectors/``, keyed by the same corpus key.
``--quick`` uses no cache. Run from the repository root::

    .venv/bin/python -m benchmarks speed_peers --quick     # 1k memories, under a few minutes
    .venv/bin/python -m benchmarks speed_peers             # 1k, 10k and 100k: long (see recall_speed)
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import datetime
import functools
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

import anyio
import anyio.to_thread
import numpy as np
from tqdm import tqdm

import cpersona
from benchmarks import harness
from benchmarks import recall_speed as rs
from benchmarks.corpus import Texts, build_corpus, load_texts
from benchmarks.harness import percentile
from benchmarks.peers._process import PeerError
from benchmarks.peers._venv import PEERS_CACHE
from benchmarks.peers.cpersona_ref import VERSION, CPersonaRef, iso_utc
from benchmarks.recall_levels import AGENT, LIMIT, WARMUP, Level
from benchmarks.store_cache import build_store, cached_store, corpus_key, settings_for, wait_indexed

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    import numpy.typing as npt

    from cpersona.stores.protocols import Embedder

PEER: Final = f"cpersona-{VERSION}"
MODEL: Final = "all-MiniLM-L6-v2"
"""The model both systems embed with: CPersona 2.6.14's (cpersona's default is another since)."""
RESULTS: Final = rs.HERE / "results" / "speed_peers.md"
STORES: Final = PEERS_CACHE / PEER / "stores"
VECTORS: Final = PEERS_CACHE / "corpus_vectors"
_STORE_BATCH: Final = 100
_EMBED_BATCH: Final = 256

Arm = Literal["plain", "traced", "cued"]
COST_ARMS: Final[tuple[Arm, ...]] = ("plain", "traced", "cued")
"""How each question of the cost runs is asked: as is, with a trace requested, with a time cue."""
_COST_WARMUP: Final = 5
"""Questions asked all three ways before the cost runs are measured."""
_WEEK_SECS: Final = 7 * 86_400.0


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
    from cpersona.settings import Settings
    from cpersona.stores.embedding.embedders import open_embedder

    data_dir = rs.HERE / ".cache"
    settings = Settings.from_env(
        {}, data_dir=data_dir, embedding_mode="onnx", embedding_model=MODEL, embedding_cache_size=0
    )
    embedder = await open_embedder(settings)
    if embedder is None:
        raise RuntimeError("the ONNX embedder did not open")
    return embedder


async def corpus_vectors(
    embedder: Embedder, corpus: Sequence[str], *, cache: bool
) -> npt.NDArray[np.float32]:
    """The corpus's vectors in corpus order: from ``corpus_vectors/<key>.npy``, else computed (and saved)."""
    path = VECTORS / f"{corpus_key(corpus, MODEL)}.npy"
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


# ------------------------------------------------------------------------------------------ trace and cue


@dataclasses.dataclass(frozen=True, slots=True)
class Sample:
    """One recall of the cost runs."""

    ms: float
    """As timed in this process (for CPersona 2.6.14: around the request to its worker)."""
    inside_ms: float | None = None
    """CPersona 2.6.14's library call alone, timed inside its worker."""
    time_cue: Mapping[str, Any] | None = None
    """The system's account of the cue it was given."""
    publish_ms: float | None = None
    """cpersona: publishing the queued trace, after the timed call."""


@dataclasses.dataclass
class Costs:
    """One system's cost runs at one corpus size: plain, traced and cued recalls of the same questions."""

    system: str
    cue: dict[str, Any]
    samples: dict[str, list[Sample]] = dataclasses.field(default_factory=dict)
    span: str = ""
    """What the system's store spans in time, for the report."""
    not_offered: dict[str, str] = dataclasses.field(default_factory=dict)
    """Arm -> why the system cannot be asked that way (the arm is then not run)."""
    error: str | None = None

    @property
    def questions(self) -> int:
        return len(self.samples.get("plain", []))

    def ms(self, arm: str, *, inside: bool = False) -> list[float]:
        found = self.samples.get(arm, [])
        if inside:
            return [s.inside_ms for s in found if s.inside_ms is not None]
        return [s.ms for s in found]

    def ratio(self, arm: str, fraction: float, *, inside: bool = False) -> float | None:
        """``arm``'s percentile over plain's (above 1: asking that way costs time); ``None`` if not run."""
        mine, plain = self.ms(arm, inside=inside), self.ms("plain", inside=inside)
        if not mine or not plain:
            return None
        return percentile(mine, fraction) / percentile(plain, fraction)


def time_cue_for(newest: float, now: float) -> dict[str, Any]:
    """The cue "about N weeks ago", N the age of ``newest`` (a POSIX time) in whole weeks, at ``likely``.

    Both systems read ``ago`` the same way (reference ``cpersona-recall.md`` §3.9): a period one week
    wide centred N weeks before now, widened by half its width on each side at ``likely``. So memories
    stored within about three and a half days of ``newest`` lie inside it, and since its own period
    starts at least three and a half days before now, neither system's recent-only rule drops it.
    """
    weeks = max(0, round((now - newest) / _WEEK_SECS))
    return {"ago": {"unit": "weeks", "value": weeks}, "confidence": "likely"}


async def interleave(
    ask: Callable[[Arm, str], Awaitable[Sample]],
    questions: Sequence[str],
    count: int,
    arms: Sequence[Arm] = COST_ARMS,
    *,
    warmup: int = _COST_WARMUP,
) -> dict[str, list[Sample]]:
    """Ask each of ``count`` questions every way of ``arms``, one recall at a time.

    The first way rotates from one question to the next (plain, traced, cued; then traced, cued, plain;
    ...), so each comes first, second and last equally often and whatever one recall warms for the next
    is shared out. The warm-up questions come from the second half of the list, away from the measured
    ones.
    """
    for question in questions[len(questions) // 2 :][:warmup]:
        for arm in arms:
            await ask(arm, question)
    samples: dict[str, list[Sample]] = {arm: [] for arm in arms}
    for index in range(count):
        question = questions[index % len(questions)]
        turn = index % len(arms)
        for arm in (*arms[turn:], *arms[:turn]):
            samples[arm].append(await ask(arm, question))
    return samples


async def measure_our_costs(data_dir: Path, size: int, questions: Sequence[str], count: int) -> Costs:
    """cpersona's cost runs on the store at ``data_dir`` (the cue is derived here, from its newest memory)."""
    # Without background tasks a queued trace is published only where ask() drains it, so publishing
    # never lands inside another recall's timed window (as in trace_cost.py).
    async with cpersona.open(settings_for(data_dir, MODEL), background=False) as memory:
        await wait_indexed(memory, size)
        [newest] = await memory.list(agent_id=AGENT, limit=1)
        if not isinstance(newest, cpersona.MemoryRecord):
            raise TypeError(f"listing memories gave a {type(newest).__name__}")
        cue = time_cue_for(newest.timestamp, time.time())

        async def ask(arm: Arm, question: str) -> Sample:
            fields: dict[str, Any] = {"trace": True} if arm == "traced" else {}
            if arm == "cued":
                fields["time_cue"] = cue
            started = time.perf_counter()
            result = await memory.recall(question, agent_id=AGENT, limit=LIMIT, **fields)
            ms = (time.perf_counter() - started) * 1000
            if arm != "traced":
                return Sample(ms, time_cue=result.time_cue)
            if result.trace is None:
                raise RuntimeError(f"a traced recall of {question!r} came back without its trace")
            began = time.perf_counter()
            taken = await memory.drain_traces()
            if taken != 1:
                raise RuntimeError(f"expected one queued trace after a traced recall, found {taken}")
            return Sample(ms, publish_ms=(time.perf_counter() - began) * 1000)

        samples = await interleave(ask, questions, count)
    span = f"newest memory stored {_utc(iso_utc(newest.timestamp))}"
    return Costs("cpersona", cue, samples, span=span)


def _utc(iso: object) -> str:
    """An ISO 8601 time as ``YYYY-MM-DD HH:MM:SS`` in UTC (as it was, if it does not read as one)."""
    try:
        moment = datetime.datetime.fromisoformat(str(iso))
    except ValueError:
        return str(iso)
    if moment.tzinfo is not None:
        moment = moment.astimezone(datetime.UTC)
    return f"{moment:%Y-%m-%d %H:%M:%S}"


async def measure_peer_costs(
    peer: CPersonaRef, questions: Sequence[str], count: int, cue: dict[str, Any]
) -> Costs:
    """CPersona 2.6.14's cost runs in its open worker, with the cue cpersona was given."""
    costs = Costs(PEER, cue)
    span = await peer.call("span", agent=AGENT)
    costs.span = f"memories stored {_utc(span['oldest'])} to {_utc(span['newest'])}"
    if peer.takes_trace is not True:
        costs.not_offered["traced"] = (
            f"not offered by {VERSION}: `memory_handlers.do_recall` has no `trace` parameter "
            f"(worker hello: {peer.hello.get('trace')!r})"
        )
    if peer.takes_time_cue is not True:
        costs.not_offered["cued"] = (
            f"not offered by {VERSION}: `memory_handlers.do_recall` has no `time_cue` parameter "
            f"(worker hello: {peer.hello.get('time_cue')!r})"
        )

    async def ask(arm: Arm, question: str) -> Sample:
        fields: dict[str, Any] = {"trace": True} if arm == "traced" else {}
        if arm == "cued":
            fields["time_cue"] = cue
        started = time.perf_counter()
        reply = await peer.call("recall", agent=AGENT, query=question, limit=LIMIT, **fields)
        ms = (time.perf_counter() - started) * 1000
        return Sample(ms, inside_ms=float(reply["elapsed_ms"]), time_cue=reply.get("time_cue"))

    arms = [arm for arm in COST_ARMS if arm not in costs.not_offered]
    costs.samples = await interleave(ask, questions, count, arms)
    return costs


async def run_ours(
    texts: Texts,
    size: int,
    smaller: Sequence[int],
    plan: Sequence[tuple[int, int]],
    count: int,
    *,
    quick: bool,
    rebuild: bool,
) -> tuple[rs.SizeResult, Costs]:
    """:func:`recall_speed.run_size`'s measurement, then the cost runs on the same copy of the store.

    The steps are ``run_size``'s own (its store cache, its stale-layout rebuild), spelled out here because
    ``run_size`` removes its copy of the store when it returns, and a quick run's store is built for the
    run and cached nowhere.
    """
    corpus = build_corpus(texts, size)
    questions = texts.questions
    tmp = Path(await anyio.to_thread.run_sync(functools.partial(tempfile.mkdtemp, prefix="speed-ours-")))
    try:
        data_dir = tmp / "data"
        if quick:
            build = await build_store(data_dir, corpus, 0, questions, 30, MODEL)
            build["from_cache"] = False
        else:
            home, build = await cached_store(corpus, smaller, questions, rebuild, MODEL)
            await anyio.to_thread.run_sync(shutil.copytree, home / "data", data_dir)
        measured = await rs.measure(
            data_dir, size, questions, plan, [] if quick else build["collections"], MODEL
        )
        if measured is None:
            print(
                f"cached {size:,} store has other collections than the engine opens; rebuilding",
                file=sys.stderr,
            )
            await anyio.to_thread.run_sync(shutil.rmtree, data_dir)
            home, build = await cached_store(corpus, smaller, questions, True, MODEL)
            await anyio.to_thread.run_sync(shutil.copytree, home / "data", data_dir)
            measured = await rs.measure(data_dir, size, questions, plan, build["collections"], MODEL)
            assert measured is not None
        costs = await measure_our_costs(data_dir, size, questions, count)
    finally:
        await anyio.to_thread.run_sync(functools.partial(shutil.rmtree, tmp, ignore_errors=True))
    levels, embed, reopen_secs = measured
    _print_costs(costs, size)
    return rs.SizeResult(size, build, levels, embed, reopen_secs), costs


def _print_costs(costs: Costs, size: int) -> None:
    shown = ", ".join(
        f"{arm} / plain p50 {ratio:.2f}"
        for arm in ("traced", "cued")
        if (ratio := costs.ratio(arm, 0.5)) is not None
    )
    print(f"  {costs.system} {size:,} memories, cost runs: {shown or costs.error}", file=sys.stderr)


def cost_questions(plan: Sequence[tuple[int, int]]) -> int:
    """How many questions the cost runs ask: as many recalls as the one-caller level makes."""
    return next((recalls for callers, recalls in plan if callers == 1), plan[0][1])


# ------------------------------------------------------------------------------------------ the peer


@dataclasses.dataclass
class PeerResult:
    size: int
    build: dict[str, Any]
    levels: list[Level]
    """Latency as seen from this process: the request to the worker, its queue, the call, the reply."""
    inside_ms: dict[int, list[float]]
    """Callers -> the library call alone, timed inside the worker (``elapsed_ms``)."""
    rows: list[int]
    hello: dict[str, Any]
    costs: Costs


def _peer(source: SwitchableSource, work_dir: Path) -> CPersonaRef:
    return CPersonaRef(source, settings={"CPERSONA_EMBEDDING_CACHE_SIZE": "0"}, work_dir=work_dir)


async def ingest_peer(peer: CPersonaRef, corpus: Sequence[str]) -> dict[str, Any]:
    began = time.perf_counter()
    with tqdm(total=len(corpus), desc=f"{PEER} ingest {len(corpus):,}", unit="mem", file=sys.stderr) as bar:
        for start in range(0, len(corpus), _STORE_BATCH):
            chunk = corpus[start : start + _STORE_BATCH]
            reply = await peer.call("store", agent=AGENT, records=[{"content": text} for text in chunk])
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
) -> tuple[Level, list[float], list[int]]:
    """``recalls`` recalls shared among ``callers`` concurrent tasks, as :func:`recall_speed.run_level`."""
    level = Level(callers, recalls, [], 0.0, {}, [], [])
    inside: list[float] = []
    rows: list[int] = []
    issued = 0

    async def caller() -> None:
        nonlocal issued
        while issued < recalls:
            question = questions[issued % len(questions)]
            issued += 1
            started = time.perf_counter()
            reply = await peer.call("recall", agent=AGENT, query=question, limit=LIMIT)
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
    cue: dict[str, Any],
    quick: bool,
    rebuild: bool,
) -> PeerResult:
    vectors = await corpus_vectors(embedder, corpus, cache=not quick)
    source = SwitchableSource(embedder, corpus, vectors)
    tmp = Path(await anyio.to_thread.run_sync(functools.partial(tempfile.mkdtemp, prefix="speed-peer-")))
    try:
        home = tmp / "built" if quick else STORES / corpus_key(corpus, MODEL)
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
            for question in questions[:WARMUP]:
                await peer.call("recall", agent=AGENT, query=question, limit=LIMIT)
            levels, inside, rows = [], {}, []
            for callers, recalls in plan:
                level, inside[callers], got = await run_peer_level(peer, questions, callers, recalls)
                levels.append(level)
                rows += got
                print(
                    f"  {PEER} {len(corpus):,} memories, {callers} caller(s): p50 {level.pct(0.5):.1f} ms "
                    f"(call alone {percentile(inside[callers], 0.5):.1f}), "
                    f"{level.throughput:.1f} recalls/s, load {harness.load():.1f}",
                    file=sys.stderr,
                )
            hello = peer.hello
            try:
                costs = await measure_peer_costs(peer, questions, cost_questions(plan), cue)
            except PeerError as exc:
                # The cost runs failing leaves the figures above standing; the report lists the error.
                costs = Costs(PEER, cue, error=str(exc))
            _print_costs(costs, len(corpus))
        finally:
            await peer.aclose()
    finally:
        await anyio.to_thread.run_sync(functools.partial(shutil.rmtree, tmp, ignore_errors=True))
    return PeerResult(len(corpus), build, levels, inside, rows, hello, costs)


# ------------------------------------------------------------------------------------------ report


def _cells(level: Level) -> str:
    return f"{level.pct(0.5):.1f} / {level.pct(0.95):.1f} / {level.pct(0.99):.1f}"


def render(
    ours: Sequence[rs.SizeResult],
    theirs: Sequence[PeerResult],
    failures: dict[int, str],
    texts: Texts,
    *,
    command: str,
    load_start: float,
    chart: str,
    costs: Mapping[int, Costs],
) -> str:
    lines = [
        f"# Recall speed: cpersona against CPersona {VERSION}, same corpus, same run",
        "",
        *harness.header(command, load_start=load_start),
        "- load skews both systems alike only if it stayed level",
        f"- corpus: {texts.source}; one agent; questions: LoCoMo's, cycled; `limit={LIMIT}`; "
        f"{WARMUP} warm-up recalls per system",
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
                f"| {percentile(peer.inside_ms[level.callers], 0.5):.1f} "
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
        ingest = r.build["ingest"]
        # A store grown from a smaller cached one and resumed after its last batch stored nothing in the
        # build on record: a rate of 0 would read as a measurement.
        ours_cell = (
            f"{ingest['records_per_sec']:.0f} records/s"
            if ingest.get("stored")
            else "not measured (store resumed complete from its cache; see store_speed.md)"
        )
        lines.append(f"| {r.size:,} | {ours_cell} | {theirs_cell} | {cached} |")
    lines += [
        "",
        f"cpersona's figure is `store_batch` with embedding; CPersona {VERSION}'s is one `store` per memory "
        "with its vector served from precomputed corpus vectors over loopback (no embedding cost), so the "
        "two are not like for like: the recall figures are the comparison.",
        "",
        *cost_sections(ours, theirs, costs),
        "## Findings",
        "",
        *findings(ours, theirs),
        *cost_findings(theirs, costs),
    ]
    return "\n".join(lines) + "\n"


def _pair(samples: Sequence[float]) -> str:
    return f"{percentile(samples, 0.5):.1f} / {percentile(samples, 0.95):.1f}" if samples else "-"


def _times(value: float | None) -> str:
    return "-" if value is None else f"**{value:.2f}**"


def _cost_rows(size: int, costs: Costs, arm: Arm, extra: Callable[[Costs], list[str]]) -> list[str]:
    """The rows of one system in one cost table (CPersona 2.6.14: seen from here, then the call alone)."""
    label = "cpersona" if costs.system == "cpersona" else f"CPersona {VERSION}"
    blanks = len(extra(costs))
    if costs.error is not None:
        return [f"| {size:,} | {label} | cost runs failed: {costs.error} | - | - | - | - |" + " - |" * blanks]
    if arm in costs.not_offered:
        return [f"| {size:,} | {label} | {costs.not_offered[arm]} | - | - | - | - |" + " - |" * blanks]
    views = [(label, False)]
    if costs.system != "cpersona":
        views = [(f"{label}, seen from here", False), (f"{label}, call alone", True)]
    rows = []
    for name, inside in views:
        rows.append(
            f"| {size:,} | {name} | {costs.questions} | {_pair(costs.ms('plain', inside=inside))} "
            f"| {_pair(costs.ms(arm, inside=inside))} | {_times(costs.ratio(arm, 0.5, inside=inside))} "
            f"| {_times(costs.ratio(arm, 0.95, inside=inside))} |"
            + "".join(f" {cell} |" for cell in extra(costs))
        )
    return rows


def _trace_cells(costs: Costs) -> list[str]:
    published = [s.publish_ms for s in costs.samples.get("traced", []) if s.publish_ms is not None]
    if costs.system == "cpersona":
        return [f"publish p50 {percentile(published, 0.5):.1f} ms" if published else "-"]
    return ["trace kept in the worker"]


def _cue_cells(costs: Costs) -> list[str]:
    """Cue used (of the cued recalls), mean seats, the period searched, anything else the system said."""
    said = [dict(s.time_cue) if s.time_cue else {} for s in costs.samples.get("cued", [])]
    if not said:
        return ["-", "-", "-", "-"]
    used = [r for r in said if r and "ignored" not in r]
    seats = statistics.mean(float(r.get("seated", 0) or 0) for r in said)
    period = next((r.get("period") for r in used if r.get("period")), None)
    shown = " to ".join(_utc(p)[:16] for p in period) if isinstance(period, list) else "-"
    notes = collections.Counter(
        f"{key}: {json.dumps(r[key], sort_keys=True)[:80]}"
        for r in said
        for key in ("ignored", "remainder")
        if key in r
    )
    noted = "; ".join(f"{text} ({n}/{len(said)})" for text, n in notes.items()) or "-"
    return [f"{len(used)}/{len(said)}", f"{seats:.1f}", shown, noted]


def cost_sections(
    ours: Sequence[rs.SizeResult], theirs: Sequence[PeerResult], costs: Mapping[int, Costs]
) -> list[str]:
    """The trace and cue tables: each system's traced and cued recalls against its own plain ones."""
    if not costs:
        return []
    peers = {r.size: r.costs for r in theirs}
    per_size = [(r.size, [c for c in (costs.get(r.size), peers.get(r.size)) if c is not None]) for r in ours]
    lines = [
        "## What a requested trace and a time cue cost (one caller)",
        "",
        "At each size, after its concurrency levels and on the same store, each system answers the same "
        f"questions three ways, one recall at a time and `limit={LIMIT}`: plain, with a trace requested, "
        "and with a time cue. The first of the three rotates from question to question, so drift in the "
        f"machine's load falls on all three alike; {_COST_WARMUP} other questions are asked all three ways "
        "first. Ratio = the traced (cued) p50 or p95 over the plain p50 or p95 of the same system (above "
        "1: the option costs time). cpersona: `Engine.recall(..., trace=True)` and `time_cue=...` in "
        "process, the engine opened without background tasks, the queued trace published "
        "(`drain_traces`) after each traced recall outside its timed call (that step's p50 is in the "
        f"note). CPersona {VERSION}: `memory_handlers.do_recall(..., trace=True)` (a trace of refs, ranks, "
        "scores and reasons per stage plus a coverage ledger, built in its worker and not shipped over "
        "the pipe) and `time_cue=...`, seen from here (request, queue, pipe) and the call alone.",
        "",
        "### Trace",
        "",
        *_cost_table(per_size, "traced", _trace_cells, ["note"]),
        "",
        "### Time cue",
        "",
        'The same cue for both systems at each size, `ago` in weeks ("about N weeks ago"), N the age of '
        "cpersona's newest memory in whole weeks, at `likely`: both read it as a week-wide period centred N "
        "weeks back and widened by half its width on each side, which holds every memory of stores built "
        "within a few days of each other (these stores carry the times they were built at). *Cue used* "
        "counts the cued recalls whose answer reports the cue applied (not ignored); *seats* is the mean "
        "of `time_cue.seated`; the period is the one the system reports it searched.",
        "",
    ]
    for size, found in per_size:
        spans = "; ".join(f"{c.system}: {c.span}" for c in found if c.span)
        cue = json.dumps(found[0].cue, sort_keys=True) if found else "-"
        lines.append(f"- {size:,} memories: cue `{cue}`; {spans} (UTC)")
    extra = ["cue used", "seats", "period searched (UTC)", "also reported"]
    return [*lines, "", *_cost_table(per_size, "cued", _cue_cells, extra), ""]


def _cost_table(
    per_size: Sequence[tuple[int, Sequence[Costs]]],
    arm: Arm,
    cells: Callable[[Costs], list[str]],
    extra: Sequence[str],
) -> list[str]:
    """One cost table: ``arm``'s recalls against plain ones, by size and system, then ``extra`` columns."""
    columns = [
        "memories",
        "system",
        "questions",
        "plain p50 / p95 (ms)",
        f"{arm} p50 / p95 (ms)",
        f"{arm} / plain p50",
        f"{arm} / plain p95",
        *extra,
    ]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for size, found in per_size:
        for c in found:
            lines += _cost_rows(size, c, arm, cells)
    return lines


def cost_findings(theirs: Sequence[PeerResult], costs: Mapping[int, Costs]) -> list[str]:
    """One statement per size on what a trace and a cue cost each system (p50, seen from here)."""
    peers = {r.size: r.costs for r in theirs}
    out = []
    for size, mine in costs.items():
        other = peers.get(size)
        parts = []
        for arm, what in (("traced", "a requested trace"), ("cued", "a time cue")):
            ours_ratio = mine.ratio(arm, 0.5)
            if ours_ratio is None:
                continue
            if other is None or other.error is not None:
                theirs_text = f"CPersona {VERSION} not measured"
            elif arm in other.not_offered:
                theirs_text = f"CPersona {VERSION}: {other.not_offered[arm]}"
            else:
                theirs_text = (
                    f"CPersona {VERSION} {other.ratio(arm, 0.5) or math.nan:.2f}x "
                    f"(call alone {other.ratio(arm, 0.5, inside=True) or math.nan:.2f}x)"
                )
            parts.append(f"{what} costs cpersona {ours_ratio:.2f}x its plain p50, {theirs_text}")
        if parts:
            out.append(f"- {size:,} memories, one caller: " + "; ".join(parts) + ".")
    return out


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
            f"average (of {LIMIT} asked) over {len(peer.rows)} measured recalls."
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
    fig.suptitle(f"recall p50, limit {LIMIT}, {os.cpu_count()} CPUs")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------------------------------ main


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    rs.add_size_arguments(
        parser,
        results=RESULTS,
        rebuild_help="rebuild cached stores of both systems",
        default_sizes=(1_000, 10_000, 100_000),
    )
    return parser


async def run_all(
    args: argparse.Namespace, texts: Texts
) -> tuple[list[rs.SizeResult], list[PeerResult], dict[int, str], dict[int, Costs]]:
    plan = list(zip(args.callers, args.recalls, strict=True))
    ours: list[rs.SizeResult] = []
    our_costs: dict[int, Costs] = {}
    theirs: list[PeerResult] = []
    failures: dict[int, str] = {}
    embedder = await open_onnx_embedder()
    try:
        for n, size in enumerate(args.sizes):
            result, costs = await run_ours(
                texts,
                size,
                args.sizes[:n],
                plan,
                cost_questions(plan),
                quick=args.quick,
                rebuild=args.rebuild,
            )
            ours.append(result)
            our_costs[size] = costs
            corpus = build_corpus(texts, size)
            try:
                theirs.append(
                    await measure_peer(
                        embedder,
                        corpus,
                        texts.questions,
                        plan,
                        cue=costs.cue,
                        quick=args.quick,
                        rebuild=args.rebuild,
                    )
                )
            except PeerError as exc:
                # A peer that cannot run is reported with its error; cpersona's figures still stand.
                print(f"{PEER} at {size:,}: {exc}", file=sys.stderr)
                failures[size] = str(exc)
    finally:
        await embedder.aclose()
    return ours, theirs, failures, our_costs


def main(argv: Sequence[str] | None = None) -> Path:
    args = build_parser().parse_args(argv)
    command = rs.settle_size_arguments(args, argv, "speed_peers", results=RESULTS)
    load_start = harness.load()
    texts = load_texts(args.data)
    ours, theirs, failures, costs = anyio.run(run_all, args, texts)
    out: Path = args.out
    chart = out.with_suffix(".png")
    write_chart(ours, theirs, chart)
    report = render(
        ours, theirs, failures, texts, command=command, load_start=load_start, chart=chart.name, costs=costs
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report, encoding="utf-8")
    print(report)
    print(f"wrote {out} and {chart}")
    return out


if __name__ == "__main__":
    main()
