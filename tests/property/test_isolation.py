"""Property tests of the isolation rules: a read never sees another agent's records, and project and
channel see only their own value plus the global pool. Run against the real Redis index and the real
Qdrant engine (in-process mode) with generated stores and scopes."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cpersona
from cpersona import MemoryRecord, Settings
from cpersona.model.records import Scope, Source
from cpersona.model.scope import ReadScope
from cpersona.stores.protocols import VectorPoint, scope_filter
from cpersona.stores.redis.scope import source_prefix_tags, tag
from cpersona.stores.vectors.factory import open_vector_store
from scopes import record_st, scope_st, visible
from traced import trace_json

if TYPE_CHECKING:
    from pathlib import Path


@given(record=record_st, read=scope_st)
def test_sees_matches_the_table(record: tuple[str, str, str, str], read: ReadScope) -> None:
    agent, project, channel, source = record
    assert read.sees(Scope(agent, project, channel), Source("Agent", source, "")) == visible(read, *record)


_id_text = st.text(alphabet=st.sampled_from("ab1:/-_.\u00e9\u4e00 "), max_size=8)


@given(source=_id_text, read=_id_text)
def test_a_prefix_read_matches_exactly_the_indexed_prefixes(source: str, read: str) -> None:
    # A prefix read is the exact tag of its prefix; the tags a memory holds must be exactly the reads
    # that see it: every prefix of the source itself, and an unrelated read.
    for candidate in (*(source[:k] for k in range(len(source) + 1)), read):
        scope = ReadScope("a", source_id=candidate)
        if scope.source_is_prefix:
            assert (tag(candidate) in source_prefix_tags(source)) == scope.sees_source(source)


_counter = itertools.count()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=st.lists(record_st, min_size=1, max_size=12), reads=st.lists(scope_st, min_size=1, max_size=6))
async def test_list_returns_exactly_the_visible_records(
    engine: cpersona.Engine, records: list[tuple[str, str, str, str]], reads: list[ReadScope]
) -> None:
    # Each example writes under fresh agent names so examples never see each other's data.
    run = f"r{next(_counter)}-"
    for n, (agent, project, channel, source) in enumerate(records):
        await engine.store(
            f"note {n}", agent_id=run + agent, project_id=project, channel=channel, source={"id": source}
        )
    for read in reads:
        rows = await engine.list(
            "memory",
            agent_id=run + read.agent_id,
            project_id=read.project_id,
            channel=read.channel,
            source_id=read.source_id,
            limit=100,
        )
        got = sorted(r.content for r in rows if isinstance(r, MemoryRecord))
        want = sorted(f"note {n}" for n, rec in enumerate(records) if visible(read, *rec))
        assert got == want


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=st.lists(record_st, min_size=1, max_size=20), reads=st.lists(scope_st, min_size=1, max_size=6))
async def test_vector_filter_never_leaks(
    tmp_path: Path, records: list[tuple[str, str, str, str]], reads: list[ReadScope]
) -> None:
    rng = np.random.default_rng(7)
    settings_ = Settings(data_dir=tmp_path, qdrant_url=":memory:")
    store = await open_vector_store(settings_, "iso", 8)
    try:
        points = []
        for n, (agent, project, channel, _source) in enumerate(records):
            vec = rng.normal(size=8).astype(np.float32)
            points.append(
                VectorPoint(
                    id=f"00000000-0000-7000-8000-{n:012d}",
                    vector=vec / np.linalg.norm(vec),
                    kind="memory",
                    agent_id=agent,
                    project_id=project,
                    channel=channel,
                    timestamp=float(n),
                    seq=n,
                )
            )
        await store.upsert(points)
        query = rng.normal(size=8).astype(np.float32)
        for read in reads:
            hits = await store.search(query, scope_filter(read), limit=100)
            got = {int(h.id[-12:]) for h in hits}
            # source_id is checked on hydrated records, so the vector filter ignores it.
            unsourced = ReadScope(read.agent_id, read.project_id, read.channel)
            want = {n for n, rec in enumerate(records) if visible(unsourced, *rec)}
            assert got == want
    finally:
        await store.aclose()


async def test_a_source_prefix_read_is_exact_whatever_other_agents_store(engine: cpersona.Engine) -> None:
    # The search module expands a tag prefix to at most 200 values counted over the whole index, so a
    # prefix query would let one agent's many sources hide another agent's record.
    await engine.store_batch(
        [{"content": f"note {n}", "agent_id": "A-big", "source": {"id": f"discord:{n}"}} for n in range(300)]
    )
    stored = await engine.store("the harbour lighthouse", agent_id="B-small", source={"id": "discord:x"})
    listed = await engine.list("memory", agent_id="B-small", source_id="discord:", limit=10)
    assert [r.content for r in listed if isinstance(r, MemoryRecord)] == ["the harbour lighthouse"]
    for query in ("", "lighthouse"):
        result = await engine.recall(query, agent_id="B-small", source_id="discord:", trace=True)
        assert result.trace is not None
        assert [row["ref"] for row in trace_json(result)["arms"]["memory_keyword"]] == [f"mem:{stored.id}"]
        assert [r.content for r in result.rows] == ["the harbour lighthouse"]
    # The big agent's own prefix read sees all of its 300 sources.
    assert len(await engine.list("memory", agent_id="A-big", source_id="discord:", limit=1000)) == 300
