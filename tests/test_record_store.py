"""The record-store contract: what :class:`~cpersona.stores.protocols.RecordStore` promises, on every adapter.

The one adapter today is Redis (:class:`~cpersona.stores.redis.store.RedisRecordStore`), run against the
session's real Redis under a fresh key prefix per test. Each test states a promise of the protocol in
its own words (what a write leaves, what a read returns, which scope sees what, what an outage raises)
and builds its records here rather than through the engine, so the store is tested alone. A second
adapter joins by adding its opener to ``ADAPTERS``.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING

import anyio
import pytest

from cpersona.errors import RedisUnavailable
from cpersona.keys import Keys
from cpersona.model.associations import Declaration, Entity, Relation
from cpersona.model.records import (
    EpisodeRecord,
    MemoryRecord,
    ProfileRecord,
    RawRecord,
    Scope,
    Source,
    new_id,
)
from cpersona.model.scope import ReadScope
from cpersona.stores.protocols import (
    BlockParent,
    ClaimHolder,
    DeclareCounts,
    EntityLinks,
    HydratedRecord,
    IndexedEntity,
    InFlightWrite,
    Link,
    MemoryWrite,
    RecordCounts,
    RecordLinks,
    RecordStore,
    SeqAt,
    StoredProfile,
)
from cpersona.stores.redis.connection import close_redis, new_client
from cpersona.stores.redis.store import RedisRecordStore

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cpersona.stores.redis.connection import RedisClient

ADAPTERS = ("redis",)
BASE = 1_700_000_000.123456


@pytest.fixture(params=ADAPTERS)
async def store(request: pytest.FixtureRequest, redis: RedisClient, key_prefix: str) -> RecordStore:
    assert request.param == "redis"
    opened = RedisRecordStore(redis, Keys(key_prefix))
    await opened.ensure_indexes()
    return opened


def memory(
    content: str,
    seq: int,
    *,
    agent: str = "a",
    project: str = "",
    channel: str = "",
    source: str = "",
    ts: float | None = None,
    pending: bool = False,
) -> MemoryRecord:
    return MemoryRecord(
        id=new_id(),
        scope=Scope(agent, project, channel),
        source=Source("Agent", source, ""),
        content=content,
        timestamp=BASE + seq if ts is None else ts,
        seq=seq,
        vector_pending=pending,
    )


def episode(summary: str, seq: int, *, agent: str = "a", pending: bool = False) -> EpisodeRecord:
    return EpisodeRecord(
        id=new_id(),
        scope=Scope(agent),
        summary=summary,
        seq=seq,
        created_at=BASE + seq,
        vector_pending=pending,
    )


async def put(store: RecordStore, *records: MemoryRecord, claims: Sequence[str] = ()) -> None:
    await store.put_memories([MemoryWrite(r, tuple(claims)) for r in records], queue_blocks=False)


def refs(records: Sequence[object]) -> list[str]:
    return [r.ref for r in records]  # type: ignore[attr-defined]


async def test_a_reachable_store_answers_ping(store: RecordStore) -> None:
    await store.ping()  # the unreachable case below raises RedisUnavailable


async def test_the_adapter_is_a_record_store(store: RecordStore) -> None:
    assert isinstance(store, RecordStore)


async def test_a_written_record_reads_back_whole(store: RecordStore) -> None:
    rec = dataclasses.replace(
        memory("the ferry leaves at nine", 1, project="p", source="slack:1"), msg_id="m1"
    )
    await put(store, rec)
    assert await store.get("memory", rec.id) == rec
    assert await store.get("episode", rec.id) is None
    assert await store.get("memory", new_id()) is None
    ep = episode("a week at the lake", 2)
    await store.put_episode(ep, queue_blocks=False)
    assert await store.get("episode", ep.id) == ep
    raw = RawRecord(new_id(), Scope("a"), "s1", "conversation", "user", "normal", "public", "hello", BASE)
    await store.put_raw([raw])
    assert await store.get("raw", raw.id) == raw


async def test_sequence_numbers_are_reserved_in_blocks(store: RecordStore) -> None:
    first = await store.next_seq(3)
    assert await store.next_seq() == first + 3
    assert await store.next_seq(2) == first + 4


async def test_a_claim_counts_only_while_its_holder_exists(store: RecordStore) -> None:
    rec = memory("claimed", 1)
    claim = Keys("unused").prefix + ":claim"
    assert await store.live_claim([claim]) is None
    await put(store, rec, claims=[claim])
    holder = await store.live_claim(["nobody-holds-this", claim])
    assert holder is not None
    assert (holder.claim, holder.record_id) == (claim, rec.id)
    await store.delete("memory", rec.id, [])
    assert await store.live_claim([claim]) is None  # the claim is left, but its holder is gone


async def test_replace_moves_claims_and_delete_removes_them(store: RecordStore) -> None:
    rec = memory("before", 1)
    await put(store, rec, claims=["old-claim"])
    changed = dataclasses.replace(rec, content="after", version=2)
    await store.replace_memory(
        changed, drop_claims=["old-claim"], add_claims=["new-claim"], queue_blocks=False
    )
    assert await store.get("memory", rec.id) == changed
    assert await store.live_claim(["old-claim"]) is None
    assert (await store.live_claim(["new-claim"])) is not None
    await store.delete("memory", rec.id, ["new-claim"])
    assert await store.get("memory", rec.id) is None
    assert await store.counts("a") == RecordCounts(0, 0, 0, 0)


async def test_delete_many_removes_each_record_with_its_claims_and_counts_those_there(
    store: RecordStore,
) -> None:
    kept, one, two = memory("kept", 1), memory("first", 2), memory("second", 3)
    await put(store, kept, claims=["kept-claim"])
    await put(store, one, claims=["claim-1"])
    await put(store, two, claims=["claim-2a", "claim-2b"])
    gone = new_id()  # never stored: not counted, and nothing of it is touched
    deleted = await store.delete_many(
        "memory", [(one.id, ["claim-1"]), (gone, []), (two.id, ["claim-2a", "claim-2b"])]
    )
    assert deleted == 2
    assert (await store.get("memory", one.id), await store.get("memory", two.id)) == (None, None)
    assert [await store.live_claim([c]) for c in ("claim-1", "claim-2a", "claim-2b")] == [None, None, None]
    assert await store.get("memory", kept.id) == kept
    assert await store.live_claim(["kept-claim"]) == ClaimHolder("kept-claim", kept.id)
    assert await store.delete_many("memory", []) == 0


async def test_newest_lists_by_insertion_within_the_scope(store: RecordStore) -> None:
    old, mid, new = (
        memory("one", 1, ts=BASE + 50),
        memory("two", 2, project="p"),
        memory("three", 3, project="q"),
    )
    await put(store, old, mid, new, memory("another agent", 4, agent="b"))
    assert refs(await store.newest("memory", ReadScope("a"), 10)) == refs([new, mid, old])
    assert refs(await store.newest("memory", ReadScope("a"), 2)) == refs([new, mid])
    # a project sees itself and the global pool
    assert refs(await store.newest("memory", ReadScope("a", project_id="p"), 10)) == refs([mid, old])
    assert await store.newest("memory", ReadScope("a"), 0) == []


async def test_episodes_carry_no_source(store: RecordStore) -> None:
    ep = episode("the lake", 1)
    await store.put_episode(ep, queue_blocks=False)
    assert refs(await store.newest("episode", ReadScope("a"), 10)) == [ep.ref]
    assert await store.newest("episode", ReadScope("a", source_id="slack:1"), 10) == []
    assert (await store.episode_fts(ReadScope("a", source_id="slack:1"), "lake", 10)).rows == ()
    assert [r.ref for r in (await store.episode_fts(ReadScope("a"), "lake", 10)).rows] == [ep.ref]


async def test_counts_per_agent_and_in_all(store: RecordStore) -> None:
    await put(store, memory("x", 1), memory("y", 2, pending=True), memory("z", 3, agent="b"))
    await store.put_episode(episode("e", 4), queue_blocks=False)
    assert await store.counts("a") == RecordCounts(2, 1, 0, 1)
    assert await store.counts("b") == RecordCounts(1, 0, 0, 1)
    assert await store.counts(None) == RecordCounts(3, 1, 0, 1)


async def test_keyword_search_ranks_by_bm25_and_lists_a_blank_query(store: RecordStore) -> None:
    zebra, cobalt = memory("zebra crossing", 1), memory("cobalt mine", 2)
    both = memory("cobalt zebra", 3)
    await put(store, zebra, cobalt, both, memory("zebra elsewhere", 4, agent="b"))
    ranked = await store.memory_keyword(ReadScope("a"), "cobalt zebra", 10)
    assert ranked.arm == "memory_keyword"
    assert ranked.rows[0].ref == both.ref
    assert {r.ref for r in ranked.rows} == {zebra.ref, cobalt.ref, both.ref}
    scores = [r.raw for r in ranked.rows if r.raw is not None]
    assert len(scores) == len(ranked.rows)
    assert all(isinstance(s, float) and s > 0 for s in scores)
    assert scores == sorted(scores, reverse=True)
    blank = await store.memory_keyword(ReadScope("a"), "  ", 2)
    assert [(r.ref, r.raw) for r in blank.rows] == [(both.ref, None), (cobalt.ref, None)]
    period = (BASE + 1, BASE + 3)  # [start, end): the first two
    inside = await store.memory_keyword(ReadScope("a"), "zebra", 10, period=period)
    assert [r.ref for r in inside.rows] == [zebra.ref]


async def test_seq_at_counts_and_finds_the_rank_from_the_newest(store: RecordStore) -> None:
    await put(store, *(memory(f"m{i}", 10 + i, source="s") for i in range(5)))
    assert await store.seq_at("memory", ReadScope("a"), 0) == SeqAt(5, 14)
    assert await store.seq_at("memory", ReadScope("a"), 3) == SeqAt(5, 11)
    assert await store.seq_at("memory", ReadScope("a"), 9) == SeqAt(5, None)
    # the source filter does not narrow the statistics
    assert await store.seq_at("memory", ReadScope("a", source_id="other"), 0) == SeqAt(5, 14)
    assert await store.seq_at("episode", ReadScope("a"), 0) == SeqAt(0, None)


async def test_the_time_span_is_exact_and_honours_the_source(store: RecordStore) -> None:
    assert await store.time_span(ReadScope("a")) is None
    await put(
        store,
        memory("old", 1, ts=BASE - 86_400.000001, source="slack:1"),
        memory("new", 2, ts=BASE + 0.000007, source="discord:2"),
    )
    assert await store.time_span(ReadScope("a")) == (BASE - 86_400.000001, BASE + 0.000007)
    assert await store.time_span(ReadScope("a", source_id="slack:1")) == (BASE - 86_400.000001,) * 2
    assert await store.time_span(ReadScope("a", source_id="telegram:1")) is None


async def test_sources_and_samples_read_in_order(store: RecordStore) -> None:
    one, two = memory("first", 1, source="slack:1"), memory("second", 2)
    await put(store, one, two)
    missing = new_id()
    assert await store.memory_sources([two.id, missing, one.id]) == ["", None, "slack:1"]
    assert await store.memory_ids("a") == [one.id, two.id]
    assert await store.memory_ids("b") == []
    assert await store.memory_samples([two.id, missing, one.id]) == [
        ("second", two.timestamp),
        ("first", one.timestamp),
    ]


async def test_pending_vectors_are_listed_loaded_and_cleared(store: RecordStore) -> None:
    rec, ep, gone = memory("pending", 1, pending=True), episode("too", 2, pending=True), memory("x", 3)
    await put(store, rec, dataclasses.replace(gone, vector_pending=True))
    await store.put_episode(ep, queue_blocks=False)
    await store.delete("memory", gone.id, [])
    assert sorted(await store.pending_refs()) == sorted([rec.ref, ep.ref])
    assert refs(await store.load_pending([rec.ref, ep.ref])) == [rec.ref, ep.ref]
    assert await store.mark_vectors_written([rec, ep], "model-x") == []
    assert await store.pending_refs() == []
    written = await store.get("memory", rec.id)
    assert isinstance(written, MemoryRecord)
    assert (written.embedded, written.embedding_model, written.vector_pending) == (True, "model-x", False)


async def test_a_pending_ref_whose_record_is_gone_loses_its_mark(store: RecordStore) -> None:
    gone = memory("deleted before its vector", 1, pending=True)
    await put(store, gone)
    await store.delete("memory", gone.id, [])
    # delete clears the mark itself; a mark left by a crash is cleared when it is loaded
    assert await store.pending_refs() == []
    assert await store.load_pending([gone.ref]) == []


async def test_block_reads_give_the_parent_and_its_current_text(store: RecordStore) -> None:
    rec, ep = memory("Block me. Twice.", 7, project="p", channel="c"), episode("A summary.", 8)
    await put(store, rec)
    await store.put_episode(ep, queue_blocks=False)
    absent = "mem:" + new_id()
    assert await store.block_parents([rec.ref, absent, ep.ref]) == [
        BlockParent("memory", rec.id, "a", "p", "c", rec.timestamp, 7, "Block me. Twice."),
        None,
        BlockParent("episode", ep.id, "a", "", "", ep.timestamp, 8, "A summary."),
    ]
    assert await store.block_texts([ep.ref, absent, rec.ref]) == ["A summary.", None, "Block me. Twice."]


async def test_delete_agent_removes_everything_of_that_agent_only(store: RecordStore) -> None:
    await put(store, memory("a1", 1, pending=True), memory("a2", 2), claims=[])
    await put(store, memory("b1", 3, agent="b"))
    await store.put_episode(episode("ae", 4), queue_blocks=False)
    await store.put_profile(ProfileRecord(agent_id="a", content="Terse.", updated_at=BASE))
    await store.put_calibration("a", {"threshold": 0.4, "selected": True})
    assert await store.delete_agent("a") == 3
    assert await store.counts("a") == RecordCounts(0, 0, 0, 0)
    assert (await store.counts("b")).memories == 1
    assert await store.profile("a") is None
    assert await store.calibration("a") is None


async def test_profiles_and_calibrations_round_trip(store: RecordStore) -> None:
    assert await store.profile("a") is None
    await store.put_profile(ProfileRecord(agent_id="a", content="Prefers YAML.", updated_at=BASE))
    assert await store.profile("a") == ProfileRecord(agent_id="a", content="Prefers YAML.", updated_at=BASE)
    assert await store.calibration("a") is None
    await store.put_calibration("a", {"threshold": 0.42, "selected": True})
    await store.select_calibration("a", False)
    assert await store.calibration("a") == {"threshold": 0.42, "selected": False}


async def test_hydration_reads_what_a_recall_shows_of_each_live_record(store: RecordStore) -> None:
    rec = dataclasses.replace(memory("the ferry leaves at nine", 1, source="slack:1"), msg_id="m1")
    ep = dataclasses.replace(episode("a week at the lake", 2), embedded=True)
    await put(store, rec)
    await store.put_episode(ep, queue_blocks=False)
    absent = "mem:" + new_id()
    found = await store.hydrate([rec.ref, absent, ep.ref, rec.ref])
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
    assert await store.hydrate([]) == {}


async def test_the_profile_and_the_gate_a_recall_reads(store: RecordStore) -> None:
    assert await store.recall_profile("a") is None
    await store.put_profile(ProfileRecord(agent_id="a", content="Prefers YAML.", updated_at=BASE))
    assert await store.recall_profile("a") == StoredProfile("Prefers YAML.")
    assert await store.calibrated_gate("a") is None
    await store.put_calibration("a", {"threshold": 0.42, "selected": True})
    assert await store.calibrated_gate("a") == 0.42
    await store.select_calibration("a", False)
    assert await store.calibrated_gate("a") is None  # calibrated, but not selected
    await store.put_calibration("b", {"threshold": "high", "selected": True})
    assert await store.calibrated_gate("b") is None  # selected, but no number to use


async def test_the_newest_times_of_a_scope_ignore_its_source(store: RecordStore) -> None:
    scope = ReadScope("a", project_id="p", source_id="nobody")
    assert await store.newest_memory_time(scope) is None
    assert await store.newest_episode_time(scope) is None
    # the newest memory by record time, not by insertion; another project is not seen
    await put(
        store,
        memory("late", 1, ts=BASE + 500, source="slack:1"),
        memory("early", 2, ts=BASE + 5, project="p"),
        memory("elsewhere", 3, ts=BASE + 900, project="q"),
    )
    # as the search engine prints it, to 12 significant digits (a centisecond is nothing to the age prior)
    assert await store.newest_memory_time(scope) == pytest.approx(BASE + 500, abs=0.01)
    # the newest episode by insertion, whatever its creation time
    await store.put_episode(
        dataclasses.replace(episode("first", 4), created_at=BASE + 70), queue_blocks=False
    )
    await store.put_episode(
        dataclasses.replace(episode("second", 5), created_at=BASE + 60), queue_blocks=False
    )
    assert await store.newest_episode_time(scope) == BASE + 60


async def test_an_unreachable_store_raises_redis_unavailable(key_prefix: str) -> None:
    gone = new_client("redis://127.0.0.1:1", timeout=1.0, retries=0)
    try:
        store = RedisRecordStore(gone, Keys(key_prefix))
        with pytest.raises(RedisUnavailable):
            await store.memory_keyword(ReadScope("a"), "ferry", 5)
        with pytest.raises(RedisUnavailable):
            await store.time_span(ReadScope("a"))
        with pytest.raises(RedisUnavailable):
            await store.get("memory", new_id())
        with pytest.raises(RedisUnavailable):
            await store.put_memories([MemoryWrite(memory("x", 1))], queue_blocks=True)
        with pytest.raises(RedisUnavailable):
            await store.hydrate(["mem:" + new_id()])
        with pytest.raises(RedisUnavailable):
            await store.recall_profile("a")
        with pytest.raises(RedisUnavailable):
            await store.newest_memory_time(ReadScope("a"))
        with pytest.raises(RedisUnavailable):
            await store.ping()
        with pytest.raises(RedisUnavailable):
            await store.declare_associations(
                Scope("a"), Declaration((Entity("Ann"),)), anchor_ref=None, retract=False
            )
        with pytest.raises(RedisUnavailable):
            await store.declare_associations(
                Scope("a"), Declaration((Entity("Ann"),)), anchor_ref=None, retract=True
            )
        with pytest.raises(RedisUnavailable):
            await store.entity_index(ReadScope("a"))
        with pytest.raises(RedisUnavailable):
            await store.forget_record_associations("a", "mem:" + new_id())
        with pytest.raises(RedisUnavailable):
            await store.delete_agent_associations("a")
    finally:
        await close_redis(gone)


# ------------------------------------------------------------------------------ the Redis adapter only


async def test_a_document_the_store_did_not_write_reads_as_absent(
    redis: RedisClient, key_prefix: str
) -> None:
    keys = Keys(key_prefix)
    store = RedisRecordStore(redis, keys)
    record_id = new_id()
    await redis.json().set(keys.memory(record_id), "$", {"vector_pending": 0, "embedded": True})
    assert await store.get("memory", record_id) is None


async def test_a_record_missing_a_hydrated_field_is_read_whole(redis: RedisClient, key_prefix: str) -> None:
    # Hydration asks for the fields by one union path, which skips absent ones: a record written by an
    # older engine without one of them must come back with that field's default, the rest unshifted.
    keys = Keys(key_prefix)
    store = RedisRecordStore(redis, keys)
    await store.ensure_indexes()
    rec = dataclasses.replace(memory("the ferry leaves at nine", 1, source="slack:1"), msg_id="m1")
    ep = dataclasses.replace(episode("a week at the lake", 2), embedded=True)
    await put(store, rec)
    await store.put_episode(ep, queue_blocks=False)
    before = await store.hydrate([rec.ref, ep.ref])
    client = redis.json()
    await client.delete(keys.memory(rec.id), "$.msg_id")  # type: ignore[no-untyped-call]
    await client.delete(keys.episode(ep.id), "$.embedded")  # type: ignore[no-untyped-call]
    assert await store.hydrate([rec.ref, ep.ref]) == {
        rec.ref: before[rec.ref]._replace(msg_id=""),
        ep.ref: before[ep.ref]._replace(embedded=False),
    }


async def test_marking_a_deleted_record_written_leaves_no_document(store: RecordStore) -> None:
    kept, gone = (
        memory("kept", 1, pending=True),
        memory("deleted while its vector was written", 2, pending=True),
    )
    await put(store, kept, gone)
    await store.delete("memory", gone.id, [])
    assert await store.mark_vectors_written([kept, gone], "model-x") == [gone.id]
    # The clear touched only the document that still exists: no partial one appeared in gone's place.
    assert await store.get("memory", gone.id) is None
    assert await store.counts(None) == RecordCounts(1, 0, 0, 0)
    assert await store.delete_agent("a") == 1
    assert await store.counts(None) == RecordCounts(0, 0, 0, 0)


async def test_a_claim_reserved_in_flight_is_held_until_released(store: RecordStore) -> None:
    c1, c2, c3, c4 = (f"claim:{new_id()}" for _ in range(4))  # names no other test holds
    first, second = new_id(), new_id()
    taken = await store.reserve_writes([InFlightWrite("memory", first, (c1, c2))], ttl_secs=60)
    assert taken == [None]
    # No document yet, but the claim is in flight: a second write of it loses, and names the first.
    lost = await store.reserve_writes(
        [InFlightWrite("memory", second, (c3, c2)), InFlightWrite("memory", new_id(), (c4,))],
        ttl_secs=60,
    )
    assert lost == [ClaimHolder(c2, first), None]
    assert await store.live_claim([c3]) is None  # the loser took none of its claims
    await store.release_writes([InFlightWrite("memory", first, (c1, c2))])
    assert await store.reserve_writes([InFlightWrite("memory", second, (c3, c2))], ttl_secs=60) == [None]


async def test_a_reservation_lapses_and_a_written_claim_does_not(store: RecordStore) -> None:
    c1, c2 = (f"claim:{new_id()}" for _ in range(2))  # names no other test holds
    rec = memory("written", 1)
    assert await store.reserve_writes([InFlightWrite("memory", rec.id, (c1,))], ttl_secs=0.05) == [None]
    await put(store, rec, claims=[c1])
    lapsing = new_id()
    assert await store.reserve_writes([InFlightWrite("memory", lapsing, (c2,))], ttl_secs=0.05) == [None]
    await anyio.sleep(0.2)
    assert await store.reserve_writes([InFlightWrite("memory", new_id(), (c1,))], ttl_secs=60) == [
        ClaimHolder(c1, rec.id)
    ]
    assert await store.reserve_writes([InFlightWrite("memory", new_id(), (c2,))], ttl_secs=60) == [None]


async def test_writes_in_flight_are_abandoned_until_their_record_is_written(store: RecordStore) -> None:
    c1, c2 = (f"claim:{new_id()}" for _ in range(2))  # names no other test holds
    rec, ep, dead = memory("written", 1), episode("written too", 2), new_id()
    writes = [
        InFlightWrite("memory", rec.id, (c1,)),
        InFlightWrite("episode", ep.id),
        InFlightWrite("memory", dead, (c2,)),
    ]
    await store.reserve_writes(writes, ttl_secs=60)
    await put(store, rec, claims=[c1])
    await store.put_episode(ep, queue_blocks=False)
    assert await store.abandoned_writes(time.time() - 60) == []  # begun too recently
    assert await store.abandoned_writes(time.time() + 1) == [writes[2]]
    # Released, a written record keeps its claims; the unwritten one loses its own and is returned, its
    # mark kept until its vector is gone.
    assert await store.release_writes(writes) == [writes[2]]
    assert await store.live_claim([c1]) == ClaimHolder(c1, rec.id)
    retry = InFlightWrite("memory", new_id(), (c2,))
    assert await store.reserve_writes([retry], ttl_secs=60) == [None]
    assert await store.abandoned_writes(time.time() + 1) == [writes[2], retry]
    await store.forget_writes([writes[2]])
    assert await store.abandoned_writes(time.time() + 1) == [retry]
    assert await store.live_claim([c1]) == ClaimHolder(c1, rec.id)


async def test_a_store_that_outlasted_its_reservation_leaves_the_claim(store: RecordStore) -> None:
    # The slow store's reservation lapses, a second store of the same content takes the claim and is
    # written; the slow one is written after it and must leave the claim to the second.
    claim = f"claim:{new_id()}"  # a name no other test holds
    slow, quick = memory("the same text", 1), memory("the same text", 2)
    assert await store.reserve_writes([InFlightWrite("memory", slow.id, (claim,))], ttl_secs=0.05) == [None]
    await anyio.sleep(0.2)
    assert await store.reserve_writes([InFlightWrite("memory", quick.id, (claim,))], ttl_secs=60) == [None]
    await put(store, quick, claims=[claim])
    await put(store, slow, claims=[claim])
    assert await store.live_claim([claim]) == ClaimHolder(claim, quick.id)


async def test_a_replaced_memory_takes_free_claims_and_gives_up_its_own(store: RecordStore) -> None:
    held, old, fresh = (f"claim:{new_id()}" for _ in range(3))  # names no other test holds
    holder, moved = memory("held text", 1), memory("old text", 2)
    await put(store, holder, claims=[held])
    await put(store, moved, claims=[old])
    # An update to the holder's text, then to a new text: the holder keeps its claim throughout.
    changed = dataclasses.replace(moved, content="held text")
    await store.replace_memory(changed, drop_claims=[old], add_claims=[held], queue_blocks=False)
    assert await store.live_claim([held]) == ClaimHolder(held, holder.id)
    assert await store.live_claim([old]) is None
    again = dataclasses.replace(changed, content="fresh text")
    await store.replace_memory(again, drop_claims=[held], add_claims=[fresh], queue_blocks=False)
    assert await store.live_claim([held]) == ClaimHolder(held, holder.id)
    assert await store.live_claim([fresh]) == ClaimHolder(fresh, moved.id)
    # A delete gives up the claims that name its record, and no other.
    await store.delete("memory", moved.id, [held, fresh])
    assert await store.live_claim([held]) == ClaimHolder(held, holder.id)
    assert await store.reserve_writes([InFlightWrite("memory", new_id(), (fresh,))], ttl_secs=60) == [None]


# ------------------------------------------------------------------------------ the associative layer


async def test_associations_are_written_with_the_record_and_read_in_scope(store: RecordStore) -> None:
    # A store's declaration goes into the record's own transaction; the read sees it only from a scope
    # that may read the scope it was declared in (here the record's: project p).
    rec = memory("Ann met Ben", 1, project="p")
    declared = Declaration((Entity("Ann", ("Annie",)), Entity("Ben")))
    await store.put_memories([MemoryWrite(rec, (), declared)], queue_blocks=False)
    index = await store.entity_index(ReadScope("a", "p"))
    assert index == [IndexedEntity("ann", "Ann", (("annie", "Annie"),)), IndexedEntity("ben", "Ben")]
    assert await store.entity_index(ReadScope("a", "")) == []
    assert await store.entity_index(ReadScope("b")) == []
    links = await store.entity_links(ReadScope("a"), ["ann", "nobody"])
    assert links == {"ann": EntityLinks((rec.ref,)), "nobody": EntityLinks()}
    assert (await store.record_links(ReadScope("a", "p"), [rec.ref]))[rec.ref] == RecordLinks(("ann", "ben"))


async def test_a_declaration_is_idempotent_and_a_relation_is_seen_from_both_ends(store: RecordStore) -> None:
    scope = Scope("a", "", "c")
    declared = Declaration(relations=(Relation("Ann", "Knows", "Ben", "entity"),))
    assert await store.declare_associations(scope, declared, anchor_ref=None, retract=False) == DeclareCounts(
        entities=2, relations=1
    )
    assert (
        await store.declare_associations(scope, declared, anchor_ref=None, retract=False) == DeclareCounts()
    )
    links = await store.entity_links(ReadScope("a", channel="c"), ["ann", "ben"])
    assert links["ann"].relations == (Link("out", "knows", "ben"),)
    assert links["ben"].relations == (Link("in", "knows", "ann"),)
    assert (await store.entity_links(ReadScope("a", channel="d"), ["ann"]))["ann"] == EntityLinks()
    gone = await store.declare_associations(scope, declared, anchor_ref=None, retract=True)
    assert gone == DeclareCounts(relations=1)
    assert (await store.entity_links(ReadScope("a"), ["ben"]))["ben"] == EntityLinks()


async def test_forgetting_a_record_removes_its_mentions_and_both_ends_of_its_relations(
    store: RecordStore,
) -> None:
    one, two = memory("one", 1), memory("two", 2)
    await put(store, one, two)
    declared = Declaration((Entity("Ann"),), (Relation(one.ref, "supports", two.ref, "record"),))
    await store.declare_associations(Scope("a"), declared, anchor_ref=one.ref, retract=False)
    assert await store.visible_refs(ReadScope("a"), [one.ref, two.ref]) == [one.ref, two.ref]
    assert await store.visible_refs(ReadScope("b"), [one.ref]) == []
    assert (await store.record_links(ReadScope("a"), [two.ref]))[two.ref].relations == (
        Link("in", "supports", one.ref),
    )
    await store.delete("memory", one.id, ())
    await store.forget_record_associations("a", one.ref)
    assert (await store.record_links(ReadScope("a"), [two.ref]))[two.ref] == RecordLinks()
    assert (await store.entity_links(ReadScope("a"), ["ann"]))["ann"] == EntityLinks()
    assert await store.visible_refs(ReadScope("a"), [one.ref, two.ref]) == [two.ref]
    assert await store.delete_agent_associations("a") > 0
    assert await store.entity_index(ReadScope("a")) == []
