"""The block-queue contract (:class:`~cpersona.stores.block_queue.BlockQueue`), on every adapter.

Events are queued the way the store queues them, by writing records through the same adapter's
``record_writes`` with ``queue_blocks=True``; each worker is a view of the queue under a consumer name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from contract.contract_records import episode, memory
from cpersona.errors import BackendUnavailable
from cpersona.model.records import MemoryRecord
from cpersona.stores.block_queue import QueueLost, event_order
from cpersona.stores.record_values import MemoryWrite

if TYPE_CHECKING:
    from collections.abc import Callable

    from contract.adapters import Adapter
    from contract.contract_records import Roles
    from cpersona.model.records import EpisodeRecord
    from cpersona.stores.block_queue import BlockEvent, BlockQueue
    from cpersona.stores.redis.connection import RedisClient

    OpenQueue = Callable[[str], BlockQueue]

# Idle longer than any test runs: no event of a live worker is this idle.
_LONG_IDLE_MS = 600_000
_RELEASE_SECS = 5.0


async def _write(roles: Roles, *records: MemoryRecord | EpisodeRecord) -> list[str]:
    """Write each record with its block event, one write each (so the events keep this order)."""
    for record in records:
        if isinstance(record, MemoryRecord):
            await roles.record_writes.put_memories([MemoryWrite(record)], queue_blocks=True)
        else:
            await roles.record_writes.put_episode(record, queue_blocks=True)
    return [record.ref for record in records]


def _refs(events: list[BlockEvent]) -> list[str | None]:
    return [event.ref for event in events]


def _ids(events: list[BlockEvent]) -> list[bytes]:
    return [event.entry_id for event in events]


async def test_events_written_before_any_worker_are_delivered_once_in_order(
    roles: Roles, open_block_queue: OpenQueue
) -> None:
    worker = open_block_queue("w1")
    written = await _write(roles, memory("first", 1), episode("second", 2), memory("third", 3))
    await worker.ensure_group()
    events = await worker.read(">")
    assert _refs(events) == written
    assert [event_order(e.entry_id) for e in events] == sorted(event_order(e.entry_id) for e in events)
    assert await worker.last_id() == event_order(events[-1].entry_id)
    assert await worker.read(">") == []  # each new event is handed out once


async def test_an_empty_queue_has_no_last_event_and_no_new_ones(open_block_queue: OpenQueue) -> None:
    worker = open_block_queue("w1")
    await worker.ensure_group()
    await worker.ensure_group()  # a second time changes nothing
    assert await worker.last_id() is None
    assert await worker.read(">") == []
    assert await worker.read("0") == []
    assert await worker.claim(min_idle_ms=0) == 0


async def test_an_event_stays_pending_at_its_worker_until_finished(
    roles: Roles, open_block_queue: OpenQueue
) -> None:
    worker = open_block_queue("w1")
    await worker.ensure_group()
    written = await _write(roles, memory("one", 1), memory("two", 2))
    taken = await worker.read(">")
    assert await worker.deliveries(taken) == dict.fromkeys(_ids(taken), 1)
    again = await worker.read("0")
    assert _ids(again) == _ids(taken)
    assert _refs(again) == written
    assert await worker.deliveries(again) == dict.fromkeys(_ids(taken), 2)  # each reading is a delivery
    await worker.ensure_group()  # a second ensure keeps what is pending
    await worker.finish(_ids(taken[:1]))
    assert _ids(await worker.read("0")) == _ids(taken[1:])
    await worker.finish(_ids(taken[1:]))
    assert await worker.read("0") == []
    assert await worker.last_id() is None  # finished events are dropped from the queue


async def test_finish_can_queue_records_again_in_the_same_step(
    roles: Roles, open_block_queue: OpenQueue
) -> None:
    worker = open_block_queue("w1")
    await worker.ensure_group()
    (ref,) = await _write(roles, memory("built too early", 1))
    (event,) = await worker.read(">")
    await worker.finish([event.entry_id], requeue=[ref])
    assert await worker.read("0") == []
    (again,) = await worker.read(">")
    assert again.ref == ref
    assert event_order(again.entry_id) > event_order(event.entry_id)


async def test_events_left_at_a_dead_worker_are_claimed_by_another(
    roles: Roles, open_block_queue: OpenQueue
) -> None:
    dead, alive = open_block_queue("dead"), open_block_queue("alive")
    await dead.ensure_group()
    written = await _write(roles, memory("one", 1), episode("two", 2))
    taken = await dead.read(">")
    assert await alive.claim(min_idle_ms=_LONG_IDLE_MS) == 0  # not idle long enough yet
    assert await alive.read("0") == []
    assert await alive.claim(min_idle_ms=0) == 2
    assert _refs(await alive.read("0")) == written
    assert await dead.read("0") == []
    await alive.finish(_ids(taken))
    assert await alive.read("0") == []


async def test_a_worker_with_pending_events_stays_in_the_queue_when_released(
    roles: Roles, open_block_queue: OpenQueue
) -> None:
    leaving, other = open_block_queue("leaving"), open_block_queue("other")
    await leaving.ensure_group()
    written = await _write(roles, memory("one", 1))
    await leaving.read(">")
    await leaving.release(_RELEASE_SECS)
    assert await other.claim(min_idle_ms=0) == 1  # still there to be claimed
    assert _refs(await other.read("0")) == written
    await other.release(_RELEASE_SECS)  # with its events still pending: bounded, and no error


async def test_a_lost_queue_raises_queue_lost_until_made_again(
    adapter: Adapter, roles: Roles, open_block_queue: OpenQueue, redis: RedisClient, key_prefix: str
) -> None:
    worker = open_block_queue("w1")
    await worker.ensure_group()
    await _write(roles, memory("one", 1))
    await adapter.lose_block_queue(redis, key_prefix)
    with pytest.raises(QueueLost):
        await worker.read(">")
    with pytest.raises(QueueLost):
        await worker.claim(min_idle_ms=0)
    await worker.ensure_group()
    assert await worker.read(">") == []
    written = await _write(roles, memory("after", 2))
    assert _refs(await worker.read(">")) == written


async def test_an_unreachable_backend_raises_backend_unavailable(
    adapter: Adapter, gone: RedisClient, key_prefix: str
) -> None:
    worker = adapter.block_queue(gone, key_prefix, consumer="w1")
    with pytest.raises(BackendUnavailable):
        await worker.ensure_group()
    with pytest.raises(BackendUnavailable):
        await worker.read(">")
    with pytest.raises(BackendUnavailable):
        await worker.last_id()
    await worker.release(_RELEASE_SECS)  # never raises
