"""The store-admin contract (:class:`~cpersona.stores.store_admin.StoreAdmin`), on every adapter."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import pytest

from contract.contract_records import BASE, Roles, episode, memory, put
from cpersona.errors import BackendUnavailable
from cpersona.model.records import ProfileRecord
from cpersona.model.scope import ReadScope
from cpersona.stores.record_values import RecordCounts

if TYPE_CHECKING:
    from cpersona.stores.recall_reads import RecallReads
    from cpersona.stores.record_reads import RecordReads
    from cpersona.stores.record_writes import RecordWrites
    from cpersona.stores.store_admin import StoreAdmin


async def test_a_reachable_store_answers_ping_and_repairs_twice_alike(
    admin: StoreAdmin, record_writes: RecordWrites, recall_reads: RecallReads
) -> None:
    await admin.ping()
    rec = memory("indexed once", 1)
    await put(record_writes, rec)
    await admin.ensure_indexes()  # the fixture made them: a second time keeps what they hold
    await admin.collect_garbage()
    assert [r.ref for r in (await recall_reads.memory_keyword(ReadScope("a"), "indexed", 10)).rows] == [
        rec.ref
    ]


async def test_delete_agent_removes_everything_of_that_agent_only(
    admin: StoreAdmin, record_writes: RecordWrites, record_reads: RecordReads
) -> None:
    await put(record_writes, memory("a1", 1, pending=True), memory("a2", 2))
    theirs = memory("b1", 3, agent="b")
    await put(record_writes, theirs)
    await record_writes.put_episode(episode("ae", 4), queue_blocks=False)
    await record_writes.put_profile(ProfileRecord(agent_id="a", content="Terse.", updated_at=BASE))
    await record_writes.put_profile(ProfileRecord(agent_id="b", content="Wordy.", updated_at=BASE))
    await record_writes.put_calibration("a", {"threshold": 0.4, "selected": True})
    assert await admin.delete_agent("a") == 3
    assert await record_reads.counts("a") == RecordCounts(0, 0, 0, 0)
    assert await record_reads.get("memory", theirs.id) == theirs
    assert await record_reads.profile("a") is None
    assert await record_reads.profile("b") == ProfileRecord(agent_id="b", content="Wordy.", updated_at=BASE)
    assert await record_reads.calibration("a") is None
    assert await admin.delete_agent("a") == 0  # a second time: nothing left


async def test_an_unreachable_backend_raises_backend_unavailable(unreachable: Roles) -> None:
    with pytest.raises(BackendUnavailable):
        await unreachable.admin.ping()
    with pytest.raises(BackendUnavailable):
        await unreachable.admin.delete_agent("a")
    with pytest.raises(BackendUnavailable):
        await unreachable.admin.record_vector_model('{"name": "m1", "dim": 3}')


async def test_the_vector_model_is_recorded_once_unless_replaced(admin: StoreAdmin) -> None:
    assert await admin.vector_model() is None
    assert await admin.record_vector_model('{"name": "m1", "dim": 3}') is None
    # A second engine starting finds the first one's record and records nothing.
    assert await admin.record_vector_model('{"name": "m2", "dim": 4}') == '{"name": "m1", "dim": 3}'
    assert await admin.vector_model() == '{"name": "m1", "dim": 3}'
    replaced = await admin.record_vector_model('{"name": "m2", "dim": 4}', replace=True)
    assert replaced == '{"name": "m1", "dim": 3}'
    assert await admin.vector_model() == '{"name": "m2", "dim": 4}'


async def test_the_legacy_model_is_the_one_a_record_names_for_its_vector(
    admin: StoreAdmin, record_writes: RecordWrites
) -> None:
    assert await admin.legacy_vector_model() is None
    # A caller's vectors and a record without one name no model of the store.
    await put(record_writes, memory("pending", 1, pending=True))
    await put(record_writes, dataclasses.replace(memory("sent", 2), embedded=True, embedding_model="caller"))
    assert await admin.legacy_vector_model() is None
    await put(record_writes, dataclasses.replace(memory("made", 3), embedded=True, embedding_model="onnx:m1"))
    assert await admin.legacy_vector_model() == "onnx:m1"
