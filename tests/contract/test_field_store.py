"""The field-writes contract (:class:`~cpersona.stores.field_store.MemoryFieldStore`), on every adapter."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import pytest

from contract.contract_records import BASE, Roles, memory, put
from cpersona.errors import BackendUnavailable
from cpersona.model.records import Association, Fidelity, MemoryRecord, new_id

if TYPE_CHECKING:
    from cpersona.stores.field_store import MemoryFieldStore
    from cpersona.stores.record_reads import RecordReads
    from cpersona.stores.record_writes import RecordWrites


async def test_a_field_is_set_alone_and_only_where_the_memory_exists(
    field_writes: MemoryFieldStore, record_writes: RecordWrites, record_reads: RecordReads
) -> None:
    rec, gone = memory("kept", 1), new_id()
    await put(record_writes, rec)
    faded = Fidelity(score=0.25)
    assert await field_writes.set_fidelities([(rec.id, faded), (gone, faded)]) == 1
    assert await record_reads.get("memory", gone) is None  # no document made for the missing id
    read = await record_reads.get("memory", rec.id)
    assert read == dataclasses.replace(rec, fidelity=faded)
    assert await field_writes.set_fidelities([(rec.id, faded)]) == 1  # the same again: the same memory
    assert await record_reads.get("memory", rec.id) == read
    assert await field_writes.set_fidelities([]) == 0


async def test_edges_are_set_without_touching_the_rest(
    field_writes: MemoryFieldStore, record_writes: RecordWrites, record_reads: RecordReads
) -> None:
    rec, other = memory("one", 1), memory("two", 2)
    await put(record_writes, rec, other)
    edges = (Association(target_id=other.id, type="temporal", weight=0.5, created_at=BASE),)
    assert await field_writes.set_associations([(rec.id, edges)]) == 1
    read = await record_reads.get("memory", rec.id)
    assert isinstance(read, MemoryRecord)
    assert read == dataclasses.replace(rec, associations=edges)
    assert await record_reads.get("memory", other.id) == other


async def test_an_unreachable_backend_raises_backend_unavailable(unreachable: Roles) -> None:
    with pytest.raises(BackendUnavailable):
        await unreachable.field_writes.set_fidelities([(new_id(), Fidelity())])
