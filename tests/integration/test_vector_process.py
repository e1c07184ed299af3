"""The embedded shard in its child process: what the pipe does when callers give up, and when the child
goes away.

The contract suite (tests/contract/test_vector_store.py) runs every protocol test against this mode
too; these are the failures only a second process has.
"""

from __future__ import annotations

import os
import random
import signal
import uuid
from typing import TYPE_CHECKING

import anyio
import numpy as np
import pytest

from cpersona.errors import VectorStoreUnavailable
from cpersona.stores.protocols import VectorFilter, VectorPoint
from cpersona.stores.vectors.edge import EdgeVectorStore

if TYPE_CHECKING:
    from pathlib import Path

DIM = 8
SCOPE = VectorFilter(agent_id="a")


def _points(n: int, dim: int = DIM) -> list[VectorPoint]:
    rng = np.random.default_rng(7)
    return [
        VectorPoint(
            id=str(uuid.uuid4()),
            vector=rng.standard_normal(dim).astype(np.float32),
            kind="memory",
            agent_id="a",
            project_id="",
            channel="",
            timestamp=float(k),
            seq=k,
        )
        for k in range(n)
    ]


def _pid(store: EdgeVectorStore) -> int:
    pid = store.process_id
    assert pid is not None
    return pid


async def test_the_shard_runs_in_a_child_process(tmp_path: Path) -> None:
    async with await EdgeVectorStore.open(tmp_path, "c", DIM) as store:
        pid = _pid(store)
        assert pid != os.getpid()
        # Linux names the child's command line; it is the worker, not this interpreter's test run.
        cmdline = (await anyio.Path(f"/proc/{pid}/cmdline").read_bytes()).split(b"\0")
        assert cmdline[2].endswith(b"edge_worker.py")
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # closed: the child has exited and been reaped
    async with await EdgeVectorStore.open(tmp_path, "c", DIM, process=False) as store:
        assert store.process_id is None


async def test_abandoned_calls_leave_every_other_caller_its_own_answer(tmp_path: Path) -> None:
    """Many searches at once, a random part of them cancelled at random moments (before their request is
    sent, while it is in the child, while another caller is reading the pipe): each one that finishes
    gets exactly the answer it gets alone, and the store keeps working."""
    rng = random.Random(11)
    async with await EdgeVectorStore.open(tmp_path, "c", DIM) as store:
        await store.upsert(_points(300))
        queries = [np.random.default_rng(k).standard_normal(DIM).astype(np.float32) for k in range(40)]
        alone = [[h.id for h in await store.search(q, SCOPE, 5 + k % 7)] for k, q in enumerate(queries)]
        answers: dict[int, list[str]] = {}
        cancelled = 0

        async def ask(k: int, give_up: float | None) -> None:
            nonlocal cancelled
            with anyio.move_on_after(give_up if give_up is not None else 60) as scope:
                hits = await store.search(queries[k], SCOPE, 5 + k % 7)
                answers[k] = [h.id for h in hits]
            cancelled += scope.cancelled_caught

        for _ in range(5):
            answers.clear()
            async with anyio.create_task_group() as tg:
                for k in range(len(queries)):
                    tg.start_soon(ask, k, rng.choice([None, None, 0, 0.0001, 0.0005, 0.002]))
            for k, ids in answers.items():
                assert ids == alone[k]
        assert cancelled > 0
        assert [h.id for h in await store.search(queries[0], SCOPE, 5)] == alone[0]


async def test_a_child_that_dies_fails_its_callers_and_the_store_closes(tmp_path: Path) -> None:
    store = await EdgeVectorStore.open(tmp_path, "c", DIM)
    await store.upsert(_points(20))
    os.kill(_pid(store), signal.SIGKILL)
    with anyio.fail_after(10):
        with pytest.raises(VectorStoreUnavailable, match=r"exited with code -9"):
            await store.search(_points(1)[0].vector, SCOPE, 3)
        with pytest.raises(VectorStoreUnavailable, match=r"exited with code -9"):
            await store.count_all()
        await store.aclose()
    # The WAL lock went with the process, and every acknowledged write is in the shard.
    async with await EdgeVectorStore.open(tmp_path, "c", DIM) as again:
        assert await again.count_all() == 20


async def test_the_child_exits_when_its_parent_goes_away(tmp_path: Path) -> None:
    """The child's input ending stands for this process dying: it closes the shard and exits."""
    store = await EdgeVectorStore.open(tmp_path, "c", DIM)
    await store.upsert(_points(10))
    process = store._link._process  # type: ignore[attr-defined]
    await process.stdin.aclose()
    with anyio.fail_after(10):
        assert await process.wait() == 0
        with pytest.raises(VectorStoreUnavailable, match="exited with code 0"):
            await store.count_all()
        await store.aclose()
    async with await EdgeVectorStore.open(tmp_path, "c", DIM) as again:
        assert await again.count_all() == 10


async def test_a_refused_open_reports_the_engine_reason_and_leaves_no_child(tmp_path: Path) -> None:
    async with await EdgeVectorStore.open(tmp_path, "c", DIM) as first:
        before = _children()  # the suite's own children (a shared redis-server) are in it too
        assert _pid(first) in before
        with pytest.raises(VectorStoreUnavailable, match="already open in another process"):
            await EdgeVectorStore.open(tmp_path, "c", DIM)
        assert _children() == before


def _children() -> set[int]:
    """This process's live child processes (Linux)."""
    me = str(os.getpid())
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[1] == me and fields[0] != "Z":
                found.add(int(entry))
    return found


async def test_a_reader_that_gives_up_hands_the_pipe_to_a_caller_still_waiting(tmp_path: Path) -> None:
    """The caller reading the pipe is cancelled before its reply while another caller waits behind it for
    a reply that comes later: that caller must take over the reading, or it waits forever. The first
    caller is cancelled by the test once the second is waiting, not by a deadline, so the order does
    not depend on how fast the machine is."""
    dim = 64
    points = _points(6000, dim)
    async with await EdgeVectorStore.open(tmp_path, "c", dim, indexing_threshold_kb=1) as store:
        await store.upsert(points)
        link = store._link
        first_scope = anyio.CancelScope()
        second_done = anyio.Event()

        async def first() -> None:
            with first_scope:
                await store.optimize()  # builds the HNSW graph in the child

        async def second() -> None:
            with anyio.fail_after(60):
                # Sent behind the first optimize, so its reply comes after the first has left.
                assert await store.optimize() in (True, False)
            second_done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(first)
            await anyio.wait_all_tasks_blocked()  # the first is reading the pipe
            assert link._reading  # type: ignore[attr-defined]
            tg.start_soon(second)
            await anyio.wait_all_tasks_blocked()  # the second has sent and waits behind the reader
            assert len(link._waiting) == 2  # type: ignore[attr-defined]
            first_scope.cancel()
        # The first left while its optimize still ran in the child, and the second got its reply.
        assert first_scope.cancelled_caught
        assert second_done.is_set()
        assert await store.count_all() == len(points)
