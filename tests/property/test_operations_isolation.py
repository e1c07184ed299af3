"""Isolation over every recall operation (issue 15): another agent's records, relations and raw entries
never appear, and no operation of one agent touches another's data.

One generated world per example: two agents, the first with three projects (``p``, ``q`` and the global
pool ``''``), the second with two of the same names. Memories share one vocabulary, emotions and times,
so every cue matches records of every scope; their typed edges point at any record stored before them,
across agents and projects (a target is not checked at store time, so an edge into another agent's
memory can exist); record relations are declared in one scope between two records it may read, raw
entries share session ids. A viewer scope is drawn, and each operation is run for it: ``recall.query``
by text, emotion, time and all three (with activation and its trace), ``associate`` and ``graph`` from
each memory it sees (and from one it does not: a 404), ``timeline``, the raw query with and without
text, ``export``, the decay tick, and ``forget`` (ids that name the other agent's memories too, with
``cascade`` over edges that point into it).

Each answer is walked whole: every string in it, and every byte array decoded as text, must hold no
marker word of a record outside the viewer's scope and no id of one. A record's own stored edges
(``associations``, ``other_associations``) are left out of the walk: they are what its owner wrote, an
id and nothing more. A declared relation in a graph edge must be one a scope the viewer reads declared.
The other scopes' Redis documents are byte-identical (``DUMP``) before and after.
"""

from __future__ import annotations

import itertools
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

import cpersona
from cpersona import RecordNotFound

if TYPE_CHECKING:
    from collections.abc import Iterator

# Owners: (agent index, project). The second agent reuses the first's project names.
OWNERS = [(0, "p"), (0, "q"), (0, ""), (1, "p"), (1, "")]
WORDS = ["harbour", "lantern", "orchard", "violin", "glacier"]
EMOTIONS = ["joy", "sadness", "anger", None]
EDGE_TYPES = ["causal", "semantic", "temporal", "user_defined"]
# The viewer: (agent index, project read; None reads every project).
VIEWERS = [(0, None), (0, "p"), (0, "q"), (0, ""), (1, None), (1, "p")]
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_OWN_EDGES = {"associations", "other_associations"}
_BASE = time.time() - 3 * 86_400

memory_st = st.tuples(
    st.sampled_from(range(len(OWNERS))),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=3, unique=True),
    st.sampled_from(EMOTIONS),
    st.integers(0, 48),  # hours after the base time
    st.lists(st.tuples(st.integers(0, 30), st.sampled_from(EDGE_TYPES)), max_size=3),
)
raw_st = st.tuples(st.sampled_from(range(len(OWNERS))), st.sampled_from(WORDS), st.sampled_from(["s1", "s2"]))
relation_st = st.tuples(st.integers(0, 30), st.integers(0, 30), st.sampled_from(range(len(OWNERS))))


def sees_project(read: str | None, project: str) -> bool:
    """The isolation table of projects (README, "Data model and isolation"), written out again."""
    if read is None:
        return True
    return project == "" if read == "" else project in (read, "")


@dataclass
class Item:
    """One stored thing: its id (bare UUID), its marker word and its owner."""

    uuid: str
    marker: str
    agent: int
    project: str


@dataclass
class World:
    agents: tuple[str, str]
    memories: list[Item] = field(default_factory=list)
    raws: list[Item] = field(default_factory=list)
    # (subject uuid, object uuid, predicate, agent, project of the declaring scope)
    relations: list[tuple[str, str, str, int, str]] = field(default_factory=list)

    def hidden(self, agent: int, project: str | None) -> list[Item]:
        """What the viewer must never see: other agents' items and its own other projects'."""
        return [
            item
            for item in (*self.memories, *self.raws)
            if item.agent != agent or not sees_project(project, item.project)
        ]

    def other_agent(self, agent: int) -> list[Item]:
        return [item for item in (*self.memories, *self.raws) if item.agent != agent]


_runs = itertools.count()


async def build(
    engine: cpersona.Engine,
    memories: list[tuple[int, list[str], str | None, int, list[tuple[int, str]]]],
    raws: list[tuple[int, str, str]],
    relations: list[tuple[int, int, int]],
) -> World:
    run = next(_runs)
    world = World((f"iso{run}-A", f"iso{run}-A:x"))  # the second spells like the first, on purpose
    # One memory of every owner first, so every scope holds something.
    for n, (owner, words, emotion, hours, edges) in enumerate(
        [(o, [WORDS[o]], "joy", o, []) for o in range(len(OWNERS))] + memories
    ):
        agent, project = OWNERS[owner]
        marker = f"mk{n:03d}z"
        targets = [world.memories[t % len(world.memories)] for t, _ in edges] if world.memories else []
        stored = await engine.store(
            f"{' '.join(words)} {marker}",
            agent_id=world.agents[agent],
            project_id=project,
            emotion=emotion,
            timestamp=_BASE + hours * 3600,
            associations=[
                {"target_id": f"mem:{t.uuid}", "type": kind, "weight": 0.9}
                for t, (_, kind) in zip(targets, edges, strict=False)
            ],
        )
        world.memories.append(Item(stored.ref.removeprefix("mem:"), marker, agent, project))
    for n, (owner, word, session) in enumerate(raws):
        agent, project = OWNERS[owner]
        marker = f"rw{n:03d}z"
        stored = await engine.store_raw(
            f"user said {word} {marker}",
            agent_id=world.agents[agent],
            project_id=project,
            session_id=session,
            source="conversation",
            speaker="user",
            visibility="normal",
            secrecy_level="public",
        )
        world.raws.append(Item(stored.ref.removeprefix("raw:"), marker, agent, project))
    for subject_n, object_n, owner in relations:
        await _declare(engine, world, subject_n, object_n, owner)
    return world


async def _declare(engine: cpersona.Engine, world: World, subject_n: int, object_n: int, owner: int) -> None:
    # A relation between two memories the declaring scope may read (else it is refused, rightly).
    agent, project = OWNERS[owner]
    readable = [m for m in world.memories if m.agent == agent and sees_project(project, m.project)]
    subject, obj = readable[subject_n % len(readable)], readable[object_n % len(readable)]
    predicate = f"rel{len(world.relations)}"
    await engine.declare_associations(
        world.agents[agent],
        {
            "relations": [
                {"subject": f"mem:{subject.uuid}", "predicate": predicate, "object": f"mem:{obj.uuid}"}
            ]
        },
        project_id=project,
    )
    world.relations.append((subject.uuid, obj.uuid, predicate, agent, project))


def strings(value: Any) -> Iterator[str]:
    """Every string in a JSON value, byte arrays decoded, a record's own stored edges left out."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            if key not in _OWN_EDGES:
                yield from strings(item)
    elif isinstance(value, list):
        if value and all(isinstance(v, int) and 0 <= v <= 255 for v in value):
            yield bytes(value).decode("utf-8", errors="replace")
        else:
            for item in value:
                yield from strings(item)


def assert_hides(answer: BaseModel | dict[str, Any], hidden: list[Item], what: str) -> None:
    data = answer.model_dump(mode="json") if isinstance(answer, BaseModel) else answer
    text = "\n".join(strings(data))
    ids = set(_UUID.findall(text.lower()))
    leaked = [item for item in hidden if item.marker in text or item.uuid in ids]
    assert not leaked, (what, leaked)


def _text(key: str | bytes) -> str:
    return key.decode() if isinstance(key, bytes) else key


async def snapshot(
    engine: cpersona.Engine, world: World, items: list[Item], agents: set[int]
) -> dict[str, Any]:
    """The stored bytes of ``items`` and of the associative layer of ``agents``."""
    keys = [engine.keys.memory(m.uuid) for m in items if m in world.memories]
    keys += [engine.keys.raw(r.uuid) for r in items if r in world.raws]
    for agent in sorted(agents):
        pattern = engine.keys.assoc_of_agent(world.agents[agent])
        keys += sorted([_text(k) async for k in engine.backends.stores.redis.scan_iter(match=pattern)])
    return {key: await engine.backends.stores.redis.dump(key) for key in keys}


async def check_reads(engine: cpersona.Engine, world: World, agent: int, project: str | None) -> None:
    hidden = world.hidden(agent, project)
    scope: dict[str, Any] = {"agent_id": world.agents[agent], "project_id": project}
    span = {"start": _BASE - 60, "end": _BASE + 49 * 3600}
    cues: list[dict[str, Any]] = [
        {"text": "harbour lantern orchard violin glacier"},
        {"emotion": "joy"},
        {"temporal": span},
        {"text": "orchard", "emotion": "sadness", "temporal": span},
    ]
    for cue in cues:
        answer = await engine.query(
            cue,
            **scope,
            limit=100,
            activation_depth=4,
            include_decayed=True,
            recall_mode="perfect",
            trace=True,
        )
        assert_hides(answer, hidden, f"query {cue}")
    visible = [m for m in world.memories if m not in hidden]
    for memory in visible:
        reached = await engine.associate(memory.uuid, **scope, depth=8, min_weight=0.0, limit=256)
        assert_hides(reached, hidden, "associate")
        around = await engine.graph(
            world.agents[agent],
            center_id=memory.uuid,
            project_id=project,
            depth=8,
            include_meta=True,
            limit_nodes=1000,
        )
        assert_hides(around, hidden, "graph")
        check_relations(around, world, agent, project)
    newest = await engine.graph(world.agents[agent], project_id=project, depth=8, limit_nodes=1000)
    assert_hides(newest, hidden, "graph from the newest")
    check_relations(newest, world, agent, project)
    for memory in [m for m in world.memories if m in hidden][:3]:
        with pytest.raises(RecordNotFound):
            await engine.associate(memory.uuid, **scope)
        with pytest.raises(RecordNotFound):
            await engine.graph(world.agents[agent], center_id=f"mem:{memory.uuid}", project_id=project)
    laid_out = await engine.timeline(world.agents[agent], range=span, granularity="day", project_id=project)
    assert_hides(laid_out, hidden, "timeline")
    for text in ("harbour", None):
        raw = await engine.raw_query(text, **scope, limit=1000)
        assert_hides(raw, hidden, f"raw {text}")


def check_relations(answer: Any, world: World, agent: int, project: str | None) -> None:
    """A declared relation in a graph comes from a scope the viewer reads, between the ends declared."""
    readable = {
        (f"mem:{s}", f"mem:{o}", predicate)
        for s, o, predicate, owner, declared in world.relations
        if owner == agent and sees_project(project, declared)
    }
    refs = {node.id: node.ref for node in answer.nodes}
    for edge in answer.edges:
        if edge.relation is not None:
            ends = {(refs.get(edge.source, edge.source), refs.get(edge.target, edge.target), edge.relation)}
            ends |= {(b, a, p) for a, b, p in ends}
            assert ends & readable, (edge, readable)


async def check_lifecycle(engine: cpersona.Engine, world: World, agent: int) -> None:
    others = world.other_agent(agent)
    archive = await engine.export(world.agents[agent], include_raw_journal=True)
    lines = [orjson.loads(line) for line in bytes(archive.archive_data).splitlines() if line.strip()]
    assert_hides({"lines": lines}, others, "export")
    before = await snapshot(engine, world, others, {1 - agent})
    await engine.decay_tick(world.agents[agent], tick_duration_seconds=3600)
    named = [m.uuid for m in world.memories]  # the other agent's ids too
    await engine.forget(world.agents[agent], confirm=True, record_ids=named, cascade=True)
    await engine.forget(
        world.agents[agent], confirm=True, temporal_range={"start": 0, "end": time.time() + 1}
    )
    assert await snapshot(engine, world, others, {1 - agent}) == before
    assert await engine.list("memory", agent_id=world.agents[agent]) == []


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    memories=st.lists(memory_st, max_size=10),
    raws=st.lists(raw_st, min_size=1, max_size=6),
    relations=st.lists(relation_st, max_size=4),
    viewer=st.sampled_from(VIEWERS),
)
async def test_no_operation_shows_or_touches_another_scope(
    engine: cpersona.Engine,
    memories: list[tuple[int, list[str], str | None, int, list[tuple[int, str]]]],
    raws: list[tuple[int, str, str]],
    relations: list[tuple[int, int, int]],
    viewer: tuple[int, str | None],
) -> None:
    world = await build(engine, memories, raws, relations)
    agent, project = viewer
    hidden = world.hidden(agent, project)
    before = await snapshot(engine, world, hidden, {1 - agent})
    assert None not in before.values()
    await check_reads(engine, world, agent, project)
    # The queries' reconsolidation strengthened what they returned, and only that.
    await engine.drain_reconsolidations()
    assert await snapshot(engine, world, hidden, {1 - agent}) == before
    await check_lifecycle(engine, world, agent)
