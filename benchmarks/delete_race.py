"""An agent's data deleted over HTTP while six writers store for it, round after round: no half-stored record.

Issue 31's probe, repeated. A real ``cpersona serve`` on loopback, in a fresh data dir of its own (its
embedded Redis, its qdrant-edge shards, the ONNX embedder). Each round has an agent of its own,
``victim-NN``, and six writers storing for it over HTTP at once: three of ``POST /v1/encode``, two of
``POST /v1/encode/batch`` with 20 memories, one of ``POST /v1/episodes``. Once every writer has had one
answer (two, three: by round), ``DELETE /v1/agents/victim-NN?confirm=true`` runs while they go on; each
writer stops after two more answers past the delete's. A write is answered 200 (its records acknowledged), 409
``AGENT_BEING_DELETED`` (refused), or anything else (counted as an error: there should be none).

After each round ``GET /v1/introspect/stats`` gives the agent's counts as the server sees them (records
minus vectors minus pending marks: more than 0 means records without a vector). The exact check needs the
vector shard, which only the server holds while it runs, so it comes after the last round: the server is
stopped with Ctrl-C, the engine is opened on its data dir, and every round's agent is read record by
record. Each round has an agent of its own so that the next round's delete does not erase what this one
left. A start finishes the vectors marked pending and deletes vectors left without a document; it writes
no vector for a record that has neither, so a half-stored record is still found. Per round it reports:

- half-stored: records in Redis with no vector and no pending mark (the bug; must be 0);
- whole: records acknowledged and still there with their vector (written after the delete);
- deleted whole: records acknowledged and gone with their vector (written before the delete);
- refused: writes answered 409; errors: writes answered anything else but 200;
- strays: records in Redis that no 200 acknowledged, and vectors of acknowledged records without one.

::

    .venv/bin/python -m benchmarks delete_race --rounds 50
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import httpx

import cpersona
from benchmarks import harness

if TYPE_CHECKING:
    from collections.abc import Iterator

RESULTS = Path(__file__).resolve().parent / "results" / "delete_race.md"
WATCHED = ("src", "benchmarks/delete_race.py")
"""The code whose edits change these figures: the engine and this harness."""
WRITERS = ("single", "single", "single", "batch", "batch", "episode")
BATCH = 20
AFTER = 2
"""Answers each writer waits for after the delete's before it stops."""
_INTERRUPTED = 130  # how ``cpersona`` exits on Ctrl-C
_GUARD_SECS = 300.0  # a hang guard on a start or a round, not a measurement
_PATHS = {"single": "/v1/encode", "batch": "/v1/encode/batch", "episode": "/v1/episodes"}


@dataclasses.dataclass
class Round:
    """One round's writes as answered, and its counts once checked."""

    agent: str
    acknowledged: set[str] = dataclasses.field(default_factory=set)
    writes: int = 0
    refused: int = 0
    errors: list[str] = dataclasses.field(default_factory=list)
    delete_status: int = 0
    deleted: int = 0
    live: dict[str, int] = dataclasses.field(default_factory=dict)
    half: list[str] = dataclasses.field(default_factory=list)
    whole: int = 0
    gone: int = 0
    strays: int = 0

    @property
    def live_gap(self) -> int:
        """Records minus vectors minus pending marks, as the server counted them after the round."""
        c = self.live
        return c["memories"] + c["episodes"] - c["vectors"] - c["vector_pending"]


def _body(kind: str, agent: str, text: str) -> dict[str, Any]:
    if kind == "single":
        return {"content": text, "agent_id": agent}
    if kind == "batch":
        return {"records": [{"content": f"{text}, part {n}", "agent_id": agent} for n in range(BATCH)]}
    return {"summary": text, "agent_id": agent}


def _refs(kind: str, answer: dict[str, Any]) -> list[str]:
    if kind == "batch":
        return [r["ref"] for r in answer["results"]]
    return [answer["ref"]]


class Race:
    """One round: the writers store until each has had 1, 2 or 3 answers, the agent is deleted, and each
    stores until it has had :data:`AFTER` answers after the delete's."""

    def __init__(self, client: httpx.AsyncClient, number: int) -> None:
        self.client = client
        self.number = number
        self.round = Round(f"victim-{number:02d}")
        # The delete starts after 1, 2 or 3 answers to each writer, by round: the agent has more to delete,
        # and the writes in flight are at other steps when it starts.
        self.before = 1 + number % 3
        self.answered = [0] * len(WRITERS)
        self.started = anyio.Event()
        self.deleted = anyio.Event()

    async def run(self) -> Round:
        async with anyio.create_task_group() as tg:
            for n, kind in enumerate(WRITERS):
                tg.start_soon(self._writer, n, kind)
            await self.started.wait()
            answer = await self.client.delete(f"/v1/agents/{self.round.agent}", params={"confirm": "true"})
            self.round.delete_status = answer.status_code
            if answer.status_code == 200:
                self.round.deleted = answer.json()["deleted"]
            self.deleted.set()
        stats = await self.client.get("/v1/introspect/stats", params={"agent_id": self.round.agent})
        stats.raise_for_status()
        counts = stats.json()
        self.round.live = {k: counts[k] for k in ("memories", "episodes", "vectors", "vector_pending")}
        return self.round

    async def _writer(self, n: int, kind: str) -> None:
        after = step = 0
        while after < AFTER:
            step += 1
            text = f"round {self.number}, writer {n} ({kind}), write {step}: a note about the garden"
            answer = await self.client.post(_PATHS[kind], json=_body(kind, self.round.agent, text))
            self._count(kind, answer)
            self.answered[n] += 1
            if min(self.answered) >= self.before:
                self.started.set()
            after += self.deleted.is_set()

    def _count(self, kind: str, answer: httpx.Response) -> None:
        r = self.round
        r.writes += 1
        if answer.status_code == 200:
            r.acknowledged.update(_refs(kind, answer.json()))
        elif answer.status_code == 409 and answer.json()["error"]["code"] == "AGENT_BEING_DELETED":
            r.refused += 1
        else:
            r.errors.append(f"{kind} {answer.status_code} {answer.text[:200]}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def _serve(data_dir: Path, port: int, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``python -m cpersona serve`` on ``data_dir`` and ``port`` with none of this process's
    ``CPERSONA_*`` settings; stopped with Ctrl-C (SIGINT) as a person would, killed if it hangs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CPERSONA_")}
    env |= {"CPERSONA_DATA_DIR": str(data_dir), "CPERSONA_PORT": str(port)}
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cpersona", "serve"], env=env, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=_GUARD_SECS)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise


async def _tail(log: Path) -> str:
    return (await anyio.Path(log).read_text())[-3000:]


async def _healthy(client: httpx.AsyncClient, proc: subprocess.Popen[bytes], log: Path) -> None:
    with anyio.fail_after(_GUARD_SECS):
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"serve exited with {proc.returncode}:\n{await _tail(log)}")
            with contextlib.suppress(httpx.TransportError):
                if (await client.get("/health")).status_code == 200:
                    return
            await anyio.sleep(0.2)


async def race(data_dir: Path, log: Path, rounds: int) -> list[Round]:
    port = _free_port()
    done: list[Round] = []
    with _serve(data_dir, port, log) as proc:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=_GUARD_SECS) as client:
            await _healthy(client, proc, log)
            for n in range(rounds):
                with anyio.fail_after(_GUARD_SECS):
                    r = await Race(client, n).run()
                done.append(r)
                print(
                    f"round {n}: {r.writes} writes, {len(r.acknowledged)} records acknowledged, "
                    f"{r.refused} refused, {len(r.errors)} errors, live gap {r.live_gap}, "
                    f"load {harness.load():.1f}",
                    file=sys.stderr,
                )
    if proc.returncode not in (0, _INTERRUPTED):
        raise SystemExit(f"serve exited with {proc.returncode} when stopped:\n{await _tail(log)}")
    return done


async def check(data_dir: Path, rounds: list[Round]) -> None:
    """Each round's agent read record by record in the engine the server left, once it has stopped."""
    async with cpersona.open(cpersona.Settings(data_dir=data_dir), background=False) as engine:
        assert engine.backends.vectors is not None, "the server ran with vectors"
        pending = set(await engine.backends.records.pending_refs())
        for r in rounds:
            present: set[str] = set()
            for kind, tag in (("memory", "mem"), ("episode", "ep")):
                ids = await engine.backends.records.record_ids(kind, r.agent)  # type: ignore[arg-type]
                with_vector = await engine.backends.vectors.existing(ids)
                present.update(f"{tag}:{i}" for i in ids)
                r.half += [f"{tag}:{i}" for i in ids if i not in with_vector and f"{tag}:{i}" not in pending]
            acked_ids = {ref: ref.partition(":")[2] for ref in r.acknowledged}
            acked_vectors = await engine.backends.vectors.existing(list(acked_ids.values()))
            for ref, record_id in acked_ids.items():
                if ref in present and record_id in acked_vectors:
                    r.whole += 1
                elif ref not in present and record_id not in acked_vectors:
                    r.gone += 1
                elif ref not in present:
                    r.strays += 1  # a vector left without its record
            r.strays += len(present - r.acknowledged)


def report(rounds: list[Round], load_start: float, load_end: float) -> str:
    total = {
        "writes": sum(r.writes for r in rounds),
        "acknowledged": sum(len(r.acknowledged) for r in rounds),
        "whole": sum(r.whole for r in rounds),
        "gone": sum(r.gone for r in rounds),
        "half": sum(len(r.half) for r in rounds),
        "refused": sum(r.refused for r in rounds),
        "errors": sum(len(r.errors) for r in rounds),
        "strays": sum(r.strays for r in rounds),
        "gap": sum(max(0, r.live_gap) for r in rounds),
    }
    # The worst round: the most half-stored records, then the most writes refused (the closest race).
    worst = max(rounds, key=lambda r: (len(r.half), r.refused))
    bad_deletes = [r.agent for r in rounds if r.delete_status != 200]
    lines = [
        "# The delete race of issue 31, repeated: an agent's data deleted while it stores",
        "",
        *harness.header(
            harness.command("delete_race"), load_start=load_start, load_end=load_end, watched=WATCHED
        ),
        f"- {len(rounds)} rounds against one real `cpersona serve` on loopback (embedded Redis, qdrant-edge "
        "shards in their own processes, the ONNX embedder), a fresh data dir; each round an agent of its "
        f"own (`victim-00` …): 3 writers of `POST /v1/encode`, 2 of `POST /v1/encode/batch` ({BATCH} "
        "memories each), 1 of `POST /v1/episodes`, storing while `DELETE /v1/agents/victim-NN?confirm=true` "
        f"runs (it starts once each writer has had 1, 2 or 3 answers, by round; each writer stops {AFTER} "
        "answers after it)",
        "- checked record by record after the last round, in the engine opened on the server's data dir "
        "once it stopped (the vector shard is the server's while it runs); and after each round by the "
        "server's own counts (`GET /v1/introspect/stats`: records - vectors - pending marks)",
        "",
        "## Totals",
        "",
        "| | count |",
        "|---|---|",
        f"| writes (requests) | {total['writes']:,} |",
        f"| records acknowledged with 200 | {total['acknowledged']:,} |",
        f"| … stored whole, still there (record and vector) | {total['whole']:,} |",
        f"| … stored whole, then deleted with the agent (neither left) | {total['gone']:,} |",
        f"| **… half-stored (record, no vector, no pending mark)** | **{total['half']}** |",
        f"| writes refused with 409 `AGENT_BEING_DELETED` | {total['refused']:,} |",
        f"| writes answered anything else | {total['errors']} |",
        f"| strays (records no 200 acknowledged; vectors without their record) | {total['strays']} |",
        f"| rounds whose server counts showed records without a vector | "
        f"{sum(r.live_gap > 0 for r in rounds)} |",
        f"| deletes not answered 200 | {len(bad_deletes)} |",
        "",
        f"Worst round (most half-stored, then most writes refused): round {rounds.index(worst)}, "
        f"{worst.writes} writes, {len(worst.acknowledged)} records acknowledged ({worst.whole} whole, "
        f"{worst.gone} deleted whole), {len(worst.half)} half-stored, {worst.refused} refused, "
        f"{len(worst.errors)} errors; the delete removed {worst.deleted} records.",
        "",
        "## Per round",
        "",
        "| round | writes | acknowledged | whole | deleted whole | half-stored | refused 409 | errors | "
        "deleted by the delete | server counts: records, vectors, pending |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n, r in enumerate(rounds):
        c = r.live
        lines.append(
            f"| {n} | {r.writes} | {len(r.acknowledged)} | {r.whole} | {r.gone} | {len(r.half)} | "
            f"{r.refused} | {len(r.errors)} | {r.deleted} | "
            f"{c['memories'] + c['episodes']}, {c['vectors']}, {c['vector_pending']} |"
        )
    for r in rounds:
        if r.half:
            lines.append(f"- {r.agent} half-stored: {', '.join(r.half)}")
        lines += [f"- {r.agent} error: {e}" for e in r.errors]
    return "\n".join(lines) + "\n"


async def main_async(args: argparse.Namespace, work: Path) -> list[Round]:
    data_dir = work / "data"
    rounds = await race(data_dir, work / "serve.log", args.rounds)
    await check(data_dir, rounds)
    return rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50, help="rounds, each on an agent of its own")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results file")
    args = parser.parse_args()
    if args.rounds < 1:
        raise SystemExit("--rounds must be at least 1")
    load_start, began = harness.load(), time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="cpersona-delete-race-") as tmp:
        rounds = anyio.run(main_async, args, Path(tmp))
    load_end = harness.load()
    text = report(rounds, load_start, load_end)
    text += f"\nThe run took {time.perf_counter() - began:.0f} s.\n"
    args.out.write_text(text, encoding="utf-8")
    print(text)
    if any(r.half for r in rounds):
        raise SystemExit("half-stored records found: see the results file")


if __name__ == "__main__":
    main()
