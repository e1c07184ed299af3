"""How engine calls reach a qdrant-edge shard from worker threads, and how closing it waits for them."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, TypeVar

from cpersona.errors import VectorStoreUnavailable

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["ShardGate"]

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
