"""The associative layer: entities with aliases, mentions, entity and record relations, traverse and
entity matching, on the real Redis. Property tests hold the two promises reads make: isolation is never
widened (what a scope gets was declared, and stored, where it may read), and a traversal never returns a
record twice nor more than ``limit``."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cpersona
from cpersona import InvalidRequest, RecordNotFound, Settings
from cpersona.edges.http.app import create_app, openapi_document
from cpersona.model.association_results import DeclareResult, TraverseResult
from cpersona.model.associations import name_key
from cpersona.model.entity_match import match_terms
from cpersona.model.scope import ReadScope

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractAsyncContextManager

    import httpx
    from starlette.applications import Starlette

_counter = itertools.count()


def agent() -> str:
    return f"agent-{next(_counter)}"


async def remember(engine: cpersona.Engine, text: str, who: str, **kw: object) -> str:
    return (await engine.store(text, agent_id=who, **kw)).ref  # type: ignore[arg-type]


def refs_of(result: object) -> list[str]:
    return [r.ref for r in result.records]  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------------ names and matching


def test_a_name_is_matched_by_its_folded_form() -> None:
    assert name_key("  ALICE\u3000 Smith ") == "alice smith"
    assert name_key("\uff21lice") == "alice"  # full-width A, NFKC
    assert name_key("Straße") == "strasse"


def test_matching_is_longest_first_without_overlap() -> None:
    terms = {"new york": {"nyc"}, "york": {"york"}, "new york times": {"nyt"}, "al": {"al"}}
    found = match_terms("I read the New York Times in new york, also York.", terms)
    assert [(m.entity, m.term) for m in found] == [
        ("nyt", "new york times"),
        ("nyc", "new york"),
        ("york", "york"),
    ]  # "al" does not match inside "also"
    wide = match_terms("東京都に住む", {"東京": {"tokyo"}})
    assert [m.entity for m in wide] == ["tokyo"]


def test_matching_keeps_at_most_64() -> None:
    terms = {f"n{i:03d}": {f"e{i}"} for i in range(100)}
    text = " ".join(terms)
    assert len(match_terms(text, terms)) == 64


_letters = st.text(alphabet=st.sampled_from("abAB \u3000\uff41東京"), max_size=12)


@given(text=_letters)
def test_the_folded_form_is_stable(text: str) -> None:
    assert name_key(name_key(text)) == name_key(text)


@given(text=_letters, terms=st.lists(_letters.filter(lambda t: bool(name_key(t))), max_size=12))
def test_matches_never_overlap_and_are_bounded(text: str, terms: list[str]) -> None:
    found = match_terms(text, {name_key(t): {f"e{i}"} for i, t in enumerate(terms)}, most=5)
    assert len(found) <= 5
    spans = sorted({(m.start, m.end) for m in found})
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in itertools.pairwise(spans))
    haystack = name_key(text)
    assert all(haystack[m.start : m.end] == m.term for m in found)


# ------------------------------------------------------------------------------------ declare and retract


async def test_declare_is_idempotent_and_retract_removes_what_is_named(engine: cpersona.Engine) -> None:
    who = agent()
    ref = await remember(engine, "Alice met Bob in Paris", who)
    decl = {"entities": [{"name": "Alice", "aliases": ["Ally", "A. Liddell"]}, {"name": "Bob"}]}
    first = await engine.declare_associations(who, decl, anchor_ref=ref)
    assert (first.entities, first.aliases, first.mentions) == (2, 2, 2)
    again = await engine.declare_associations(who, decl, anchor_ref=ref)
    assert (again.entities, again.aliases, again.mentions, again.relations) == (0, 0, 0, 0)
    scope = ReadScope(who)
    found = await engine.match_entities(scope, "what did ally say to bob?")
    assert [(m.entity, m.term, m.name, m.aliases) for m in found] == [
        ("alice", "ally", "Alice", ("A. Liddell", "Ally")),
        ("bob", "bob", "Bob", ()),
    ]

    gone = await engine.declare_associations(
        who, {"entities": [{"name": "alice", "aliases": ["ally"]}]}, retract=True
    )
    assert (gone.aliases, gone.entities, gone.mentions) == (1, 0, 0)
    assert [m.entity for m in await engine.match_entities(scope, "ally and a. liddell")] == ["alice"]
    assert refs_of(await engine.traverse(who, "Alice")) == [ref]  # the mention stays

    await engine.declare_associations(who, {"entities": [{"name": "Bob"}]}, anchor_ref=ref, retract=True)
    assert refs_of(await engine.traverse(who, "bob")) == []
    whole = await engine.declare_associations(who, {"entities": [{"name": "ALICE"}]}, retract=True)
    assert (whole.entities, whole.aliases, whole.mentions) == (1, 1, 1)
    assert (await engine.traverse(who, "alice")).entity is None
    assert await engine.match_entities(scope, "a. liddell") == []


async def test_a_relation_to_itself_is_kept_and_the_walk_passes_over_it(engine: cpersona.Engine) -> None:
    who = agent()
    ref = await remember(engine, "Ann wrote to herself", who)
    decl = {
        "entities": [{"name": "Ann"}],
        "relations": [{"subject": "Ann", "predicate": "knows", "object": "ann"}],
    }
    declared = await engine.declare_associations(who, decl, anchor_ref=ref)
    assert declared.relations == 1
    reached = await engine.traverse(who, "Ann", max_hops=3)
    assert refs_of(reached) == [ref]


async def test_a_store_declares_its_mentions_in_the_same_write(engine: cpersona.Engine) -> None:
    who = agent()
    ref = await remember(
        engine, "Carol joined ACME", who, associations={"entities": [{"name": "Carol"}, {"name": "ACME"}]}
    )
    assert refs_of(await engine.traverse(who, "carol")) == [ref]
    links = await engine.record_links(ReadScope(who), [ref])
    assert links[ref].entities == ("acme", "carol")
    edges = await engine.store(
        "Cerememory edges still work", agent_id=who, associations=[{"target_id": "x", "type": "semantic"}]
    )
    record = await engine.get(edges.ref, agent_id=who)
    assert [a.target_id for a in record.associations] == ["x"]  # type: ignore[union-attr]


async def test_the_anchor_must_be_visible_from_the_declaration(engine: cpersona.Engine) -> None:
    who, other = agent(), agent()
    mine = await remember(engine, "in project p", who, project_id="p")
    with pytest.raises(RecordNotFound):
        await engine.declare_associations(other, {"entities": [{"name": "X"}]}, anchor_ref=mine)
    with pytest.raises(RecordNotFound):
        await engine.declare_associations(who, {"entities": [{"name": "X"}]}, anchor_ref=mine, project_id="q")
    await engine.declare_associations(who, {"entities": [{"name": "X"}]}, anchor_ref=mine, project_id="p")
    assert refs_of(await engine.traverse(who, "x", project_id="p")) == [mine]
    assert refs_of(await engine.traverse(who, "x", project_id="")) == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"entities": []}, "associations"),
        ({"entities": [{"name": " "}]}, "associations.entities[0].name"),
        ({"entities": [{"name": "A", "aliases": ["x"] * 33}]}, "associations.entities[0].aliases"),
        ({"entities": [{"name": "A" * 257}]}, "associations.entities[0].name"),
        ({"entities": [{"name": "A", "alias": []}]}, "associations.entities[0].alias"),
        (
            {
                "relations": [
                    {
                        "subject": "A",
                        "predicate": "p",
                        "object": "mem:" + "0" * 8 + "-0000-0000-0000-" + "0" * 12,
                    }
                ]
            },
            "associations.relations[0].object",
        ),
        (
            {"relations": [{"subject": "A", "predicate": " ", "object": "B"}]},
            "associations.relations[0].predicate",
        ),
        ({"entities": [{"name": "A"}] * 65}, "associations.entities"),
    ],
)
async def test_bad_input_is_refused_naming_the_field(
    engine: cpersona.Engine, body: dict[str, object], field: str
) -> None:
    with pytest.raises(InvalidRequest) as err:
        await engine.declare_associations(agent(), body)
    assert err.value.field == field


async def test_bad_traverse_bounds_are_refused(engine: cpersona.Engine) -> None:
    for kw, field in (({"max_hops": 6}, "max_hops"), ({"limit": 0}, "limit"), ({"limit": 101}, "limit")):
        with pytest.raises(InvalidRequest) as err:
            await engine.traverse("a", "x", **kw)  # type: ignore[arg-type]
        assert err.value.field == field


# ------------------------------------------------------------------------------------ relations and traverse


async def test_traverse_walks_relations_by_hops_either_direction(engine: cpersona.Engine) -> None:
    who = agent()
    a = await remember(engine, "about Ann", who, associations={"entities": [{"name": "Ann"}]})
    b = await remember(engine, "about Ben", who, associations={"entities": [{"name": "Ben"}]})
    c = await remember(engine, "about Cy", who, associations={"entities": [{"name": "Cy"}]})
    both = await remember(
        engine, "Ann and Cy", who, associations={"entities": [{"name": "Ann"}, {"name": "Cy"}]}
    )
    rels = [
        {"subject": "Ann", "predicate": "knows", "object": "Ben"},
        {"subject": "Cy", "predicate": "Manages", "object": "Ben"},
    ]
    assert (await engine.declare_associations(who, {"relations": rels})).relations == 2
    zero = await engine.traverse(who, "ann", max_hops=0)
    assert sorted(refs_of(zero)) == sorted([a, both])
    two = await engine.traverse(who, "Ann", max_hops=2)
    hops = {r.ref: (r.hops, r.predicates) for r in two.records}
    assert (hops[a][0], hops[both][0]) == (0, 0)  # each once, at its fewest hops
    assert hops[b] == (1, ("knows",))
    assert hops[c] == (2, ("knows", "manages"))  # Cy is reached against the relation's direction
    assert len(two.records) == 4
    limited = await engine.traverse(who, "Ann", max_hops=2, limit=3)
    assert len(limited.records) == 3
    assert limited.truncated
    assert (await engine.traverse(who, "nobody")).entity is None


async def test_record_relations_are_read_per_record_and_go_with_a_delete(engine: cpersona.Engine) -> None:
    who = agent()
    old = await remember(engine, "the plan was A", who)
    new = await remember(engine, "the plan is B", who, associations={"entities": [{"name": "Plan"}]})
    rel = {"relations": [{"subject": new, "predicate": "supersedes", "object": old}]}
    assert (await engine.declare_associations(who, rel)).relations == 1
    links = await engine.record_links(ReadScope(who), [new, old])
    assert [(x.direction, x.predicate, x.other) for x in links[new].relations] == [("out", "supersedes", old)]
    assert [(x.direction, x.other) for x in links[old].relations] == [("in", new)]
    await engine.delete(old, agent_id=who)
    assert (await engine.record_links(ReadScope(who), [new]))[new].relations == ()
    await engine.delete(new, agent_id=who)
    assert refs_of(await engine.traverse(who, "plan")) == []
    keys = [k async for k in engine.backends.stores.redis.scan_iter(match=engine.keys.assoc_record(who, "*"))]
    assert keys == []


async def test_delete_agent_data_removes_the_graph(engine: cpersona.Engine) -> None:
    who, other = agent(), agent()
    await remember(engine, "x", who, associations={"entities": [{"name": "Dana"}]})
    kept = await remember(engine, "y", other, associations={"entities": [{"name": "Dana"}]})
    await engine.delete_agent_data(who)
    assert [
        k async for k in engine.backends.stores.redis.scan_iter(match=engine.keys.assoc_of_agent(who))
    ] == []
    assert refs_of(await engine.traverse(other, "dana")) == [kept]


# ------------------------------------------------------------------------------------ HTTP


async def test_declare_and_traverse_over_http(
    settings: Settings,
    redis: object,
    serve_asgi: Callable[[Starlette], AbstractAsyncContextManager[httpx.AsyncClient]],
) -> None:
    paths = openapi_document()["paths"]
    assert {"/v1/associations", "/v1/traverse"} <= set(paths)
    app = create_app(settings.with_(qdrant_url=":memory:", embedding_mode="none"), background=False)
    async with serve_asgi(app) as client:
        stored = await client.post("/v1/encode", json={"content": "Eve builds boats", "agent_id": "h"})
        ref = stored.json()["ref"]
        body = {"agent_id": "h", "anchor_ref": ref, "associations": {"entities": [{"name": "Eve"}]}}
        declared = await client.post("/v1/associations", json=body)
        assert declared.status_code == 200, declared.text
        assert DeclareResult.model_validate(declared.json()).mentions == 1
        walked = await client.post("/v1/traverse", json={"agent_id": "h", "entity": "eve"})
        assert walked.status_code == 200, walked.text
        assert [r.ref for r in TraverseResult.model_validate(walked.json()).records] == [ref]
        bad = await client.post("/v1/traverse", json={"agent_id": "h", "entity": "eve", "max_hops": 9})
        assert (bad.status_code, bad.json()["error"]["field"]) == (400, "max_hops")
        body["agent_id"] = "someone-else"
        missing = await client.post("/v1/associations", json=body)
        assert missing.status_code == 404, missing.text


# ------------------------------------------------------------------------------------ properties

AGENTS = ["a", "b", "a:b"]
PROJECTS = ["", "p", "q"]
CHANNELS = ["", "c", "d"]
NAMES = ["Ann", "Ben", "Cy", "Dee"]

SOURCES = ["", "s:1", "s:2"]
write_st = st.tuples(
    st.sampled_from(AGENTS),
    st.sampled_from(PROJECTS),
    st.sampled_from(CHANNELS),
    st.sampled_from(NAMES),
    st.sampled_from(SOURCES),
)
relation_st = st.tuples(
    st.sampled_from(AGENTS),
    st.sampled_from(PROJECTS),
    st.sampled_from(CHANNELS),
    st.sampled_from(NAMES),
    st.sampled_from(NAMES),
)
read_st = st.builds(
    ReadScope,
    agent_id=st.sampled_from(AGENTS),
    project_id=st.one_of(st.none(), st.sampled_from(PROJECTS)),
    channel=st.one_of(st.none(), st.sampled_from(CHANNELS)),
    source_id=st.sampled_from(["", "s:", "s:1"]),
)


def may_read(read: ReadScope, agent_id: str, project: str, channel: str, source: str | None = None) -> bool:
    """The isolation table, written out apart from ``ReadScope.sees`` (``source``: a record's)."""
    if agent_id != read.agent_id:
        return False
    if read.project_id is not None and project not in {read.project_id, ""}:
        return False
    if read.channel and channel not in {read.channel, ""}:
        return False
    if source is None or not read.source_id:
        return True
    return source == read.source_id if read.source_id[-1].isalnum() else source.startswith(read.source_id)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    writes=st.lists(write_st, min_size=1, max_size=10),
    relations=st.lists(relation_st, max_size=8),
    reads=st.lists(
        st.tuples(read_st, st.sampled_from(NAMES), st.integers(0, 5), st.integers(1, 6)), max_size=5
    ),
)
async def test_reads_never_widen_isolation(
    engine: cpersona.Engine,
    writes: list[tuple[str, str, str, str, str]],
    relations: list[tuple[str, str, str, str, str]],
    reads: list[tuple[ReadScope, str, int, int]],
) -> None:
    run = f"r{next(_counter)}-"
    where: dict[str, tuple[str, str, str, str]] = {}
    named: dict[str, set[tuple[str, str, str]]] = {}
    for agent_id, project, channel, name, source in writes:
        ref = await remember(
            engine,
            f"{name} {len(where)}",
            run + agent_id,
            project_id=project,
            channel=channel,
            source={"id": source},
            associations={"entities": [{"name": name}]},
        )
        where[ref] = (agent_id, project, channel, source)
        named.setdefault(name_key(name), set()).add((agent_id, project, channel))
    for agent_id, project, channel, subject, obj in relations:
        if subject != obj:
            body = {"relations": [{"subject": subject, "predicate": "near", "object": obj}]}
            await engine.declare_associations(run + agent_id, body, project_id=project, channel=channel)
            for name in (subject, obj):
                named.setdefault(name_key(name), set()).add((agent_id, project, channel))
    for read, name, hops, limit in reads:
        scope = ReadScope(run + read.agent_id, read.project_id, read.channel, read.source_id)
        got = await engine.traverse(
            scope.agent_id,
            name,
            max_hops=hops,
            limit=limit,
            project_id=read.project_id,
            channel=read.channel,
            source_id=read.source_id,
        )
        reached = refs_of(got)
        assert len(reached) == len(set(reached)) <= limit
        assert all(may_read(read, *where[ref]) for ref in reached)
        for match in await engine.match_entities(scope, " ".join(NAMES)):
            assert any(may_read(read, *at) for at in named[match.entity])
