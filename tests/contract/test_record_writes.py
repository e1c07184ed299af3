"""The record-writes contract (:class:`~cpersona.stores.record_writes.RecordWrites`), on every adapter."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import pytest

from contract.contract_records import BASE, Roles, episode, memory, put, raw
from cpersona.errors import BackendUnavailable
from cpersona.keys import Keys
from cpersona.model.records import ProfileRecord, new_id
from cpersona.stores.record_values import ClaimHolder, MemoryWrite, RecordCounts

if TYPE_CHECKING:
    from cpersona.stores.record_reads import RecordReads
    from cpersona.stores.record_writes import RecordWrites


async def test_a_written_record_reads_back_whole(
    record_writes: RecordWrites, record_reads: RecordReads
) -> None:
    rec = dataclasses.replace(
        memory("the ferry leaves at nine", 1, project="p", source="slack:1"), msg_id="m1"
    )
    await put(record_writes, rec)
    assert await record_reads.get("memory", rec.id) == rec
    ep = episode("a week at the lake", 2)
    await record_writes.put_episode(ep, queue_blocks=False)
    assert await record_reads.get("episode", ep.id) == ep
    entry = raw("hello", BASE)
    await record_writes.put_raw([entry])
    assert await record_reads.get("raw", entry.id) == entry


async def test_writing_a_record_twice_leaves_one(
    record_writes: RecordWrites, record_reads: RecordReads
) -> None:
    rec = memory("once", 1)
    await put(record_writes, rec)
    await put(record_writes, rec)
    assert await record_reads.counts("a") == RecordCounts(1, 0, 0, 0)


async def test_sequence_numbers_are_reserved_in_blocks(record_writes: RecordWrites) -> None:
    first = await record_writes.next_seq(3)
    assert await record_writes.next_seq() == first + 3
    assert await record_writes.next_seq(2) == first + 4


async def test_a_claim_counts_only_while_its_holder_exists(record_writes: RecordWrites) -> None:
    rec = memory("claimed", 1)
    claim = Keys("unused").prefix + ":claim"
    assert await record_writes.live_claim([claim]) is None
    await put(record_writes, rec, claims=[claim])
    holder = await record_writes.live_claim(["nobody-holds-this", claim])
    assert holder == ClaimHolder(claim, rec.id)
    await record_writes.delete("memory", rec.id, [])
    assert await record_writes.live_claim([claim]) is None  # the claim is left, but its holder is gone


async def test_replace_moves_claims_and_delete_removes_them(
    record_writes: RecordWrites, record_reads: RecordReads
) -> None:
    rec = memory("before", 1)
    await put(record_writes, rec, claims=["old-claim"])
    changed = dataclasses.replace(rec, content="after", version=2)
    await record_writes.replace_memory(
        changed, drop_claims=["old-claim"], add_claims=["new-claim"], queue_blocks=False
    )
    assert await record_reads.get("memory", rec.id) == changed
    assert await record_writes.live_claim(["old-claim"]) is None
    assert (await record_writes.live_claim(["new-claim"])) is not None
    await record_writes.delete("memory", rec.id, ["new-claim"])
    assert await record_reads.get("memory", rec.id) is None
    assert await record_reads.counts("a") == RecordCounts(0, 0, 0, 0)


async def test_deleting_a_missing_record_changes_nothing(
    record_writes: RecordWrites, record_reads: RecordReads
) -> None:
    kept = memory("kept", 1)
    await put(record_writes, kept)
    await record_writes.delete("memory", new_id(), [])
    await record_writes.delete("episode", kept.id, [])  # the id of a memory, as an episode: nothing there
    assert await record_reads.get("memory", kept.id) == kept


async def test_delete_many_removes_each_record_with_its_claims_and_counts_those_there(
    record_writes: RecordWrites, record_reads: RecordReads
) -> None:
    kept, one, two = memory("kept", 1), memory("first", 2), memory("second", 3)
    await put(record_writes, kept, claims=["kept-claim"])
    await put(record_writes, one, claims=["claim-1"])
    await put(record_writes, two, claims=["claim-2a", "claim-2b"])
    gone = new_id()  # never stored: not counted, and nothing of it is touched
    deleted = await record_writes.delete_many(
        "memory", [(one.id, ["claim-1"]), (gone, []), (two.id, ["claim-2a", "claim-2b"])]
    )
    assert deleted == 2
    assert (await record_reads.get("memory", one.id), await record_reads.get("memory", two.id)) == (
        None,
        None,
    )
    assert [await record_writes.live_claim([c]) for c in ("claim-1", "claim-2a", "claim-2b")] == [None] * 3
    assert await record_reads.get("memory", kept.id) == kept
    assert await record_writes.live_claim(["kept-claim"]) == ClaimHolder("kept-claim", kept.id)
    assert await record_writes.delete_many("memory", []) == 0
    assert await record_writes.delete_many("memory", [(one.id, [])]) == 0  # a second time: none there


async def test_a_replaced_memory_takes_free_claims_and_gives_up_its_own(record_writes: RecordWrites) -> None:
    held, old, fresh = (f"claim:{new_id()}" for _ in range(3))  # names no other test holds
    holder, moved = memory("held text", 1), memory("old text", 2)
    await put(record_writes, holder, claims=[held])
    await put(record_writes, moved, claims=[old])
    # An update to the holder's text, then to a new text: the holder keeps its claim throughout.
    changed = dataclasses.replace(moved, content="held text")
    await record_writes.replace_memory(changed, drop_claims=[old], add_claims=[held], queue_blocks=False)
    assert await record_writes.live_claim([held]) == ClaimHolder(held, holder.id)
    assert await record_writes.live_claim([old]) is None
    again = dataclasses.replace(changed, content="fresh text")
    await record_writes.replace_memory(again, drop_claims=[held], add_claims=[fresh], queue_blocks=False)
    assert await record_writes.live_claim([held]) == ClaimHolder(held, holder.id)
    assert await record_writes.live_claim([fresh]) == ClaimHolder(fresh, moved.id)
    # A delete gives up the claims that name its record, and no other.
    await record_writes.delete("memory", moved.id, [held, fresh])
    assert await record_writes.live_claim([held]) == ClaimHolder(held, holder.id)
    assert await record_writes.live_claim([fresh]) is None


async def test_profiles_and_calibrations_round_trip_per_agent(
    record_writes: RecordWrites, record_reads: RecordReads
) -> None:
    await record_writes.put_profile(ProfileRecord(agent_id="a", content="Prefers YAML.", updated_at=BASE))
    assert await record_reads.profile("a") == ProfileRecord(
        agent_id="a", content="Prefers YAML.", updated_at=BASE
    )
    assert await record_reads.profile("b") is None
    await record_writes.put_profile(ProfileRecord(agent_id="a", content="Prefers TOML.", updated_at=BASE + 1))
    assert await record_reads.profile("a") == ProfileRecord(
        agent_id="a", content="Prefers TOML.", updated_at=BASE + 1
    )
    await record_writes.put_calibration("a", {"threshold": 0.42, "selected": True})
    await record_writes.select_calibration("a", False)
    assert await record_reads.calibration("a") == {"threshold": 0.42, "selected": False}
    assert await record_reads.calibration("b") is None


async def test_an_unreachable_backend_raises_backend_unavailable(unreachable: Roles) -> None:
    writes = unreachable.record_writes
    with pytest.raises(BackendUnavailable):
        await writes.put_memories([MemoryWrite(memory("x", 1))], queue_blocks=True)
    with pytest.raises(BackendUnavailable):
        await writes.next_seq()
    with pytest.raises(BackendUnavailable):
        await writes.delete("memory", new_id(), [])
