"""Reconsolidation after the answer: a cue query that returns memories (``reconsolidate: true``, the
default) strengthens them, but not on its own latency path.

The query hands one job (its request id, the ids it returned, the moment it read them) to this bounded
queue and answers. The engine's background task group runs :meth:`ReconsolidationQueue.run`, which
applies each job: for every memory, :func:`cpersona.model.fidelity.reconsolidated` at the job's moment,
written once per request id (the store's marker, :meth:`~cpersona.stores.cue_store.CueStore.reconsolidate`),
so a request retried with the same id strengthens nothing twice. Without a background group (tests,
``background=False``) :meth:`drain` applies what is queued.

A full queue drops the job (counted and logged): a recall that goes unstrengthened is a smaller loss
than a recall that waits. A job that fails (Redis away) is logged and counted; the answer it followed
has long been sent.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from typing import TYPE_CHECKING

import anyio

from cpersona.model.fidelity import reconsolidated

if TYPE_CHECKING:
    from anyio.abc import TaskStatus

    from cpersona.model.fidelity import FidelityCurve
    from cpersona.stores.cue_store import CueStore

__all__ = ["MARKER_TTL_SECS", "ReconsolidationJob", "ReconsolidationQueue", "ReconsolidationStats"]

log = logging.getLogger("cpersona.engine")

MARKER_TTL_SECS = 86_400
"""How long a request id is remembered as applied: a retry within a day strengthens nothing again."""


@dataclasses.dataclass(frozen=True, slots=True)
class ReconsolidationJob:
    request_id: str
    record_ids: tuple[str, ...]
    at: float


@dataclasses.dataclass(frozen=True, slots=True)
class ReconsolidationStats:
    applied: int
    repeated: int
    dropped: int
    failed: int


class ReconsolidationQueue:
    """The jobs of one engine, and the worker that writes them."""

    def __init__(
        self, cues: CueStore, curve: FidelityCurve, *, capacity: int = 1024, timeout_secs: float = 5.0
    ) -> None:
        self._cues = cues
        self._strengthen = functools.partial(reconsolidated, curve=curve)
        self._timeout = timeout_secs
        self._send, self._receive = anyio.create_memory_object_stream[ReconsolidationJob](capacity)
        self._applied = self._repeated = self._dropped = self._failed = 0

    def offer(self, job: ReconsolidationJob) -> bool:
        """Queue ``job`` without waiting; ``False`` (and counted) when the queue is full or closed."""
        try:
            self._send.send_nowait(job)
        except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._dropped += 1
            log.warning("reconsolidation queue full: request %s left unstrengthened", job.request_id)
            return False
        return True

    def stats(self) -> ReconsolidationStats:
        return ReconsolidationStats(self._applied, self._repeated, self._dropped, self._failed)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Apply jobs as they come, until cancelled."""
        task_status.started()
        try:
            async for job in self._receive:
                await self._apply(job)
        except anyio.ClosedResourceError:
            return  # the engine closed the queue under a worker it has not cancelled yet

    async def drain(self) -> int:
        """Apply every job queued so far; how many were taken off the queue."""
        taken = 0
        while True:
            try:
                job = self._receive.receive_nowait()
            except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                return taken
            taken += 1
            await self._apply(job)

    def close(self) -> None:
        """Stop taking jobs; what is still queued is dropped (the engine is closing)."""
        self._send.close()
        self._receive.close()

    async def _apply(self, job: ReconsolidationJob) -> None:
        try:
            with anyio.fail_after(self._timeout):
                wrote = await self._cues.reconsolidate(
                    job.record_ids, job.request_id, job.at, self._strengthen, ttl_secs=MARKER_TTL_SECS
                )
        except Exception as exc:
            self._failed += len(job.record_ids)
            log.warning("reconsolidation of request %s failed: %s", job.request_id, exc)
            return
        self._applied += sum(wrote)
        self._repeated += len(wrote) - sum(wrote)
