"""The lexical arms leave out the scope filter only where it would admit everything, and never let a
row of another agent through: the same rows and scores as the filtered search on a one-agent store, the
filtered search beside a second agent, and the filtered answer when a stale read says one agent but
another has written since. Real Redis throughout."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpersona.model.scope import ReadScope
from cpersona.stores.redis.keyword import LexicalIndexes, episode_fts, memory_keyword
from cpersona.stores.redis.scope import tag
from cpersona.stores.redis.sole_agent import SoleAgents, agent_only

if TYPE_CHECKING:
    import cpersona
    from cpersona.model.candidates import ArmResult

WORDS = ["harbour", "violin", "garden", "lemonade", "ticket", "painted", "station", "letter", "window"]


def _rows(result: ArmResult) -> list[tuple[str, float | None]]:
    return [(row.ref, row.raw) for row in result.rows]


def _refs(result: ArmResult) -> set[str]:
    return {row.ref for row in result.rows}


async def _store_agent(engine: cpersona.Engine, agent: str, count: int) -> set[str]:
    texts = [" ".join(WORDS[(i * k) % len(WORDS)] for k in (1, 3, 5)[: 1 + i % 3]) for i in range(count)]
    batch = await engine.store_batch([{"content": text, "agent_id": agent} for text in texts])
    return {result.ref for result in batch.results}


def _indexes(engine: cpersona.Engine, sole: SoleAgents | None) -> LexicalIndexes:
    return LexicalIndexes(engine.backends.stores.redis, engine.keys, sole)


def test_only_an_agent_alone_is_a_filter_the_store_may_drop() -> None:
    assert agent_only(ReadScope("a"), with_source=True)
    assert not agent_only(ReadScope("a", project_id="p"), with_source=True)
    assert not agent_only(ReadScope("a", channel="c"), with_source=True)
    assert not agent_only(ReadScope("a", source_id="s"), with_source=True)


async def test_the_sole_agent_of_an_index_is_read_and_kept_for_its_ttl(engine: cpersona.Engine) -> None:
    now = [0.0]
    sole = SoleAgents(engine.backends.stores.redis, ttl=5.0, clock=lambda: now[0])
    index = engine.keys.memory_index
    assert await sole.of(index) is None  # an empty index has no agent
    await _store_agent(engine, "a", 3)
    assert await sole.of(index) is None  # still the read of a moment ago
    now[0] = 6.0
    assert await sole.of(index) == tag("a")
    await _store_agent(engine, "b", 1)
    now[0] = 12.0
    assert await sole.of(index) is None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4), fetch=st.integers(1, 30))
async def test_a_one_agent_store_gets_the_filtered_rows_and_scores_without_the_filter(
    engine: cpersona.Engine, words: list[str], fetch: int
) -> None:
    if not (await engine.stats("solo"))["memories"]:
        await _store_agent(engine, "solo", 40)
    sole = SoleAgents(engine.backends.stores.redis)
    query = " ".join(words)
    scope = ReadScope("solo")
    fast = await memory_keyword(_indexes(engine, sole), scope, query, fetch)
    filtered = await memory_keyword(_indexes(engine, None), scope, query, fetch)
    assert await sole.of(engine.keys.memory_index) == tag("solo")
    assert _rows(fast) == _rows(filtered)
    assert fast.rows


async def test_beside_another_agent_only_the_callers_rows_come_back(engine: cpersona.Engine) -> None:
    owned = {"a": await _store_agent(engine, "a", 20), "b": await _store_agent(engine, "b", 20)}
    sole = SoleAgents(engine.backends.stores.redis)
    for query, agent in itertools.product(["violin harbour", "garden lemonade ticket"], ["a", "b"]):
        fast = await memory_keyword(_indexes(engine, sole), ReadScope(agent), query, 100)
        filtered = await memory_keyword(_indexes(engine, None), ReadScope(agent), query, 100)
        assert _rows(fast) == _rows(filtered)
        assert fast.rows
        assert _refs(fast) <= owned[agent]


async def test_a_stale_sole_agent_never_lets_another_agents_row_through(engine: cpersona.Engine) -> None:
    await _store_agent(engine, "a", 10)
    # Read once, then trusted for an hour: the store below makes that read wrong.
    sole = SoleAgents(engine.backends.stores.redis, ttl=3600.0)
    assert await sole.of(engine.keys.memory_index) == tag("a")
    intruder = await engine.store("violin violin violin harbour", agent_id="b")
    fast = await memory_keyword(_indexes(engine, sole), ReadScope("a"), "violin harbour", 100)
    filtered = await memory_keyword(_indexes(engine, None), ReadScope("a"), "violin harbour", 100)
    assert intruder.ref not in _refs(fast)
    assert _rows(fast) == _rows(filtered)
    assert fast.rows


async def test_episodes_take_the_same_path(engine: cpersona.Engine) -> None:
    for n in range(6):
        await engine.archive_episode(f"the {WORDS[n]} and the {WORDS[n + 2]} were discussed", agent_id="a")
    sole = SoleAgents(engine.backends.stores.redis)
    fast = await episode_fts(_indexes(engine, sole), ReadScope("a"), "violin lemonade", 20)
    filtered = await episode_fts(_indexes(engine, None), ReadScope("a"), "violin lemonade", 20)
    assert await sole.of(engine.keys.episode_index) == tag("a")
    assert fast.rows
    assert _rows(fast) == _rows(filtered)
