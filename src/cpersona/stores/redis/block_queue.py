"""The block stream: a Redis stream of "build the blocks of this record" events and its consumer group.

A store appends ``{key: <record key>}`` in the transaction that writes the record (see :mod:`.writes`),
so an acknowledged record always has its event. A consumer group hands events to the block workers; an
event stays pending at its consumer until acknowledged, and one left by a dead consumer is claimed by
another. This module holds the stream calls; what a worker does with an event is the engine's.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from typing import TYPE_CHECKING

import anyio
import redis.exceptions

from cpersona.stores.block_queue import BlockEvent, QueueLost, event_order
from cpersona.stores.redis.connection import command
from cpersona.stores.redis.refs import key_of_ref, ref_of_key

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cpersona.keys import Keys
    from cpersona.stores.redis.connection import RedisClient

__all__ = ["RedisBlockQueue", "consumer_name"]

log = logging.getLogger("cpersona.blocks")

_GROUP_EXISTS = "BUSYGROUP"
_NO_GROUP = "NOGROUP"
_CLAIM_BATCH = 100


def consumer_name() -> str:
    """A consumer name unique to this engine: host, process and a random part."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class RedisBlockQueue:
    """The :class:`~cpersona.stores.block_queue.BlockQueue` role on a Redis stream: one consumer of its
    group. Every call has the client's deadline."""

    def __init__(
        self, client: RedisClient, keys: Keys, *, consumer: str | None = None, batch: int = 16
    ) -> None:
        self.client = client
        self.keys = keys
        self.consumer = consumer or consumer_name()
        self.batch = batch
        self.stream = keys.block_stream
        self.group = keys.block_group

    async def ensure_group(self) -> None:
        """Create the consumer group (and the stream) if absent; from the stream's start, so events
        written before any worker existed are delivered too."""
        try:
            await self.client.xgroup_create(self.stream, self.group, id="0", mkstream=True)
        except redis.exceptions.ResponseError as exc:
            if _GROUP_EXISTS not in str(exc):
                raise

    async def last_id(self) -> tuple[int, int] | None:
        """The order of the newest event in the stream (``None``: the stream is empty)."""
        async with _GroupCalls():
            newest = await self.client.xrevrange(self.stream, "+", "-", count=1)
        return event_order(newest[0][0]) if newest else None

    async def claim(self, *, min_idle_ms: int) -> int:
        """Move events idle for ``min_idle_ms`` at other consumers (dead ones) to this one; they are
        then read back as this consumer's pending events."""
        claimed = 0
        cursor: bytes | str = "0-0"
        while True:
            async with _GroupCalls():
                reply = await self.client.xautoclaim(
                    self.stream, self.group, self.consumer, min_idle_ms, cursor, count=_CLAIM_BATCH
                )
            cursor, entries = reply[0], reply[1]
            claimed += len(entries)
            if event_order(cursor) == (0, 0):
                return claimed

    async def read(self, from_id: str, *, block_ms: int | None = None) -> list[BlockEvent]:
        """Up to ``batch`` events: this consumer's pending ones (``"0"``) or new ones (``">"``)."""
        async with _GroupCalls():
            reply = await self.client.xreadgroup(
                self.group, self.consumer, {self.stream: from_id}, count=self.batch, block=block_ms
            )
        events: list[BlockEvent] = []
        for _, items in reply or ():
            for entry_id, fields in items:
                if entry_id is None:
                    continue
                # An entry deleted from the stream while pending comes back without fields.
                raw = (fields or {}).get(b"key")
                key = raw.decode() if raw else None
                events.append(BlockEvent(entry_id, None if key is None else ref_of_key(self.keys, key), key))
        return events

    async def deliveries(self, events: Sequence[BlockEvent]) -> dict[bytes, int]:
        """How many times each of this consumer's pending events has been delivered."""
        async with _GroupCalls():
            info = await self.client.xpending_range(
                self.stream,
                self.group,
                min=events[0].entry_id,
                max=events[-1].entry_id,
                count=len(events),
                consumername=self.consumer,
            )
        return {row["message_id"]: int(row["times_delivered"]) for row in info}

    async def finish(self, entry_ids: Sequence[bytes], *, requeue: Sequence[str] = ()) -> None:
        """Acknowledge and delete events, and queue the records ``requeue`` names again, at once."""
        async with _GroupCalls():
            pipe = self.client.pipeline(transaction=True)
            for ref in requeue:
                pipe.xadd(self.stream, {"key": key_of_ref(self.keys, ref)})
            pipe.xack(self.stream, self.group, *entry_ids)
            pipe.xdel(self.stream, *entry_ids)
            await pipe.execute()

    async def release(self, timeout_secs: float) -> None:
        """Leave the consumer group if nothing is pending here (a consumer with pending entries stays,
        so another worker can claim them). Bounded, shielded, and never raises."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(timeout_secs):
            try:
                pending = await self.client.xpending_range(
                    self.stream, self.group, min="-", max="+", count=1, consumername=self.consumer
                )
                if not pending:
                    await command(
                        self.client, "XGROUP", "DELCONSUMER", self.stream, self.group, self.consumer
                    )
            except Exception as exc:
                log.warning("could not leave the block consumer group: %s", exc)


class _GroupCalls:
    """A missing group or stream, raised as :class:`QueueLost` (the client maps an outage itself)."""

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        if isinstance(exc, redis.exceptions.ResponseError) and _NO_GROUP in str(exc):
            raise QueueLost(str(exc)) from exc
