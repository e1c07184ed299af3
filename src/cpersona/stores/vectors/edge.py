"""The vector store on the embedded Qdrant engine (``qdrant-edge``): one shard directory per collection.

The shard is the real Rust engine, in this process, on disk at ``<root>/<name>`` (the factory passes
``<data_dir>/qdrant``). Its Python API is synchronous, so every call runs in a worker thread under the
store's deadline. What the engine guarantees, as found in qdrant-edge 0.9.0 (its source and by
measurement):

Durability
    The write-ahead log is on (the engine's default, fixed when the shard is created). ``update()``
    appends the operation to the memory-mapped WAL and applies it, without syncing: the operation
    survives a crash of this process (the WAL is replayed on load — checked by killing a writer before
    any flush) but not a power loss. ``flush()`` syncs the WAL and the segments. So every upsert and
    delete here ends with a flush: when it returns, the change is on stable storage. A flush after a
    small write costs about 10 ms, after 500 points 45-130 ms, with the GIL held throughout; concurrent
    writers share one flush where they can (group commit, :meth:`EdgeVectorStore._flushed`).

Threads
    The Rust shard is safe to share between threads: writes serialise on the WAL mutex and the
    segments' update lock, reads take the segments' read lock; concurrent readers and writers were
    exercised without error. The store therefore lets several calls in at once (``_CONCURRENT_CALLS``).
    The 0.9.0 binding releases the GIL for only part of a call (it imports ``PyEval_SaveThread``):
    measured on a 266k-point shard, a CPU-bound Python thread kept 43% of its pace beside back-to-back
    searches without payload and 27% beside searches that return payloads, against 100% beside a
    sleeping thread. So an engine call still stalls the event loop for much of its run, and turning
    results into Python objects is the part that competes for the GIL; calls are kept small (batches
    are chunked). Running searches one at a time in a single batch (``query_batch``) was tried and
    made recalls slower, one caller and eight alike: the overlap of concurrent calls is real.

Lifecycle
    The shard takes an exclusive lock on its WAL, so a second process (or a second open in this one)
    is refused with :class:`~cpersona.VectorStoreUnavailable`. Closing waits, in a worker thread, for
    the calls still inside the engine, then closes the shard, which flushes it.

The engine has no background optimiser: points accumulate in one appendable segment (searched by
brute force) until :meth:`EdgeVectorStore.optimize` runs, which is also when HNSW graphs and the binary
quantised copy (``binary_quantized=True``) are built and deleted points are vacuumed.

The shard's configuration, its opening and the filter in engine terms are in :mod:`.edge_shard`; the
gate that counts the calls inside the engine is :mod:`.edge_gate`.
"""

from __future__ import annotations

import functools
import importlib.metadata
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import anyio
import anyio.to_thread
import qdrant_edge as qe

from cpersona.errors import VectorStoreUnavailable
from cpersona.stores.vectors.common import (
    BQ_OVERSAMPLING,
    HIT_FIELDS,
    PreparedPoint,
    chunked,
    finite_timeout,
    hit_from_payload,
    matches_nothing,
    point_id,
    prepare_points,
    query_vector,
    stored_vector,
    top_hits,
    validate_collection,
)
from cpersona.stores.vectors.edge_gate import ShardGate
from cpersona.stores.vectors.edge_shard import edge_config, edge_filter, open_shard

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from types import TracebackType

    from cpersona.stores.protocols import Vector, VectorFilter, VectorHit, VectorPoint

__all__ = ["EdgeVectorStore"]

_T = TypeVar("_T")

_CONCURRENT_CALLS = 4
"""Worker threads one shard may occupy at once (see "Threads" above: the shard is safe to share)."""

_WRITE_CHUNK = 256
"""Points per ``update()`` call: bounds how long one call holds the engine (and, today, the GIL)."""

_FLUSH_LINGER_SECS = 0.02  # how long a flush may wait for updates under way to join it (``_flushed``)

_READ_CHUNK = 1024
"""Ids per ``retrieve()`` call in :meth:`EdgeVectorStore.existing` and :meth:`EdgeVectorStore.vectors`."""


class EdgeVectorStore:
    """A :class:`~cpersona.stores.protocols.VectorStore` on one qdrant-edge shard. Open with :meth:`open`."""

    def __init__(
        self,
        shard: qe.EdgeShard,
        *,
        path: Path,
        name: str,
        dim: int,
        timeout_secs: float,
        binary_quantized: bool,
        version: str,
    ) -> None:
        self._shard = shard
        self._path = path
        self._name = name
        self._dim = dim
        self._timeout = timeout_secs
        self._binary_quantized = binary_quantized
        self._engine_name = f"qdrant-edge {version}"
        self._label = f"vector collection {name!r} ({path})"
        self._limiter = anyio.CapacityLimiter(_CONCURRENT_CALLS)
        self._gate = ShardGate(self._label)
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
    ) -> EdgeVectorStore:
        """Open the shard ``<root>/<name>`` of ``dim``-d cosine vectors, creating it when absent.

        ``binary_quantized`` adds a 1-bit copy of the vectors (built by :meth:`optimize`) that searches
        scan first, rescoring their candidates with the original vectors. ``indexing_threshold_kb``
        is the segment size above which :meth:`optimize` builds an index (``None``: the engine's
        default). Raises :class:`~cpersona.VectorStoreUnavailable` if the shard cannot be opened within
        ``timeout_secs``, is open elsewhere, or holds vectors of another dimension.
        """
        validate_collection(name, dim)
        timeout = finite_timeout(timeout_secs)
        path = Path(root) / name
        label = f"vector collection {name!r} ({path})"
        config = edge_config(dim, binary_quantized, indexing_threshold_kb)

        def work() -> tuple[qe.EdgeShard, str]:
            shard = open_shard(path, config, label, dim)
            return shard, importlib.metadata.version("qdrant-edge-py")

        try:
            with anyio.fail_after(timeout):
                # If the deadline abandons this thread, the shard it may still open is dropped with the
                # thread's result, and the engine closes a dropped shard (flushing it, freeing the lock).
                shard, version = await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
        except VectorStoreUnavailable:
            raise
        except TimeoutError as exc:
            raise VectorStoreUnavailable(f"opening {label} took longer than {timeout}s") from exc
        except Exception as exc:
            raise VectorStoreUnavailable(f"cannot open {label}: {exc}") from exc
        return cls(
            shard,
            path=path,
            name=name,
            dim=dim,
            timeout_secs=timeout,
            binary_quantized=binary_quantized,
            version=version,
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

    async def __aenter__(self) -> EdgeVectorStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _run(self, what: str, work: Callable[[], _T], *, deadline: float | None = None) -> _T:
        """Run one engine call in a worker thread, under the deadline, mapping every failure."""
        if self._closed:
            raise VectorStoreUnavailable(f"{what} on {self._label}: the store is closed")
        seconds = self._timeout if deadline is None else deadline
        try:
            with anyio.fail_after(seconds):
                # abandon_on_cancel: without it the deadline would wait for the thread to finish.
                return await anyio.to_thread.run_sync(
                    self._gate.call, work, limiter=self._limiter, abandon_on_cancel=True
                )
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
        for chunk in chunked(prepared, _WRITE_CHUNK):
            await self._update("upsert", functools.partial(self._upsert_chunk, chunk))
        await self._flushed()

    def _upsert_chunk(self, chunk: Sequence[PreparedPoint]) -> None:
        points = [qe.Point(p.id, p.vector, p.payload) for p in chunk]
        self._shard.update(qe.UpdateOperation.upsert_points(points))

    async def delete(self, ids: Sequence[str]) -> None:
        """Delete points by id (unknown ids are ignored); flushed when it returns."""
        wanted: list[str] = list(dict.fromkeys(point_id(i) for i in ids))
        if not wanted:
            return
        for chunk in chunked(wanted, _WRITE_CHUNK):
            operation = qe.UpdateOperation.delete_points(list(chunk))
            await self._update("delete", functools.partial(self._shard.update, operation))
        await self._flushed()

    async def delete_where(self, flt: VectorFilter) -> None:
        """Delete every point that matches the filter; flushed when it returns."""
        if matches_nothing(flt):
            return
        operation = qe.UpdateOperation.delete_points_by_filter(edge_filter(flt))
        await self._update("delete by filter", functools.partial(self._shard.update, operation))
        await self._flushed()

    async def _update(self, what: str, work: Callable[[], None]) -> None:
        self._updating += 1
        try:
            await self._run(what, work)
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

        The 0.9.0 binding holds the GIL through a flush (measured: a Python thread beside it keeps 4-14%
        of its pace for the 45-130 ms a flush of 500 points takes), so the event loop stands still for
        each one. Concurrent writers that reach this point while a flush runs share the next one
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
            await self._run("flush", self._shard.flush)
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
        shard_filter = edge_filter(flt)
        params = (
            qe.SearchParams(
                quantization=qe.QuantizationSearchParams(rescore=True, oversampling=BQ_OVERSAMPLING)
            )
            if self._binary_quantized
            else None
        )

        def fetch_in_thread(n: int) -> list[VectorHit]:
            request = qe.QueryRequest(
                limit=n,
                query=qe.Query.Nearest(query),
                filter=shard_filter,
                with_payload=list(HIT_FIELDS),
                with_vector=False,
                params=params,
            )
            return [hit_from_payload(p.id, p.score, p.payload) for p in self._shard.query(request)]

        async def fetch(n: int) -> list[VectorHit]:
            return await self._run("search", functools.partial(fetch_in_thread, n))

        return await top_hits(fetch, limit, open_tail=open_tail)

    async def existing(self, ids: Sequence[str]) -> set[str]:
        """Which of these ids have a point (in canonical UUID form)."""
        wanted: list[str] = list(dict.fromkeys(point_id(i) for i in ids))
        found: set[str] = set()
        for chunk in chunked(wanted, _READ_CHUNK):
            found.update(await self._run("existing", functools.partial(self._existing_chunk, chunk)))
        return found

    def _existing_chunk(self, chunk: Sequence[str]) -> set[str]:
        # The binding requires both flags although its stubs give them defaults.
        records = self._shard.retrieve(list(chunk), False, False)
        return {point_id(str(record.id)) for record in records}

    async def vectors(self, ids: Sequence[str]) -> dict[str, Vector]:
        """The stored (unit-length) vectors of those of these ids that have a point."""
        wanted: list[str] = list(dict.fromkeys(point_id(i) for i in ids))
        found: dict[str, Vector] = {}
        for chunk in chunked(wanted, _READ_CHUNK):
            found.update(await self._run("retrieve", functools.partial(self._vectors_chunk, chunk)))
        return found

    def _vectors_chunk(self, chunk: Sequence[str]) -> dict[str, Vector]:
        records = self._shard.retrieve(list(chunk), False, True)
        return {point_id(str(r.id)): stored_vector(r.vector, self._dim) for r in records}

    async def count(self, flt: VectorFilter) -> int:
        """How many points match the filter (exact)."""
        if matches_nothing(flt):
            return 0
        request = qe.CountRequest(exact=True, filter=edge_filter(flt))
        return await self._run("count", functools.partial(self._shard.count, request))

    async def count_all(self) -> int:
        """How many points the shard holds (exact)."""
        request = qe.CountRequest(exact=True)
        return await self._run("count", functools.partial(self._shard.count, request))

    async def optimize(self, *, timeout_secs: float | None = None) -> bool:
        """Run the engine's optimisers now (index, quantise, vacuum); ``True`` if anything changed.

        The engine has no background optimiser, so a maintenance task should call this now and then.
        It can take seconds on a large shard and, with the 0.9.0 binding, holds the GIL meanwhile.
        """
        deadline = None if timeout_secs is None else finite_timeout(timeout_secs)
        return await self._run("optimize", self._shard.optimize, deadline=deadline)

    async def aclose(self) -> None:
        """Wait for calls still inside the engine, then close (and so flush) the shard. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            # Shielded: a cancelled caller must still release the shard, or its WAL lock stays held.
            with anyio.fail_after(2 * self._timeout, shield=True):
                await anyio.to_thread.run_sync(
                    self._gate.close, self._shard.close, self._timeout, abandon_on_cancel=True
                )
        except VectorStoreUnavailable:
            raise
        except TimeoutError as exc:
            raise VectorStoreUnavailable(
                f"closing {self._label} took longer than {2 * self._timeout}s"
            ) from exc
        except Exception as exc:
            raise VectorStoreUnavailable(f"closing {self._label} failed: {exc}") from exc
