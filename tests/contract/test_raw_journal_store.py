"""The raw-journal contract (:class:`~cpersona.stores.raw_journal_store.RawJournalStore`), on every
adapter. Sealed entries need the engine's sealer and are covered by
``tests/integration/test_raw_sealing.py``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from contract.contract_records import BASE, Roles, raw
from cpersona.errors import BackendUnavailable
from cpersona.model.raw_query import RawFilter
from cpersona.model.records import new_id
from cpersona.model.scope import ReadScope

if TYPE_CHECKING:
    from cpersona.stores.raw_journal_store import RawJournalStore
    from cpersona.stores.record_writes import RecordWrites


def every(agent: str, *, query: str | None = None, limit: int = 10, session: str | None = None) -> RawFilter:
    return RawFilter(ReadScope(agent), session, None, ("normal",), ("public",), query, False, limit)


async def test_entries_come_oldest_first_and_are_counted_past_the_limit(
    raw_journal: RawJournalStore, record_writes: RecordWrites
) -> None:
    late, early, middle = raw("late", BASE + 3), raw("early", BASE + 1), raw("middle", BASE + 2)
    await record_writes.put_raw([late, early, middle])
    page = await raw_journal.raw_query(every("a"))
    assert [r.id for r in page.records] == [early.id, middle.id, late.id]
    assert page.total == 3
    first = await raw_journal.raw_query(every("a", limit=2))
    assert ([r.id for r in first.records], first.total) == ([early.id, middle.id], 3)


async def test_no_query_returns_an_entry_of_another_agent_or_session(
    raw_journal: RawJournalStore, record_writes: RecordWrites
) -> None:
    mine, theirs, elsewhere = (
        raw("the harbour", BASE),
        raw("the harbour", BASE, agent="b"),
        raw("x", BASE, session="s2"),
    )
    await record_writes.put_raw([mine, theirs, elsewhere])
    assert [r.id for r in (await raw_journal.raw_query(every("a", query="harbour"))).records] == [mine.id]
    assert [r.id for r in (await raw_journal.raw_query(every("a", session="s1"))).records] == [mine.id]
    assert (await raw_journal.raw_query(every("c"))).total == 0


async def test_only_a_sealed_entry_of_the_agent_is_deleted_as_sealed(
    raw_journal: RawJournalStore, record_writes: RecordWrites
) -> None:
    plain = raw("in the clear", BASE)
    await record_writes.put_raw([plain])
    assert await raw_journal.delete_sealed("a", plain.id) is False
    assert await raw_journal.delete_sealed("a", new_id()) is False
    assert (await raw_journal.raw_query(every("a"))).total == 1


async def test_an_unreachable_backend_raises_backend_unavailable(unreachable: Roles) -> None:
    with pytest.raises(BackendUnavailable):
        await unreachable.raw_journal.raw_query(every("a"))
