"""The emotion cue benchmark: does ``cue.emotion`` find a memory that only its emotion can find?

Run from the repository root::

    .venv/bin/python -m benchmarks quality.emotion_bench [--size 10000 100000] [--cases 200] \\
        [--noise 0 0.1 0.2]

A generated store (seeded, so every run builds the same one): ``size`` memories of one agent, each a few
words from a shared vocabulary with a random emotion (two to four of the eight Plutchik axes set, each
0.2-1.0; a third of the memories carry none; with a single axis every memory of that axis would point
the same way and tie at cosine 1, which no ranking by direction can separate). For each of ``cases``
questions one extra *gold* memory is stored whose words come from a vocabulary of its own, so it shares
no word with any question, and whose emotion is drawn like the others'. The question's text is three
words of the shared vocabulary (it matches many distractors by BM25, never the gold) and its emotion
cue is the gold's emotion with Gaussian noise (``noise`` per axis, clipped to 0..1; several levels,
default 0, 0.1 and 0.2): the caller remembers roughly how it felt.

Each question is asked three ways, ``limit`` 10, activation off (no edges are stored), no reconsolidation:

* **text** - ``cue.text`` alone (the gold cannot be found: the floor);
* **text + emotion** - ``cue.text`` and ``cue.emotion``, fused by reciprocal rank;
* **emotion** - ``cue.emotion`` alone.

recall@10 is the share of questions whose gold is among the ten memories returned; the latency of each
way is reported too (p50, p95 over the questions, one caller). Two more tables time, on the same store:
the emotion query with ``reconsolidate`` true against false, interleaved, while the background group
writes the strengthening; and spreading activation, through the text + emotion query at
``activation_depth`` 0 and 2 and through ``recall.associate`` at depth 2 and 4 (every memory after the
first batch has two associations to earlier ones; recall is measured with activation off, so they do not
move it). The engine runs without an embedder
(``embedding_mode none``), so the vector arm cannot reach the gold by meaning either: the one way to it
is its emotion. Results go to ``benchmarks/results/emotion_recall.md`` with the machine, date, commit,
load and command.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import functools
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

import cpersona
from benchmarks import harness
from benchmarks.harness import percentile
from cpersona.model.cue_query import PLUTCHIK_AXES

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parent / "results" / "emotion_recall.md"
LIMIT = 10
_BATCH = 1_000
AGENT = "emotion-bench"


def _vocabulary(rng: random.Random, size: int, prefix: str) -> list[str]:
    letters = "bcdfghjklmnpqrstvwz"
    return [prefix + "".join(rng.choice(letters) for _ in range(5)) for _ in range(size)]


def _emotion(rng: random.Random) -> dict[str, float]:
    axes = rng.sample(PLUTCHIK_AXES, rng.randint(2, 4))
    return {axis: round(rng.uniform(0.2, 1.0), 3) for axis in axes}


def _noisy(rng: random.Random, emotion: dict[str, float], noise: float) -> dict[str, float]:
    out = {axis: max(0.0, min(1.0, emotion.get(axis, 0.0) + rng.gauss(0.0, noise))) for axis in PLUTCHIK_AXES}
    if not any(v > 0 for v in out.values()):
        out = dict(emotion)
    return {axis: round(v, 4) for axis, v in out.items()}


def build(size: int, cases: int, seed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The memories to store and the questions (text, the gold's emotion, the gold's index)."""
    rng = random.Random(seed)
    shared = _vocabulary(rng, 400, "w")
    own = _vocabulary(rng, 400, "g")
    memories: list[dict[str, Any]] = []
    for _ in range(size):
        record: dict[str, Any] = {"content": " ".join(rng.sample(shared, 6)), "agent_id": AGENT}
        if rng.random() >= 1 / 3:
            record["emotion"] = _emotion(rng)
        memories.append(record)
    questions = []
    for _ in range(cases):
        emotion = _emotion(rng)
        gold = {"content": " ".join(rng.sample(own, 6)), "agent_id": AGENT, "emotion": emotion}
        questions.append(
            {
                "text": " ".join(rng.sample(shared, 3)),
                "emotion": emotion,
                "gold": len(memories),
            }
        )
        memories.append(gold)
    return memories, questions


_EDGES = 2
_KINDS = ("semantic", "causal", "temporal")


async def _store(memory: cpersona.Engine, memories: list[dict[str, Any]], seed: int) -> list[str]:
    """Store the memories in batches; from the second batch on, each gets two associations to memories
    stored before it (random targets, types and weights 0.2-1.0), for the activation and associate
    timings."""
    rng = random.Random(seed)
    refs: list[str] = []
    for start in range(0, len(memories), _BATCH):
        batch = memories[start : start + _BATCH]
        if refs:
            batch = [{**m, "associations": [_edge(rng, refs) for _ in range(_EDGES)]} for m in batch]
        result = await memory.store_batch(batch)
        refs.extend(r.ref for r in result.results)
    return refs


def _edge(rng: random.Random, refs: list[str]) -> dict[str, Any]:
    return {
        "target_id": rng.choice(refs),
        "type": rng.choice(_KINDS),
        "weight": round(rng.uniform(0.2, 1.0), 2),
    }


async def _timed(call: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    result = await call()
    return (time.perf_counter() - t0) * 1000, result


async def _walks(memory: cpersona.Engine, questions: list[dict[str, Any]], refs: list[str]) -> dict[str, Any]:
    """Latency of activation in the cue query (depth 0 against 2) and of associate (depth 2 and 4) from a
    late memory (its edges point back into the store), with how many memories each reached."""
    times: dict[str, list[float]] = {}
    reached: dict[str, list[int]] = {}

    def note(name: str, ms: float, count: int) -> None:
        times.setdefault(name, []).append(ms)
        reached.setdefault(name, []).append(count)

    for q in questions:
        cue = {"text": q["text"], "emotion": q["emotion"]}
        for depth in (0, 2):
            ms, found = await _timed(
                functools.partial(
                    memory.query,
                    cue,
                    agent_id=AGENT,
                    limit=LIMIT,
                    activation_depth=depth,
                    reconsolidate=False,
                )
            )
            trace = found.activation_trace
            note(f"query depth {depth}", ms, 0 if trace is None else len(trace.activations))
        start = refs[len(refs) - 1 - q["gold"] % _BATCH]
        for depth in (2, 4):
            ms, walked = await _timed(
                functools.partial(
                    memory.associate, start, agent_id=AGENT, depth=depth, min_weight=0.1, limit=50
                )
            )
            note(f"associate depth {depth}", ms, walked.total_candidates)
    return {
        name: {
            "p50": percentile(ts, 0.5),
            "p95": percentile(ts, 0.95),
            "reached": statistics.fmean(reached[name]),
        }
        for name, ts in times.items()
    }


async def _ask(memory: cpersona.Engine, cue: dict[str, Any], gold: str) -> tuple[bool, float]:
    t0 = time.perf_counter()
    result = await memory.query(cue, agent_id=AGENT, limit=LIMIT, activation_depth=0, reconsolidate=False)
    elapsed = (time.perf_counter() - t0) * 1000
    return any(m.record.ref == gold for m in result.memories), elapsed


def _cues(question: dict[str, Any], emotion: dict[str, float]) -> dict[str, dict[str, Any]]:
    return {
        "text": {"text": question["text"]},
        "text + emotion": {"text": question["text"], "emotion": emotion},
        "emotion": {"emotion": emotion},
    }


async def _way(memory: cpersona.Engine, cues: list[dict[str, Any]], golds: list[str]) -> dict[str, float]:
    hits, times = 0, []
    for cue, gold in zip(cues, golds, strict=True):
        found, ms = await _ask(memory, cue, gold)
        hits += found
        times.append(ms)
    return {
        "recall": hits / len(cues),
        "p50": percentile(times, 0.5),
        "p95": percentile(times, 0.95),
        "mean": statistics.fmean(times),
    }


async def _reconsolidation_cost(memory: cpersona.Engine, cues: list[dict[str, Any]]) -> dict[str, Any]:
    """The same queries with ``reconsolidate`` true and false, interleaved (which first alternating),
    while the background group writes the strengthening: what the answer waits for."""
    times: dict[bool, list[float]] = {True: [], False: []}
    offered = 0
    for n, cue in enumerate(cues):
        for on in (True, False) if n % 2 else (False, True):
            t0 = time.perf_counter()
            result = await memory.query(
                cue, agent_id=AGENT, limit=LIMIT, activation_depth=0, reconsolidate=on
            )
            times[on].append((time.perf_counter() - t0) * 1000)
            offered += len(result.memories) if on else 0
    with anyio.fail_after(60):
        while sum(dataclasses.astuple(memory.reconsolidation_stats())) < offered:  # noqa: ASYNC110 - counters
            await anyio.sleep(0.05)
    out: dict[str, Any] = {
        str(on): {"p50": percentile(ts, 0.5), "p95": percentile(ts, 0.95), "mean": statistics.fmean(ts)}
        for on, ts in times.items()
    }
    out["applied"] = memory.reconsolidation_stats().applied
    return out


async def run(size: int, cases: int, noises: list[float], seed: int) -> dict[str, Any]:
    memories, questions = build(size, cases, seed)
    out: dict[tuple[float, str], dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="emotion-bench-") as home:
        # The background group runs, so reconsolidation is written while the queries go on.
        async with cpersona.open(data_dir=home, embedding_mode="none") as memory:
            t0 = time.perf_counter()
            refs = await _store(memory, memories, seed)
            ingest_s = time.perf_counter() - t0
            golds = [refs[q["gold"]] for q in questions]
            for noise in noises:
                rng = random.Random(seed + round(noise * 1000))
                per_question = [_cues(q, _noisy(rng, q["emotion"], noise)) for q in questions]
                for name in ("text", "text + emotion", "emotion"):
                    if name == "text" and noise != noises[0]:
                        continue  # the text cue does not change with the noise
                    out[(noise, name)] = await _way(memory, [c[name] for c in per_question], golds)
            recon = await _reconsolidation_cost(memory, [{"emotion": q["emotion"]} for q in questions])
            walks = await _walks(memory, questions, refs)
    return {
        "ways": out,
        "records": len(memories),
        "ingest_s": ingest_s,
        "reconsolidation": recon,
        "walks": walks,
    }


def _rows(size: int, found: dict[str, Any]) -> str:
    return "\n".join(
        f"| {size} | {name} | {'-' if name == 'text' else noise} | {w['recall']:.3f} | {w['p50']:.1f} "
        f"| {w['p95']:.1f} |"
        for (noise, name), w in found["ways"].items()
    )


def report(found: dict[int, dict[str, Any]], args: argparse.Namespace, load_start: float, began: str) -> str:
    header = "\n".join(harness.header(harness.command("quality.emotion_bench"), load_start=load_start))
    rows = "\n".join(_rows(size, one) for size, one in found.items())
    recon = "\n".join(
        f"| {size} | {r['True']['p50']:.1f} | {r['True']['p95']:.1f} | {r['False']['p50']:.1f} "
        f"| {r['False']['p95']:.1f} | {r['applied']} |"
        for size, one in found.items()
        for r in [one["reconsolidation"]]
    )
    stores = "; ".join(
        f"{one['records']} memories ingested in {one['ingest_s']:.1f} s" for one in found.values()
    )
    walks = "\n".join(
        f"| {size} | {name} | {w['p50']:.1f} | {w['p95']:.1f} | {w['reached']:.1f} |"
        for size, one in found.items()
        for name, w in one["walks"].items()
    )
    return f"""# Emotion cue: recall@10 where only the emotion can find the gold

The gold memory of each question shares no word with it; its emotion cue is the gold's emotion with
Gaussian noise (standard deviation per axis in the noise column). See the module docstring of
`benchmarks/quality/emotion_bench.py` for the store and the three ways of asking. Latency is the whole
`memory.query` call in process (arms, one batched read of the candidates, fusion, rendering), one caller.

| distractors | cue | noise | recall@10 | p50 ms | p95 ms |
|---|---|---|---|---|---|
{rows}

What `reconsolidate: true` costs the answer (the emotion cue, {args.cases} queries each way, interleaved,
the engine's background group writing the strengthening meanwhile; applied: memories strengthened):

| distractors | true p50 ms | true p95 ms | false p50 ms | false p95 ms | applied |
|---|---|---|---|---|---|
{recon}

Spreading activation: the text + emotion query with `activation_depth` 0 and 2, and `recall.associate`
from a memory at depth 2 and 4 (`min_weight` 0.1, `limit` 50); every memory after the first
{_BATCH} has {_EDGES} associations to earlier ones (random targets, types and weights 0.2-1.0):

| distractors | operation | p50 ms | p95 ms | memories reached (mean) |
|---|---|---|---|---|
{walks}

- stores: one agent, {args.cases} gold memories each, a third of the distractors without emotion;
  {stores} (store_batch of {_BATCH}, no embedder)
- questions: {args.cases} per store, limit {LIMIT}, activation_depth 0, reconsolidate false, seed {args.seed}
- began: {began}
{header}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--size", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--noise", type=float, nargs="+", default=[0.0, 0.1, 0.2])
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    load_start = harness.load()
    began = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    found = {size: anyio.run(run, size, args.cases, args.noise, args.seed) for size in args.size}
    text = report(found, args, load_start, began)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
