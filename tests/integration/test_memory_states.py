"""The statistics and the per-agent listings read every memory a page at a time, each page after the
last one's sequence number: every memory of the scope once, in insertion order, however many pages."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from cpersona.stores.redis import memory_states, record_reads

if TYPE_CHECKING:
    import cpersona


async def _kept_ids(engine: cpersona.Engine, agent: str, count: int, others: int, gone: int) -> list[str]:
    """Store ``count`` memories of ``agent`` and ``others`` of another agent, delete ``agent``'s memory
    number ``gone``; the ids of ``agent``'s memories kept, in the order they were stored."""
    stored = await engine.store_batch(
        [{"agent_id": agent, "content": f"memory number {n} of {agent}"} for n in range(count)]
    )
    await engine.store_batch([{"agent_id": "other", "content": f"someone else's {n}"} for n in range(others)])
    refs = [str(r.ref) for r in stored.results]
    await engine.delete(refs[gone], agent_id=agent)
    return [ref.split(":")[-1] for n, ref in enumerate(refs) if n != gone]


@pytest.mark.parametrize("page", [1, 4, 7, 100])
async def test_every_memory_is_read_once_across_pages(
    engine: cpersona.Engine, monkeypatch: pytest.MonkeyPatch, page: int
) -> None:
    monkeypatch.setattr(memory_states, "_PAGE", page)
    await _kept_ids(engine, "pager", 15, 3, gone=4)
    states = await engine.backends.records.memory_states("pager")
    assert len(states) == 14
    assert [s.timestamp for s in states] == sorted(s.timestamp for s in states)
    assert len(await engine.backends.records.memory_states(None)) == 17
    assert (await engine.stats("pager"))["memories"] == 14


@pytest.mark.parametrize("page", [1, 4, 100])
async def test_an_agents_record_ids_are_every_one_in_insertion_order(
    engine: cpersona.Engine, monkeypatch: pytest.MonkeyPatch, page: int
) -> None:
    monkeypatch.setattr(record_reads, "_SAMPLE_PAGE", page)
    expected = await _kept_ids(engine, "lister", 9, 1, gone=2)
    assert await engine.backends.records.memory_ids("lister") == expected
