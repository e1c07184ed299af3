"""The record-reads contract (:class:`~cpersona.stores.record_reads.RecordReads`), on every adapter."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from contract.contract_records import BASE, Roles, episode, memory, put, raw, refs
from cpersona.errors import BackendUnavailable
from cpersona.model.records import new_id
from cpersona.model.scope import ReadScope
from cpersona.stores.record_values import BlockParent, RecordCounts

if TYPE_CHECKING:
    from cpersona.stores.record_reads import RecordReads
    from cpersona.stores.record_writes import RecordWrites


async def test_a_missing_record_or_one_of_another_kind_reads_as_none(
    record_reads: RecordReads, record_writes: RecordWrites
) -> None:
    rec = memory("here", 1)
    await put(record_writes, rec)
    assert await record_reads.get("memory", new_id()) is None
    assert await record_reads.get("episode", rec.id) is None
    assert await record_reads.get("raw", rec.id) is None


async def test_newest_lists_by_insertion_within_the_scope(
    record_reads: RecordReads, record_writes: RecordWrites
) -> None:
    old, mid, new = (
        memory("one", 1, ts=BASE + 50),
        memory("two", 2, project="p"),
        memory("three", 3, project="q"),
    )
    await put(record_writes, old, mid, new, memory("another agent", 4, agent="b"))
    assert refs(await record_reads.newest("memory", ReadScope("a"), 10)) == refs([new, mid, old])
    assert refs(await record_reads.newest("memory", ReadScope("a"), 2)) == refs([new, mid])
    # a project sees itself and the global pool
    assert refs(await record_reads.newest("memory", ReadScope("a", project_id="p"), 10)) == refs([mid, old])
    assert await record_reads.newest("memory", ReadScope("a"), 0) == []
    assert await record_reads.newest("memory", ReadScope("c"), 10) == []


async def test_episodes_carry_no_source(record_reads: RecordReads, record_writes: RecordWrites) -> None:
    ep = episode("the lake", 1)
    await record_writes.put_episode(ep, queue_blocks=False)
    assert refs(await record_reads.newest("episode", ReadScope("a"), 10)) == [ep.ref]
    assert await record_reads.newest("episode", ReadScope("a", source_id="slack:1"), 10) == []


async def test_raw_entries_list_by_time(record_reads: RecordReads, record_writes: RecordWrites) -> None:
    late, early = raw("late", BASE + 9), raw("early", BASE + 1)
    await record_writes.put_raw([late, early, raw("theirs", BASE + 5, agent="b")])
    assert refs(await record_reads.newest("raw", ReadScope("a"), 10)) == refs([late, early])
    assert await record_reads.record_ids("raw", "a") == sorted([late.id, early.id])


async def test_counts_per_agent_and_in_all(record_reads: RecordReads, record_writes: RecordWrites) -> None:
    await put(record_writes, memory("x", 1), memory("y", 2, pending=True), memory("z", 3, agent="b"))
    await record_writes.put_episode(episode("e", 4), queue_blocks=False)
    assert await record_reads.counts("a") == RecordCounts(2, 1, 0, 1)
    assert await record_reads.counts("b") == RecordCounts(1, 0, 0, 1)
    assert await record_reads.counts(None) == RecordCounts(3, 1, 0, 1)


async def test_ids_and_samples_read_in_order(record_reads: RecordReads, record_writes: RecordWrites) -> None:
    one, two = memory("first", 1), memory("second", 2)
    await put(record_writes, one, two, memory("theirs", 3, agent="b"))
    assert await record_reads.memory_ids("a") == [one.id, two.id]
    assert await record_reads.record_ids("memory", "a") == [one.id, two.id]
    assert await record_reads.memory_ids("c") == []
    missing = new_id()
    assert await record_reads.memory_samples([two.id, missing, one.id]) == [
        ("second", two.timestamp),
        ("first", one.timestamp),
    ]


async def test_memory_states_are_per_agent(record_reads: RecordReads, record_writes: RecordWrites) -> None:
    await put(record_writes, memory("x", 1), memory("y", 2), memory("z", 3, agent="b"))
    mine = await record_reads.memory_states("a")
    assert [s.timestamp for s in mine] == [BASE + 1, BASE + 2]
    assert len(await record_reads.memory_states(None)) == 3


async def test_block_reads_give_the_parent_and_its_current_text(
    record_reads: RecordReads, record_writes: RecordWrites
) -> None:
    rec, ep = memory("Block me. Twice.", 7, project="p", channel="c"), episode("A summary.", 8)
    await put(record_writes, rec)
    await record_writes.put_episode(ep, queue_blocks=False)
    absent = "mem:" + new_id()
    assert await record_reads.block_parents([rec.ref, absent, ep.ref]) == [
        BlockParent("memory", rec.id, "a", "p", "c", rec.timestamp, 7, "Block me. Twice."),
        None,
        BlockParent("episode", ep.id, "a", "", "", ep.timestamp, 8, "A summary."),
    ]
    assert await record_reads.block_texts([ep.ref, absent, rec.ref]) == [
        "A summary.",
        None,
        "Block me. Twice.",
    ]
    assert await record_reads.block_parents([]) == []


async def test_an_unreachable_backend_raises_backend_unavailable(unreachable: Roles) -> None:
    reads = unreachable.record_reads
    with pytest.raises(BackendUnavailable):
        await reads.get("memory", new_id())
    with pytest.raises(BackendUnavailable):
        await reads.counts("a")
