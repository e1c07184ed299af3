"""The records shard killed under load: how long until the engine serves whole again, and what is lost.

An embedded engine (its own redis-server and qdrant-edge shard processes, the MiniLM embedder for the
queries) is seeded with ``--memories`` memories (caller vectors, so seeding embeds nothing). Then
``--readers`` tasks recall in a loop and ``--writers`` tasks store one memory at a time (caller vectors),
while the records shard's child is killed with SIGKILL ``--kills`` times, ``--settle`` seconds of load
apart. For each kill it measures the time from the kill to recovery: readiness ready again and a probe
recall not degraded. Every recall is classed by when it ran: in flight at some time during an outage (from
a kill to its recovery), or wholly outside them; a degraded one outside is a failure of the supervisor. At the
end, with the load stopped, it waits for ``vector_pending`` to reach 0 and checks that every store that
was acknowledged has its vector in the shard::

    .venv/bin/python -m benchmarks shard_kill --memories 3000 --kills 5 --out benchmarks/results/shard_kill.md
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

import cpersona
from benchmarks import harness
from benchmarks.corpus import sentences
from benchmarks.store_ab import unit_vectors
from cpersona.stores.vectors.edge import EdgeVectorStore

if TYPE_CHECKING:
    from cpersona.engine.facade import Engine

AGENT = "shard-kill"
_SEED_BATCH = 500
_POLL_SECS = 0.02
_GUARD_SECS = 300.0  # a hang guard: a shard that never comes back ends the run
_QUERIES = ("parcel depot", "meeting next week", "the weather in spring", "a new job offer", "holiday plans")


@dataclasses.dataclass
class Run:
    outages: list[tuple[float, float]] = dataclasses.field(default_factory=list)
    """(kill, recovered) monotonic times, one pair per kill."""
    recalls: list[tuple[float, float, bool]] = dataclasses.field(default_factory=list)
    """(start, end, degraded) of every load recall."""
    recall_errors: int = 0
    acknowledged: list[str] = dataclasses.field(default_factory=list)
    pending_at_ack: int = 0
    store_errors: dict[str, int] = dataclasses.field(default_factory=dict)
    """Stores answered with an error (not acknowledged), by error code."""
    stopping: bool = False


def _records_shard(memory: Engine) -> EdgeVectorStore:
    store = memory.backends.vectors
    if not isinstance(store, EdgeVectorStore) or store.process_id is None:
        raise SystemExit("the records collection is not an embedded shard in a child process")
    return store


async def _seed(memory: Engine, count: int) -> None:
    texts, vectors = sentences(count, seed=3), unit_vectors(count, seed=5)
    for start in range(0, count, _SEED_BATCH):
        batch = [
            {"agent_id": AGENT, "content": f"seed {n}. {texts[n]}", "embedding": vectors[n]}
            for n in range(start, min(count, start + _SEED_BATCH))
        ]
        await memory.store_batch(batch)


async def _reader(memory: Engine, run: Run, n: int) -> None:
    turn = n
    while not run.stopping:
        started = time.monotonic()
        try:
            result = await memory.recall(_QUERIES[turn % len(_QUERIES)], agent_id=AGENT, limit=10)
        except cpersona.BackendUnavailable:
            run.recall_errors += 1
        else:
            run.recalls.append((started, time.monotonic(), bool(result.degraded)))
        turn += 1


async def _writer(memory: Engine, run: Run, n: int) -> None:
    vectors = unit_vectors(2000, seed=100 + n)
    texts = sentences(2000, seed=200 + n)
    turn = 0
    while not run.stopping:
        at = turn % len(vectors)
        content = f"writer {n} turn {turn}. {texts[at]}"
        try:
            stored = await memory.store(content, agent_id=AGENT, embedding=vectors[at])
        except cpersona.BackendUnavailable as exc:
            run.store_errors[exc.code] = run.store_errors.get(exc.code, 0) + 1
        else:
            run.acknowledged.append(stored.ref)
            run.pending_at_ack += stored.vector_pending
        turn += 1


async def _serves_whole(memory: Engine) -> bool:
    if not (await memory.readiness()).ready:
        return False
    return not (await memory.recall(_QUERIES[0], agent_id=AGENT, limit=10)).degraded


async def _kill_and_wait(memory: Engine, shard: EdgeVectorStore) -> tuple[float, float]:
    pid = shard.process_id
    assert pid is not None
    killed = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    with anyio.fail_after(_GUARD_SECS):
        # Seen down (or already replaced) first, so a check that ran before the kill landed counts nothing.
        while shard.process_id == pid and shard.available:  # noqa: ASYNC110 - a process state, no event
            await anyio.sleep(_POLL_SECS)
        while not await _serves_whole(memory):  # noqa: ASYNC110 - polls readiness and a recall
            await anyio.sleep(_POLL_SECS)
    return killed, time.monotonic()


async def _pending_drained(memory: Engine) -> float:
    started = time.monotonic()
    with anyio.fail_after(_GUARD_SECS):
        while (await memory.stats(AGENT))["vector_pending"]:  # noqa: ASYNC110 - polls Redis
            await anyio.sleep(0.1)
    return time.monotonic() - started


def _report(args: argparse.Namespace, run: Run, load_start: float, end: dict[str, object]) -> str:
    recoveries = [recovered - killed for killed, recovered in run.outages]

    def in_outage(start: float, end: float) -> bool:
        return any(start < recovered and end > killed for killed, recovered in run.outages)

    during = [degraded for start, end, degraded in run.recalls if in_outage(start, end)]
    after = [degraded for start, end, degraded in run.recalls if not in_outage(start, end)]
    refused = ", ".join(f"{count} {code}" for code, count in sorted(run.store_errors.items())) or "none"
    lines = [
        "# The records shard killed under load (issue 31, item 2)",
        "",
        *harness.header(harness.command("shard_kill"), load_start=load_start, watched=("src", "benchmarks")),
        f"- load: {args.memories} memories seeded (caller vectors), then {args.readers} recall loops and "
        f"{args.writers} store loops (one memory each, caller vectors) on one embedded engine; "
        f"{args.kills} SIGKILLs of the records shard's child, {args.settle} s of load apart",
        "- recovery: from the kill to readiness ready and a probe recall not degraded (polled every 20 ms)",
        "",
        "| kill | recovery s |",
        "|---|---|",
        *(f"| {n + 1} | {seconds:.2f} |" for n, seconds in enumerate(recoveries)),
        f"| median | {harness.percentile(recoveries, 0.5):.2f} |",
        f"| max | {max(recoveries):.2f} |",
        "",
        "| recalls | count | degraded |",
        "|---|---|---|",
        f"| in flight during an outage (from a kill to its recovery) | {len(during)} | {sum(during)} |",
        f"| wholly outside the outages | {len(after)} | {sum(after)} |",
        f"| failed (BackendUnavailable) | {run.recall_errors} | |",
        "",
        f"- stores acknowledged: {len(run.acknowledged)} ({run.pending_at_ack} with `vector_pending`); "
        f"answered with an error (not acknowledged): {refused}",
        f"- after the load: `vector_pending` reached 0 in {end['drain_secs']:.2f} s; acknowledged stores "
        f"without a vector: {end['missing']}; memories {end['memories']}, vectors {end['vectors']}",
    ]
    return "\n".join(lines) + "\n"


async def _measure(args: argparse.Namespace, data_dir: Path) -> str:
    async with cpersona.open(data_dir=data_dir) as memory:
        shard = _records_shard(memory)
        await _seed(memory, args.memories)
        run = Run()
        load_start = harness.load()
        async with anyio.create_task_group() as tg:
            for n in range(args.readers):
                tg.start_soon(_reader, memory, run, n)
            for n in range(args.writers):
                tg.start_soon(_writer, memory, run, n)
            for _ in range(args.kills):
                await anyio.sleep(args.settle)
                run.outages.append(await _kill_and_wait(memory, shard))
                print(f"kill {len(run.outages)}: back in {run.outages[-1][1] - run.outages[-1][0]:.2f} s")
            await anyio.sleep(args.settle)
            run.stopping = True
        drain_secs = await _pending_drained(memory)
        ids = [ref.partition(":")[2] for ref in run.acknowledged]
        missing = len(set(ids) - await shard.existing(ids))
        stats = await memory.stats(AGENT)
        end = {"drain_secs": drain_secs, "missing": missing, "memories": stats["memories"]}
        end["vectors"] = stats["vectors"]
    return _report(args, run, load_start, end)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=3000, help="memories seeded before the load")
    parser.add_argument("--readers", type=int, default=4, help="concurrent recall loops")
    parser.add_argument("--writers", type=int, default=2, help="concurrent store loops")
    parser.add_argument("--kills", type=int, default=5, help="SIGKILLs of the records shard's child")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds of load before each kill")
    parser.add_argument("--out", type=Path, help="write the results here (else only printed)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="shard-kill-") as tmp:
        report = anyio.run(_measure, args, Path(tmp))
    sys.stdout.write(report)
    if args.out is not None:
        args.out.write_text(report)


if __name__ == "__main__":
    main()
