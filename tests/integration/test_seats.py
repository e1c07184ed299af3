"""The held seats and what a recall says about its rows (issue 13, item 13).

A recall returns up to ``limit`` ranked rows plus at most 2 block and 3 cue seats; a seat takes a record
only if it passes the gate's floor for the score its arm found it by, so an empty seat stays empty; the
response says ``limit``, ``count`` and ``seated``; every row has a ``match_reason``, the profile row
included, and the profile row's ref ``profile:<agent_id>`` is answered, not left dangling.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpersona.edges.http.app import create_app, openapi_document
from cpersona.errors import InvalidRequest
from cpersona.model.candidates import ArmResult, ArmRow
from cpersona.recall.policy import load_policies
from cpersona.recall.request import RecallResult
from cpersona.recall.stages.chain import CueFound, RecallPlan, Retrieved, build_chain
from cpersona.recall.stages.fusion import Candidate, kind_of
from cpersona.recall.stages.gate import decide, gate_config
from serving import environment_without_settings
from traced import trace_json

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractAsyncContextManager
    from pathlib import Path

    import httpx
    from starlette.applications import Starlette

    import cpersona
    from cpersona import Settings
    from cpersona.model.time_cue import Confidence
    from cpersona.recall.stages.chain import Seated

POLICIES = load_policies()
# The policies with the seat floor; single-pass-v0 and cued-v0.3 are the same without it.
PLAIN = POLICIES["single-pass-v1"]
CUED = POLICIES["cued-v0.4"]
MAX_BLOCK_SEATS = 2
MAX_CUE_SEATS = 3


def stage_plan(
    *, limit: int, pool: int, calibrated: float | None = None, policy: Any = PLAIN, deep: bool = False
) -> RecallPlan:
    gate = gate_config(
        pool, policy.gate, deep=deep, calibrated=calibrated, rrf_k=policy.fusion.rrf_k, blank_query=False
    )
    return RecallPlan(
        policy=policy,
        mode="rrf",
        limit=limit,
        depth=limit,
        gate=gate,
        blank_query=False,
        vector_threshold=0.3,
    )


def ranked(name: Any, *pairs: tuple[str, float]) -> ArmResult:
    return ArmResult.ranked(name, list(pairs))


def blocks(*pairs: tuple[str, float]) -> ArmResult:
    return ArmResult(
        "block", tuple(ArmRow(ref, rank, raw, block_index=0) for rank, (ref, raw) in enumerate(pairs))
    )


def retrieved(block: ArmResult, cue: CueFound | None = None) -> Retrieved:
    return Retrieved(
        arms={
            "vector_near": ranked("vector_near", ("mem:1", 0.62), ("mem:2", 0.41)),
            "memory_keyword": ranked("memory_keyword", ("mem:2", 7.0)),
            "block": block,
        },
        profile_ref=None,
        single_arm_refs=frozenset(),
        created_at={},
        timestamps={},
        episode_boundary=None,
        prior_anchor=0.0,
        cue=cue,
    )


def run(data: Retrieved, plan: RecallPlan) -> Seated:
    final: Seated = build_chain(plan.policy).run(data, plan).final
    return final


# ------------------------------------------------------------------------------------- the seat floor


def test_a_block_seat_needs_the_cosine_an_ordinary_vector_row_needs() -> None:
    # Pool 500: the gate's cosine minimum is 0.2. mem:9's best block (0.06) is what "peanuts allergy"
    # scored against a question about an office move; mem:8 clears the floor, mem:7 does not.
    data = retrieved(blocks(("mem:9", 0.06), ("mem:8", 0.25), ("mem:7", 0.19)))
    final = run(data, stage_plan(limit=1, pool=500))
    assert [(s.ref, s.kind) for s in final.seats] == [("mem:8", "block")]
    # No candidate above the floor: the seats stay empty.
    assert run(retrieved(blocks(("mem:9", 0.06), ("mem:7", 0.19))), stage_plan(limit=1, pool=500)).seats == ()
    # A calibrated gate is the floor when the agent has one (halved by deep, like the gate).
    assert run(data, stage_plan(limit=1, pool=500, calibrated=0.3)).seats == ()
    deep = run(data, stage_plan(limit=1, pool=500, calibrated=0.3, deep=True))
    assert [s.ref for s in deep.seats] == ["mem:8", "mem:7"]


def test_the_policies_before_the_floor_seat_any_block_row_so_their_recalls_replay() -> None:
    data = retrieved(blocks(("mem:9", 0.06), ("mem:8", 0.25), ("mem:7", 0.19)))
    final = run(data, stage_plan(limit=1, pool=500, policy=POLICIES["single-pass-v0"]))
    assert [(s.ref, s.kind) for s in final.seats] == [("mem:9", "block"), ("mem:8", "block")]


def cue_rows(*rows: tuple[str, float, float | None]) -> tuple[ArmRow, ...]:
    return tuple(ArmRow(ref, rank, vote, cosine=cos) for rank, (ref, vote, cos) in enumerate(rows))


def test_a_cue_seat_for_a_record_no_arm_reached_needs_the_gates_floor() -> None:
    cue = CueFound(
        rows=cue_rows(
            ("mem:30", 1 / 61, 0.12),  # the vector half found it below the cosine floor (0.2)
            ("mem:31", 1 / 62, None),  # keyword half only, vote 1/62 >= 0.2 * 3 / 61
            ("mem:32", 1 / 63, 0.35),  # above the floor
            ("mem:33", 1 / 200, None),  # keyword only, too far down its list
            ("mem:2", 1 / 64, 0.1),  # returned already
        ),
        confidence="sure",
        period=None,
        lift=3,
        seats=3,
        seat_cut_rows=True,
    )
    final = run(retrieved(blocks(), cue), stage_plan(limit=2, pool=500, policy=CUED))
    assert [(s.ref, s.kind) for s in final.seats] == [("mem:31", "cue"), ("mem:32", "cue")]


def test_a_cue_seat_may_still_take_a_row_the_count_cut() -> None:
    # mem:1 passed the gate and was cut by limit 1 (mem:2, on two lists, ranks first): the seed lets a
    # cue seat bring it back, whatever the cosine the cue arm's own vector half saw.
    cue = CueFound(
        rows=cue_rows(("mem:1", 1 / 61, 0.05)),
        confidence="sure",
        period=None,
        lift=3,
        seats=3,
        seat_cut_rows=True,
    )
    final = run(retrieved(blocks(), cue), stage_plan(limit=1, pool=500, policy=CUED))
    assert [r.ref for r in final.rows] == ["mem:2"]
    assert [s.ref for s in final.seats] == ["mem:1"]


refs = st.sampled_from([f"mem:{i}" for i in range(12)] + [f"ep:{i}" for i in range(4)])
scores = st.floats(min_value=-0.2, max_value=1.0, allow_nan=False)


@st.composite
def recalls(draw: st.DrawFn) -> tuple[Retrieved, RecallPlan]:
    block_pairs = draw(st.lists(st.tuples(refs, scores), max_size=8, unique_by=lambda p: p[0]))
    cue_triples = draw(
        st.lists(
            st.tuples(refs, st.floats(min_value=0.0, max_value=0.04), st.none() | scores),
            max_size=8,
            unique_by=lambda t: t[0],
        )
    )
    confidence: Confidence = draw(st.sampled_from(["sure", "likely", "vague"]))
    cue = CueFound(
        rows=cue_rows(*cue_triples),
        confidence=confidence,
        period=None,
        lift=CUED.cue.lift[confidence] if CUED.cue else 0,
        seats=CUED.cue.seats[confidence] if CUED.cue else 0,
        seat_cut_rows=True,
    )
    near = draw(st.lists(st.tuples(refs, scores), max_size=8, unique_by=lambda p: p[0]))
    data = dataclasses.replace(
        retrieved(blocks(*block_pairs), cue if cue_triples else None),
        arms={"vector_near": ranked("vector_near", *near), "block": blocks(*block_pairs)},
    )
    plan = stage_plan(
        limit=draw(st.integers(min_value=0, max_value=6)),
        pool=draw(st.integers(min_value=0, max_value=3000)),
        calibrated=draw(st.none() | st.floats(min_value=0.05, max_value=0.6)),
        deep=draw(st.booleans()),
        policy=CUED,
    )
    return data, plan


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recalls())
def test_no_seat_holds_a_record_below_its_arms_floor(case: tuple[Retrieved, RecallPlan]) -> None:
    data, plan = case
    final = run(data, plan)
    reached = {row.ref for row in data.arms["vector_near"].rows}
    cut = set(final.source.cut_by_count)
    for seat in final.seats:
        if seat.kind == "block":
            assert seat.row.raw is not None
            candidate = Candidate(ref=seat.ref, kind=kind_of(seat.ref), cosine=seat.row.raw)
        elif seat.ref in reached:
            assert seat.ref in cut  # admitted by the gate itself, then cut by the count
            continue
        elif seat.row.cosine is not None:
            candidate = Candidate(ref=seat.ref, kind=kind_of(seat.ref), cosine=seat.row.cosine)
        else:
            candidate = Candidate(ref=seat.ref, kind=kind_of(seat.ref), rrf=seat.row.raw)
        assert decide(candidate, plan.gate, plan.policy.gate).passed, seat
    kinds = [s.kind for s in final.seats]
    assert kinds.count("block") <= MAX_BLOCK_SEATS
    assert kinds.count("cue") <= MAX_CUE_SEATS
    assert len(final.rows) + len(final.seats) <= plan.limit + MAX_BLOCK_SEATS + MAX_CUE_SEATS
    assert len({s.ref for s in final.seats} | {r.ref for r in final.rows}) == len(final.seats) + len(
        final.rows
    )


# ---------------------------------------------------------------------------------- through the engine


OFFICE = [
    "The office moves to the fourth floor of the Lindqvist building in March.",
    "Movers pack the office desks on the last Friday of February.",
    "Tom has a peanuts allergy and carries an epinephrine pen.",
    "The cat sleeps on the printer when the heating is on.",
]


async def test_limit_one_returns_one_ranked_row_and_says_how_many_seats(
    vector_engine: cpersona.Engine,
) -> None:
    for text in OFFICE:
        await vector_engine.store(text, agent_id="a")
    await vector_engine.drain_blocks()
    result = await vector_engine.recall(
        "When does the office move to the new building?", agent_id="a", limit=1
    )
    seated = [row for row in result.rows if row.match_reason.get("admission") == "reservation"]
    assert len(result.rows) - len(seated) == 1
    assert (result.limit, result.count, result.seated) == (1, len(result.rows), len(seated))
    # One block seat: the movers' record clears the gate's cosine floor; the cat (its block at about 0.08)
    # and the peanuts allergy do not, and took the second seat before the floor.
    assert [row.content for row in seated] == [OFFICE[1]]
    gated = result.final.source.source
    floors = {d.threshold for d in gated.decisions if d.signal == "cosine" and d.threshold is not None}
    for row in seated:
        assert row.match_reason["cosine"] >= min(floors), row
    body = result.model_dump(mode="json")
    assert (body["limit"], body["count"], body["seated"]) == (1, len(body["rows"]), len(seated))
    RecallResult.model_validate(body)


async def test_the_trace_lists_the_same_seats_as_the_response(vector_engine: cpersona.Engine) -> None:
    for text in OFFICE:
        await vector_engine.store(text, agent_id="t")
    await vector_engine.drain_blocks()
    result = await vector_engine.recall("When does the office move?", agent_id="t", limit=1, trace=True)
    assert result.trace is not None
    seats = [row.ref for row in result.rows if row.seated]
    assert [entry["ref"] for entry in trace_json(result)["reservation"]] == seats
    assert {entry["kind"] for entry in trace_json(result)["reservation"]} <= {"block"}
    assert result.seated == len(seats) <= MAX_BLOCK_SEATS


async def test_every_row_says_why_it_is_there(vector_engine: cpersona.Engine) -> None:
    await vector_engine.store_batch(
        [{"content": f"garden note {i}: the tomatoes need water", "agent_id": "g"} for i in range(50)]
    )
    await vector_engine.update_profile("g", "likes tomatoes")
    await vector_engine.drain_blocks()
    for query, fields in (
        ("tomatoes", {}),
        ("tomatoes", {"mode": "cascade"}),
        ("", {}),
        ("   ", {"limit": 3}),
    ):
        result = await vector_engine.recall(query, agent_id="g", **fields)
        assert result.rows, (query, fields)
        for row in result.rows:
            assert row.match_reason.get("signal"), (query, fields, row)
            assert row.model_dump(mode="json")["match_reason"] == dict(row.match_reason)
    blank = await vector_engine.recall("", agent_id="g")
    assert {row.match_reason["signal"] for row in blank.rows} == {"recency", "profile"}


async def test_the_profile_row_has_a_ref_that_answers(vector_engine: cpersona.Engine) -> None:
    await vector_engine.store_batch(
        [{"content": f"note {i} about the deploy", "agent_id": "p"} for i in range(50)]
    )
    await vector_engine.update_profile("p", "terse; prefers YAML")
    result = await vector_engine.recall("deploy", agent_id="p", limit=100)
    [profile] = [row for row in result.rows if row.kind == "profile"]
    assert profile.ref == "profile:p"
    assert profile.match_reason == {"signal": "profile"}
    assert profile.model_dump(mode="json")["ref"] == "profile:p"
    # Copied into a get, the ref is answered with where the profile is read, not a generic refusal.
    with pytest.raises(InvalidRequest) as err:
        await vector_engine.get(profile.ref, agent_id="p")
    assert err.value.field == "ref"
    assert "get_profile" in str(err.value)
    assert "/v1/profile/" in str(err.value)
    stored = await vector_engine.get_profile("p")
    assert stored is not None
    assert stored.content == "terse; prefers YAML"


# ------------------------------------------------------------------------------------------- over HTTP


def test_the_openapi_document_has_limit_count_and_seated() -> None:
    schema = openapi_document()["components"]["schemas"]["RecallResult"]
    assert {"limit", "count", "seated"} <= set(schema["required"])
    assert all(schema["properties"][name]["type"] == "integer" for name in ("limit", "count", "seated"))
    row = openapi_document()["components"]["schemas"]["RecallRow"]
    assert {"ref", "match_reason"} <= set(row["required"])


async def test_http_recall_says_limit_count_seated_and_the_profile_ref_is_answered(
    settings: Settings,
    redis: object,
    serve_asgi: Callable[[Starlette], AbstractAsyncContextManager[httpx.AsyncClient]],
) -> None:
    app = create_app(settings.with_(qdrant_url=":memory:", embedding_mode="none"), background=False)
    async with serve_asgi(app) as client:
        records = [{"content": f"note {i} about the deploy", "agent_id": "h"} for i in range(50)]
        assert (await client.post("/v1/encode/batch", json={"records": records})).status_code == 200
        assert (await client.put("/v1/profile/h", json={"profile": "terse"})).status_code == 200
        answer = await client.post("/v1/recall/query", json={"agent_id": "h", "query": "deploy", "limit": 2})
        body = answer.json()
        RecallResult.model_validate(body)
        assert (body["limit"], body["count"], body["seated"]) == (2, len(body["rows"]), 0)
        default = (await client.post("/v1/recall/query", json={"agent_id": "h", "query": ""})).json()
        assert default["limit"] == PLAIN.limit.default
        assert all(row["match_reason"]["signal"] for row in default["rows"])
        [profile] = [row for row in default["rows"] if row["kind"] == "profile"]
        assert profile["ref"] == "profile:h"
        got = await client.get("/v1/records/profile:h", params={"agent_id": "h"})
        assert got.status_code == 400, got.text
        error = got.json()["error"]
        assert (error["code"], error["field"]) == ("VALIDATION_ERROR", "ref")
        assert "/v1/profile/" in error["message"]


# -------------------------------------------------------------------------------------------- the CLI


def test_the_cli_says_limit_and_seated(
    redis_url: str, key_prefix: str, tmp_path: Path, redis: object
) -> None:
    env = {
        **environment_without_settings(),
        "CPERSONA_REDIS_URL": redis_url,
        "CPERSONA_KEY_PREFIX": key_prefix,
        "CPERSONA_DATA_DIR": str(tmp_path / "data"),
        "CPERSONA_QDRANT_URL": ":memory:",
        "CPERSONA_EMBEDDING_MODE": "none",
    }

    def cli(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "cpersona", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    for text in ("the boiler is serviced in May", "the boiler needs a new valve"):
        cli("remember", text, "--agent", "c")
    shown = cli("recall", "boiler", "--agent", "c", "--limit", "1")
    assert shown.splitlines()[0].endswith("; limit 1, 0 seated"), shown
    body = orjson.loads(cli("recall", "boiler", "--agent", "c", "--limit", "1", "--json"))
    assert (body["limit"], body["count"], body["seated"]) == (1, 1, 0)
