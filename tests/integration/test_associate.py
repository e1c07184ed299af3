"""recall.associate (issue 15 item 2) on the real Redis: hand-computed levels and paths, the caps, the
type filter at every hop, 404 outside the caller's scope, and the SDK parsing the HTTP answer."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import pytest

from cpersona import InvalidRequest, RecordNotFound

if TYPE_CHECKING:
    import httpx

    import cpersona


def _agent() -> str:
    return "as-" + uuid.uuid4().hex[:10]


async def _chain(engine: cpersona.Engine, agent: str) -> dict[str, str]:
    """A -semantic .8-> B -temporal .6-> C ; A -causal 1.0-> D."""
    refs: dict[str, str] = {}
    refs["C"] = (await engine.store("node c", agent_id=agent)).ref
    refs["D"] = (await engine.store("node d", agent_id=agent)).ref
    refs["B"] = (
        await engine.store(
            "node b",
            agent_id=agent,
            associations=[{"target_id": refs["C"], "type": "temporal", "weight": 0.6}],
        )
    ).ref
    refs["A"] = (
        await engine.store(
            "node a",
            agent_id=agent,
            associations=[
                {"target_id": refs["B"], "type": "semantic", "weight": 0.8},
                {"target_id": refs["D"], "type": "causal", "weight": 1.0},
            ],
        )
    ).ref
    return refs


async def test_levels_and_paths_by_hand(engine: cpersona.Engine) -> None:
    agent = _agent()
    refs = await _chain(engine, agent)
    ids = {name: ref[4:] for name, ref in refs.items()}
    result = await engine.associate(refs["A"], agent_id=agent, depth=3)
    got = [(m.record.ref, round(m.relevance_score, 9), m.activation_path) for m in result.memories]
    assert got == [
        (refs["D"], 0.5, [ids["A"], ids["D"]]),  # 1 * 1.0 * .5
        (refs["B"], 0.4, [ids["A"], ids["B"]]),  # 1 * .8 * .5
        (refs["C"], 0.12, [ids["A"], ids["B"], ids["C"]]),  # .4 * .6 * .5
    ]
    assert result.total_candidates == 3
    # a bare UUID is the same memory
    bare = await engine.associate(ids["A"], agent_id=agent, depth=3)
    assert [(m.record.ref, m.activation_path) for m in bare.memories] == [(r, p) for r, _, p in got]


async def test_depth_limit_min_weight_and_types(engine: cpersona.Engine) -> None:
    agent = _agent()
    refs = await _chain(engine, agent)
    assert [m.record.ref for m in (await engine.associate(refs["A"], agent_id=agent, depth=1)).memories] == [
        refs["D"],
        refs["B"],
    ]
    limited = await engine.associate(refs["A"], agent_id=agent, depth=3, limit=1)
    assert [m.record.ref for m in limited.memories] == [refs["D"]]
    assert limited.total_candidates == 3
    heavy = await engine.associate(refs["A"], agent_id=agent, depth=3, min_weight=0.9)
    assert [m.record.ref for m in heavy.memories] == [refs["D"]]
    # Only semantic edges: B, and not C (B -> C is temporal) — the filter holds at every hop.
    semantic = await engine.associate(refs["A"], agent_id=agent, depth=3, association_types=["semantic"])
    assert [m.record.ref for m in semantic.memories] == [refs["B"]]
    both = await engine.associate(
        refs["A"], agent_id=agent, depth=3, association_types=["semantic", "temporal"]
    )
    assert [m.record.ref for m in both.memories] == [refs["B"], refs["C"]]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"depth": 9}, "depth"),
        ({"depth": 0}, "depth"),
        ({"limit": 257}, "limit"),
        ({"limit": 0}, "limit"),
        ({"min_weight": 1.5}, "min_weight"),
        ({"association_types": ["friendly"]}, "association_types[0]"),
    ],
)
async def test_refusals_name_the_field(
    engine: cpersona.Engine, kwargs: dict[str, object], field: str
) -> None:
    agent = _agent()
    ref = (await engine.store("x", agent_id=agent)).ref
    with pytest.raises(InvalidRequest) as err:
        await engine.associate(ref, agent_id=agent, **kwargs)  # type: ignore[arg-type]
    assert err.value.field == field


async def test_only_the_callers_scope(engine: cpersona.Engine) -> None:
    mine, theirs = _agent(), _agent()
    their = await engine.store("their node", agent_id=theirs)
    my = await engine.store(
        "my node", agent_id=mine, associations=[{"target_id": their.ref, "type": "semantic", "weight": 1.0}]
    )
    with pytest.raises(RecordNotFound):
        await engine.associate(their.ref, agent_id=mine)
    assert (await engine.associate(my.ref, agent_id=mine)).memories == []
    in_project = await engine.store("project node", agent_id=mine, project_id="p1")
    with pytest.raises(RecordNotFound):
        await engine.associate(in_project.ref, agent_id=mine, project_id="p2")
    with pytest.raises(InvalidRequest) as err:
        await engine.associate("ep:" + my.ref[4:], agent_id=mine)
    assert err.value.field == "record_id"


async def test_http_and_the_sdk_model(client: httpx.AsyncClient) -> None:
    types = pytest.importorskip("cerememory.types")
    agent = _agent()
    b = (await client.post("/v1/encode", json={"content": "b", "agent_id": agent})).json()["ref"]
    a = (
        await client.post(
            "/v1/encode",
            json={
                "content": "a",
                "agent_id": agent,
                "associations": [{"target_id": b, "type": "causal", "weight": 0.5}],
            },
        )
    ).json()["ref"]
    # The SDK sends the record id in the body too (bare UUID), with its defaults.
    body = {"agent_id": agent, "record_id": a[4:], "depth": 2, "min_weight": 0.1, "limit": 10}
    answer = await client.post(f"/v1/recall/associate/{a[4:]}", json=body)
    assert answer.status_code == 200, answer.text
    parsed = types.RecallAssociateResponse.model_validate(answer.json())
    assert [str(p) for p in parsed.memories[0].activation_path] == [a[4:], b[4:]]
    assert parsed.memories[0].relevance_score == 0.25
    other = await client.post(f"/v1/recall/associate/{a[4:]}", json={**body, "record_id": b[4:]})
    assert (other.status_code, other.json()["error"]["field"]) == (400, "record_id")
    missing = await client.post(f"/v1/recall/associate/{a[4:]}", json={"agent_id": "nobody"})
    assert (missing.status_code, missing.json()["error"]["field"]) == (404, "record_id")
    deep = await client.post(f"/v1/recall/associate/{a}", json={"agent_id": agent, "depth": 9})
    assert (deep.status_code, deep.json()["error"]["field"]) == (400, "depth")
