"""recall.graph on the real Redis, against hand-computed graphs: the breadth-first walk over outbound
associations and declared record relations, its depth, type filter and node limit (which says it cut),
the induced edges, the meta edges a caller declared (context_edges, end to end), and the scope it never
leaves."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cpersona
from cpersona import InvalidRequest, RecordNotFound
from cpersona.model.graph_parts import node_summary
from cpersona.model.graph_response import GraphResult
from cpersona.model.timeline_response import timeline_json

if TYPE_CHECKING:
    import httpx

_counter = itertools.count()
RAW_ID = "01916e3a-5678-7000-8000-000000000003"


def agent() -> str:
    return f"gr-{next(_counter)}"


def edge(target: str, kind: str, weight: float) -> dict[str, Any]:
    return {"target_id": target, "type": kind, "weight": weight}


async def build(engine: cpersona.Engine, who: str, project_id: str = "") -> dict[str, str]:
    """A → B (semantic .8), A → D (emotional .9), B → C (causal .5), D → E (semantic .4), C → A (a declared
    record relation "recalls"), E → another agent's X, B → an episode ref and A → text that names nothing.
    Returns each letter's bare id."""
    other = await engine.store("X of another agent", agent_id=who + "-other")
    ids: dict[str, str] = {"X": other.ref.removeprefix("mem:")}

    async def put(name: str, edges: list[dict[str, Any]], **kw: Any) -> None:
        stored = await engine.store(
            f"memory {name}", agent_id=who, associations=edges or None, project_id=project_id, **kw
        )
        ids[name] = stored.ref.removeprefix("mem:")

    await put("E", [edge(other.ref, "semantic", 1.0)])
    await put("D", [edge(ids["E"], "semantic", 0.4)])
    await put("C", [])
    await put("B", [edge(f"mem:{ids['C']}", "causal", 0.5), edge(f"ep:{RAW_ID}", "semantic", 1.0)])
    meta = {
        "rationale": "summarised from the journal",
        "context_edges": [
            {
                "target_id": f"raw:{RAW_ID}",
                "relation": "derived_from",
                "confidence": 1.0,
                "rationale": "its source",
            },
            {"target_id": ids["C"], "relation": "supports", "source_id": ids["B"]},
        ],
    }
    await put(
        "A",
        [edge(ids["B"], "semantic", 0.8), edge(ids["D"], "emotional", 0.9), edge("nothing", "causal", 1.0)],
        meta=meta,
    )
    declared = {
        "relations": [{"subject": f"mem:{ids['C']}", "predicate": "recalls", "object": f"mem:{ids['A']}"}]
    }
    await engine.declare_associations(who, declared, project_id=project_id)
    return ids


def shape(
    result: GraphResult, ids: dict[str, str]
) -> tuple[list[tuple[str, int]], set[tuple[str, str, str, float]]]:
    name = {v: k for k, v in ids.items()}
    nodes = [(name[n.id], n.depth) for n in result.nodes]
    edges = {(name[e.source], name[e.target], str(e.edge_type), e.weight) for e in result.edges}
    return nodes, edges


async def test_the_walk_follows_outbound_edges_level_by_level(engine: cpersona.Engine) -> None:
    who = agent()
    ids = await build(engine, who)
    one = await engine.graph(who, center_id=f"mem:{ids['A']}", depth=1)
    assert shape(one, ids) == (
        [("A", 0), ("B", 1), ("D", 1)],
        {("A", "B", "semantic", 0.8), ("A", "D", "emotional", 0.9)},
    )
    two = await engine.graph(who, center_id=ids["A"], depth=2)  # the bare UUID the Cerememory SDK sends
    assert shape(two, ids) == (
        [("A", 0), ("B", 1), ("D", 1), ("C", 2), ("E", 2)],
        {
            ("A", "B", "semantic", 0.8),
            ("A", "D", "emotional", 0.9),
            ("B", "C", "causal", 0.5),
            ("D", "E", "semantic", 0.4),
            ("C", "A", "user_defined", 1.0),
        },
    )
    relation = next(e for e in two.edges if e.edge_type == "user_defined")
    assert relation.relation == "recalls"
    assert (two.total_nodes, two.truncated, two.meta_edges) == (5, False, [])
    assert all(n.meta is None for n in two.nodes)
    zero = await engine.graph(who, center_id=ids["C"], depth=0)
    assert shape(zero, ids) == ([("C", 0)], set())
    back = await engine.graph(who, center_id=ids["C"], depth=3)
    assert shape(back, ids)[0] == [("C", 0), ("A", 1), ("B", 2), ("D", 2), ("E", 3)]


async def test_types_limit_and_truncation(engine: cpersona.Engine) -> None:
    who = agent()
    ids = await build(engine, who)
    semantic = await engine.graph(who, center_id=ids["A"], depth=3, edge_types=["semantic"])
    assert shape(semantic, ids) == ([("A", 0), ("B", 1)], {("A", "B", "semantic", 0.8)})
    relations_only = await engine.graph(who, center_id=ids["C"], depth=3, edge_types=["user_defined"])
    assert shape(relations_only, ids) == ([("C", 0), ("A", 1)], {("C", "A", "user_defined", 1.0)})
    cut = await engine.graph(who, center_id=ids["A"], depth=2, limit_nodes=2)
    assert shape(cut, ids) == ([("A", 0), ("B", 1)], {("A", "B", "semantic", 0.8)})
    assert cut.truncated
    whole = await engine.graph(who, center_id=ids["A"], depth=2, limit_nodes=5)
    assert not whole.truncated


async def test_without_a_center_the_newest_memories_seed_it(engine: cpersona.Engine) -> None:
    who = agent()
    ids = await build(engine, who)
    newest = await engine.graph(who, limit_nodes=2)
    # A was stored last, then B.
    assert shape(newest, ids) == ([("A", 0), ("B", 0)], {("A", "B", "semantic", 0.8)})


async def test_meta_edges_are_declared_stored_and_returned(engine: cpersona.Engine) -> None:
    who = agent()
    ids = await build(engine, who)
    result = await engine.graph(who, center_id=ids["A"], depth=0, include_meta=True)
    node = result.nodes[0]
    assert node.meta is not None
    assert node.meta["rationale"] == "summarised from the journal"
    assert [
        (m.source_ref, m.target_ref, m.relation, m.confidence, m.rationale) for m in result.meta_edges
    ] == [
        (f"mem:{ids['A']}", f"raw:{RAW_ID}", "derived_from", 1.0, "its source"),
        (f"mem:{ids['B']}", f"mem:{ids['C']}", "supports", None, None),
    ]
    assert [(m.source_id, m.target_id) for m in result.meta_edges] == [
        (ids["A"], RAW_ID),
        (ids["B"], ids["C"]),
    ]
    stored = await engine.get(f"mem:{ids['A']}", agent_id=who)
    assert [e.relation for e in stored.meta.context_edges] == ["derived_from", "supports"]  # type: ignore[union-attr]


async def test_bad_meta_edges_are_refused_naming_the_field(engine: cpersona.Engine) -> None:
    who = agent()
    cases = [
        ({"target_id": "00000000-0000-0000-0000-000000000000"}, "meta.context_edges[0].target_id"),
        ({"target_id": "somewhere"}, "meta.context_edges[0].target_id"),
        ({"target_id": RAW_ID, "relation": "likes"}, "meta.context_edges[0].relation"),
        ({"target_id": RAW_ID, "confidence": 1.5}, "meta.context_edges[0].confidence"),
        ({"relation": "supports"}, "meta.context_edges[0].target_id"),
    ]
    for bad, field in cases:
        with pytest.raises(InvalidRequest) as caught:
            await engine.store("x", agent_id=who, meta={"context_edges": [bad]})
        assert caught.value.field == field, bad


async def test_it_never_leaves_the_callers_scope(engine: cpersona.Engine) -> None:
    who = agent()
    ids = await build(engine, who, project_id="p")
    walked = await engine.graph(who, center_id=ids["E"], depth=3)
    assert shape(walked, ids)[0] == [("E", 0)]  # E → X is another agent's: no node, no edge
    with pytest.raises(RecordNotFound):
        await engine.graph(who, center_id=ids["X"])
    with pytest.raises(RecordNotFound):
        await engine.graph(who, center_id=ids["A"], project_id="q")
    assert shape(await engine.graph(who, center_id=ids["A"], project_id="p", depth=1), ids)[0] == [
        ("A", 0),
        ("B", 1),
        ("D", 1),
    ]
    with pytest.raises(RecordNotFound):
        await engine.graph(who, center_id="01916e3a-5678-7000-8000-00000000dead")


async def test_bad_requests_name_the_field(engine: cpersona.Engine) -> None:
    who = agent()
    cases = [
        ({"edge_types": ["likes"]}, "edge_types[0]"),
        ({"depth": 9}, "depth"),
        ({"depth": -1}, "depth"),
        ({"limit_nodes": 0}, "limit_nodes"),
        ({"limit_nodes": 1001}, "limit_nodes"),
        ({"center_id": "ep:01916e3a-5678-7000-8000-000000000003"}, "center_id"),
    ]
    for kwargs, field in cases:
        with pytest.raises(InvalidRequest) as caught:
            await engine.graph(who, **kwargs)  # type: ignore[arg-type]
        assert caught.value.field == field, kwargs


def test_a_summary_is_cut_at_80_bytes_on_a_character_edge() -> None:
    assert node_summary("short") == "short"
    assert node_summary("a" * 80) == "a" * 80
    assert node_summary("a" * 81) == "a" * 80 + "..."
    assert node_summary("a" * 79 + "é") == "a" * 79 + "..."  # é is two bytes: not cut in half


async def test_the_route_answers_and_refuses(client: httpx.AsyncClient) -> None:
    who = agent()
    first = (await client.post("/v1/encode", json={"content": "first", "agent_id": who})).json()["ref"]
    second = await client.post(
        "/v1/encode",
        json={"content": "second", "agent_id": who, "associations": [edge(first, "causal", 0.7)]},
    )
    center = second.json()["ref"].removeprefix("mem:")
    answer = await client.post("/v1/recall/graph", json={"agent_id": who, "center_id": center, "header": {}})
    assert answer.status_code == 200, answer.text
    body = GraphResult.model_validate(answer.json())
    assert [n.summary for n in body.nodes] == ["second", "first"]
    assert [(e.edge_type, e.weight) for e in body.edges] == [("causal", 0.7)]
    assert "meta" not in answer.json()["nodes"][0]
    missing = await client.post(
        "/v1/recall/graph", json={"agent_id": who, "center_id": "01916e3a-5678-7000-8000-00000000dead"}
    )
    assert missing.status_code == 404
    # The field the request named, not the engine's word for it.
    assert (missing.json()["error"]["code"], missing.json()["error"]["field"]) == (
        "RECORD_NOT_FOUND",
        "center_id",
    )
    unknown = await client.post("/v1/recall/graph", json={"agent_id": who, "edge_types": ["friendly"]})
    assert unknown.status_code == 400
    assert unknown.json()["error"]["field"] == "edge_types[0]"


_writer = st.tuples(st.sampled_from(["a", "b"]), st.sampled_from(["", "p", "q"]))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    writers=st.lists(_writer, min_size=1, max_size=10),
    links=st.lists(
        st.tuples(st.integers(0, 9), st.integers(0, 9), st.sampled_from(["semantic", "causal"])), max_size=20
    ),
    reader=_writer,
    depth=st.integers(0, 4),
    limit=st.integers(1, 6),
)
async def test_a_walk_stays_in_scope_and_within_its_bounds(
    engine: cpersona.Engine,
    writers: list[tuple[str, str]],
    links: list[tuple[int, int, str]],
    reader: tuple[str, str],
    depth: int,
    limit: int,
) -> None:
    run = f"w{next(_counter)}-"
    where: dict[str, tuple[str, str]] = {}
    refs: list[str] = []
    for i, (who, project) in enumerate(writers):
        # Each record links to those stored before it (ids are known only once stored).
        edges = [edge(refs[t], kind, 0.5) for s, t, kind in links if s == i and t < len(refs)]
        stored = await engine.store(
            f"node {i}", agent_id=run + who, project_id=project, associations=edges or None
        )
        refs.append(stored.ref)
        where[stored.ref.removeprefix("mem:")] = (run + who, project)
    who, project = reader
    visible = {rid for rid, (a, p) in where.items() if a == run + who and p in (project, "")}
    result = await engine.graph(run + who, project_id=project, depth=depth, limit_nodes=limit)
    ids = [n.id for n in result.nodes]
    assert len(ids) == len(set(ids)) <= limit
    assert set(ids) <= visible
    assert all(n.depth <= depth for n in result.nodes)
    assert all(e.source in ids and e.target in ids for e in result.edges)
    for center in sorted(visible)[:2]:
        around = await engine.graph(
            run + who, project_id=project, center_id=center, depth=depth, limit_nodes=limit
        )
        assert around.nodes[0].id == center
        assert {n.id for n in around.nodes} <= visible


async def test_answers_parse_into_the_cerememory_sdk_models(engine: cpersona.Engine) -> None:
    # Runs where the Cerememory SDK is installed (the compatibility suite's extra); skipped elsewhere.
    sdk = pytest.importorskip("cerememory.types")
    who = agent()
    ids = await build(engine, who)
    drawn = await engine.graph(who, center_id=ids["A"], depth=2, include_meta=True)
    parsed = sdk.RecallGraphResponse.model_validate(drawn.model_dump(mode="json"))
    assert [str(n.id) for n in parsed.nodes] == [n.id for n in drawn.nodes]
    laid_out = await engine.timeline(who, range={"start": 0, "end": 4_000_000_000}, granularity="month")
    timeline = sdk.RecallTimelineResponse.model_validate(timeline_json(laid_out))
    assert sum(b.count for b in timeline.buckets) == 5
    assert {
        str(a.target_id) for b in timeline.buckets for m in b.memories for a in m.record.associations
    } >= {ids["B"], ids["D"]}
