"""Latency of the recall operations (p50/p95, one caller) at 10k and 100k memories.

The engine runs as a library in this process (embedded Redis and Qdrant) on a generated store of one
agent, built once and cached: memories spread over a year of timestamps, a third of them with an
emotion, each linked to up to three earlier ones by typed, weighted associations, and one in ten with a
declared context edge (``meta.context_edges``), and a raw journal of as many entries, in sessions of 50.
Each operation is a named case in :data:`CASES` — a function that makes one call from a seeded random
generator and the store's ids — timed ``--calls`` times after a short warm-up, one call at a time:
timeline, graph, recall.query by a text, an emotion and a temporal cue (and all three), associate, and
the raw query. The cue queries there pass ``reconsolidate: false``; its cost is measured apart, paired
(:func:`paired_reconsolidation`): cues are queried with false, false again and true, in a shuffled
order, one cue at a time (the call's own latency) and in blocks of ten (the whole cost to a caller
querying back to back, the background write included), and the per-cue differences against the first
false are compared with the false-against-false noise. The engine runs its background task group, so
the strengthening is written as a server writes it, beside the calls that follow.

Stores are cached under ``benchmarks/.cache/operations_speed/`` (gitignored), keyed by size, embedding
mode and :data:`_CACHE_VERSION` (bump it when the generated corpus or the stored layout changes). The
default embedding mode is ``none``: timeline, graph, associate and the raw query read no vector, and a
store of 100k memories without embeddings builds in minutes rather than hours; a text cue is then
searched by BM25 alone (no vector arm), so its figures leave out embedding the cue (see
``embedding_speed.md``) and the vector search; ``--embedding onnx`` measures them.
Run it from the repository root::

    .venv/bin/python -m benchmarks operations_speed --sizes 10000          # 10k only
    .venv/bin/python -m benchmarks operations_speed                        # 10k and 100k
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import random
import shutil
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio

import cpersona
from benchmarks import harness
from benchmarks.corpus import sentences
from benchmarks.harness import percentile
from cpersona import Settings

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "operations_speed.md"
CACHE = HERE / ".cache" / "operations_speed"
AGENT = "ops-bench"
_CACHE_VERSION = 2  # 2: the raw journal holds as many entries as there are memories
_BATCH = 256
_SEED = 15
_YEAR = 365 * 86_400.0
_START = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC).timestamp()
_TYPES = ("semantic", "temporal", "causal", "emotional", "sequential")
_LABELS = ("joy", "trust", "fear", "surprise", "sadness", "anger", "anticipation", "disgust")
_WARMUP = 5
_RAW_SESSION = 50  # raw entries per session
# Text cues: sentences of the corpus's own generator, so their words are the stored memories' words.
_CUES = sentences(500, _SEED + 2)
_WORDS = sorted({w.strip(".,").lower() for s in _CUES for w in s.split() if len(w) > 4})


# ------------------------------------------------------------------------------------------ the store


def _memory(i: int, text: str, refs: Sequence[str], rng: random.Random) -> dict[str, Any]:
    body: dict[str, Any] = {
        "content": f"{text} (note {i})",
        "agent_id": AGENT,
        "timestamp": _START + rng.random() * _YEAR,
    }
    if rng.random() < 1 / 3:
        body["emotion"] = rng.choice(_LABELS)
    if refs:
        links = rng.sample(refs[-2_000:], min(len(refs), rng.randint(0, 3)))
        body["associations"] = [
            {"target_id": ref, "type": rng.choice(_TYPES), "weight": round(rng.uniform(0.1, 1.0), 2)}
            for ref in links
        ] or None
        if rng.random() < 0.1:
            edge = {"target_id": rng.choice(refs), "relation": "derived_from", "confidence": 0.9}
            body["meta"] = {"rationale": "generated", "context_edges": [edge]}
    return {k: v for k, v in body.items() if v is not None}


def settings_for(data_dir: Path, embedding: str) -> Settings:
    # from_env({}) ignores the shell's CPERSONA_* variables: the figures are for the defaults.
    return Settings.from_env({}, data_dir=data_dir, embedding_mode=embedding, redis_startup_timeout_secs=300)


async def build_store(data_dir: Path, size: int, embedding: str) -> dict[str, Any]:
    """Store ``size`` generated memories (batches of 256) and return what the cache keeps of them."""
    rng = random.Random(_SEED)
    texts = sentences(size, _SEED)
    refs: list[str] = []
    started = time.perf_counter()
    async with cpersona.open(settings_for(data_dir, embedding), background=False) as memory:
        for at in range(0, size, _BATCH):
            batch = [_memory(i, texts[i], refs, rng) for i in range(at, min(size, at + _BATCH))]
            result = await memory.store_batch(batch)
            refs.extend(r.ref for r in result.results)
            if at // _BATCH % 40 == 0:
                print(f"  stored {len(refs)} of {size}", file=sys.stderr, flush=True)
        await build_raw(memory, size)
        if embedding != "none":
            await memory.optimize()
    return {"size": size, "embedding": embedding, "refs": refs, "build_secs": time.perf_counter() - started}


def _raw(i: int, text: str) -> dict[str, Any]:
    return {
        "content": text,
        "agent_id": AGENT,
        "session_id": f"session-{i // _RAW_SESSION}",
        "turn_id": str(i % _RAW_SESSION),
        "source": "conversation",
        "speaker": "user" if i % 2 == 0 else "assistant",
        "visibility": "normal",
        "secrecy_level": "public",
    }


async def build_raw(memory: cpersona.Engine, size: int) -> None:
    """As many raw journal entries as memories, in sessions of 50 turns (the raw query's corpus)."""
    texts = sentences(size, _SEED + 1)
    for at in range(0, size, _BATCH):
        await memory.store_raw_batch([_raw(i, texts[i]) for i in range(at, min(size, at + _BATCH))])
        if at // _BATCH % 40 == 0:
            print(f"  journalled {at + _BATCH} of {size}", file=sys.stderr, flush=True)


async def cached_store(size: int, embedding: str, rebuild: bool) -> tuple[Path, dict[str, Any]]:
    """The directory of a built store of ``size`` memories (building it when not cached)."""
    home = CACHE / f"v{_CACHE_VERSION}-{embedding}-{size}"
    meta_path = home / "meta.json"
    if not rebuild and meta_path.is_file():
        return home, {**json.loads(meta_path.read_text()), "from_cache": True}
    work = home.with_name(home.name + ".building")
    shutil.rmtree(work, ignore_errors=True)
    (work / "data").mkdir(parents=True)
    meta = await build_store(work / "data", size, embedding)
    # meta.json last and the directory renamed into place: a build that dies never passes for a cache.
    (work / "meta.json").write_text(json.dumps(meta))
    shutil.rmtree(home, ignore_errors=True)
    work.rename(home)
    return home, {**meta, "from_cache": False}


# ------------------------------------------------------------------------------------------ the cases

Call = Callable[[cpersona.Engine, random.Random, Sequence[str]], Awaitable[int]]


@dataclasses.dataclass(frozen=True, slots=True)
class Case:
    """One operation as measured: what it is, and one call of it (returning how many items came back)."""

    name: str
    what: str
    call: Call


async def _timeline(
    memory: cpersona.Engine, rng: random.Random, days: int, granularity: str, **filters: Any
) -> int:
    start = _START + rng.random() * (_YEAR - days * 86_400.0)
    result = await memory.timeline(
        AGENT,
        range={"start": start, "end": start + days * 86_400.0},
        granularity=granularity,  # type: ignore[arg-type]
        **filters,
    )
    return result.count


async def _graph(memory: cpersona.Engine, center: str | None, depth: int, limit: int) -> int:
    result = await memory.graph(AGENT, center_id=center, depth=depth, limit_nodes=limit, include_meta=True)
    return result.total_nodes


def _window(rng: random.Random, days: int) -> dict[str, float]:
    start = _START + rng.random() * (_YEAR - days * 86_400.0)
    return {"start": start, "end": start + days * 86_400.0}


async def _query(memory: cpersona.Engine, cue: dict[str, Any], **options: Any) -> int:
    # Read-only here: the cost of reconsolidate is measured apart, paired (see paired_reconsolidation).
    result = await memory.query(cue, agent_id=AGENT, reconsolidate=False, **options)
    return len(result.memories)


async def _associate(memory: cpersona.Engine, record_id: str, depth: int, min_weight: float) -> int:
    result = await memory.associate(record_id, agent_id=AGENT, depth=depth, min_weight=min_weight, limit=50)
    return len(result.memories)


async def _raw_query(memory: cpersona.Engine, query: str | None, **filters: Any) -> int:
    result = await memory.raw_query(query, agent_id=AGENT, **filters)
    return len(result.records)


def _session(rng: random.Random, ids: Sequence[str]) -> str:
    return f"session-{rng.randrange(max(1, len(ids) // _RAW_SESSION))}"


CASES: tuple[Case, ...] = (
    Case("recall.timeline", "1 day, by the hour", lambda m, r, _: _timeline(m, r, 1, "hour")),
    Case("recall.timeline", "30 days, by the day", lambda m, r, _: _timeline(m, r, 30, "day")),
    Case(
        "recall.timeline",
        "1 year, by the month (at most 1000 records)",
        lambda m, r, _: _timeline(m, r, 365, "month"),
    ),
    Case(
        "recall.timeline",
        "1 year, emotion filter (joy), limit 100",
        lambda m, r, _: _timeline(m, r, 365, "month", emotion_filter={"joy": 1.0}, limit=100),
    ),
    Case(
        "recall.graph",
        "random center, depth 2, 50 nodes, meta",
        lambda m, r, ids: _graph(m, r.choice(ids), 2, 50),
    ),
    Case(
        "recall.graph",
        "random center, depth 4, 200 nodes, meta",
        lambda m, r, ids: _graph(m, r.choice(ids), 4, 200),
    ),
    Case("recall.graph", "no center (newest 10), depth 2", lambda m, _r, _ids: _graph(m, None, 2, 10)),
    Case(
        "recall.query",
        "text cue (a 20-word sentence), limit 10, activation depth 2",
        lambda m, r, _: _query(m, {"text": r.choice(_CUES)}),
    ),
    Case(
        "recall.query",
        "emotion cue (a label), limit 10, activation depth 2",
        lambda m, r, _: _query(m, {"emotion": r.choice(_LABELS)}),
    ),
    Case(
        "recall.query",
        "temporal cue (30 days), limit 10, activation depth 2",
        lambda m, r, _: _query(m, {"temporal": _window(r, 30)}),
    ),
    Case(
        "recall.query",
        "text + emotion + temporal (90 days), activation depth 2",
        lambda m, r, _: _query(
            m, {"text": r.choice(_CUES), "emotion": r.choice(_LABELS), "temporal": _window(r, 90)}
        ),
    ),
    Case(
        "recall.query",
        "text cue, no activation (depth 0)",
        lambda m, r, _: _query(m, {"text": r.choice(_CUES)}, activation_depth=0),
    ),
    Case(
        "recall.associate",
        "random memory, depth 2, min_weight 0.1, limit 50",
        lambda m, r, ids: _associate(m, r.choice(ids), 2, 0.1),
    ),
    Case(
        "recall.associate",
        "random memory, depth 4, min_weight 0, limit 50",
        lambda m, r, ids: _associate(m, r.choice(ids), 4, 0.0),
    ),
    Case("recall.raw", "one word, limit 10", lambda m, r, _: _raw_query(m, r.choice(_WORDS))),
    Case(
        "recall.raw",
        "two words, limit 100",
        lambda m, r, _: _raw_query(m, " ".join(r.sample(_WORDS, 2)), limit=100),
    ),
    Case(
        "recall.raw",
        "one session (50 entries), no text, limit 100",
        lambda m, r, ids: _raw_query(m, None, session_id=_session(r, ids), limit=100),
    ),
)


@dataclasses.dataclass(frozen=True, slots=True)
class Timed:
    case: Case
    p50_ms: float
    p95_ms: float
    mean_items: float


async def time_case(memory: cpersona.Engine, case: Case, ids: Sequence[str], calls: int) -> Timed:
    rng = random.Random(f"{_SEED}-{case.name}-{case.what}")
    for _ in range(_WARMUP):
        await case.call(memory, rng, ids)
    samples: list[float] = []
    items = 0
    for _ in range(calls):
        started = time.perf_counter()
        items += await case.call(memory, rng, ids)
        samples.append((time.perf_counter() - started) * 1000)
    return Timed(case, percentile(samples, 0.5), percentile(samples, 0.95), items / calls)


_ARMS = ("false", "false, again", "true")


# Cues per block: 1 times the call alone (its three settings interleaved, so the strengthening a true
# call queues is written while the next calls, of any setting, run); 10 charges that write to the true
# calls (a block's calls run under one setting), the whole cost to a caller who queries back to back.
_BLOCKS = (1, 10)


@dataclasses.dataclass(frozen=True, slots=True)
class Paired:
    """recall.query by the same text cues with ``reconsolidate`` false, false again and true: the cues
    come in blocks of ``block``, each block queried under the three settings one after the other, in a
    shuffled order; the second false is the noise the difference is read against."""

    block: int
    samples: dict[str, list[float]]
    applied: int

    def diffs(self, arm: str) -> list[float]:
        return [b - a for a, b in zip(self.samples["false"], self.samples[arm], strict=True)]


async def paired_reconsolidation(memory: cpersona.Engine, calls: int, block: int) -> Paired:
    rng = random.Random(f"{_SEED}-reconsolidate-{block}")
    samples: dict[str, list[float]] = {arm: [] for arm in _ARMS}
    before = memory.reconsolidation_stats().applied
    for _ in range(_WARMUP):
        await memory.query({"text": rng.choice(_CUES)}, agent_id=AGENT, reconsolidate=False)
    for _ in range(-(-calls // block)):
        cues = [{"text": rng.choice(_CUES)} for _ in range(block)]
        for arm in rng.sample(_ARMS, len(_ARMS)):
            for cue in cues:
                started = time.perf_counter()
                await memory.query(cue, agent_id=AGENT, reconsolidate=arm == "true")
                samples[arm].append((time.perf_counter() - started) * 1000)
    # The background task group wrote them meanwhile; what is left is written now, and counted.
    await memory.drain_reconsolidations()
    return Paired(block, samples, memory.reconsolidation_stats().applied - before)


async def run_size(
    size: int, embedding: str, calls: int, rebuild: bool
) -> tuple[dict[str, Any], list[Timed], list[Paired]]:
    home, meta = await cached_store(size, embedding, rebuild)
    ids = [ref.removeprefix("mem:") for ref in meta["refs"]]
    # With the background task group, so reconsolidation is written as a server writes it: beside the
    # calls that follow, not within the one that asked for it.
    async with cpersona.open(settings_for(home / "data", embedding), background=True) as memory:
        # Measured on the cached store itself. The cases only read; the paired reconsolidation runs last
        # and strengthens (re-anchors the fidelity of) the memories its true calls returned.
        timed = [await time_case(memory, case, ids, calls) for case in CASES]
        return meta, timed, [await paired_reconsolidation(memory, calls, block) for block in _BLOCKS]


# ------------------------------------------------------------------------------------------ the report


def _median_interval(values: Sequence[float], rng: random.Random) -> tuple[float, float, float]:
    """The median of ``values`` and its 95% bootstrap interval (1000 resamples)."""
    medians = sorted(percentile([rng.choice(values) for _ in values], 0.5) for _ in range(1000))
    return percentile(list(values), 0.5), medians[25], medians[974]


def render_paired(paired: Paired) -> list[str]:
    rng = random.Random(_SEED)
    how = (
        "each cue queried with false, false again and true in a shuffled order (the call alone: the "
        "strengthening is written while the next calls, of any setting, run)"
        if paired.block == 1
        else f"blocks of {paired.block} cues, each block queried with false, false again and true in a "
        "shuffled order (the strengthening is written while calls of its own setting run)"
    )
    lines = [
        "",
        f"`reconsolidate` on recall.query (text cue, limit 10, depth 2), paired, {how}; "
        f"{paired.applied} memories strengthened by the background task group meanwhile",
        "",
        "| reconsolidate | p50 | p95 | median of (this - false) per cue | its 95% interval |",
        "|---|---|---|---|---|",
    ]
    for arm in _ARMS:
        ms = paired.samples[arm]
        p50, p95 = percentile(ms, 0.5), percentile(ms, 0.95)
        if arm == "false":
            lines.append(f"| {arm} | {p50:.1f} ms | {p95:.1f} ms | — | — |")
            continue
        median, low, high = _median_interval(paired.diffs(arm), rng)
        lines.append(
            f"| {arm} | {p50:.1f} ms | {p95:.1f} ms | {median:+.2f} ms | {low:+.2f} … {high:+.2f} ms |"
        )
    return lines


def render(
    args: argparse.Namespace,
    results: Sequence[tuple[dict[str, Any], list[Timed], list[Paired]]],
    *,
    command: str,
    load_start: float,
) -> str:
    lines = [
        "# Operations speed: the recall operations, one caller",
        "",
        *harness.header(command, load_start=load_start),
        f"- embedding mode: {args.embedding}; {args.calls} calls per case after {_WARMUP} warm-up calls, one "
        "at a time, in this process (embedded Redis and Qdrant)",
        "- store: one agent; timestamps over one year; a third with an emotion; up to 3 associations to "
        "earlier memories each; one in ten with a `derived_from` context edge; a raw journal of as many "
        "entries, in sessions of 50; the engine's background task group running",
        "",
    ]
    for meta, timed, paired in results:
        built = "cached" if meta["from_cache"] else f"built in {meta['build_secs']:.0f} s"
        lines += [
            f"## {meta['size']:,} memories ({built})",
            "",
            "| operation | case | p50 | p95 | items per call |",
        ]
        lines.append("|---|---|---|---|---|")
        lines += [
            f"| {t.case.name} | {t.case.what} | {t.p50_ms:.1f} ms | {t.p95_ms:.1f} ms | {t.mean_items:.1f} |"
            for t in timed
        ]
        lines += [line for one in paired for line in render_paired(one)]
        lines.append("")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=lambda t: [int(x) for x in t.split(",")], default=[10_000, 100_000])
    parser.add_argument("--calls", type=int, default=200, help="timed calls per case (default 200)")
    parser.add_argument("--embedding", choices=("none", "onnx"), default="none")
    parser.add_argument("--rebuild", action="store_true", help="build the stores even when cached")
    parser.add_argument("--out", type=Path, default=RESULTS)
    return parser


def main(argv: Sequence[str] | None = None) -> Path:
    args = build_parser().parse_args(argv)

    async def run_all() -> list[tuple[dict[str, Any], list[Timed], list[Paired]]]:
        return [await run_size(size, args.embedding, args.calls, args.rebuild) for size in args.sizes]

    load_start = harness.load()
    results = anyio.run(run_all)
    out: Path = args.out
    command = harness.command("operations_speed", argv)
    out.write_text(render(args, results, command=command, load_start=load_start) + "\n")
    print(out.read_text())
    return out


if __name__ == "__main__":
    main()
