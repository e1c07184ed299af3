"""The statistics and the per-agent listings read every memory a page at a time, each page after the
last one's sequence number: every memory of the scope once, in insertion order, however many pages."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from cpersona.stores.redis import memory_states, store

if TYPE_CHECKING:
    import cpersona


@pytest.mark.parametrize("page", [1, 4, 7, 100])
async def test_every_memory_is_read_once_across_pages(
    engine: cpersona.Engine, monkeypatch: pytest.MonkeyPatch, page: int
) -> None:
    monkeypatch.setattr(memory_states, "_PAGE", page)
    stored = await engine.store_batch(
        [{"agent_id": "pager", "content": f"memory number {n} of the pager"} for n in range(15)]
    )
    await engine.store_batch([{"agent_id": "other", "content": f"someone else's {n}"} for n in range(3)])
    await engine.delete(stored.results[4].ref, agent_id="pager")
    states = await engine._b.records.memory_states("pager")
    assert len(states) == 14
    assert [s.timestamp for s in states] == sorted(s.timestamp for s in states)
    assert len(await engine._b.records.memory_states(None)) == 17
    assert (await engine.stats("pager"))["memories"] == 14


@pytest.mark.parametrize("page", [1, 4, 100])
async def test_an_agents_record_ids_are_every_one_in_insertion_order(
    engine: cpersona.Engine, monkeypatch: pytest.MonkeyPatch, page: int
) -> None:
    monkeypatch.setattr(store, "_SAMPLE_PAGE", page)
    stored = await engine.store_batch(
        [{"agent_id": "lister", "content": f"listed memory {n}"} for n in range(9)]
    )
    await engine.store_batch([{"agent_id": "other", "content": "not listed"}])
    refs = [r.ref for r in stored.results]
    await engine.delete(refs[2], agent_id="lister")
    expected = [ref.split(":")[-1] for n, ref in enumerate(refs) if n != 2]
    assert await engine._b.records.memory_ids("lister") == expected
