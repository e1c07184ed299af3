"""forget: by id (bare or ref, with cascade), by store, by period and by age, the union of them, only the
caller's memories, through the one delete path (claims, vectors and associations go too)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cpersona
from cpersona.model.scope import ReadScope
from cpersona.recall.arms.block import block_filter
from cpersona.stores.protocols import scope_filter

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from contextlib import AbstractAsyncContextManager


async def _refs(engine: cpersona.Engine, agent: str) -> set[str]:
    return {r.ref for r in await engine.list(agent_id=agent, limit=1000)}


async def test_confirm_false_deletes_nothing(engine: cpersona.Engine) -> None:
    stored = await engine.store("keep me", agent_id="a")
    with pytest.raises(cpersona.ForgetUnconfirmed) as caught:
        await engine.forget("a", confirm=False, record_ids=[stored.id])
    assert caught.value.field == "confirm"
    assert caught.value.code == "FORGET_UNCONFIRMED"
    assert await _refs(engine, "a") == {stored.ref}


async def test_a_forget_that_names_nothing_or_working_is_refused(engine: cpersona.Engine) -> None:
    with pytest.raises(cpersona.InvalidRequest) as caught:
        await engine.forget("a", confirm=True)
    assert caught.value.field == "body"
    with pytest.raises(cpersona.InvalidRequest) as caught:
        await engine.forget("a", confirm=True, store="working")  # type: ignore[arg-type]
    assert caught.value.field == "store"
    with pytest.raises(cpersona.InvalidRequest) as caught:
        await engine.forget("a", confirm=True, record_ids=["ep:0190a0b0-0000-7000-8000-000000000000"])
    assert caught.value.field == "record_ids[0]"


async def test_by_ids_bare_or_ref_with_cascade_one_hop(engine: cpersona.Engine) -> None:
    far = await engine.store("far", agent_id="a")
    near = await engine.store(
        "near",
        agent_id="a",
        associations=[{"target_id": far.id, "association_type": "causal", "weight": 0.5}],
    )
    head = await engine.store(
        "head",
        agent_id="a",
        associations=[{"target_id": near.id, "association_type": "causal", "weight": 0.5}],
    )
    other = await engine.store("other", agent_id="a")
    result = await engine.forget("a", confirm=True, record_ids=[head.ref], cascade=True)
    assert result.records_deleted == 2
    assert await _refs(engine, "a") == {far.ref, other.ref}
    assert (await engine.forget("a", confirm=True, record_ids=[other.id, head.id])).records_deleted == 1


async def test_by_store_period_and_age_is_their_union(engine: cpersona.Engine) -> None:
    now = time.time()
    old = await engine.store("old", agent_id="a", timestamp=now - 10 * 86400)
    in_range = await engine.store("in range", agent_id="a", timestamp=1_000_000.0)
    semantic = await engine.store("a fact", agent_id="a", store="semantic")
    kept = await engine.store("kept", agent_id="a")
    result = await engine.forget(
        "a",
        confirm=True,
        store="semantic",
        temporal_range={"start": 999_999, "end": 1_000_000},
        older_than_seconds=5 * 86400,
    )
    assert result.records_deleted == 3
    assert await _refs(engine, "a") == {kept.ref}
    assert {old.ref, in_range.ref, semantic.ref}.isdisjoint(await _refs(engine, "a"))


async def test_only_the_callers_memories_and_raw_journal_untouched(engine: cpersona.Engine) -> None:
    theirs = await engine.store("the same words", agent_id="b", store="semantic")
    await engine.store_raw(
        "user: hi",
        agent_id="a",
        session_id="s",
        source="conversation",
        speaker="user",
        visibility="normal",
        secrecy_level="public",
    )
    mine = await engine.store("the same words", agent_id="a", store="semantic")
    result = await engine.forget("a", confirm=True, record_ids=[theirs.id], store="semantic")
    assert result.records_deleted == 1
    assert await _refs(engine, "b") == {theirs.ref}
    assert mine.ref not in await _refs(engine, "a")
    assert len(await engine.list("raw", agent_id="a")) == 1


async def test_a_forgotten_memory_releases_its_claims(engine: cpersona.Engine) -> None:
    first = await engine.store("said once", agent_id="a", msg_id="m-1")
    await engine.forget("a", confirm=True, record_ids=[first.id])
    again = await engine.store("said once", agent_id="a", msg_id="m-1")
    assert again.result == "stored"
    assert again.ref != first.ref


@pytest.fixture(scope="module")
async def embedded(
    open_test_engine: Callable[..., AbstractAsyncContextManager[cpersona.Engine]],
) -> AsyncIterator[cpersona.Engine]:
    async with open_test_engine("fg") as memory:
        yield memory


async def test_vectors_go_with_the_memory(embedded: cpersona.Engine) -> None:
    stored = [await embedded.store(f"note number {n} about boats", agent_id="vec") for n in range(3)]
    assert embedded.backends.vectors is not None
    flt = scope_filter(ReadScope("vec"))
    assert await embedded.backends.vectors.count(flt) == 3
    await embedded.forget("vec", confirm=True, record_ids=[s.id for s in stored[:2]])
    assert await embedded.backends.vectors.count(flt) == 1


async def test_a_forget_by_age_of_more_than_a_page_takes_every_memory_with_its_vectors_and_blocks(
    embedded: cpersona.Engine,
) -> None:
    # More memories than one delete page (256), an hour old by their own time; the forget deletes them
    # page by page and leaves a memory of the same agent from now, and another agent's.
    vectors, blocks = embedded.backends.vectors, embedded.backends.blocks
    assert vectors is not None
    assert blocks is not None
    fresh = await embedded.store("a note from just now, about the lighthouse and its keeper", agent_id="aged")
    await embedded.drain_blocks()
    fresh_blocks = await blocks.count(block_filter("aged"))
    count, hour_ago = 300, time.time() - 3600
    aged = [
        {"agent_id": "aged", "content": f"aged note {n} about the harbour", "timestamp": hour_ago}
        for n in range(count)
    ]
    await embedded.store_batch(aged)
    await embedded.store("a note of another agent", agent_id="young", timestamp=hour_ago)
    await embedded.drain_blocks()
    flt = scope_filter(ReadScope("aged"))
    assert await vectors.count(flt) == count + 1
    assert await blocks.count(block_filter("aged")) > fresh_blocks
    result = await embedded.forget("aged", confirm=True, older_than_seconds=60)
    assert result.records_deleted == count
    assert await _refs(embedded, "aged") == {fresh.ref}
    assert await vectors.count(flt) == 1
    assert await blocks.count(block_filter("aged")) == fresh_blocks
    # Their claims went too: the same text stores again.
    again = await embedded.store("aged note 7 about the harbour", agent_id="aged")
    assert again.result == "stored"
    assert len(await _refs(embedded, "young")) == 1


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from("ab"), st.sampled_from(["episodic", "semantic"])), max_size=8))
async def test_isolation_whatever_is_named(embedded: cpersona.Engine, rows: list[tuple[str, str]]) -> None:
    tag = f"iso{time.monotonic_ns()}"
    stored = [
        (who, await embedded.store(f"row {i} {tag}", agent_id=tag + who, store=kind))  # type: ignore[arg-type]
        for i, (who, kind) in enumerate(rows)
    ]
    named = [s.id for _, s in stored]
    if not named:
        return
    result = await embedded.forget(tag + "a", confirm=True, record_ids=named, store="episodic")
    assert result.records_deleted == sum(1 for who, _ in stored if who == "a")
    left_b = await _refs(embedded, tag + "b")
    assert left_b == {s.ref for who, s in stored if who == "b"}
