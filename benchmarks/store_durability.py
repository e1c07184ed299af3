"""What the durable acknowledgement costs: store throughput, paired against the old path in one run.

Engines on their embedded defaults, each in its own temporary data dir, one per write path:

* ``durable`` (today): the embedded Redis fsyncs before it answers (``appendfsync always``) and each
  write waits for ``WAITAOF 1 0`` in the same round trip;
* ``everysec`` (before): the Redis fsyncs once a second in the background (``CONFIG SET appendfsync
  everysec``) and the write does not wait (the WAITAOF is left out of the pipeline for this engine).

Each round measures: sequential single ``store()`` calls, the same from 16 concurrent callers,
``store_batch`` of 100, and single stores with a ``msg_id`` (one more dedup claim in the claim script);
each measure on both paths back to back, which one first alternating. Then one ``EVAL`` of the claim
script alone. Once with vectors: they go
to the embedded Qdrant engine (each upsert flushed), but the embedder is replaced by a fixed vector per
text, so the figures are Redis and vector-store cost with no model time; once with Redis only
(``embedding_mode none``). Block building is off (no background tasks).

Results go to ``benchmarks/results/store_durability.md`` with the machine, date, commit, load and command::

    .venv/bin/python -m benchmarks store_durability [--rounds 5]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import anyio
import numpy as np

import cpersona
from benchmarks import harness
from cpersona import Settings
from cpersona.stores.record_values import InFlightWrite
from cpersona.stores.redis import durable
from cpersona.stores.redis.write_scripts import CLAIM, reservation_args, run_script

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from cpersona.engine.facade import Engine

RESULTS = Path(__file__).parent / "results" / "store_durability.md"
PATHS = ("durable", "everysec")
MEASURES = ("single", "concurrent", "batch", "single_msg_id")
_BATCH = 100
_FSYNC = {"durable": "always", "everysec": "everysec"}


def _fix_embedder(memory: Engine) -> None:
    """Replace the model by a fixed unit vector per text (seeded by its digest): no model time."""
    embedder = memory.backends.embedder
    assert embedder is not None
    dim = embedder.dim

    async def fixed(texts: Sequence[str]) -> list[Any]:
        out = []
        for text in texts:
            seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
            v = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
            out.append(v / np.float32(np.linalg.norm(v)))
        return out

    setattr(embedder, "embed", fixed)  # noqa: B010 - an instance attribute shadows the method


@contextlib.contextmanager
def _without_waitaof(path: str) -> Iterator[None]:
    """For the old path, each write pipeline goes without its WAITAOF (what the code did before)."""
    if path == "durable":
        yield
        return
    original = durable.flushed

    async def unconfirmed(pipe: Any, client: Any) -> list[Any]:
        return cast("list[Any]", await pipe.execute())

    durable.flushed = unconfirmed
    try:
        yield
    finally:
        durable.flushed = original


async def _singles(memory: Engine, agent: str, n: int, *, msg_ids: bool = False) -> float:
    start = time.perf_counter()
    for i in range(n):
        text = f"{agent} note {i}: the parcel left the depot at {i % 24}h"
        await memory.store(text, agent_id=agent, msg_id=f"{agent}-{i}" if msg_ids else None)
    return n / (time.perf_counter() - start)


async def _concurrent(memory: Engine, agent: str, callers: int, per_caller: int) -> float:
    async def caller(c: int) -> None:
        for i in range(per_caller):
            await memory.store(f"{agent} caller {c} note {i}: a crate of pears", agent_id=agent)

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for c in range(callers):
            tg.start_soon(caller, c)
    return callers * per_caller / (time.perf_counter() - start)


async def _batched(memory: Engine, agent: str, batches: int) -> float:
    start = time.perf_counter()
    for b in range(batches):
        await memory.store_batch(
            [
                {"agent_id": agent, "content": f"{agent} batch {b} row {i}: a van of apples"}
                for i in range(_BATCH)
            ]
        )
    return batches * _BATCH / (time.perf_counter() - start)


async def _claim_script_us(memory: Engine, agent: str, n: int, claims: int) -> float:
    """p50 of one EVAL of the claim script taking ``claims`` claims (fresh ones: every call wins)."""
    prefix, samples = memory.keys.prefix, []
    for i in range(n):
        write = InFlightWrite(
            "memory", f"bench-{agent}-{i}", tuple(f"{prefix}:bench:{agent}:{i}:{c}" for c in range(claims))
        )
        keys, args = reservation_args(f"{prefix}:bench:{agent}:inflight", [write])
        t0 = time.perf_counter()
        await run_script(
            memory.backends.stores.redis,
            CLAIM,
            keys,
            [f"{prefix}:bench:mem:", "60000", repr(time.time()), *args],
        )
        samples.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(samples)


async def _measure(memory: Engine, path: str, measure: str, tag: str, args: argparse.Namespace) -> float:
    """One measure on one path (its fsync policy set, its WAITAOF on or off), on a fresh agent."""
    await cast("Any", memory.backends.stores.redis).config_set("appendfsync", _FSYNC[path])
    agent = f"{tag}{measure}"
    with _without_waitaof(path):
        if measure == "concurrent":
            return await _concurrent(memory, agent, args.callers, args.per_caller)
        if measure == "batch":
            return await _batched(memory, agent, args.batches)
        return await _singles(memory, agent, args.singles, msg_ids=measure == "single_msg_id")


async def _open(stack: contextlib.AsyncExitStack, path: str, vectors: bool) -> Engine:
    tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix=f"cpersona-dur-{path}-"))
    settings = Settings.from_env({}).with_(data_dir=Path(tmp), embedding_mode="onnx" if vectors else "none")
    memory = await stack.enter_async_context(cpersona.open(settings, background=False))
    if vectors:
        _fix_embedder(memory)
    return memory


Rates = dict[str, dict[str, list[float]]]


async def _rounds(args: argparse.Namespace, vectors: bool) -> tuple[Rates, dict[str, float]]:
    """Every round of one configuration (vectors on or off), both paths; and the claim script's cost."""
    rates: Rates = {p: {m: [] for m in MEASURES} for p in PATHS}
    async with contextlib.AsyncExitStack() as stack:
        engines = {path: await _open(stack, path, vectors) for path in PATHS}
        warm = argparse.Namespace(**{**vars(args), "singles": 20})
        for path, memory in engines.items():
            await _measure(memory, path, "single", "warm", warm)
        # The two paths of a pair run back to back, so that a change in the machine's load between
        # pairs moves both; which goes first alternates.
        for r in range(args.rounds):
            for n, measure in enumerate(MEASURES):
                for path in PATHS if (r + n) % 2 == 0 else PATHS[::-1]:
                    rate = await _measure(engines[path], path, measure, f"r{r}", args)
                    rates[path][measure].append(rate)
                    print(vectors, r, measure, path, round(rate), file=sys.stderr, flush=True)
        memory = engines["durable"]
        costs = {f"claims_{k}": await _claim_script_us(memory, f"k{k}", 500, k) for k in (1, 2)}
        costs["ping"] = await _ping_us(memory, 500)
    return rates, costs


async def _ping_us(memory: Engine, n: int) -> float:
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        await memory.backends.stores.redis.ping()
        samples.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(samples)


_LABELS = {
    "single": "single `store()`, one caller",
    "concurrent": "single `store()`, {callers} concurrent callers",
    "batch": f"`store_batch` of {_BATCH}",
    "single_msg_id": "single `store()` with a `msg_id`, one caller",
}


def _row(measure: str, rates: Rates, label: str) -> str:
    new, old = rates["durable"][measure], rates["everysec"][measure]
    ratios = [a / b for a, b in zip(new, old, strict=True)]
    return (
        f"| {label} | {statistics.median(new):.0f} | {statistics.median(old):.0f} | "
        f"{statistics.median(ratios):.2f} | {min(ratios):.2f} to {max(ratios):.2f} |"
    )


def _added_ms(rates: Rates) -> float:
    new, old = statistics.median(rates["durable"]["single"]), statistics.median(rates["everysec"]["single"])
    return 1000 / new - 1000 / old


def _table(title: str, rates: Rates, args: argparse.Namespace) -> list[str]:
    return [
        f"## {title}",
        "",
        "| records/s (median of rounds) | durable | everysec | ratio (median) | ratio spread (min to max) |",
        "|---|---|---|---|---|",
        *(_row(m, rates, _LABELS[m].format(callers=args.callers)) for m in MEASURES),
        "",
    ]


def report(
    runs: dict[bool, tuple[Rates, dict[str, float]]],
    alternative: dict[str, float],
    args: argparse.Namespace,
    load_start: float,
) -> str:
    costs = runs[False][1]
    lines = [
        "# Store durability: what the durable acknowledgement costs",
        "",
        *harness.header(harness.command("store_durability"), load_start=load_start),
        f"- {args.rounds} rounds; in each, per measure, the two paths back to back (which goes first "
        "alternates): "
        f"{args.singles} single stores, {args.callers} callers x {args.per_caller} stores, "
        f"{args.batches} batches of {_BATCH}, "
        f"{args.singles} single stores with a msg_id; each measure on a fresh agent",
        "- `durable`: `appendfsync always` + `WAITAOF 1 0` after each write; `everysec`: the old path "
        "(background fsync once a second, no wait)",
        "",
        *_table(
            "With vectors (the embedded Qdrant engine, each upsert flushed; a fixed vector per text, "
            "no model time; block building off)",
            runs[True][0],
            args,
        ),
        *_table("Redis only (embedding_mode none)", runs[False][0], args),
        f"On Redis alone the durable path adds {_added_ms(runs[False][0]):.2f} ms to a single store (from "
        "the medians above). A single store "
        "makes three writes that each wait for an fsync under `appendfsync always` (the claim script, the "
        "sequence number, the document transaction); a batch makes the same three for all its records, "
        "and concurrent callers share each fsync. With vectors, the vector store's own flush of each "
        "upsert (an fsync too) dominates either way; the ratio spread says how much the machine's load "
        "moved the figures between pairs.",
        "",
        f"The claim script alone (one `EVAL` from the client, durable path, Redis only): p50 "
        f"{costs['claims_1']:.0f} µs taking one claim (content), {costs['claims_2']:.0f} µs taking two "
        f"(content and `msg_id`); a `PING` round trip on the same client: {costs['ping']:.0f} µs.",
        "",
        "The path not taken, a WAITAOF after each write on a Redis that fsyncs once a second (Redis only): "
        f"{alternative['single']:.1f} single stores/s from one caller, "
        f"{alternative['concurrent']:.0f}/s from 16 callers: each write waits for the next "
        "once-a-second fsync.",
        "",
    ]
    return "\n".join(lines)


async def _alternative() -> dict[str, float]:
    """The path not taken, on Redis alone: fsync once a second and a WAITAOF after each write."""
    async with contextlib.AsyncExitStack() as stack:
        memory = await _open(stack, "alternative", vectors=False)
        await cast("Any", memory.backends.stores.redis).config_set("appendfsync", "everysec")
        return {
            "single": await _singles(memory, "alt-s", 5),
            "concurrent": await _concurrent(memory, "alt-c", 16, 2),
        }


async def _all(
    args: argparse.Namespace,
) -> tuple[dict[bool, tuple[Rates, dict[str, float]]], dict[str, float]]:
    runs = {vectors: await _rounds(args, vectors) for vectors in (True, False)}
    return runs, await _alternative()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--singles", type=int, default=200)
    parser.add_argument("--callers", type=int, default=16)
    parser.add_argument("--per-caller", type=int, default=25)
    parser.add_argument("--batches", type=int, default=5)
    args = parser.parse_args()
    load_start = harness.load()
    runs, alternative = anyio.run(_all, args)
    text = report(runs, alternative, args, load_start)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
