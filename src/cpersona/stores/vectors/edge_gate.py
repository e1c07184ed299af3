"""How engine calls reach a qdrant-edge shard in this process, from worker threads, and how closing it
waits for them (the thread mode; :mod:`.edge_process` is the child-process mode)."""

from __future__ import annotations

import functools
import threading
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.to_thread

from cpersona.errors import VectorStoreUnavailable
from cpersona.stores.vectors.edge_worker import WORKER_THREADS, ShardOps

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["ShardGate", "ThreadLink"]

_T = TypeVar("_T")


class ShardGate:
    """Admits engine calls until the shard closes, and lets the close wait for the calls inside.

    Used only from worker threads. A call abandoned by its deadline keeps running in its thread; the
    close must not pull the shard from under it, so the count is kept here, where the work happens,
    and not on the event-loop side.
    """

    def __init__(self, label: str) -> None:
        self._label = label
        self._cond = threading.Condition()
        self._inside = 0
        self._closed = False

    def call(self, work: Callable[[], _T]) -> _T:
        with self._cond:
            if self._closed:
                raise VectorStoreUnavailable(f"{self._label} is closed")
            self._inside += 1
        try:
            return work()
        except BaseException as exc:
            if isinstance(exc, Exception | KeyboardInterrupt | SystemExit):
                raise
            # A Rust panic reaches Python as pyo3's PanicException, which derives from BaseException.
            # In a worker thread nothing else of that kind can occur (cancellation happens on the
            # event-loop side), so it is reported as the engine failure it is.
            raise VectorStoreUnavailable(f"{self._label}: the engine panicked: {exc}") from exc
        finally:
            with self._cond:
                self._inside -= 1
                self._cond.notify_all()

    def close(self, release: Callable[[], None], wait_secs: float) -> None:
        with self._cond:
            if self._closed:
                return
            self._closed = True
            if not self._cond.wait_for(lambda: self._inside == 0, timeout=wait_secs):
                raise VectorStoreUnavailable(
                    f"{self._label}: {self._inside} engine call(s) still running after {wait_secs}s; the "
                    "shard is left open and is released when the store is garbage-collected"
                )
        release()


class ThreadLink:
    """Calls into a shard opened in this process, each in a worker thread (at most
    :data:`~.edge_worker.WORKER_THREADS` at once). Start it with :meth:`start`."""

    pid = None
    alive = True  # it lives and dies with this process

    def __init__(self, ops: ShardOps, label: str, close_wait_secs: float) -> None:
        self._ops = ops
        self._gate = ShardGate(label)
        self._limiter = anyio.CapacityLimiter(WORKER_THREADS)
        self._close_wait = close_wait_secs

    @classmethod
    async def start(
        cls, label: str, open_args: tuple[Any, ...], close_wait_secs: float
    ) -> tuple[ThreadLink, str]:
        """Open the shard; the link and the engine's version. Raises :class:`~.edge_worker.ShardError`
        when the shard would not open."""

        def work() -> tuple[ShardOps, str]:
            # The version reads the package's metadata files: here, off the event loop, too.
            return ShardOps.open(*open_args), ShardOps.version()

        # If the caller's deadline abandons this thread, the shard it may still open is dropped with the
        # thread's result, and the engine closes a dropped shard (flushing it, freeing the lock).
        ops, version = await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
        return cls(ops, label, close_wait_secs), version

    async def call(self, op: str, *args: Any) -> Any:
        work = functools.partial(getattr(self._ops, op), *args)
        # abandon_on_cancel: without it the caller's deadline would wait for the thread to finish.
        return await anyio.to_thread.run_sync(
            self._gate.call, work, limiter=self._limiter, abandon_on_cancel=True
        )

    async def close(self) -> None:
        """Wait, in a worker thread, for the calls still inside the engine, then close the shard."""
        await anyio.to_thread.run_sync(
            self._gate.close, self._ops.close, self._close_wait, abandon_on_cancel=True
        )
