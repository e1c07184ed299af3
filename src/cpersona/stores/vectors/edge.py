"""The vector store on the embedded Qdrant engine (``qdrant-edge``): one shard directory per collection.

The shard is the real Rust engine, on disk at ``<root>/<name>`` (the factory passes ``<data_dir>/qdrant``).
Its Python API is synchronous and holds the GIL for most of every call, so by default each shard runs in
a child process of its own (:mod:`.edge_process`, ``CPERSONA_QDRANT_PROCESS``), where its searches and
flushes take their own core's interpreter and leave this one to the event loop; with
``qdrant_process=False`` it runs here, each call in a worker thread (:mod:`.edge_gate`). Either way the
same :class:`~.edge_worker.ShardOps` do the work, and this class keeps the deadlines, the chunking, the
group commit and the error mapping. What the engine guarantees, as found in qdrant-edge 0.9.0 (its
source and by measurement):

Durability
    The write-ahead log is on (the engine's default, fixed when the shard is created). ``update()``
    appends the operation to the memory-mapped WAL and applies it, without syncing: the operation
    survives a crash of the process holding the shard (the WAL is replayed on load — checked by killing
    a writer before any flush) but not a power loss. ``flush()`` syncs the WAL and the segments. So
    every upsert and delete here ends with a flush: when it returns, the change is on stable storage. A
    flush after a small write costs about 10 ms, after 500 points 45-130 ms, with the GIL held
    throughout; concurrent writers share one flush where they can (group commit,
    :meth:`EdgeVectorStore._flushed`).

Threads and the GIL
    The Rust shard is safe to share between threads: writes serialise on the WAL mutex and the
    segments' update lock, reads take the segments' read lock; concurrent readers and writers were
    exercised without error, so several calls are let in at once (:data:`~.edge_worker.WORKER_THREADS`,
    in the child or here); writes among them queue on a lock of :class:`~.edge_worker.ShardOps`, which
    they would otherwise spend fighting over the interpreter lock. The 0.9.0 binding releases the GIL
    for only part of a call: beside an exact search of a 206k-point shard a spinning Python thread
    kept 17% of its pace, beside indexed searches with payloads 27-37%. In this process that stalls
    the event loop for much of each search; at 64 callers on 100k memories it was 54% of the samples
    that held the lock. In the child it costs this process one pipe round trip per call (paired at
    100k memories, 64 callers: 95.9 -> 122.2 recalls/s, `benchmarks/results/recall_ab_fleet.md`).

Lifecycle
    The shard takes an exclusive lock on its WAL, so a second process (or a second open in this one)
    is refused with :class:`~cpersona.VectorStoreUnavailable`. Closing lets the calls still inside the
    engine finish, then closes the shard, which flushes it; a child process then exits, and one whose
    parent goes away exits when its input ends. A child that dies unasked (killed, SIGBUS on a full
    disk) fails its calls until :meth:`EdgeVectorStore.restart` starts another on the same directory,
    which replays the WAL; the engine's supervisor does that (:mod:`cpersona.stores.supervision`).

The engine has no background optimiser: points accumulate in one appendable segment (searched by
brute force) until :meth:`EdgeVectorStore.optimize` runs, which is also when HNSW graphs and the binary
quantised copy (``binary_quantized=True``) are built and deleted points are vacuumed.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

import anyio

from cpersona.errors import VectorStoreUnavailable
from cpersona.stores import owner_only
from cpersona.stores.protocols import VectorHit
from cpersona.stores.vectors.common import (
    BQ_OVERSAMPLING,
    PAYLOAD_INDEXES,
    MatchClause,
    chunked,
    filter_clauses,
    finite_timeout,
    matches_nothing,
    point_id,
    prepare_points,
    query_vector,
    stored_vector,
    top_hits,
    validate_collection,
)
from cpersona.stores.vectors.edge_gate import ThreadLink
from cpersona.stores.vectors.edge_process import ProcessLink
from cpersona.stores.vectors.edge_worker import Clause, ShardError

if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import TracebackType

    from cpersona.stores.protocols import PointKind, Vector, VectorFilter, VectorPoint

__all__ = ["EdgeVectorStore"]

_WRITE_CHUNK = 256
"""Points per ``update()`` call: bounds how long one call holds the engine (and its GIL)."""

_FLUSH_LINGER_SECS = 0.02  # how long a flush may wait for updates under way to join it (``_flushed``)

_READ_CHUNK = 1024
"""Ids per ``retrieve()`` call in :meth:`EdgeVectorStore.existing` and :meth:`EdgeVectorStore.vectors`."""


class _Link(Protocol):
    """Where the shard's operations run: :class:`~.edge_process.ProcessLink` or
    :class:`~.edge_gate.ThreadLink`."""

    @property
    def pid(self) -> int | None: ...

    @property
    def alive(self) -> bool: ...

    async def call(self, op: str, *args: Any) -> Any: ...

    async def close(self) -> None: ...


def shard_clauses(flt: VectorFilter) -> list[Clause]:
    """A filter as the worker's plain clauses (call :func:`matches_nothing` first)."""
    return [
        ("match", c.key, c.values) if isinstance(c, MatchClause) else ("range", c.key, c.gte, c.lt)
        for c in filter_clauses(flt)
    ]


async def _start_link(
    label: str, args: tuple[Any, ...], limit_secs: float, *, process: bool
) -> tuple[_Link, str]:
    """Open the shard in a child process (or in worker threads here) within ``limit_secs``; the link and
    the engine's version."""
    try:
        with anyio.fail_after(limit_secs):
            if process:
                return await ProcessLink.start(label, args)
            return await ThreadLink.start(label, args, limit_secs)
    except VectorStoreUnavailable:
        raise
    except ShardError as exc:
        raise VectorStoreUnavailable(str(exc)) from exc
    except TimeoutError as exc:
        raise VectorStoreUnavailable(f"opening {label} took longer than {limit_secs}s") from exc
    except Exception as exc:
        raise VectorStoreUnavailable(f"cannot open {label}: {exc}") from exc


class EdgeVectorStore:
    """A :class:`~cpersona.stores.protocols.VectorStore` on one qdrant-edge shard. Open with :meth:`open`."""

    def __init__(
        self,
        link: _Link,
        *,
        path: Path,
        name: str,
        dim: int,
        timeout_secs: float,
        binary_quantized: bool,
        version: str,
        open_args: tuple[Any, ...] = (),
    ) -> None:
        self._link = link
        self._open_args = open_args
        self._path = path
        self._name = name
        self._dim = dim
        self._timeout = timeout_secs
        self._binary_quantized = binary_quantized
        self._engine_name = f"qdrant-edge {version}"
        self._label = f"vector collection {name!r} ({path})"
        self._closed = False
        # Group commit (see _flushed): updates applied, covered by a flush, and under way.
        self._applied = self._synced = self._updating = 0
        self._quiet: anyio.Event | None = None
        self._flush_lock = anyio.Lock()

    @classmethod
    async def open(
        cls,
        root: Path,
        name: str,
        dim: int,
        *,
        timeout_secs: float = 10.0,
        binary_quantized: bool = False,
        indexing_threshold_kb: int | None = None,
        process: bool = True,
    ) -> EdgeVectorStore:
        """Open the shard ``<root>/<name>`` of ``dim``-d cosine vectors, creating it when absent.

        ``binary_quantized`` adds a 1-bit copy of the vectors (built by :meth:`optimize`) that searches
        scan first, rescoring their candidates with the original vectors. ``indexing_threshold_kb``
        is the segment size above which :meth:`optimize` builds an index (``None``: the engine's
        default). ``process`` runs the shard in a child process (else in worker threads here).
        Raises :class:`~cpersona.VectorStoreUnavailable` if the shard cannot be opened within
        ``timeout_secs``, is open elsewhere, or holds vectors of another dimension.
        """
        validate_collection(name, dim)
        timeout = finite_timeout(timeout_secs)
        path = Path(root) / name
        label = f"vector collection {name!r} ({path})"
        await anyio.Path(path.parent).mkdir(parents=True, exist_ok=True, mode=owner_only.DIR_MODE)
        oversampling = BQ_OVERSAMPLING if binary_quantized else None
        args = (str(path), dim, oversampling, indexing_threshold_kb, dict(PAYLOAD_INDEXES), label)
        link, version = await _start_link(label, args, timeout, process=process)
        return cls(
            link,
            path=path,
            name=name,
            dim=dim,
            timeout_secs=timeout,
            binary_quantized=binary_quantized,
            version=version,
            open_args=args,
        )

    @property
    def engine_name(self) -> str:
        return self._engine_name

    @property
    def name(self) -> str:
        return self._name

    @property
    def path(self) -> Path:
        return self._path

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def binary_quantized(self) -> bool:
        return self._binary_quantized

    @property
    def label(self) -> str:
        return self._label

    @property
    def process_id(self) -> int | None:
        """The child process that holds the shard (``None`` in thread mode), for CPU accounting."""
        return self._link.pid

    @property
    def pid(self) -> int | None:
        return self._link.pid

    @property
    def available(self) -> bool:
        """Whether the shard can answer: open, and its child (if it has one) running."""
        return not self._closed and self._link.alive

    @property
    def stopping(self) -> bool:
        """Whether the store was closed: its child's exit is then no crash."""
        return self._closed

    async def wait_exited(self) -> int:
        """Wait until the shard's child process exits; its exit code. Only a store whose shard runs in a
        child process (:attr:`process_id`) has one to wait for."""
        link = self._link
        if not isinstance(link, ProcessLink):
            raise RuntimeError(f"{self._label} runs in this process: there is no child to wait for")
        return await link.wait_exited()

    async def restart(self) -> None:
        """Start a new child on the shard after the last one died, and send every later call to it.

        The dead child is reaped first, which frees the WAL lock; the new one replays the WAL, so every
        update the dead one applied is there again. Raises :class:`~cpersona.VectorStoreUnavailable`
        when the shard would not open (the old child stays the dead one, for another try)."""
        old = self._link
        if not isinstance(old, ProcessLink) or self._closed:
            return
        if old.alive:
            raise RuntimeError(f"{self._label}: its child process is still running")
        await old.kill()
        link, _ = await _start_link(self._label, self._open_args, self._timeout, process=True)
        if self._closed:
            # Closed while the new child started: it must not outlive the store.
            await link.close()
            return
        self._link = link

    async def __aenter__(self) -> EdgeVectorStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _run(self, what: str, op: str, *args: Any, deadline: float | None = None) -> Any:
        """Run one engine operation under the deadline, mapping every failure."""
        if self._closed:
            raise VectorStoreUnavailable(f"{what} on {self._label}: the store is closed")
        seconds = self._timeout if deadline is None else deadline
        try:
            with anyio.fail_after(seconds):
                return await self._link.call(op, *args)
        except VectorStoreUnavailable:
            raise
        except TimeoutError as exc:
            raise VectorStoreUnavailable(f"{what} on {self._label} did not finish within {seconds}s") from exc
        except Exception as exc:
            raise VectorStoreUnavailable(f"{what} on {self._label} failed: {exc}") from exc

    async def upsert(self, points: Sequence[VectorPoint]) -> None:
        """Insert or replace points; on stable storage when it returns (each write ends with a flush)."""
        prepared = prepare_points(points, self._dim)
        if not prepared:
            return
        for chunk in prepared.chunks(_WRITE_CHUNK):
            await self._update("upsert", "upsert", chunk.ids, chunk.vectors, chunk.payloads)
        await self._flushed()

    async def delete(self, ids: Sequence[str]) -> None:
        """Delete points by id (unknown ids are ignored); flushed when it returns."""
        wanted: list[str] = list(dict.fromkeys(point_id(i) for i in ids))
        if not wanted:
            return
        for chunk in chunked(wanted, _WRITE_CHUNK):
            await self._update("delete", "delete", list(chunk))
        await self._flushed()

    async def delete_where(self, flt: VectorFilter) -> None:
        """Delete every point that matches the filter; flushed when it returns."""
        if matches_nothing(flt):
            return
        await self._update("delete by filter", "delete_where", shard_clauses(flt))
        await self._flushed()

    async def _update(self, what: str, op: str, *args: Any) -> None:
        self._updating += 1
        try:
            await self._run(what, op, *args)
        finally:
            self._updating -= 1
            if not self._updating and self._quiet is not None:
                self._quiet.set()
        self._applied += 1  # counted once applied, so a flush that starts after this covers it

    async def _join_updates_under_way(self) -> None:
        """Wait (a little) for other writers' updates inside the engine, so the flush covers them too."""
        if self._updating:
            self._quiet = anyio.Event()  # only the flush lock's holder waits on it
            with anyio.move_on_after(_FLUSH_LINGER_SECS):
                await self._quiet.wait()

    async def _flushed(self) -> None:
        """Put every update this caller applied on stable storage: by a flush of its own, or by one that
        began after its updates were applied (group commit).

        A flush of 500 points takes 45-130 ms (with the GIL held: in thread mode the event loop stands
        still meanwhile). Concurrent writers that reach this point while a flush runs share the next one
        instead of each waiting for its own: the flush syncs whatever the shard had applied when it
        began, and ``_applied`` counts an update only once it has been applied. A flush also waits up
        to ``_FLUSH_LINGER_SECS`` for updates other writers have under way (a lone writer never waits):
        at four writers of 500 points that took flushes from 25 to 19 per 36 batches, +8-12% records/s.
        """
        wanted = self._applied
        try:
            with anyio.fail_after(self._timeout):
                await self._flush_lock.acquire()
        except TimeoutError as exc:
            raise VectorStoreUnavailable(
                f"flush on {self._label}: waited longer than {self._timeout}s for the flushes before it"
            ) from exc
        try:
            if self._synced >= wanted:
                return
            await self._join_updates_under_way()
            covered = self._applied
            await self._run("flush", "flush")
            self._synced = max(self._synced, covered)
        finally:
            self._flush_lock.release()

    async def search(
        self, vector: Vector, flt: VectorFilter, limit: int, *, open_tail: bool = False
    ) -> list[VectorHit]:
        """The ``limit`` nearest points that match ``flt``, best first (ties: lower ``seq`` first)."""
        if limit < 0:
            raise ValueError(f"search limit must be at least 0, got {limit}")
        query = query_vector(vector, self._dim)
        if limit == 0 or matches_nothing(flt):
            return []
        clauses = shard_clauses(flt)

        async def fetch(n: int) -> list[VectorHit]:
            rows = await self._run("search", "search", query, clauses, n)
            return [
                VectorHit(pid, score, cast("PointKind", kind), parent, seq, timestamp, index)
                for pid, score, kind, parent, seq, timestamp, index in rows
            ]

        return await top_hits(fetch, limit, open_tail=open_tail)

    async def existing(self, ids: Sequence[str]) -> set[str]:
        """Which of these ids have a point (in canonical UUID form)."""
        wanted: list[str] = list(dict.fromkeys(point_id(i) for i in ids))
        found: set[str] = set()
        for chunk in chunked(wanted, _READ_CHUNK):
            found.update(point_id(i) for i in await self._run("existing", "existing", list(chunk)))
        return found

    async def vectors(self, ids: Sequence[str]) -> dict[str, Vector]:
        """The stored (unit-length) vectors of those of these ids that have a point."""
        wanted: list[str] = list(dict.fromkeys(point_id(i) for i in ids))
        found: dict[str, Vector] = {}
        for chunk in chunked(wanted, _READ_CHUNK):
            rows = await self._run("retrieve", "vectors", list(chunk))
            found.update((point_id(i), stored_vector(v, self._dim)) for i, v in rows)
        return found

    async def count(self, flt: VectorFilter) -> int:
        """How many points match the filter (exact)."""
        if matches_nothing(flt):
            return 0
        return int(await self._run("count", "count", shard_clauses(flt)))

    async def count_all(self) -> int:
        """How many points the shard holds (exact)."""
        return int(await self._run("count", "count", None))

    async def shard_info(self) -> dict[str, int]:
        """What the shard reports of itself: ``points``, ``indexed_vectors`` and ``segments`` (counts, not
        sizes), for benchmarks and diagnostics."""
        return dict(await self._run("info", "info"))

    async def optimize(self, *, timeout_secs: float | None = None) -> bool:
        """Run the engine's optimisers now (index, quantise, vacuum); ``True`` if anything changed.

        The engine has no background optimiser, so a maintenance task should call this now and then.
        It can take seconds on a large shard (holding the GIL of the process the shard is in).
        """
        deadline = None if timeout_secs is None else finite_timeout(timeout_secs)
        return bool(await self._run("optimize", "optimize", deadline=deadline))

    async def aclose(self) -> None:
        """Let calls still inside the engine finish, then close (and so flush) the shard. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            # Shielded: a cancelled caller must still release the shard, or its WAL lock stays held.
            with anyio.fail_after(2 * self._timeout, shield=True):
                await self._link.close()
        except VectorStoreUnavailable:
            raise
        except TimeoutError as exc:
            raise VectorStoreUnavailable(
                f"closing {self._label} took longer than {2 * self._timeout}s"
            ) from exc
        except Exception as exc:
            raise VectorStoreUnavailable(f"closing {self._label} failed: {exc}") from exc
