"""consolidate: near-duplicate episodic memories merge into the best kept one (edges carried over), the
rest get one semantic copy each, and a second call with the same arguments creates and deletes nothing."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cpersona.model.records import MemoryRecord
from cpersona.operations.lifecycle.consolidation import Candidate, copy_id, duplicate_groups, survivor

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from contextlib import AbstractAsyncContextManager

    import cpersona


async def _memories(engine: cpersona.Engine, agent: str) -> list[MemoryRecord]:
    return [r for r in await engine.list(agent_id=agent, limit=1000) if isinstance(r, MemoryRecord)]


async def test_episodic_memories_get_one_semantic_copy_and_a_second_call_changes_nothing(
    engine: cpersona.Engine,
) -> None:
    one = await engine.store("the kettle is in the left cupboard", agent_id="a")
    await engine.store("the red bike was sold", agent_id="a")
    await engine.store("a fact already", agent_id="a", store="semantic")
    await engine.store("not mine", agent_id="b")
    dry = await engine.consolidate("a", dry_run=True)
    assert (dry.records_processed, dry.records_migrated, dry.semantic_nodes_created) == (2, 2, 2)
    assert dry.dry_run
    assert len(await _memories(engine, "a")) == 3
    first = await engine.consolidate("a")
    assert (first.records_processed, first.records_migrated, first.records_compressed) == (2, 2, 0)
    assert first.records_pruned == 0
    after = {m.id: m for m in await _memories(engine, "a")}
    assert len(after) == 5
    copy = after[copy_id(one.id)]
    wanted = ("semantic", "the kettle is in the left cupboard", one.ref)
    assert (copy.store, copy.content, copy.metadata["_consolidated_from"]) == wanted
    assert any(a.target_id == copy.id and a.type == "semantic" for a in after[one.id].associations)
    second = await engine.consolidate("a")
    assert (second.records_migrated, second.records_compressed, second.semantic_nodes_created) == (0, 0, 0)
    # Fidelity as read moves with the clock; everything else must be as the first call left it.
    assert {m.id: (m.content, m.associations, m.seq) for m in await _memories(engine, "a")} == {
        m.id: (m.content, m.associations, m.seq) for m in after.values()
    }
    assert len(await _memories(engine, "b")) == 1


async def test_near_duplicates_merge_into_the_best_kept_with_their_edges(engine: cpersona.Engine) -> None:
    target = await engine.store("something it points to", agent_id="a", store="semantic")
    edge = [{"target_id": target.id, "association_type": "causal", "weight": 0.5}]
    older = await engine.store("The Keys are  in the drawer", agent_id="a", associations=edge)
    newer = await engine.store("the keys are in the drawer", agent_id="a")
    result = await engine.consolidate("a")
    assert (result.records_processed, result.records_compressed, result.records_migrated) == (2, 1, 1)
    ids = {m.id for m in await _memories(engine, "a")}
    # The newer one was stored later, so it is the better kept now; the older one's edge moves to it.
    assert newer.id in ids
    assert older.id not in ids
    kept = await engine.get(newer.ref, agent_id="a")
    assert isinstance(kept, MemoryRecord)
    assert (target.id, "causal") in {(a.target_id, a.type) for a in kept.associations}
    assert (await engine.consolidate("a")).records_compressed == 0


async def test_age_and_access_filters(engine: cpersona.Engine) -> None:
    await engine.store("recent", agent_id="a")
    await engine.store("old enough", agent_id="a", timestamp=time.time() - 3 * 3600)
    assert (await engine.consolidate("a", min_age_hours=2)).records_migrated == 1
    assert (await engine.consolidate("a", min_access_count=1)).records_migrated == 0


@given(st.lists(st.sampled_from(["a b", "A  b", "c", "C", "d"]), max_size=10))
def test_groups_are_closed_and_do_not_depend_on_order(texts: list[str]) -> None:
    items = [Candidate(str(i), t, 1.0, i) for i, t in enumerate(texts)]
    groups = duplicate_groups(items)
    keys = {" ".join(t.casefold().split()) for t in texts}
    assert len(groups) == sum(1 for k in keys if sum(" ".join(t.casefold().split()) == k for t in texts) > 1)
    for g in groups:
        assert len({" ".join(items[i].text.casefold().split()) for i in g}) == 1
        assert survivor(items, g) == g[0]  # equal fidelity: the oldest


@pytest.fixture(scope="module")
async def embedded(
    open_test_engine: Callable[..., AbstractAsyncContextManager[cpersona.Engine]],
) -> AsyncIterator[cpersona.Engine]:
    async with open_test_engine("cs") as memory:
        yield memory


async def test_with_vectors_near_paraphrases_merge(embedded: cpersona.Engine) -> None:
    await embedded.store("The cat sat on the mat.", agent_id="vec")
    await embedded.store("The cat sat on the mat!", agent_id="vec", channel="other")
    await embedded.store("Quarterly revenue grew by four percent", agent_id="vec")
    result = await embedded.consolidate("vec")
    assert (result.records_processed, result.records_compressed, result.records_migrated) == (3, 1, 2)
    assert (await embedded.consolidate("vec")).semantic_nodes_created == 0


@given(st.lists(st.lists(st.sampled_from([0.0, 1.0, -1.0, 0.5]), min_size=3, max_size=3), max_size=12))
def test_vector_pairs_are_those_above_the_cosine_figure(rows: list[list[float]]) -> None:
    import numpy as np

    from cpersona.operations.lifecycle.consolidation import DUPLICATE_COSINE

    items = [Candidate(str(i), f"distinct {i}", 1.0, i) for i in range(len(rows))]
    groups = duplicate_groups(items, rows)
    unit = [np.asarray(r) / (np.linalg.norm(r) or 1.0) for r in rows]
    together = {frozenset((i, j)) for g in groups for i in g for j in g if i != j}
    for i in range(len(rows)):
        for j in range(i + 1, len(rows)):
            if float(unit[i] @ unit[j]) > DUPLICATE_COSINE:
                assert frozenset((i, j)) in together


async def test_edges_are_written_alone_and_never_bring_a_memory_back(engine: cpersona.Engine) -> None:
    from cpersona.model.records import Association

    kept = await engine.store("kept, then updated", agent_id="a")
    gone = await engine.store("deleted meanwhile", agent_id="a")
    await engine.update(kept.ref, agent_id="a", content="updated after the read")
    await engine.delete(gone.ref, agent_id="a")
    edge = (Association(gone.id, "semantic", 1.0, 0.0),)
    assert await engine.backends.records.set_associations([(kept.id, edge), (gone.id, edge)]) == 1
    assert await engine.backends.records.get("memory", gone.id) is None
    now = await engine.backends.records.get("memory", kept.id)
    assert isinstance(now, MemoryRecord)
    assert (now.content, now.associations) == ("updated after the read", edge)
