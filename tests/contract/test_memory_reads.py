"""The memory-reads contract (:class:`~cpersona.stores.memory_reads.MemoryReadStore`), on every adapter."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from contract.contract_records import BASE, Roles, memory, put
from cpersona.errors import BackendUnavailable
from cpersona.model.records import EmotionVector, Fidelity, new_id
from cpersona.model.scope import ReadScope
from cpersona.stores.memory_reads import TimeRangeIds

if TYPE_CHECKING:
    from cpersona.stores.memory_reads import MemoryReadStore
    from cpersona.stores.record_writes import RecordWrites


async def test_a_time_range_is_read_oldest_first_inclusive_and_counted(
    memory_reads: MemoryReadStore, record_writes: RecordWrites
) -> None:
    # inserted out of time order: the range orders by each memory's own time
    late, first, middle = (
        memory("late", 1, ts=BASE + 30),
        memory("first", 2, ts=BASE + 10),
        memory("mid", 3, ts=BASE + 20),
    )
    await put(record_writes, late, first, middle, memory("after", 4, ts=BASE + 31))
    scope = ReadScope("a")
    assert await memory_reads.memory_ids_in_time(scope, BASE + 10, BASE + 30, 10) == TimeRangeIds(
        (first.id, middle.id, late.id), 3
    )
    assert await memory_reads.memory_ids_in_time(scope, BASE + 10, BASE + 30, 2) == TimeRangeIds(
        (first.id, middle.id), 3
    )
    assert await memory_reads.memory_ids_in_time(scope, BASE + 40, BASE + 50, 10) == TimeRangeIds((), 0)


async def test_no_read_returns_a_memory_of_another_agent(
    memory_reads: MemoryReadStore, record_writes: RecordWrites
) -> None:
    mine, theirs = memory("mine", 1), memory("theirs", 2, agent="b")
    await put(record_writes, mine, theirs)
    scope = ReadScope("a")
    assert (await memory_reads.memory_ids_in_time(scope, BASE, BASE + 10, 10)).ids == (mine.id,)
    # an id from an edge may name any agent's record: the read checks the scope itself
    assert await memory_reads.memories_by_id(scope, [theirs.id, mine.id, new_id()]) == {mine.id: mine}
    assert await memory_reads.memories_by_id(ReadScope("b"), [mine.id]) == {}


async def test_vitals_read_in_order_and_none_where_gone(
    memory_reads: MemoryReadStore, record_writes: RecordWrites
) -> None:
    rec = memory("kept", 1)
    await put(record_writes, rec)
    assert await memory_reads.memory_vitals([new_id(), rec.id]) == [None, (EmotionVector(), Fidelity())]


async def test_an_unreachable_backend_raises_backend_unavailable(unreachable: Roles) -> None:
    with pytest.raises(BackendUnavailable):
        await unreachable.memory_reads.memories_by_id(ReadScope("a"), [new_id()])
