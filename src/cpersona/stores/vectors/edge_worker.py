"""One qdrant-edge shard's operations in plain values, and the loop that serves them from a child process.

The 0.9.0 binding keeps the GIL for most of every call: a search of a 206k-point shard scanned exactly
left a spinning Python thread 17% of its pace, and a flush holds it throughout. In the engine's process
that stalls the event loop and every other Python thread for the length of each search. Run here, in a
process of its own (:mod:`.edge_process` starts it), the shard has its own interpreter lock and the
engine's Python keeps its core; in-process (:mod:`.edge`'s thread mode) the same :class:`ShardOps` run
in worker threads.

This file imports only the standard library and ``qdrant_edge`` and is run by path, so the child starts
in a few tens of milliseconds instead of importing the whole engine. Everything crossing the pipe is a
plain value: filters as clause tuples (``("match", key, values)``, ``("range", key, gte, lt)``), points
as ``(id, vector, payload)``, hits as :data:`HitRow` tuples. The parent is the child's only peer and
the frames are pickles of those values.

Frames are a 4-byte little-endian length, then the pickle. A request is ``(request_id, op, args)``;
the reply ``(request_id, ok, value)``, where ``value`` is the error's text when ``ok`` is false. The
first request must be ``open``. Requests run in a few threads (the shard is safe to share, see
:mod:`.edge`), so replies may come back out of order. The loop ends on ``close`` or when its input
ends (the parent went away); either way the shard is closed, which flushes it.
"""

from __future__ import annotations

import importlib.metadata
import os
import pickle
import struct
import sys
import threading
from typing import IO, TYPE_CHECKING, Any, Final

import qdrant_edge as qe

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import numpy as np
    import numpy.typing as npt

__all__ = [
    "Clause",
    "HitRow",
    "ShardError",
    "ShardOps",
    "read_frame",
    "serve",
    "shard_config",
    "write_frame",
]

Clause = tuple[Any, ...]
"""``("match", key, values)`` or ``("range", key, gte, lt)``; all of a filter's clauses must hold."""

HitRow = tuple[str, float, str, str, int, float, int]
"""One hit: id, score, kind, parent, seq, timestamp, block index."""

HIT_FIELDS: Final = ("kind", "parent", "seq", "timestamp", "block_index")

WORKER_THREADS: Final = 4
"""Requests one shard serves at once (the engine's threads allowance for one shard)."""

_LENGTH: Final = struct.Struct("<I")


class ShardError(Exception):
    """The shard refused or failed an operation; the text says what, for the engine's error."""


class ShardOps:
    """A loaded shard and the operations the engine calls on it, taking and returning plain values."""

    def __init__(self, shard: qe.EdgeShard, *, oversampling: float | None) -> None:
        self._shard = shard
        # Writes (upserts, deletes, flushes) go one at a time; searches do not wait for them. The engine
        # applies writes one at a time anyway (its WAL mutex), while the binding holds the interpreter
        # lock for most of a write: concurrent writers only fought over that lock. Four writers of 500
        # points spent 0.64-0.69x the CPU per point here with them queued on this lock instead (paired in
        # benchmarks/results/store_ab.md).
        self._writing = threading.Lock()
        self._params = (
            None
            if oversampling is None
            else qe.SearchParams(
                quantization=qe.QuantizationSearchParams(rescore=True, oversampling=oversampling)
            )
        )

    @classmethod
    def open(
        cls,
        path: str,
        dim: int,
        oversampling: float | None,
        indexing_threshold_kb: int | None,
        indexes: Mapping[str, str],
        label: str,
    ) -> ShardOps:
        """Create the shard at ``path``, or load it and check it against the configuration; then make sure
        the payload ``indexes`` (field: ``tenant``, ``keyword``, ``float`` or ``integer``) exist.

        ``oversampling`` (candidates per requested hit that a search's 1-bit pass keeps for rescoring)
        gives the shard a binary quantised copy; ``None``, none."""
        config = shard_config(dim, oversampling is not None, indexing_threshold_kb)
        if os.path.exists(path):
            try:
                shard = qe.EdgeShard.load(path, config)
            except Exception as exc:
                raise ShardError(_load_failure(path, label, dim, exc)) from exc
        else:
            shard = qe.EdgeShard.create(path, config)
        try:
            present = set(shard.info().payload_schema)
            missing = [(key, kind) for key, kind in indexes.items() if key not in present]
            for key, kind in missing:
                shard.update(qe.UpdateOperation.create_field_index(key, _schema(kind)))
            if missing:
                shard.flush()
        except BaseException:
            shard.close()
            raise
        return cls(shard, oversampling=oversampling)

    @staticmethod
    def version() -> str:
        return importlib.metadata.version("qdrant-edge-py")

    def search(self, query: list[float], clauses: Sequence[Clause], limit: int) -> list[HitRow]:
        request = qe.QueryRequest(
            limit=limit,
            query=qe.Query.Nearest(query),
            filter=_filter(clauses),
            with_payload=list(HIT_FIELDS),
            with_vector=False,
            params=self._params,
        )
        return [_hit_row(point) for point in self._shard.query(request)]

    def upsert(
        self, ids: Sequence[str], vectors: npt.NDArray[np.float32], payloads: Sequence[dict[str, Any]]
    ) -> None:
        """Insert or replace points: ``vectors`` row ``k`` is point ``ids[k]``'s."""
        # The binding takes a list of floats faster than an array's row (33 against 48 µs for 384 floats).
        with self._writing:
            rows = vectors.tolist()
            batch = [
                qe.Point(pid, row, payload) for pid, row, payload in zip(ids, rows, payloads, strict=True)
            ]
            self._shard.update(qe.UpdateOperation.upsert_points(batch))

    def delete(self, ids: Sequence[str]) -> None:
        with self._writing:
            self._shard.update(qe.UpdateOperation.delete_points(list(ids)))

    def delete_where(self, clauses: Sequence[Clause]) -> None:
        with self._writing:
            self._shard.update(qe.UpdateOperation.delete_points_by_filter(_filter(clauses)))

    def flush(self) -> None:
        with self._writing:
            self._shard.flush()

    def existing(self, ids: Sequence[str]) -> list[str]:
        # The binding requires both flags although its stubs give them defaults.
        return [str(record.id) for record in self._shard.retrieve(list(ids), False, False)]

    def vectors(self, ids: Sequence[str]) -> list[tuple[str, object]]:
        return [(str(r.id), r.vector) for r in self._shard.retrieve(list(ids), False, True)]

    def count(self, clauses: Sequence[Clause] | None) -> int:
        flt = None if clauses is None else _filter(clauses)
        return int(self._shard.count(qe.CountRequest(exact=True, filter=flt)))

    def info(self) -> dict[str, int]:
        info = self._shard.info()
        return {
            "points": int(info.points_count),
            "indexed_vectors": int(info.indexed_vectors_count),
            "segments": int(info.segments_count),
        }

    def optimize(self) -> bool:
        return bool(self._shard.optimize())

    def close(self) -> None:
        self._shard.close()


def _hit_row(point: qe.ScoredPoint) -> HitRow:
    payload = point.payload
    if payload is None:
        raise ShardError(f"the engine returned point {point.id} without its payload")
    # The engine hands ids back as UUID objects, whose text is already canonical. A point stored without
    # a parent is its own (see vectors.common.point_payload: a later release may stop writing it).
    pid = str(point.id)
    return (
        pid,
        float(point.score),
        str(payload["kind"]),
        str(payload.get("parent", pid)),
        int(payload["seq"]),
        float(payload["timestamp"]),
        int(payload.get("block_index", 0)),
    )


def shard_config(dim: int, binary_quantized: bool, indexing_threshold_kb: int | None) -> qe.EdgeConfig:
    """The shard's configuration: cosine vectors of ``dim``, optionally a 1-bit copy and an indexing
    threshold (``None``: the engine's default).

    One search thread: by default the engine searches a shard's segments in parallel on a pool of one
    thread per CPU, and handing each search to that pool cost more than it won on two cores (paired at
    100k memories, one caller: recall p50 0.93x and the engine's CPU per recall 23.7 -> 15.9 ms; 64
    callers 1.03x throughput; the same hits)."""
    return qe.EdgeConfig(
        vectors=qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine),
        quantization_config=qe.BinaryQuantizationConfig(always_ram=True) if binary_quantized else None,
        optimizers=(
            None
            if indexing_threshold_kb is None
            else qe.EdgeOptimizersConfig(indexing_threshold=indexing_threshold_kb)
        ),
        max_search_threads=1,
    )


def _schema(kind: str) -> qe.PayloadSchemaType | qe.KeywordIndexParams:
    if kind == "tenant":
        return qe.KeywordIndexParams(is_tenant=True)
    if kind == "keyword":
        return qe.PayloadSchemaType.Keyword
    if kind == "float":
        return qe.PayloadSchemaType.Float
    if kind == "integer":
        return qe.PayloadSchemaType.Integer
    raise ShardError(f"unknown payload index kind {kind!r}")


def _filter(clauses: Sequence[Clause]) -> qe.Filter:
    must: list[
        qe.FieldCondition
        | qe.IsEmptyCondition
        | qe.IsNullCondition
        | qe.HasIdCondition
        | qe.HasVectorCondition
        | qe.NestedCondition
        | qe.Filter
    ] = []
    for clause in clauses:
        if clause[0] == "match":
            _, key, values = clause
            match = qe.MatchValue(values[0]) if len(values) == 1 else qe.MatchAny(list(values))
            must.append(qe.FieldCondition(key=key, match=match))
        else:
            _, key, gte, lt = clause
            must.append(qe.FieldCondition(key=key, range=qe.RangeFloat(gte=gte, lt=lt)))
    return qe.Filter(must=must)


def _load_failure(path: str, label: str, dim: int, exc: Exception) -> str:
    """Why the shard at ``path`` would not load with our configuration, in the engine's words.

    A load without a configuration succeeds when the data is readable, so if it does, the shard holds
    vectors of another size (or metric) than requested.
    """
    try:
        probe = qe.EdgeShard.load(path)
    except Exception:
        if "WouldBlock" in str(exc):
            return f"{label} is already open in another process or store (its write-ahead log is locked)"
        return f"cannot open {label}: {exc}"
    probe.close()
    return (
        f"{label} already exists with a different vector configuration than the {dim}-d cosine vectors "
        f"requested (a different embedding model?); use another collection name or remove its directory. "
        f"Engine: {exc}"
    )


# ------------------------------------------------------------------------------------------- the child


def read_frame(stream: IO[bytes]) -> Any | None:
    """The next frame's value from a blocking stream; ``None`` when the stream ends."""
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        return None
    (size,) = _LENGTH.unpack(head)
    body = stream.read(size)
    if len(body) < size:
        return None
    # The parent is the only writer of this pipe.
    return pickle.loads(body)


def write_frame(value: object) -> bytes:
    """``value`` as one frame."""
    body = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(body)) + body


def _answer(ops: ShardOps, request_id: int, op: str, args: tuple[Any, ...]) -> bytes:
    try:
        return write_frame((request_id, True, getattr(ops, op)(*args)))
    except Exception as exc:
        return write_frame((request_id, False, str(exc) or type(exc).__name__))
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            raise
        # A Rust panic reaches Python as pyo3's PanicException, which derives from BaseException.
        return write_frame((request_id, False, f"the engine panicked: {exc}"))


def serve(source: IO[bytes], sink: IO[bytes]) -> None:
    """Open the shard the first request names, then answer requests until ``close`` or end of input.

    :data:`WORKER_THREADS` threads take turns at the input: the one holding the turn reads the next
    request, passes the turn on and runs what it read. So the thread the kernel wakes for a request is
    the one that runs it; handing each request from a reader to a pool thread cost a second wake-up,
    0.1-0.7 ms of a search with the cores busy.
    """
    first = read_frame(source)
    if first is None:
        return
    request_id, op, args = first
    try:
        if op != "open":
            raise ShardError(f"the first request must be open, not {op!r}")
        ops = ShardOps.open(*args)
        sink.write(write_frame((request_id, True, ShardOps.version())))
    except Exception as exc:
        sink.write(write_frame((request_id, False, str(exc) or type(exc).__name__)))
        sink.flush()
        return
    sink.flush()
    loop = _Turns(ops, source, sink)
    threads = [
        threading.Thread(target=loop.work, name=f"cpersona-shard-{i}") for i in range(1, WORKER_THREADS)
    ]
    for thread in threads:
        thread.start()
    loop.work()
    for thread in threads:
        thread.join()
    # Every request read before the end has been answered by now; closing flushes the shard.
    closed = _answer(ops, 0 if loop.last is None else loop.last[0], "close", ())
    if loop.failure is not None:
        raise loop.failure
    if loop.last is not None:
        loop.reply(closed)


class _Turns:
    """The threads of :func:`serve`, taking turns at reading requests."""

    def __init__(self, ops: ShardOps, source: IO[bytes], sink: IO[bytes]) -> None:
        self._ops = ops
        self._source = source
        self._sink = sink
        self._turn = threading.Lock()
        self._write = threading.Lock()
        self._ended = False
        self.last: tuple[Any, ...] | None = None
        """The ``close`` request that ended the loop; ``None`` when the input ended."""
        self.failure: BaseException | None = None

    def work(self) -> None:
        while (request := self._next()) is not None:
            request_id, op, args = request
            try:
                self.reply(_answer(self._ops, request_id, op, args))
            except OSError:
                # The parent's end of the pipe is gone: stop taking requests, so the shard closes.
                self._ended = True
                return

    def _next(self) -> tuple[Any, ...] | None:
        """The next request to run; ``None`` once the input ended or ``close`` came (for every thread)."""
        with self._turn:
            if self._ended:
                return None
            try:
                request = read_frame(self._source)
            except BaseException as exc:
                # An unreadable frame ends the loop; serve() raises it once every thread is done.
                self.failure, request = exc, None
            if request is None or request[1] == "close":
                self._ended, self.last = True, request
                return None
            return tuple(request)

    def reply(self, frame: bytes) -> None:
        with self._write:
            self._sink.write(frame)
            self._sink.flush()


if __name__ == "__main__":
    serve(sys.stdin.buffer, sys.stdout.buffer)
