"""The shard's writes go one at a time inside ``ShardOps``, searches beside them.

The engine applies writes one at a time anyway (its WAL mutex) and the binding keeps the interpreter lock
for most of a write, so writers running at once only fight over that lock: ``ShardOps`` queues them on a
lock of its own instead. Checked on the real qdrant-edge shard, wrapped so that each call into it waits a
little (releasing the interpreter lock, as a long write would let another thread in) and notes how many
writes and searches are inside it at once.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import TYPE_CHECKING, Any

import numpy as np

from cpersona.stores.vectors.common import PAYLOAD_INDEXES
from cpersona.stores.vectors.edge_worker import ShardOps

if TYPE_CHECKING:
    from pathlib import Path

_DIM = 8
_PAUSE_SECS = 0.005


class _Counting:
    """The real shard; notes the most writes, and the most writes and searches, inside it at once."""

    def __init__(self, shard: Any) -> None:
        self._shard = shard
        self._lock = threading.Lock()
        self._writes = self._searches = 0
        self.most_writes = self.most_beside_a_write = 0

    def _inside(self, write: bool, call: Any, *args: Any) -> Any:
        with self._lock:
            self._writes += write
            self._searches += not write
            self.most_writes = max(self.most_writes, self._writes)
            if self._writes:
                self.most_beside_a_write = max(self.most_beside_a_write, self._writes + self._searches)
        try:
            time.sleep(_PAUSE_SECS)
            return call(*args)
        finally:
            with self._lock:
                self._writes -= write
                self._searches -= not write

    def update(self, op: Any) -> Any:
        return self._inside(True, self._shard.update, op)

    def flush(self) -> Any:
        return self._inside(True, self._shard.flush)

    def query(self, request: Any) -> Any:
        return self._inside(False, self._shard.query, request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._shard, name)


def _upsert(ops: ShardOps, n: int, seed: int) -> None:
    ids = [str(uuid.uuid4()) for _ in range(n)]
    vectors = np.random.default_rng(seed).standard_normal((n, _DIM)).astype(np.float32)
    payloads = [
        {"kind": "memory", "agent_id": "a", "parent": i, "seq": k, "timestamp": 1.0}
        for k, i in enumerate(ids)
    ]
    ops.upsert(ids, vectors, payloads)


def test_writes_queue_one_at_a_time_and_searches_run_beside_them(tmp_path: Path) -> None:
    ops = ShardOps.open(str(tmp_path / "s"), _DIM, None, None, dict(PAYLOAD_INDEXES), "records")
    counting = _Counting(ops._shard)
    ops._shard = counting  # type: ignore[assignment]
    start = threading.Barrier(6)

    def writer(seed: int) -> None:
        start.wait()
        for round_ in range(10):
            _upsert(ops, 20, seed * 100 + round_)
            ops.flush()
        ops.delete_where([("match", "agent_id", ["nobody"])])

    def searcher() -> None:
        start.wait()
        for _ in range(60):
            ops.search([1.0] * _DIM, [("match", "agent_id", ["a"])], 5)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    threads += [threading.Thread(target=searcher) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert counting.most_writes == 1
        assert counting.most_beside_a_write > 1  # a search ran while a write was inside the shard
        assert ops.count(None) == 4 * 10 * 20
    finally:
        ops._shard = counting._shard
        ops.close()
