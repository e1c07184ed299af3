"""The fence contract (:class:`~cpersona.stores.fence_store.FenceStore`), on every adapter."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from contract.contract_records import Roles, memory, put, raw
from cpersona.errors import AgentBeingDeleted, BackendUnavailable
from cpersona.model.records import ProfileRecord

if TYPE_CHECKING:
    from cpersona.stores.fence_store import FenceStore
    from cpersona.stores.record_reads import RecordReads
    from cpersona.stores.record_writes import RecordWrites


async def test_a_fenced_agent_writes_nothing_and_other_agents_write_on(
    fences: FenceStore, record_writes: RecordWrites, record_reads: RecordReads
) -> None:
    seq = await record_writes.next_seq()
    await fences.raise_fence("a", fence_secs=60, bound_secs=60)
    refused = memory("during the delete", seq + 1)
    with pytest.raises(AgentBeingDeleted):
        await put(record_writes, refused)
    with pytest.raises(AgentBeingDeleted):
        await record_writes.put_raw([raw("during the delete", 1.0)])
    with pytest.raises(AgentBeingDeleted):
        await record_writes.put_profile(ProfileRecord(agent_id="a", content="Terse.", updated_at=1.0))
    assert await record_reads.get("memory", refused.id) is None
    theirs = memory("another agent", seq + 2, agent="b")
    await put(record_writes, theirs)
    assert await record_reads.get("memory", theirs.id) == theirs


async def test_once_lowered_only_records_numbered_past_the_bound_are_written(
    fences: FenceStore, record_writes: RecordWrites, record_reads: RecordReads
) -> None:
    before = await record_writes.next_seq()  # numbered before the delete: its vector may be gone
    await fences.raise_fence("a", fence_secs=60, bound_secs=60)
    await fences.renew_fence("a", fence_secs=60)
    await fences.lower_fence("a", bound_secs=60)
    with pytest.raises(AgentBeingDeleted):
        await put(record_writes, memory("numbered before", before))
    after = memory("numbered after", await record_writes.next_seq())
    await put(record_writes, after)
    assert await record_reads.get("memory", after.id) == after


async def test_the_fence_stays_up_until_every_delete_under_way_lowers_it(
    fences: FenceStore, record_writes: RecordWrites
) -> None:
    await fences.raise_fence("a", fence_secs=60, bound_secs=60)
    await fences.raise_fence("a", fence_secs=60, bound_secs=60)  # a second delete of the same agent
    await fences.lower_fence("a", bound_secs=60)
    with pytest.raises(AgentBeingDeleted):
        await put(record_writes, memory("one delete still runs", await record_writes.next_seq()))
    await fences.lower_fence("a", bound_secs=60)
    await put(record_writes, memory("both done", await record_writes.next_seq()))


async def test_an_unreachable_backend_raises_backend_unavailable(unreachable: Roles) -> None:
    with pytest.raises(BackendUnavailable):
        await unreachable.fences.raise_fence("a", fence_secs=60, bound_secs=60)
