"""Spreading activation (cpersona.operations.activation): levels and paths computed by hand on a small
graph, the type and weight filters, several seeds, isolation, and the invariants on generated graphs."""

from __future__ import annotations

import itertools
import math
import uuid
from typing import TYPE_CHECKING

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpersona.model.records import Association, MemoryRecord, Scope, Source
from cpersona.operations.activation import HOP_DECAY, PRUNE, edge_target, spread

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from cpersona.model.records import AssociationType

ME = Scope("me")
OTHER = Scope("other")


def _id(name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_OID, name))


def _record(
    name: str, edges: Sequence[tuple[str, AssociationType, float]], scope: Scope = ME
) -> MemoryRecord:
    associations = tuple(
        Association(f"mem:{_id(target)}", kind, weight, 0.0) for target, kind, weight in edges
    )
    return MemoryRecord(_id(name), scope, Source(), name, 0.0, 0, associations=associations)


# A -semantic .8-> B -temporal 1-> D -sequential .6-> E ; A -causal .6-> C -semantic 1-> D ; D -causal 1-> A ;
# B -semantic 1-> X, which belongs to another agent.
GRAPH = {
    "A": _record("A", [("B", "semantic", 0.8), ("C", "causal", 0.6)]),
    "B": _record("B", [("D", "temporal", 1.0), ("X", "semantic", 1.0)]),
    "C": _record("C", [("D", "semantic", 1.0)]),
    "D": _record("D", [("A", "causal", 1.0), ("E", "sequential", 0.6)]),
    "E": _record("E", []),
    "X": _record("X", [("E", "semantic", 1.0)], OTHER),
}
BY_ID = {rec.id: rec for rec in GRAPH.values()}


def _loader(graph: Mapping[str, MemoryRecord], calls: list[list[str]] | None = None):  # type: ignore[no-untyped-def]
    async def load(ids: Sequence[str]) -> dict[str, MemoryRecord]:
        if calls is not None:
            calls.append(list(ids))
        return {i: graph[i] for i in ids if i in graph and graph[i].scope.agent_id == "me"}

    return load


def _names(result: Mapping[str, object]) -> dict[str, tuple[float, int, str, tuple[str, ...]]]:
    back = {rec.id: name for name, rec in GRAPH.items()}
    out = {}
    for rid, act in result.items():
        out[back[rid]] = (
            round(act.level, 12),  # type: ignore[attr-defined]
            act.hop,  # type: ignore[attr-defined]
            act.edge_type,  # type: ignore[attr-defined]
            tuple(back[p] for p in act.path),  # type: ignore[attr-defined]
        )
    return out


def _run(
    seeds: list[tuple[str, float]], **kwargs: object
) -> dict[str, tuple[float, int, str, tuple[str, ...]]]:
    async def go() -> dict[str, object]:
        return dict(await spread([(GRAPH[n], lvl) for n, lvl in seeds], _loader(BY_ID), **kwargs))  # type: ignore[arg-type]

    return _names(anyio.run(go))


def test_levels_and_paths_by_hand() -> None:
    assert _run([("A", 1.0)], depth=3) == {
        "B": (0.4, 1, "semantic", ("A", "B")),  # 1 * .8 * .5
        "C": (0.3, 1, "causal", ("A", "C")),  # 1 * .6 * .5
        "D": (0.2, 2, "temporal", ("A", "B", "D")),  # .4 * 1 * .5 beats .3 * 1 * .5 through C
        "E": (0.06, 3, "sequential", ("A", "B", "D", "E")),  # .2 * .6 * .5; D -> A is a cycle
    }


def test_depth_cuts_the_walk() -> None:
    assert set(_run([("A", 1.0)], depth=1)) == {"B", "C"}
    assert set(_run([("A", 1.0)], depth=2)) == {"B", "C", "D"}
    assert _run([("A", 1.0)], depth=0) == {}


def test_a_level_under_the_prune_threshold_stops() -> None:
    # From a seed at .5: B .2, C .15, D .1, E .03 (< .05, so not reached).
    got = _run([("A", 0.5)], depth=8)
    assert set(got) == {"B", "C", "D"}
    assert got["D"][0] == pytest.approx(0.1)


def test_the_type_filter_holds_at_every_hop() -> None:
    assert set(_run([("A", 1.0)], depth=4, types={"semantic", "temporal"})) == {"B", "D"}
    # Only semantic edges: B, and nothing past it (B -> D is temporal; C is reached only by a causal edge).
    assert set(_run([("A", 1.0)], depth=4, types={"semantic"})) == {"B"}


def test_min_weight() -> None:
    # A -> C and D -> E weigh .6: not walked.
    assert set(_run([("A", 1.0)], depth=4, min_weight=0.7)) == {"B", "D"}


def test_several_seeds_each_spread_and_a_seed_can_be_activated_by_another() -> None:
    got = _run([("A", 1.0), ("C", 0.5)], depth=2)
    assert got["B"] == (0.4, 1, "semantic", ("A", "B"))
    assert got["C"] == (0.3, 1, "causal", ("A", "C"))  # a leader another leader reaches
    assert got["D"] == (0.25, 1, "semantic", ("C", "D"))  # .5 * 1 * .5 from C beats .2 through B
    assert got["A"] == (0.125, 2, "causal", ("C", "D", "A"))
    assert got["E"] == (0.075, 2, "sequential", ("C", "D", "E"))


def test_another_agents_record_is_never_entered_nor_walked_through() -> None:
    # B -> X (other agent) -> E: E is reached only through D, never through X.
    got = _run([("B", 1.0)], depth=3)
    assert "X" not in got
    assert got["E"][3] == ("B", "D", "E")


def test_each_hop_reads_its_targets_in_one_batch() -> None:
    calls: list[list[str]] = []

    async def go() -> None:
        await spread([(GRAPH["A"], 1.0)], _loader(BY_ID, calls), depth=3)

    anyio.run(go)
    # X (another agent's) is read once at hop 2 and refused; it is not asked for again.
    assert [sorted(c) for c in calls] == [
        sorted([_id("B"), _id("C")]),
        sorted([_id("D"), _id("X")]),
        [_id("E")],
    ]


def test_edge_targets() -> None:
    rid = _id("A")
    assert edge_target(f"mem:{rid}") == rid
    assert edge_target(rid) == rid
    assert edge_target(rid.upper()) == rid  # a UUID in any case names the same memory
    assert edge_target(f"ep:{rid}") is None
    assert edge_target("some-entity") is None


# ----------------------------------------------------------------------------------- invariants

_KINDS: tuple[AssociationType, ...] = ("semantic", "causal", "temporal")


@st.composite
def _graphs(draw: st.DrawFn) -> dict[str, MemoryRecord]:
    n = draw(st.integers(2, 8))
    names = [f"n{i}" for i in range(n)]
    out = {}
    for name in names:
        edges = draw(
            st.lists(
                st.tuples(st.sampled_from(names), st.sampled_from(_KINDS), st.floats(0.0, 1.0)), max_size=4
            )
        )
        scope = OTHER if draw(st.integers(0, 5)) == 0 else ME
        rec = _record(name, edges, scope)
        out[rec.id] = rec
    return out


@settings(max_examples=150, deadline=None)
@given(graph=_graphs(), depth=st.integers(0, 8), data=st.data())
def test_every_activation_is_the_product_along_its_own_path(
    graph: dict[str, MemoryRecord], depth: int, data: st.DataObject
) -> None:
    mine = [rec for rec in graph.values() if rec.scope == ME]
    if not mine:
        return
    seeds = data.draw(st.lists(st.sampled_from(mine), min_size=1, max_size=3, unique_by=lambda r: r.id))
    levels = {rec.id: data.draw(st.floats(0.1, 1.0)) for rec in seeds}

    async def go() -> dict[str, object]:
        return dict(await spread([(r, levels[r.id]) for r in seeds], _loader(graph), depth=depth))

    result = anyio.run(go)
    for rid, act in result.items():
        path = act.path  # type: ignore[attr-defined]
        assert path[-1] == rid
        assert path[0] in levels
        assert len(set(path)) == len(path)  # no cycles
        assert 1 <= act.hop == len(path) - 1 <= depth  # type: ignore[attr-defined]
        assert all(graph[p].scope == ME for p in path)  # isolation
        level = levels[path[0]]
        for here, there in itertools.pairwise(path):
            weights = [a.weight for a in graph[here].associations if edge_target(a.target_id) == there]
            level *= max(weights) * HOP_DECAY
        assert act.level >= PRUNE  # type: ignore[attr-defined]
        assert math.isclose(act.level, level, rel_tol=1e-9)  # type: ignore[attr-defined]
