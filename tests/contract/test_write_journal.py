"""The write-journal contract (:class:`~cpersona.stores.write_journal.WriteJournal`), on every adapter."""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING

import anyio
import pytest

from contract.contract_records import Roles, episode, memory, put, refs
from cpersona.errors import BackendUnavailable
from cpersona.model.records import MemoryRecord, new_id
from cpersona.stores.record_values import ClaimHolder, InFlightWrite, RecordCounts

if TYPE_CHECKING:
    from collections.abc import Callable

    from cpersona.stores.block_queue import BlockQueue
    from cpersona.stores.record_reads import RecordReads
    from cpersona.stores.record_writes import RecordWrites
    from cpersona.stores.write_journal import WriteJournal

# A reservation lapses by the backend's own expiry (Redis's PX, on Redis's clock), which no fake clock
# reaches: the shortest lifetime the store keeps (1 ms), then a wait ten times as long.
_LAPSE_SECS = 0.001
_PAST_THE_LAPSE_SECS = 0.01


async def test_pending_vectors_are_listed_loaded_and_cleared(
    write_journal: WriteJournal, record_writes: RecordWrites, record_reads: RecordReads
) -> None:
    rec, ep, gone = memory("pending", 1, pending=True), episode("too", 2, pending=True), memory("x", 3)
    await put(record_writes, rec, dataclasses.replace(gone, vector_pending=True))
    await record_writes.put_episode(ep, queue_blocks=False)
    await record_writes.delete("memory", gone.id, [])
    assert await write_journal.pending_refs() == sorted([rec.ref, ep.ref])
    assert refs(await write_journal.load_pending([rec.ref, ep.ref])) == [rec.ref, ep.ref]
    assert await write_journal.mark_vectors_written([rec, ep], "model-x") == []
    assert await write_journal.pending_refs() == []
    written = await record_reads.get("memory", rec.id)
    assert isinstance(written, MemoryRecord)
    assert (written.embedded, written.embedding_model, written.vector_pending) == (True, "model-x", False)
    assert await write_journal.mark_vectors_written([rec], "model-x") == []  # a second time changes nothing


async def test_a_pending_ref_whose_record_is_gone_loses_its_mark(
    write_journal: WriteJournal, record_writes: RecordWrites
) -> None:
    gone = memory("deleted before its vector", 1, pending=True)
    await put(record_writes, gone)
    await record_writes.delete("memory", gone.id, [])
    assert await write_journal.pending_refs() == []
    assert await write_journal.load_pending([gone.ref]) == []


async def test_marking_a_deleted_record_written_leaves_no_document(
    write_journal: WriteJournal, record_writes: RecordWrites, record_reads: RecordReads
) -> None:
    kept, gone = (
        memory("kept", 1, pending=True),
        memory("deleted while its vector was written", 2, pending=True),
    )
    await put(record_writes, kept, gone)
    await record_writes.delete("memory", gone.id, [])
    assert await write_journal.mark_vectors_written([kept, gone], "model-x") == [gone.id]
    assert await record_reads.get("memory", gone.id) is None
    assert await record_reads.counts(None) == RecordCounts(1, 0, 0, 0)


async def test_a_claim_reserved_in_flight_is_held_until_released(
    write_journal: WriteJournal, record_writes: RecordWrites
) -> None:
    c1, c2, c3, c4 = (f"claim:{new_id()}" for _ in range(4))  # names no other test holds
    first, second = new_id(), new_id()
    assert await write_journal.reserve_writes([InFlightWrite("memory", first, (c1, c2))], ttl_secs=60) == [
        None
    ]
    # No document yet, but the claim is in flight: a second write of it loses, and names the first.
    lost = await write_journal.reserve_writes(
        [InFlightWrite("memory", second, (c3, c2)), InFlightWrite("memory", new_id(), (c4,))], ttl_secs=60
    )
    assert lost == [ClaimHolder(c2, first), None]
    assert await record_writes.live_claim([c3]) is None  # the loser took none of its claims
    await write_journal.release_writes([InFlightWrite("memory", first, (c1, c2))])
    assert await write_journal.reserve_writes([InFlightWrite("memory", second, (c3, c2))], ttl_secs=60) == [
        None
    ]


async def test_a_reservation_lapses_and_a_written_claim_does_not(
    write_journal: WriteJournal, record_writes: RecordWrites
) -> None:
    c1, c2 = (f"claim:{new_id()}" for _ in range(2))  # names no other test holds
    rec = memory("written", 1)
    assert await write_journal.reserve_writes(
        [InFlightWrite("memory", rec.id, (c1,))], ttl_secs=_LAPSE_SECS
    ) == [None]
    await put(record_writes, rec, claims=[c1])
    assert await write_journal.reserve_writes(
        [InFlightWrite("memory", new_id(), (c2,))], ttl_secs=_LAPSE_SECS
    ) == [None]
    await anyio.sleep(_PAST_THE_LAPSE_SECS)
    assert await write_journal.reserve_writes([InFlightWrite("memory", new_id(), (c1,))], ttl_secs=60) == [
        ClaimHolder(c1, rec.id)
    ]
    assert await write_journal.reserve_writes([InFlightWrite("memory", new_id(), (c2,))], ttl_secs=60) == [
        None
    ]


async def test_writes_in_flight_are_abandoned_until_their_record_is_written(
    write_journal: WriteJournal, record_writes: RecordWrites
) -> None:
    c1, c2 = (f"claim:{new_id()}" for _ in range(2))  # names no other test holds
    rec, ep, dead = memory("written", 1), episode("written too", 2), new_id()
    writes = [
        InFlightWrite("memory", rec.id, (c1,)),
        InFlightWrite("episode", ep.id),
        InFlightWrite("memory", dead, (c2,)),
    ]
    await write_journal.reserve_writes(writes, ttl_secs=60)
    await put(record_writes, rec, claims=[c1])
    await record_writes.put_episode(ep, queue_blocks=False)
    assert await write_journal.abandoned_writes(time.time() - 60) == []  # begun too recently
    assert await write_journal.abandoned_writes(time.time() + 1) == [writes[2]]
    # Released, a written record keeps its claims; the unwritten one loses its own and is returned, its
    # mark kept until its vector is gone.
    assert await write_journal.release_writes(writes) == [writes[2]]
    assert await record_writes.live_claim([c1]) == ClaimHolder(c1, rec.id)
    retry = InFlightWrite("memory", new_id(), (c2,))
    assert await write_journal.reserve_writes([retry], ttl_secs=60) == [None]
    assert await write_journal.abandoned_writes(time.time() + 1) == [writes[2], retry]
    await write_journal.forget_writes([writes[2]])
    assert await write_journal.abandoned_writes(time.time() + 1) == [retry]
    await write_journal.forget_writes([writes[2]])  # forgetting twice changes nothing
    assert await write_journal.abandoned_writes(time.time() + 1) == [retry]


async def test_a_store_that_outlasted_its_reservation_leaves_the_claim(
    write_journal: WriteJournal, record_writes: RecordWrites
) -> None:
    claim = f"claim:{new_id()}"  # a name no other test holds
    slow, quick = memory("the same text", 1), memory("the same text", 2)
    assert await write_journal.reserve_writes(
        [InFlightWrite("memory", slow.id, (claim,))], ttl_secs=_LAPSE_SECS
    ) == [None]
    await anyio.sleep(_PAST_THE_LAPSE_SECS)
    assert await write_journal.reserve_writes([InFlightWrite("memory", quick.id, (claim,))], ttl_secs=60) == [
        None
    ]
    await put(record_writes, quick, claims=[claim])
    await put(record_writes, slow, claims=[claim])
    assert await record_writes.live_claim([claim]) == ClaimHolder(claim, quick.id)


async def test_an_unreachable_backend_raises_backend_unavailable(unreachable: Roles) -> None:
    journal = unreachable.write_journal
    with pytest.raises(BackendUnavailable):
        await journal.pending_refs()
    with pytest.raises(BackendUnavailable):
        await journal.reserve_writes([InFlightWrite("memory", new_id(), ("c",))], ttl_secs=60)


async def test_marking_all_pending_lists_every_record_and_queues_its_blocks(
    write_journal: WriteJournal, record_writes: RecordWrites, open_block_queue: Callable[[str], BlockQueue]
) -> None:
    assert await write_journal.mark_all_pending(queue_blocks=True) == 0
    rec, ep = memory("one", 1), episode("two", 2)
    await put(record_writes, rec)
    await record_writes.put_episode(ep, queue_blocks=False)
    worker = open_block_queue("w1")
    await worker.ensure_group()
    assert await write_journal.mark_all_pending(queue_blocks=False) == 2
    assert await write_journal.pending_refs() == sorted([rec.ref, ep.ref])
    assert await worker.read(">") == []
    assert await write_journal.mark_vectors_written([rec, ep], "model-x") == []
    assert await write_journal.mark_all_pending(queue_blocks=True) == 2
    assert await write_journal.pending_refs() == sorted([rec.ref, ep.ref])
    assert sorted(event.ref for event in await worker.read(">") if event.ref) == sorted([rec.ref, ep.ref])
