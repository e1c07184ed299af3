"""The cue-store contract (:class:`~cpersona.stores.cue_store.CueStore`), on every adapter.

Records are written through the same adapter's ``record_writes``; the emotion cue's query vector is the
one the cue arm sends (:func:`~cpersona.model.cue_query.cue_emotion_vector`). Reconsolidation is given
its moment and its rule, so a fixed ``NOW`` stands in for the clock and a rule written here stands in for
the fidelity formula.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import pytest

from contract.contract_records import BASE, Roles, memory, put
from cpersona.errors import BackendUnavailable
from cpersona.model.cue_query import cue_emotion_vector
from cpersona.model.records import EmotionVector, Fidelity, new_id
from cpersona.model.scope import ReadScope

if TYPE_CHECKING:
    from contract.adapters import Adapter
    from cpersona.model.records import StoreKind
    from cpersona.stores.cue_store import CueStore
    from cpersona.stores.record_values import Period
    from cpersona.stores.redis.connection import RedisClient

NOW = BASE + 1_000.5
EVERY_STORE: tuple[StoreKind, ...] = ("episodic", "semantic", "procedural", "emotional")
JOY = cue_emotion_vector(EmotionVector(joy=1.0))


def _noted(fidelity: Fidelity, emotion: EmotionVector, now: float) -> Fidelity:
    """A rule that shows what it was given: one more access at ``now``, the emotion's joy as the score."""
    return dataclasses.replace(
        fidelity, access_count=fidelity.access_count + 1, last_accessed_at=now, score=emotion.joy
    )


async def test_memories_are_read_by_id_and_missing_ids_are_left_out(cues: CueStore, roles: Roles) -> None:
    one, two = memory("first", 1), memory("second", 2, agent="b")
    await put(roles.record_writes, one, two)
    assert await cues.memories([two.id, new_id(), one.id]) == {one.id: one, two.id: two}
    assert await cues.memories([]) == {}


async def test_emotion_nearest_ranks_by_cosine_and_skips_memories_without_a_shared_emotion(
    cues: CueStore, roles: Roles
) -> None:
    pure = memory("pure joy", 1, emotion=EmotionVector(joy=0.9))
    mixed = memory("joy and fear", 2, emotion=EmotionVector(joy=0.5, fear=0.5))
    unrelated = memory("only anger", 3, emotion=EmotionVector(anger=1.0))
    flat = memory("no emotion", 4)
    await put(roles.record_writes, pure, mixed, unrelated, flat)
    found = await cues.emotion_nearest(ReadScope("a"), JOY, 10, stores=EVERY_STORE, period=None)
    assert [rid for rid, _ in found] == [pure.id, mixed.id]
    assert [cosine for _, cosine in found] == pytest.approx([1.0, 2**-0.5], abs=1e-5)
    top = await cues.emotion_nearest(ReadScope("a"), JOY, 1, stores=EVERY_STORE, period=None)
    assert [rid for rid, _ in top] == [pure.id]


async def test_emotion_nearest_keeps_to_the_scope_the_stores_and_the_inclusive_period(
    cues: CueStore, roles: Roles
) -> None:
    glad = EmotionVector(joy=1.0)
    early = memory("early", 1, emotion=glad, ts=BASE + 10)
    late = memory("late", 2, emotion=glad, ts=BASE + 20)
    known = memory("a fact", 3, emotion=glad, ts=BASE + 15, store="semantic")
    theirs = memory("another agent's", 4, agent="b", emotion=glad, ts=BASE + 15)
    elsewhere = memory("another project's", 5, project="p2", emotion=glad, ts=BASE + 15)
    await put(roles.record_writes, early, late, known, theirs, elsewhere)

    async def ids(scope: ReadScope, stores: tuple[StoreKind, ...], period: Period | None) -> set[str]:
        found = await cues.emotion_nearest(scope, JOY, 10, stores=stores, period=period)
        return {rid for rid, _ in found}

    assert await ids(ReadScope("a"), EVERY_STORE, None) == {early.id, late.id, known.id, elsewhere.id}
    # A project's read sees its own and the unprojected memories, never another project's.
    assert await ids(ReadScope("a", "p1"), EVERY_STORE, None) == {early.id, late.id, known.id}
    assert await ids(ReadScope("a"), ("episodic",), None) == {early.id, late.id, elsewhere.id}
    assert await ids(ReadScope("a"), EVERY_STORE, (BASE + 10, BASE + 15)) == {
        early.id,
        known.id,
        elsewhere.id,
    }
    assert await ids(ReadScope("b"), EVERY_STORE, None) == {theirs.id}


async def test_in_period_is_newest_first_inclusive_and_scoped(cues: CueStore, roles: Roles) -> None:
    before = memory("before", 1, ts=BASE + 9)
    first = memory("at the start", 2, ts=BASE + 10)
    middle = memory("in the middle", 3, ts=BASE + 15, store="procedural")
    last = memory("at the end", 4, ts=BASE + 20)
    after = memory("after", 5, ts=BASE + 21)
    theirs = memory("another agent's", 6, agent="b", ts=BASE + 15)
    await put(roles.record_writes, before, first, middle, last, after, theirs)
    period = (BASE + 10, BASE + 20)
    assert await cues.in_period(ReadScope("a"), period, 10, stores=EVERY_STORE) == [
        last.id,
        middle.id,
        first.id,
    ]
    assert await cues.in_period(ReadScope("a"), period, 2, stores=EVERY_STORE) == [last.id, middle.id]
    assert await cues.in_period(ReadScope("a"), period, 10, stores=("episodic",)) == [last.id, first.id]
    assert await cues.in_period(ReadScope("b"), period, 10, stores=EVERY_STORE) == [theirs.id]
    assert await cues.in_period(ReadScope("c"), period, 10, stores=EVERY_STORE) == []


async def test_reconsolidation_applies_the_rule_to_the_stored_fidelity_once_per_request(
    cues: CueStore, roles: Roles
) -> None:
    glad = memory("glad", 1, emotion=EmotionVector(joy=0.75))
    plain = memory("plain", 2)
    missing = new_id()
    await put(roles.record_writes, glad, plain)
    assert dict(await cues.stored_fidelity(glad.id) or {}) == dataclasses.asdict(Fidelity())
    assert await cues.reconsolidate([glad.id, missing, plain.id], "req-1", NOW, _noted, ttl_secs=60) == [
        True,
        False,
        True,
    ]
    once = await cues.stored_fidelity(glad.id)
    assert once is not None
    assert (once["access_count"], once["last_accessed_at"], once["score"]) == (1, NOW, 0.75)
    # The same request again (a retry): nothing written, whatever the moment.
    assert await cues.reconsolidate([glad.id], "req-1", NOW + 5, _noted, ttl_secs=60) == [False]
    assert await cues.stored_fidelity(glad.id) == once
    # Another request starts from what the first one stored.
    assert await cues.reconsolidate([glad.id], "req-2", NOW + 5, _noted, ttl_secs=60) == [True]
    twice = await cues.stored_fidelity(glad.id)
    assert twice is not None
    assert (twice["access_count"], twice["last_accessed_at"]) == (2, NOW + 5)
    # The record read back carries the stored fidelity.
    assert (await cues.memories([glad.id]))[glad.id].fidelity.access_count == 2


async def test_a_gone_memory_has_no_fidelity_and_is_never_recreated(cues: CueStore, roles: Roles) -> None:
    gone = memory("deleted", 1)
    await put(roles.record_writes, gone)
    await roles.record_writes.delete("memory", gone.id, [])
    assert await cues.stored_fidelity(gone.id) is None
    assert await cues.reconsolidate([gone.id], "req-1", NOW, _noted, ttl_secs=60) == [False]
    assert await cues.memories([gone.id]) == {}
    assert await roles.record_reads.get("memory", gone.id) is None


async def test_an_unreachable_backend_raises_backend_unavailable(
    adapter: Adapter, gone: RedisClient, key_prefix: str
) -> None:
    cues = adapter.cues(gone, key_prefix)
    with pytest.raises(BackendUnavailable):
        await cues.memories([new_id()])
    with pytest.raises(BackendUnavailable):
        await cues.in_period(ReadScope("a"), (BASE, NOW), 10, stores=EVERY_STORE)
    with pytest.raises(BackendUnavailable):
        await cues.reconsolidate([new_id()], "req-1", NOW, _noted, ttl_secs=60)
