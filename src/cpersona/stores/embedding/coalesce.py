"""Concurrent queries embedded together: the queries that arrive while a batch runs form the next one.

One query is a few rows through the model, where the cost is reading the weights, not the rows: on two
cores a batch of 32 short questions takes a few times one question's time, not 32 times. Under a fleet's
concurrency the queries queue behind the embedder anyway (it runs one batch at a time), so the queue is
the batch: nothing waits on a timer, and a lone caller runs at once exactly as before.

The caller that finds no batch running runs the next one for everyone queued, up to ``max_batch``, and
hands each its vector; the rest wait for that batch to end, then either have their vector or one of them
runs the next batch. A batch is shielded from its runner's cancellation (the thread it runs in cannot be
interrupted anyway), so a cancelled runner never strands the callers whose queries it took; a cancelled
waiter leaves the queue and its query is not run, or is run and dropped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from cpersona.stores.protocols import Vector

__all__ = ["QueryCoalescer"]


class _Slot:
    """One caller's query, and what became of it."""

    __slots__ = ("done", "error", "text", "vector")

    def __init__(self, text: str) -> None:
        self.text = text
        self.done = False
        self.vector: Vector | None = None
        self.error: Exception | None = None


class QueryCoalescer:
    """Runs ``embed`` over the queries of concurrent callers, one batch at a time (see the module)."""

    def __init__(self, embed: Callable[[Sequence[str]], Awaitable[list[Vector]]], *, max_batch: int) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self._embed = embed
        self._max_batch = max_batch
        self._queue: list[_Slot] = []
        self._ended: anyio.Event | None = None  # set while a batch runs; created in the event loop
        self.batches = 0
        self.queries = 0

    async def embed_one(self, text: str) -> Vector:
        """The vector of ``text``, embedded in a batch with whatever other queries are waiting."""
        slot = _Slot(text)
        self._queue.append(slot)
        try:
            while not slot.done:
                if self._ended is not None:
                    await self._ended.wait()
                else:
                    await self._run_next()
        except BaseException:
            if not slot.done and slot in self._queue:
                self._queue.remove(slot)
            raise
        if slot.error is not None:
            raise slot.error
        assert slot.vector is not None
        return slot.vector

    async def _run_next(self) -> None:
        batch = self._queue[: self._max_batch]
        del self._queue[: self._max_batch]
        ended = self._ended = anyio.Event()
        try:
            with anyio.CancelScope(shield=True):
                await self._fill(batch)
        finally:
            for slot in batch:
                slot.done = True
            self._ended = None
            ended.set()

    async def _fill(self, batch: list[_Slot]) -> None:
        try:
            # The same question asked by several callers at once is embedded once.
            texts = list(dict.fromkeys(slot.text for slot in batch))
            vectors = await self._embed(texts)
            if len(vectors) != len(texts):
                raise RuntimeError(f"the embedder returned {len(vectors)} vectors for {len(texts)} texts")
        except Exception as exc:
            for slot in batch:
                slot.error = exc
            return
        by_text = dict(zip(texts, vectors, strict=True))
        for slot in batch:
            # Each caller gets its own array, as the query cache hands out copies.
            slot.vector = by_text[slot.text].copy()
        self.batches += 1
        self.queries += len(batch)
