"""The recall-reads contract (:class:`~cpersona.stores.recall_reads.RecallReads`), on every adapter."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import pytest

from contract.contract_records import BASE, Roles, episode, memory, put
from cpersona.errors import BackendUnavailable
from cpersona.model.records import ProfileRecord, Source, new_id
from cpersona.model.scope import ReadScope
from cpersona.stores.record_values import HydratedRecord, SeqAt, StoredProfile

if TYPE_CHECKING:
    from cpersona.stores.recall_reads import RecallReads
    from cpersona.stores.record_writes import RecordWrites


async def test_keyword_search_ranks_by_bm25_and_lists_a_blank_query(
    recall_reads: RecallReads, record_writes: RecordWrites
) -> None:
    zebra, cobalt = memory("zebra crossing", 1), memory("cobalt mine", 2)
    both = memory("cobalt zebra", 3)
    await put(record_writes, zebra, cobalt, both, memory("zebra elsewhere", 4, agent="b"))
    ranked = await recall_reads.memory_keyword(ReadScope("a"), "cobalt zebra", 10)
    assert ranked.arm == "memory_keyword"
    assert ranked.rows[0].ref == both.ref
    assert {r.ref for r in ranked.rows} == {zebra.ref, cobalt.ref, both.ref}
    scores = [r.raw for r in ranked.rows if r.raw is not None]
    assert len(scores) == len(ranked.rows)
    assert all(isinstance(s, float) and s > 0 for s in scores)
    assert scores == sorted(scores, reverse=True)
    blank = await recall_reads.memory_keyword(ReadScope("a"), "  ", 2)
    assert [(r.ref, r.raw) for r in blank.rows] == [(both.ref, None), (cobalt.ref, None)]
    period = (BASE + 1, BASE + 3)  # [start, end): the first two
    inside = await recall_reads.memory_keyword(ReadScope("a"), "zebra", 10, period=period)
    assert [r.ref for r in inside.rows] == [zebra.ref]


async def test_a_row_the_keyword_search_finds_for_every_term_holds_every_term(
    recall_reads: RecallReads, record_writes: RecordWrites
) -> None:
    # terms_held counts what the search itself matches: the row holding both words (one only by its
    # stem) is first, and holds both; the one holding one of them holds one.
    both, one = memory("the databases of staging", 1), memory("staging only", 2)
    await put(record_writes, both, one)
    ranked = await recall_reads.memory_keyword(ReadScope("a"), "staging database", 10)
    assert [r.ref for r in ranked.rows] == [both.ref, one.ref]
    assert recall_reads.terms_held("staging database", "the databases of staging") == (2, 2)
    assert recall_reads.terms_held("staging database", "staging only") == (1, 2)


async def test_no_read_returns_a_row_of_another_agent(
    recall_reads: RecallReads, record_writes: RecordWrites
) -> None:
    mine, theirs = (
        memory("the lighthouse keeper", 1, agent="a"),
        memory("the lighthouse keeper", 2, agent="b"),
    )
    await put(record_writes, mine, theirs)
    await record_writes.put_episode(episode("a lighthouse week", 3, agent="b"), queue_blocks=False)
    scope = ReadScope("a")
    assert [r.ref for r in (await recall_reads.memory_keyword(scope, "lighthouse", 10)).rows] == [mine.ref]
    assert [r.ref for r in (await recall_reads.memory_keyword(scope, "", 10)).rows] == [mine.ref]
    assert (await recall_reads.episode_fts(scope, "lighthouse", 10)).rows == ()
    assert await recall_reads.seq_at("memory", scope, 0) == SeqAt(1, 1)
    assert await recall_reads.seq_at("episode", scope, 0) == SeqAt(0, None)
    assert await recall_reads.time_span(scope) == (mine.timestamp, mine.timestamp)
    assert await recall_reads.newest_episode_time(scope) is None
    assert await recall_reads.newest_memory_time(ReadScope("c")) is None


async def test_episodes_carry_no_source(recall_reads: RecallReads, record_writes: RecordWrites) -> None:
    ep = episode("the lake", 1)
    await record_writes.put_episode(ep, queue_blocks=False)
    assert (await recall_reads.episode_fts(ReadScope("a", source_id="slack:1"), "lake", 10)).rows == ()
    assert [r.ref for r in (await recall_reads.episode_fts(ReadScope("a"), "lake", 10)).rows] == [ep.ref]


async def test_seq_at_counts_and_finds_the_rank_from_the_newest(
    recall_reads: RecallReads, record_writes: RecordWrites
) -> None:
    await put(record_writes, *(memory(f"m{i}", 10 + i, source="s") for i in range(5)))
    assert await recall_reads.seq_at("memory", ReadScope("a"), 0) == SeqAt(5, 14)
    assert await recall_reads.seq_at("memory", ReadScope("a"), 3) == SeqAt(5, 11)
    assert await recall_reads.seq_at("memory", ReadScope("a"), 9) == SeqAt(5, None)
    # the source filter does not narrow the statistics
    assert await recall_reads.seq_at("memory", ReadScope("a", source_id="other"), 0) == SeqAt(5, 14)


async def test_the_time_span_is_exact_and_honours_the_source(
    recall_reads: RecallReads, record_writes: RecordWrites
) -> None:
    assert await recall_reads.time_span(ReadScope("a")) is None
    await put(
        record_writes,
        memory("old", 1, ts=BASE - 86_400.000001, source="slack:1"),
        memory("new", 2, ts=BASE + 0.000007, source="discord:2"),
    )
    assert await recall_reads.time_span(ReadScope("a")) == (BASE - 86_400.000001, BASE + 0.000007)
    assert await recall_reads.time_span(ReadScope("a", source_id="slack:1")) == (BASE - 86_400.000001,) * 2
    assert await recall_reads.time_span(ReadScope("a", source_id="telegram:1")) is None


async def test_sources_read_in_order_and_a_missing_memory_has_none(
    recall_reads: RecallReads, record_writes: RecordWrites
) -> None:
    one, two = memory("first", 1, source="slack:1"), memory("second", 2)
    await put(record_writes, one, two)
    assert await recall_reads.memory_sources([two.id, new_id(), one.id]) == ["", None, "slack:1"]


async def test_hydration_reads_what_a_recall_shows_of_each_live_record(
    recall_reads: RecallReads, record_writes: RecordWrites
) -> None:
    rec = dataclasses.replace(memory("the ferry leaves at nine", 1, source="slack:1"), msg_id="m1")
    ep = dataclasses.replace(episode("a week at the lake", 2), embedded=True)
    await put(record_writes, rec)
    await record_writes.put_episode(ep, queue_blocks=False)
    absent = "mem:" + new_id()
    found = await recall_reads.hydrate([rec.ref, absent, ep.ref, rec.ref])
    assert found == {
        rec.ref: HydratedRecord(
            rec.ref, "the ferry leaves at nine", "Agent", "slack:1", "", "m1", rec.timestamp, 0.0, False
        ),
        ep.ref: HydratedRecord(
            ep.ref, "a week at the lake", "Agent", "", "", "", ep.timestamp, BASE + 2, True
        ),
    }
    assert found[rec.ref].source == Source("Agent", "slack:1", "")
    assert found[ep.ref].source is None
    await record_writes.delete("memory", rec.id, [])
    assert set(await recall_reads.hydrate([rec.ref, ep.ref])) == {ep.ref}
    assert await recall_reads.hydrate([]) == {}


async def test_the_profile_and_the_gate_a_recall_reads(
    recall_reads: RecallReads, record_writes: RecordWrites
) -> None:
    assert await recall_reads.recall_profile("a") is None
    await record_writes.put_profile(ProfileRecord(agent_id="a", content="Prefers YAML.", updated_at=BASE))
    assert await recall_reads.recall_profile("a") == StoredProfile("Prefers YAML.")
    assert await recall_reads.recall_profile("b") is None
    assert await recall_reads.calibrated_gate("a") is None
    await record_writes.put_calibration("a", {"threshold": 0.42, "selected": True})
    assert await recall_reads.calibrated_gate("a") == 0.42
    assert await recall_reads.calibrated_gate("b") is None
    await record_writes.select_calibration("a", False)
    assert await recall_reads.calibrated_gate("a") is None  # calibrated, but not selected
    await record_writes.put_calibration("b", {"threshold": "high", "selected": True})
    assert await recall_reads.calibrated_gate("b") is None  # selected, but no number to use


async def test_the_newest_times_of_a_scope_ignore_its_source(
    recall_reads: RecallReads, record_writes: RecordWrites
) -> None:
    scope = ReadScope("a", project_id="p", source_id="nobody")
    assert await recall_reads.newest_memory_time(scope) is None
    assert await recall_reads.newest_episode_time(scope) is None
    # the newest memory by record time, not by insertion; another project is not seen
    await put(
        record_writes,
        memory("late", 1, ts=BASE + 500, source="slack:1"),
        memory("early", 2, ts=BASE + 5, project="p"),
        memory("elsewhere", 3, ts=BASE + 900, project="q"),
    )
    # as the search engine prints it, to 12 significant digits (a centisecond is nothing to the age prior)
    assert await recall_reads.newest_memory_time(scope) == pytest.approx(BASE + 500, abs=0.01)
    # the newest episode by insertion, whatever its creation time
    await record_writes.put_episode(
        dataclasses.replace(episode("first", 4), created_at=BASE + 70), queue_blocks=False
    )
    await record_writes.put_episode(
        dataclasses.replace(episode("second", 5), created_at=BASE + 60), queue_blocks=False
    )
    assert await recall_reads.newest_episode_time(scope) == BASE + 60


async def test_an_unreachable_backend_raises_backend_unavailable(unreachable: Roles) -> None:
    reads = unreachable.recall_reads
    with pytest.raises(BackendUnavailable):
        await reads.memory_keyword(ReadScope("a"), "ferry", 5)
    with pytest.raises(BackendUnavailable):
        await reads.time_span(ReadScope("a"))
    with pytest.raises(BackendUnavailable):
        await reads.hydrate(["mem:" + new_id()])
    with pytest.raises(BackendUnavailable):
        await reads.recall_profile("a")
    with pytest.raises(BackendUnavailable):
        await reads.newest_memory_time(ReadScope("a"))
