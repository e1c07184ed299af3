"""Concurrent writes to the embedded vector engine share flushes, and none returns before one covers it.

The shard is the real qdrant-edge engine, in this process (thread mode: the group commit is the store's
own logic, the same in either mode); a recording wrapper around its operations notes when each update
finished and when each flush began and ended (it forwards every call unchanged). The promise checked: every
upsert or delete returns only after a flush that began once all of its updates were applied had ended,
so what it wrote is on stable storage; and concurrent writers need fewer flushes than writes.
"""

from __future__ import annotations

import itertools
import uuid
from typing import TYPE_CHECKING, Any

import anyio
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpersona.stores.protocols import VectorPoint
from cpersona.stores.vectors.edge import EdgeVectorStore

if TYPE_CHECKING:
    from pathlib import Path

    from cpersona.stores.vectors.edge_worker import ShardOps

DIM = 8


class RecordingShard:
    """The real shard, with the ticks (one counter, in call order) at which each flush began and ended."""

    def __init__(self, shard: ShardOps) -> None:
        self._shard = shard
        self._ticks = itertools.count()
        self.flushes: list[tuple[int, int]] = []

    def flush(self) -> None:
        began = next(self._ticks)
        self._shard.flush()
        self.flushes.append((began, next(self._ticks)))

    def tick(self) -> int:
        return next(self._ticks)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._shard, name)


def _points(n: int, seed: int) -> list[VectorPoint]:
    rng = np.random.default_rng(seed)
    return [
        VectorPoint(
            id=str(uuid.uuid4()),
            vector=rng.standard_normal(DIM).astype(np.float32) + 0.1,
            kind="memory",
            agent_id="a",
            project_id="",
            channel="",
            timestamp=1.0,
            seq=k,
        )
        for k in range(n)
    ]


@given(sizes=st.lists(st.integers(1, 40), min_size=1, max_size=8), deletes=st.integers(0, 3))
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
async def test_each_write_returns_after_a_flush_that_covers_it(
    tmp_path: Path, sizes: list[int], deletes: int
) -> None:
    root = tmp_path / uuid.uuid4().hex
    async with await EdgeVectorStore.open(root, "c", DIM, process=False) as store:
        link = store._link
        shard = RecordingShard(link._ops)  # type: ignore[attr-defined]
        link._ops = shard  # type: ignore[attr-defined]
        applied: dict[int, int] = {}  # per task: the tick just after its latest update was counted
        update = store._update

        async def counted_update(what: str, op: str, *args: Any) -> None:
            await update(what, op, *args)
            # No await between the count and this tick: a flush that covers the update begins later.
            applied[anyio.get_current_task().id] = shard.tick()

        store._update = counted_update  # type: ignore[method-assign]
        batches = [_points(n, seed) for seed, n in enumerate(sizes)]
        writes: list[tuple[int, int]] = []  # per write call: its last update's tick, and when it returned

        async def write(batch: list[VectorPoint], delete: bool) -> None:
            await store.upsert(batch)
            writes.append((applied[anyio.get_current_task().id], shard.tick()))
            if delete:
                await store.delete([batch[0].id])
                writes.append((applied[anyio.get_current_task().id], shard.tick()))

        async with anyio.create_task_group() as tg:
            for k, batch in enumerate(batches):
                tg.start_soon(write, batch, k < deletes)
        for last_update, returned in writes:
            assert any(last_update < began and end < returned for began, end in shard.flushes)
        assert len(shard.flushes) <= len(writes)
        assert await store.count_all() == sum(sizes) - min(deletes, len(batches))
