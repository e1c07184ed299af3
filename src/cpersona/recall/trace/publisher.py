"""The live trace channel: recall traces go to a bounded queue that one task hands to a trace sink.

A recall never waits for the sink here. :meth:`TracePublisher.offer` puts ``(agent_id, trace)`` on an
in-memory queue without blocking and returns at once; when the queue is full the trace is dropped and
counted. One task (:meth:`TracePublisher.run`) takes traces off the queue and publishes each one, as its
``model_dump_json`` (:mod:`cpersona.model.trace`), through a
:class:`~cpersona.stores.protocols.TraceSink` on the agent's channel (the Redis sink ``PUBLISH``es on
:meth:`Keys.trace_channel`, so a tailer subscribes to one agent, or to :attr:`Keys.trace_pattern` for
all of them, on any worker that shares the Redis). A sink does not wait for subscribers, every call has
a deadline, and a failed call is counted and logged, never raised. :meth:`TracePublisher.stats` is a
snapshot of the counters, reported by ``/health`` under ``traces``.

The trace is shared with the recall result, not copied: the recaller hands over a finished trace (a
frozen model), so serialising it later, in the publisher task, sees what the recall saw and keeps the
cost off the recall's path.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import anyio
from pydantic_core import PydanticSerializationError

from cpersona.errors import BackendUnavailable
from cpersona.model.result_model import ResultModel

if TYPE_CHECKING:
    from anyio.abc import TaskStatus

    from cpersona.model.trace import AnyTrace
    from cpersona.stores.protocols import TraceSink

__all__ = ["TracePublisher", "TraceStats", "encode_trace"]

log = logging.getLogger("cpersona.trace")

# Drops and failures come in bursts (a stalled Redis fails every call for a while); one warning per
# interval says so without flooding the log, and the counters keep the exact numbers.
_WARN_INTERVAL_SECS = 10.0
# At shutdown the queued traces get this long (at most) to reach the sink before they are given up.
_FLUSH_SECS = 1.0

_Item = tuple[str, "AnyTrace"]


class TraceStats(ResultModel):
    """The publisher's counters at one moment.

    ``published``: traces the sink accepted; ``dropped``: traces refused because the queue was full (or
    the engine closed); ``failed``: traces taken off the queue that could not be published (backend error,
    missed deadline, a value JSON cannot hold); ``queued``: waiting now; ``capacity``: the queue's size.
    """

    capacity: int
    queued: int
    published: int
    dropped: int
    failed: int


def encode_trace(trace: AnyTrace) -> bytes:
    """A trace as the bytes published on the channel (raises ``PydanticSerializationError`` on a value
    JSON cannot hold)."""
    return trace.model_dump_json(warnings="error").encode()


class TracePublisher:
    """A bounded queue of traces and the task that publishes them.

    ``capacity`` is the queue's size (``CPERSONA_TRACE_QUEUE_SIZE``); ``timeout_secs`` is the deadline of
    one publish to ``sink``. Start :meth:`run` in a task group for as long as the engine is open, or call
    :meth:`drain` to publish what is queued now (tests, and engines opened without background tasks).
    """

    def __init__(self, sink: TraceSink, *, capacity: int, timeout_secs: float) -> None:
        if capacity < 1:
            raise ValueError("the trace queue needs a capacity of at least 1")
        self._sink = sink
        self._capacity = capacity
        self._timeout = timeout_secs
        self._send, self._receive = anyio.create_memory_object_stream[_Item](capacity)
        self._published = 0
        self._dropped = 0
        self._failed = 0
        self._running = False
        self._last_warning: dict[str, float] = {}

    # ------------------------------------------------------------------ the recall side

    def offer(self, agent_id: str, trace: AnyTrace) -> bool:
        """Queue ``trace`` for ``agent_id``'s channel without waiting; ``False`` if it was dropped."""
        try:
            self._send.send_nowait((agent_id, trace))
        except anyio.WouldBlock:
            self._dropped += 1
            self._warn(
                "dropped", "trace queue full (%d): dropped %d trace(s) so far", self._capacity, self._dropped
            )
            return False
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._dropped += 1
            return False
        return True

    def stats(self) -> TraceStats:
        """A snapshot of the counters."""
        return TraceStats(
            capacity=self._capacity,
            queued=self._send.statistics().current_buffer_used,
            published=self._published,
            dropped=self._dropped,
            failed=self._failed,
        )

    # ------------------------------------------------------------------ the publishing side

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Publish queued traces until cancelled (start it in a task group; one per publisher).

        On cancellation the traces still queued get a short, shielded moment to reach the sink, then the
        cancellation goes on.
        """
        if self._running:
            raise RuntimeError("this trace publisher already has its publishing task")
        self._running = True
        try:
            task_status.started()
            while True:
                try:
                    agent_id, trace = await self._receive.receive()
                except (anyio.EndOfStream, anyio.ClosedResourceError):
                    return
                await self._publish(agent_id, trace)
        finally:
            self._running = False
            with anyio.CancelScope(shield=True), anyio.move_on_after(min(_FLUSH_SECS, self._timeout)):
                await self.drain()

    async def drain(self) -> int:
        """Publish every trace queued now; return how many were taken off the queue."""
        taken = 0
        while True:
            try:
                agent_id, trace = self._receive.receive_nowait()
            except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                return taken
            taken += 1
            await self._publish(agent_id, trace)

    def close(self) -> None:
        """Close the queue: later offers are dropped, and what is still queued is given up."""
        self._send.close()
        self._receive.close()

    async def _publish(self, agent_id: str, trace: AnyTrace) -> None:
        try:
            payload = encode_trace(trace)
        except PydanticSerializationError as exc:
            # A bug in whoever built the trace, not an outage: counted, and logged with the detail.
            self._failed += 1
            log.error("trace for agent %r not published: %s", agent_id, exc)
            return
        try:
            with anyio.fail_after(self._timeout):
                await self._sink.publish(agent_id, payload)
        except (BackendUnavailable, TimeoutError) as exc:
            # Cancellation is not among these: it passes through untouched.
            self._failed += 1
            self._warn("failed", "trace publish failed (%d so far): %s", self._failed, _describe(exc))
            return
        self._published += 1

    def _warn(self, kind: str, message: str, *args: object) -> None:
        now = time.monotonic()
        if now - self._last_warning.get(kind, -_WARN_INTERVAL_SECS) >= _WARN_INTERVAL_SECS:
            self._last_warning[kind] = now
            log.warning(message, *args)


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
