"""recall.query with a cue (issue 15 item 1) on the real Redis: each arm, the filters, the fusion with
spreading activation, rendering, refusals naming the field, and the trace carrying no stored text."""

from __future__ import annotations

import math
import random
import time
import uuid
from typing import TYPE_CHECKING, Any

import orjson
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

import cpersona
from cpersona import InvalidRequest
from cpersona.model.fidelity import PRUNE_THRESHOLD
from cpersona.model.scope import ReadScope
from cpersona.operations.query.fusion import ACTIVATION_BONUS, RRF_K
from cpersona.settings import Settings
from cpersona.stores.redis.connection import command
from cpersona.stores.redis.indexes import SCHEMAS, create_index
from traced import trace_json

if TYPE_CHECKING:
    from pathlib import Path

DAY = 86_400.0


def _agent() -> str:
    return "cq-" + uuid.uuid4().hex[:10]


def _texts(result: Any) -> list[str]:
    return [bytes(m.record.content["blocks"][0]["data"]).decode() for m in result.memories]


async def test_text_finds_by_bm25_and_the_answer_has_the_cmp_shape(engine: cpersona.Engine) -> None:
    agent = _agent()
    await engine.store("the user prefers vim for editing", agent_id=agent)
    await engine.store("lunch was pasta", agent_id=agent)
    result = await engine.query({"text": "vim editing"}, agent_id=agent)
    assert _texts(result) == ["the user prefers vim for editing"]
    top = result.memories[0]
    assert top.relevance_score == 1.0  # the best fused memory
    assert top.activation_path == [top.record.id]
    assert top.record.ref == f"mem:{top.record.id}"
    assert result.total_candidates == 1
    assert result.query_metadata.stores_searched == ["episodic", "semantic", "procedural", "emotional"]
    assert result.query_metadata.total_records_scanned == 1
    assert result.activation_trace is not None
    assert result.activation_trace.source_id == top.record.id


async def test_the_emotion_arm_ranks_by_cosine_over_the_plutchik_axes(engine: cpersona.Engine) -> None:
    agent = _agent()
    await engine.store("alpha", agent_id=agent, emotion={"joy": 0.9, "trust": 0.1})
    await engine.store("beta", agent_id=agent, emotion={"joy": 0.3, "trust": 0.6})
    await engine.store("gamma", agent_id=agent, emotion="sadness")  # orthogonal: never a neighbour
    await engine.store("delta", agent_id=agent)  # no emotion: never a neighbour
    result = await engine.query({"emotion": {"joy": 1.0}}, agent_id=agent, trace=True)
    assert _texts(result) == ["alpha", "beta"]
    assert result.trace is not None
    raws = [row["raw"] for row in trace_json(result)["arms"]["emotion"]["rows"]]
    # cosine of (1,0,...) with (.9,.1) and (.3,.6)
    assert raws == pytest.approx([0.9 / (0.82**0.5), 0.3 / (0.45**0.5)], rel=1e-5)
    # by label too
    assert _texts(await engine.query({"emotion": "sad"}, agent_id=agent)) == ["gamma"]


async def test_emotion_fuses_with_text_by_reciprocal_rank(engine: cpersona.Engine) -> None:
    agent = _agent()
    await engine.store("meeting notes about the budget", agent_id=agent)
    await engine.store("meeting with an angry client", agent_id=agent, emotion="anger")
    result = await engine.query({"text": "meeting", "emotion": "anger"}, agent_id=agent, activation_depth=0)
    # Both match the text; the angry one is also the emotion arm's first, so it leads.
    assert _texts(result)[0] == "meeting with an angry client"
    second = result.memories[1].relevance_score
    # share of the second: its one lexical rank against the leader's two first ranks
    lexical_rank = 1 if second == pytest.approx((1 / (RRF_K + 1)) / (2 / (RRF_K + 1))) else 2
    assert second == pytest.approx((1 / (RRF_K + lexical_rank)) / (2 / (RRF_K + 1)))
    assert result.activation_trace is None
    assert all(m.activation_path is None for m in result.memories)


async def test_temporal_is_a_hard_filter_and_a_source(engine: cpersona.Engine) -> None:
    agent = _agent()
    base = 1_700_000_000.0
    await engine.store("old office day", agent_id=agent, timestamp=base - 10 * DAY)
    await engine.store("office inside", agent_id=agent, timestamp=base)
    await engine.store("edge of the range", agent_id=agent, timestamp=base + DAY)
    window = {"start": base, "end": base + DAY}  # inclusive both ends
    as_source = await engine.query({"temporal": window}, agent_id=agent)
    assert sorted(_texts(as_source)) == ["edge of the range", "office inside"]
    as_filter = await engine.query({"text": "office", "temporal": window}, agent_id=agent)
    # The old office day matches the text but lies outside: gone. The range is a source too, so the other
    # memory inside it comes as well, after the one both arms found.
    assert _texts(as_filter) == ["office inside", "edge of the range"]
    with pytest.raises(InvalidRequest) as err:
        await engine.query({"temporal": {"start": base, "end": base - 1}}, agent_id=agent)
    assert err.value.field == "cue.temporal"


async def test_stores_filter_and_limit(engine: cpersona.Engine) -> None:
    agent = _agent()
    await engine.store("fact about tea", agent_id=agent, store="semantic")
    await engine.store("a day with tea", agent_id=agent, store="episodic")
    got = await engine.query({"text": "tea"}, agent_id=agent, stores=["semantic"])
    assert _texts(got) == ["fact about tea"]
    assert got.query_metadata.stores_searched == ["semantic"]
    one = await engine.query({"text": "tea"}, agent_id=agent, limit=1)
    assert len(one.memories) == 1
    assert one.total_candidates == 2
    for kwargs, field in (
        ({"stores": ["working"]}, "stores[0]"),
        ({"stores": ["semantic", "semantic"]}, "stores"),
        ({"limit": 0}, "limit"),
        ({"limit": 101}, "limit"),
        ({"activation_depth": 9}, "activation_depth"),
        ({"min_fidelity": 1.5}, "min_fidelity"),
        ({"recall_mode": "dreamy"}, "recall_mode"),
    ):
        with pytest.raises(InvalidRequest) as err:
            await engine.query({"text": "tea"}, agent_id=agent, **kwargs)
        assert err.value.field == field, kwargs


async def test_fidelity_filters_count_what_they_leave_out(engine: cpersona.Engine) -> None:
    agent = _agent()
    fresh = await engine.store("tea fresh", agent_id=agent)
    await engine.store("tea faded", agent_id=agent)
    # Age the second memory's baseline a long way back, as if it had not been recalled for ages.
    faded = next(r for r in await engine.list(agent_id=agent) if r.ref != fresh.ref)
    key = engine.keys.memory(faded.id)
    await engine.backends.stores.redis.json().set(key, "$.fidelity.last_accessed_at", time.time() - 10**12)
    await engine.backends.stores.redis.json().set(key, "$.fidelity.score", 0.05)
    hidden = await engine.query({"text": "tea"}, agent_id=agent)
    assert _texts(hidden) == ["tea fresh"]
    assert hidden.query_metadata.fidelity_filtered == 1
    shown = await engine.query({"text": "tea"}, agent_id=agent, include_decayed=True)
    assert sorted(_texts(shown)) == ["tea faded", "tea fresh"]
    decayed = next(m for m in shown.memories if m.record.ref == faded.ref)
    assert decayed.record.fidelity.score < PRUNE_THRESHOLD
    # rendered in human mode: below 0.9 some words may go, but never more than 80% of them
    floor = await engine.query({"text": "tea"}, agent_id=agent, include_decayed=True, min_fidelity=0.5)
    assert _texts(floor) == ["tea fresh"]
    assert floor.query_metadata.fidelity_filtered == 1


async def test_activation_adds_a_linked_memory_the_arms_missed(engine: cpersona.Engine) -> None:
    agent = _agent()
    target = await engine.store("the reason behind it all", agent_id=agent)
    await engine.store(
        "the decision about databases",
        agent_id=agent,
        associations=[{"target_id": target.ref, "type": "causal", "weight": 0.8}],
    )
    result = await engine.query({"text": "databases"}, agent_id=agent)
    assert _texts(result) == ["the decision about databases", "the reason behind it all"]
    leader, linked = result.memories
    assert linked.activation_path == [leader.record.id, linked.record.id]
    assert linked.relevance_score == pytest.approx(0.8 * 0.4)  # activation only: 0.8 * (1 * .8 * .5)
    assert result.activation_trace is not None
    [node] = result.activation_trace.activations
    assert (node.record_id, node.hop, node.edge_type) == (linked.record.id, 1, "causal")
    assert node.activation_level == pytest.approx(0.4)
    assert ACTIVATION_BONUS == 0.3
    # depth 0: no second wave
    alone = await engine.query({"text": "databases"}, agent_id=agent, activation_depth=0)
    assert _texts(alone) == ["the decision about databases"]


async def test_another_agents_memories_never_appear(engine: cpersona.Engine) -> None:
    mine, theirs = _agent(), _agent()
    their = await engine.store("secret tea recipe", agent_id=theirs, emotion="joy")
    await engine.store(
        "my tea",
        agent_id=mine,
        emotion="joy",
        associations=[{"target_id": their.ref, "type": "semantic", "weight": 1.0}],
    )
    base = time.time() - DAY
    for cue in (
        {"text": "tea recipe"},
        {"emotion": "joy"},
        {"temporal": {"start": base, "end": base + 2 * DAY}},
    ):
        result = await engine.query(cue, agent_id=mine, trace=True)
        assert _texts(result) == ["my tea"], cue
        assert result.query_metadata.total_records_scanned == 1  # the other agent's is not even counted
        assert result.activation_trace is not None
        assert result.activation_trace.activations == []
        assert their.ref not in orjson.dumps(trace_json(result)).decode()


@pytest.mark.parametrize(
    ("cue", "field", "code"),
    [
        ({}, "cue", "VALIDATION_ERROR"),
        ({"text": "   "}, "cue", "VALIDATION_ERROR"),
        ({"image": [137, 80, 78, 71]}, "cue.image", "MODALITY_UNSUPPORTED"),
        ({"audio": "UklGRg=="}, "cue.audio", "MODALITY_UNSUPPORTED"),
        ({"text": "x", "spatial": {"lat": 1}}, "cue.spatial", "MODALITY_UNSUPPORTED"),
        ({"emotion": {"intensity": 1.0, "valence": 0.5}}, "cue.emotion", "VALIDATION_ERROR"),
        ({"emotion": {"joy": 2.0}}, "cue.emotion.joy", "VALIDATION_ERROR"),
        ({"embedding": [0.1, 0.2]}, "cue.embedding", "VALIDATION_ERROR"),  # no vector index here
        ({"text": "x", "bogus": 1}, "cue.bogus", "VALIDATION_ERROR"),
    ],
)
async def test_refusals_name_the_field(
    engine: cpersona.Engine, cue: dict[str, Any], field: str, code: str
) -> None:
    with pytest.raises(InvalidRequest) as err:
        await engine.query(cue, agent_id=_agent())
    assert (err.value.field, err.value.code) == (field, code)


# ------------------------------------------------------------------------------ the trace


def _leaked(serialised: str, contents: list[str]) -> list[str]:
    return [t[i : i + 8] for t in contents for i in range(len(t) - 7) if t[i : i + 8] in serialised]


_word = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz"), min_size=3, max_size=9)
_content = st.lists(_word, min_size=2, max_size=8).map(" ".join).filter(lambda t: len(t) >= 8)


@hsettings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(memories=st.lists(_content, min_size=1, max_size=5, unique=True), data=st.data())
async def test_a_trace_carries_no_stored_text(
    engine: cpersona.Engine, memories: list[str], data: st.DataObject
) -> None:
    agent = _agent()
    refs = []
    for text in memories:
        stored = await engine.store(text, agent_id=agent, emotion="joy")
        refs.append(stored.ref)
    question = data.draw(st.sampled_from(memories)).split()[0]
    result = await engine.query({"text": question, "emotion": "joy"}, agent_id=agent, trace=True)
    assert result.trace is not None
    serialised = orjson.dumps(trace_json(result)).decode()
    # The query's own words are the caller's: leave them out of what counts as a leak.
    assert _leaked(serialised.replace(question, ""), memories) == []
    assert {row["ref"] for row in trace_json(result)["returned"]} <= set(refs)


async def test_the_emotion_arm_is_exact_among_memories_without_emotion(engine: cpersona.Engine) -> None:
    # Memories without an emotion once held all-zero vectors, which the filtered KNN scored as NaN and
    # which broke its ranking of every other memory; it must agree with a brute-force cosine.
    rng = random.Random(7)
    agent = _agent()
    axes = ("joy", "trust", "fear", "surprise", "sadness", "disgust", "anger", "anticipation")
    emotions: dict[str, dict[str, float]] = {}
    batch = []
    for i in range(120):
        record: dict[str, Any] = {"content": f"memory number {i}", "agent_id": agent}
        if i % 2:
            record["emotion"] = {a: round(rng.uniform(0.1, 1.0), 3) for a in rng.sample(axes, 3)}
        batch.append(record)
    stored = await engine.store_batch(batch)
    for record, one in zip(batch, stored.results, strict=True):
        if "emotion" in record:
            emotions[one.ref] = record["emotion"]
    cue = {a: round(rng.uniform(0.1, 1.0), 3) for a in rng.sample(axes, 3)}

    def cosine(e: dict[str, float]) -> float:
        dot = sum(cue.get(a, 0.0) * e.get(a, 0.0) for a in axes)
        norms = math.sqrt(sum(v * v for v in cue.values())) * math.sqrt(sum(v * v for v in e.values()))
        return dot / norms

    expected = sorted(((cosine(e), ref) for ref, e in emotions.items() if cosine(e) > 0), reverse=True)
    result = await engine.query({"emotion": cue}, agent_id=agent, limit=10, trace=True, activation_depth=0)
    assert result.trace is not None
    rows = trace_json(result)["arms"]["emotion"]["rows"]
    assert [row["raw"] for row in rows] == pytest.approx([c for c, _ in expected[: len(rows)]], abs=1e-5)
    assert len(rows) == min(30, len(expected))


async def test_a_store_from_before_the_emotion_index_is_brought_up_to_date(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, embedding_mode="none")
    async with cpersona.open(settings, background=False) as memory:
        await memory.store("a joyful lake", agent_id="a", emotion="joy")
        await memory.store("a plain lake", agent_id="a")
        scores = await memory.backends.records.memory_keyword(ReadScope("a"), "lake", 10)
        # What the engine before the emotion index left: documents without the axes, an index without it.
        index, prefix = memory.keys.memory_index, memory.keys.memory_prefix
        await command(memory.backends.stores.redis, "FT.DROPINDEX", index)
        async for key in memory.backends.stores.redis.scan_iter(match=f"{prefix}*"):
            await memory.backends.stores.redis.json().delete(key, "$.emotion_axes")  # type: ignore[no-untyped-call]
        schema = [field for field in SCHEMAS["memory"] if field.name != "$.emotion_axes"]
        await create_index(memory.backends.stores.redis, index, prefix, schema)
    async with cpersona.open(settings, background=False) as memory:
        assert _texts(await memory.query({"emotion": "joy"}, agent_id="a")) == ["a joyful lake"]
        again = await memory.backends.records.memory_keyword(ReadScope("a"), "lake", 10)
        assert [(r.ref, r.raw) for r in again.rows] == [(r.ref, r.raw) for r in scores.rows]


_SCOPES = [("a", ""), ("a", "p1"), ("a", "p2"), ("b", ""), ("b", "p1")]


@hsettings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rows=st.lists(
        st.tuples(st.sampled_from(range(len(_SCOPES))), st.sampled_from(["joy", "fear", None])),
        min_size=2,
        max_size=10,
    ),
    links=st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9), st.floats(0.2, 1.0)), max_size=12),
    reader=st.sampled_from([("a", None), ("a", "p1"), ("a", ""), ("b", None)]),
)
async def test_isolation_property(
    engine: cpersona.Engine,
    rows: list[tuple[int, str | None]],
    links: list[tuple[int, int, float]],
    reader: tuple[str, str | None],
) -> None:
    run = uuid.uuid4().hex[:8]
    refs: list[str] = []
    owners: dict[str, tuple[str, str]] = {}
    for n, (where, emotion) in enumerate(rows):
        agent, project = _SCOPES[where]
        edges = [
            {"target_id": refs[t], "type": "semantic", "weight": w}
            for s, t, w in links
            if s == n and t < len(refs)
        ]
        stored = await engine.store(
            f"shared lake note {n}",
            agent_id=agent + run,
            project_id=project,
            emotion=emotion,
            associations=edges,
        )
        refs.append(stored.ref)
        owners[stored.ref[4:]] = (agent, project)
    me, mine = reader
    window = {"start": time.time() - DAY, "end": time.time() + DAY}
    for cue in ({"text": "lake note"}, {"emotion": "joy"}, {"temporal": window}):
        result = await engine.query(cue, agent_id=me + run, project_id=mine, limit=100, activation_depth=4)
        seen = {m.record.id for m in result.memories}
        for m in result.memories:
            assert m.activation_path is not None
            seen.update(m.activation_path)
        if result.activation_trace is not None:
            seen.update(a.record_id for a in result.activation_trace.activations)
        for rid in seen:
            owner, home = owners[rid]
            assert owner == me, cue
            assert mine is None or home in (mine, ""), cue
