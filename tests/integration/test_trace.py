"""The recall trace (``trace_version`` 1) on a real engine: the shared test Redis, Qdrant in-process and
the ONNX embedder, blocks drained after storing so the block arm and its seats take part.

What is checked: every field of the seed's §1.2 table is there with its type; the trace agrees with the
response it describes (the arms with each row's ``match_reason``, the order before the count cut with
the returned rows, the reservation with the held seats, the gate's decisions with fusion's candidates);
it carries no stored text (a hypothesis property over generated stores); and asking for it, or building
it for the server's own use, changes nothing in the answer.
"""

from __future__ import annotations

import itertools
import uuid
from typing import TYPE_CHECKING, Any

import orjson
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

import cpersona
from answers import assert_same_answer
from cpersona import InvalidRequest, Settings
from cpersona.edges.http.app import openapi_document
from cpersona.recall import recaller
from cpersona.recall.policy import load_policies
from cpersona.recall.request import RecallResult, recall_request
from cpersona.recall.trace.coverage import normalize
from traced import trace_json

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator, Sequence

TOP_LEVEL: dict[str, type | tuple[type, ...]] = {
    "trace_version": int,
    "policy": dict,
    "server_version": str,
    "scope": dict,
    "request": dict,
    "config": dict,
    "arms": dict,
    "fusion": list,
    "scoring": dict,
    "gate": dict,
    "autocut": dict,
    "order": dict,
    "reservation": list,
    "stages": list,
    "suspected": list,
    "coverage": dict,
    "timing_ms": dict,
}
VECTOR_ARMS = ("vector_near", "vector_far")
LEXICAL_ARMS = ("episode_fts", "memory_keyword")

NOTES = [
    "The deploy key for the staging cluster rotates every Friday at noon",
    "Bug-218 was fixed in release 2.5.5a1 by widening the retry window",
    "Lunch with Aiko is moved to Thursday because of the offsite",
    "The Redis snapshot runs nightly and keeps seven copies",
    "東京オフィスの会議室は三階にあります",
    "サーバーの設定ファイルは毎週月曜日に更新されます",
    "Issue #354 tracks the flaky vector test on the CI runners",
    "The quarterly report is due on the last business day of March",
    "Aiko prefers green tea over coffee in the afternoon",
    "新しいデータベースの移行は来月に予定されています",
]
EPISODES = [
    "Session about rotating the staging deploy key and the Friday schedule",
    "会議でデータベースの移行計画について話し合った",
]
LONG = (
    "Runbook for the staging cluster. "
    + "Check the dashboards, then the alerts, then the queue depth. " * 12
    + "Finally the deploy key fingerprint must match the vault entry."
)
QUESTIONS = [
    "When does the deploy key rotate?",
    "Which release fixed bug-218?",
    "会議室はどこですか",
    "サーバーの設定ファイル",
    "what does Aiko drink",
    "データベースの移行はいつ",
    "#354",
]


def agent_id() -> str:
    return "a" + uuid.uuid4().hex[:8]


@pytest.fixture(scope="module")
async def shared_engine(open_test_engine: Callable[..., Any]) -> AsyncIterator[cpersona.Engine]:
    """One ONNX engine for the module; each test or example works under its own agent id."""
    async with open_test_engine("tr") as memory:
        yield memory


@pytest.fixture(scope="module")
async def corpus(shared_engine: cpersona.Engine) -> str:
    """A bilingual store with episodes, a long memory and a profile, large enough (pool ≥ 50) that the
    profile row is admitted by the gate."""
    agent = agent_id()
    fillers = [f"Weather log {i}: light rain in the morning, clear skies by noon" for i in range(50)]
    await shared_engine.store_batch(
        [{"content": text, "agent_id": agent} for text in [*NOTES, LONG, *fillers]]
    )
    for summary in EPISODES:
        await shared_engine.archive_episode(summary, agent_id=agent)
    await shared_engine.update_profile(agent, "Works on the staging cluster; drinks green tea")
    await shared_engine.drain_blocks()
    return agent


def walk_refs(trace: dict[str, Any]) -> Iterator[str]:
    for arm in trace["arms"].values():
        yield from (row["ref"] for row in arm)


def returned_refs(result: RecallResult) -> list[str]:
    return ["profile" if row.kind == "profile" else row.ref for row in result.rows]


def seat_rows(result: RecallResult) -> list[str]:
    return [row.ref for row in result.rows if row.match_reason.get("admission") == "reservation"]


def check_shape(trace: dict[str, Any], result: RecallResult) -> None:
    """Every field of the seed's table, with its type, and the nested fields the brief fixes."""
    assert set(TOP_LEVEL) <= set(trace)
    for key, kind in TOP_LEVEL.items():
        assert isinstance(trace[key], kind), key
    assert trace["trace_version"] == 1
    assert trace["policy"] == {"scoring": "fused-gate-v2", "process": "single-pass-v2"}
    assert trace["server_version"] == cpersona.__version__
    assert set(trace["scope"]) == {"agent_id", "project_id", "channel", "source_id"}
    request = trace["request"]
    assert set(request) == {
        "limit",
        "depth",
        "deep",
        "mode",
        "confidence_ordering",
        "prior",
        "episode_penalty",
        "time_cue",
    }
    assert (request["limit"], request["depth"], request["mode"]) == (result.limit, result.depth, result.mode)
    assert request["confidence_ordering"] == "none"
    assert request["time_cue"] is None
    assert set(request["prior"]) == {"far_weight", "age_rate", "age_floor", "age_anchor"}
    assert isinstance(request["episode_penalty"], bool)
    config = trace["config"]
    assert config["embedding_mode"] == "onnx"
    assert isinstance(config["embedding_model"], str)
    assert isinstance(config["scan_window"], int)
    assert config["scan_window"] > 0
    assert isinstance(config["vector_reach"], int)
    assert isinstance(config["vector_far_limit"], int)
    assert config["fused_gate_enabled"] is False  # no calibrated gate was selected
    assert isinstance(config["autocut_enabled"], bool)
    for name, rows in trace["arms"].items():
        assert isinstance(name, str)
        assert [row["rank"] for row in rows] == list(range(len(rows)))
        for row in rows:
            assert set(row) == {"ref", "rank", "raw"}
            assert row["raw"] is None or isinstance(row["raw"], float)
    for entry in trace["fusion"]:
        assert set(entry) == {"ref", "score", "votes"}
        assert entry["ref"].startswith(("mem:", "ep:"))  # the profile is not fused
        assert all(isinstance(v, float) for v in entry["votes"].values())
    assert set(trace["scoring"]) <= {"episode_penalty", "prior"}
    gate = trace["gate"]
    assert {"signal", "threshold", "heuristic_min", "calibrated", "origin", "pool", "decisions"} <= set(gate)
    assert gate["gate_fallback"] is False
    assert gate["origin"] == "heuristic"
    assert gate["calibrated"] is None
    assert gate["threshold"] == gate["heuristic_min"]
    assert isinstance(gate["pool"], int)
    for d in gate["decisions"]:
        assert {"ref", "signal", "score", "threshold", "passed"} <= set(d) <= {*d, "reason"}
        assert ("reason" in d) is (not d["passed"])
    autocut = trace["autocut"]
    assert isinstance(autocut["fired"], bool)
    assert isinstance(autocut["kept"], int)
    assert isinstance(autocut["dropped"], list)
    order = trace["order"]
    assert set(order) == {"before_cut", "limit", "cut_by_count"}
    assert all(set(entry) == {"ref"} for entry in order["before_cut"])
    assert all(set(seat) == {"ref", "kind"} for seat in trace["reservation"])
    assert trace["stages"] == [{"stage": 0, "searched": "all arms", "next": None}]
    assert trace["suspected"] == []
    ledger = trace["coverage"]
    assert ledger["normalization"] == "nfkc-lower"
    assert len(ledger["covered_by"]) == len(ledger["parts"])
    assert ledger["records"] == len(result.rows)
    timing = trace["timing_ms"]
    assert {"retrieve", "fuse", "gate", "count", "seats", "total", "trace", "coverage"} <= set(timing)
    assert all(isinstance(v, float) and v >= 0 for v in timing.values())
    # and it serialises as it is
    assert orjson.loads(orjson.dumps(trace)) == trace


def check_consistent(trace: dict[str, Any], result: RecallResult) -> None:
    """The trace describes the response it came with."""
    arms = {name: {row["ref"]: row for row in rows} for name, rows in trace["arms"].items()}
    fusion = {entry["ref"]: entry for entry in trace["fusion"]}
    for row in result.rows:
        reason = dict(row.match_reason)
        if row.kind == "profile":
            continue
        if reason.get("signal") == "block":
            assert row.ref in arms["block"]
            assert arms["block"][row.ref]["raw"] == pytest.approx(reason["cosine"])
            continue
        if "cosine" in reason:
            found = [arms[n][row.ref]["raw"] for n in VECTOR_ARMS if row.ref in arms.get(n, {})]
            assert found
            assert max(found) == pytest.approx(reason["cosine"])
        elif reason.get("signal") == "rrf":
            assert any(row.ref in arms.get(n, {}) for n in LEXICAL_ARMS)
            assert not any(row.ref in arms.get(n, {}) for n in VECTOR_ARMS)
        # the fused score is the relative one where there is one (informed rows carry both, the rrf
        # for the gate)
        fused = reason.get("rsf", reason.get("rrf"))
        if fused is not None:
            assert fusion[row.ref]["score"] == pytest.approx(fused)
            assert sum(fusion[row.ref]["votes"].values()) == pytest.approx(fused)
            # every vote names an arm whose list holds the row
            assert all(row.ref in arms[name] for name in fusion[row.ref]["votes"])
    # the order before the count cut, cut at limit, is what the response returned outside the seats
    order = trace["order"]
    kept = [entry["ref"] for entry in order["before_cut"][: order["limit"]]]
    seats = seat_rows(result)
    returned = [ref for ref in returned_refs(result) if ref not in seats]
    if result.order == "best_last":
        returned.reverse()
    assert kept == returned
    assert order["cut_by_count"] == [entry["ref"] for entry in order["before_cut"][order["limit"] :]]
    assert [seat["ref"] for seat in trace["reservation"]] == (
        seats[::-1] if result.order == "best_last" else seats
    )
    assert all(seat["kind"] == "block" for seat in trace["reservation"])
    # one decision per fused candidate (and the profile row when there is one); what passed and was not
    # dropped by autocut is the order before the cut
    decisions = trace["gate"]["decisions"]
    decided = [d["ref"] for d in decisions]
    assert len(decided) == len(set(decided))
    assert set(decided) - {"profile"} == set(fusion)
    passed = [d["ref"] for d in decisions if d["passed"]]
    assert [r for r in passed if r not in trace["autocut"]["dropped"]] == [
        e["ref"] for e in order["before_cut"]
    ]
    assert trace["autocut"]["kept"] == len(order["before_cut"])
    # coverage lists refs of returned records only, in response order
    order_of = {ref: i for i, ref in enumerate(returned_refs(result))}
    for refs in trace["coverage"]["covered_by"]:
        assert all(ref in order_of for ref in refs)
        assert [order_of[ref] for ref in refs] == sorted(order_of[ref] for ref in refs)


# ------------------------------------------------------------------------------------------- shape


@pytest.mark.parametrize("question", QUESTIONS)
async def test_trace_shape_and_consistency(
    shared_engine: cpersona.Engine, corpus: str, question: str
) -> None:
    result = await shared_engine.recall(question, agent_id=corpus, trace=True)
    trace = result.model_dump(mode="json")["trace"]
    assert trace == trace_json(result)
    check_shape(trace, result)
    check_consistent(trace, result)
    assert trace["scope"] == {"agent_id": corpus, "project_id": None, "channel": None, "source_id": ""}
    # what a fused arm handed fusion is cut to the depth
    for name in (*VECTOR_ARMS, *LEXICAL_ARMS):
        assert len(trace["arms"].get(name, [])) <= result.depth


@pytest.mark.parametrize(
    "fields",
    [
        {"mode": "rrf"},
        {"mode": "rsf"},
        {"mode": "informed"},
        {"mode": "cascade"},
        {"order": "best_last"},
        {"deep": True, "limit": 3},
        {"limit": 30},
        {"limit": 0},
    ],
)
async def test_trace_under_each_mode_and_order(
    shared_engine: cpersona.Engine, corpus: str, fields: dict[str, Any]
) -> None:
    result = await shared_engine.recall(
        "deploy key rotation on Friday", agent_id=corpus, trace=True, **fields
    )
    assert result.trace is not None
    trace = trace_json(result)
    check_shape(trace, result)
    check_consistent(trace, result)
    mode = fields.get("mode", shared_engine.settings.recall_mode)
    if mode == "rsf":
        assert trace["gate"]["signal"] == "rsf"
        assert all(d["signal"] in ("rsf", "profile") for d in trace["gate"]["decisions"])
    if mode == "informed":  # gated as under rrf
        assert trace["gate"]["signal"] == "cosine"
        assert all(d["signal"] in ("cosine", "rrf", "profile") for d in trace["gate"]["decisions"])
    # the per-list weights are there under informed fusion only, one per list fusion read (a limit of 0
    # fuses nothing)
    if mode == "informed" and result.depth > 0:
        fused = {name for name in (*VECTOR_ARMS, *LEXICAL_ARMS) if trace["arms"].get(name)}
        assert set(trace["fusion_weights"]) == fused
        assert all(0.0 <= w["weight"] <= 1.0 for w in trace["fusion_weights"].values())
    else:
        assert "fusion_weights" not in trace
    if mode == "cascade":
        assert all(entry["score"] is None for entry in trace["fusion"])
    if fields.get("deep"):
        assert trace["request"]["deep"] is True
        shallow = await shared_engine.recall("deploy key rotation on Friday", agent_id=corpus, trace=True)
        assert shallow.trace is not None
        # the minimum is reported as applied: deep halves it
        assert trace["gate"]["heuristic_min"] == pytest.approx(
            trace_json(shallow)["gate"]["heuristic_min"] / 2
        )


async def test_the_profile_row_is_named_profile(shared_engine: cpersona.Engine, corpus: str) -> None:
    # a wide limit returns every admitted row, the profile (admitted at pool ≥ 50, sorted last) included
    result = await shared_engine.recall("staging cluster", agent_id=corpus, trace=True, limit=100)
    assert f"profile:{corpus}" in [row.ref for row in result.rows]
    assert result.trace is not None
    trace = trace_json(result)
    assert "profile" in [d["ref"] for d in trace["gate"]["decisions"]]
    assert trace["order"]["before_cut"][-1] == {"ref": "profile"}
    assert "profile" not in {e["ref"] for e in trace["fusion"]}
    assert not any(ref.startswith("profile") for ref in walk_refs(trace))
    # the engine's internal profile key (which names the agent) never shows
    assert f"profile:{corpus}" not in orjson.dumps(trace).decode()
    # the profile's stored text is a record the ledger reads: "staging" and "cluster" are in it
    assert "profile" in trace["coverage"]["covered_by"][0]


async def test_blank_query_trace(shared_engine: cpersona.Engine, corpus: str) -> None:
    result = await shared_engine.recall("", agent_id=corpus, trace=True, limit=5)
    assert result.trace is not None
    check_shape(trace_json(result), result)
    check_consistent(trace_json(result), result)
    assert trace_json(result)["coverage"]["parts"] == []


async def test_the_block_seats_are_in_the_reservation(shared_engine: cpersona.Engine, corpus: str) -> None:
    seen_seat = False
    for question in QUESTIONS:
        result = await shared_engine.recall(question, agent_id=corpus, trace=True, limit=2)
        assert result.trace is not None
        seats = seat_rows(result)
        assert [s["ref"] for s in trace_json(result)["reservation"]] == seats
        seen_seat = seen_seat or bool(seats)
    assert seen_seat  # the corpus is built so that some question reaches a record only by its block


# ------------------------------------------------------------------------------------------ no effect


@pytest.mark.parametrize("question", [*QUESTIONS, ""])
async def test_no_trace_no_key_and_the_same_answer(
    shared_engine: cpersona.Engine, corpus: str, question: str
) -> None:
    plain = await shared_engine.recall(question, agent_id=corpus)
    assert plain.trace is None
    assert not plain.trace_requested
    assert "trace" not in plain.model_dump(mode="json")
    traced = await shared_engine.recall(question, agent_id=corpus, trace=True)
    body = traced.model_dump(mode="json")
    assert isinstance(body.pop("trace"), dict)
    assert_same_answer(body, plain)


async def test_want_trace_builds_it_without_changing_the_response(
    shared_engine: cpersona.Engine, corpus: str
) -> None:
    def request(**fields: Any) -> Any:
        body = {"agent_id": corpus, "query": "When does the deploy key rotate?", **fields}
        return recall_request(body, shared_engine.settings, shared_engine.policies, max_limit=100)

    plain = await shared_engine.backends.recaller.recall(request())
    sampled = await shared_engine.backends.recaller.recall(request(trace=False), want_trace=True)
    assert sampled.trace is not None
    assert trace_json(sampled)["trace_version"] == 1
    check_shape(trace_json(sampled), sampled)
    assert "trace" not in sampled.model_dump(mode="json")
    assert_same_answer(sampled, plain)
    # the trace's cost is reported with the recall's own times
    assert {"trace", "coverage"} <= set(sampled.timing_ms)
    # and a server may decline to build a requested trace: the response then says null
    declined = await shared_engine.backends.recaller.recall(request(trace=True), want_trace=False)
    assert declined.trace is None
    assert declined.model_dump(mode="json")["trace"] is None


def test_trace_request_field() -> None:
    policies = load_policies()
    base = {"agent_id": "a", "query": "x"}
    assert recall_request(base, Settings(), policies, max_limit=100).trace is False
    assert recall_request({**base, "trace": True}, Settings(), policies, max_limit=100).trace is True
    for bad in ("yes", 1, None):
        with pytest.raises(InvalidRequest) as err:
            recall_request({**base, "trace": bad}, Settings(), policies, max_limit=100)
        assert err.value.field == "trace"
    schemas = openapi_document()["components"]["schemas"]
    assert schemas["RecallRequest"]["properties"]["trace"]["type"] == "boolean"
    assert "trace" in schemas["RecallResult"]["properties"]


# -------------------------------------------------------------------------------------------- no text

# Words avoid the letters a-f, so no 8-character window of a stored text can be part of a hex id the
# trace legitimately carries (refs are ``mem:<uuid>``); the CJK runs cannot occur in a trace at all.
word_st = st.text(alphabet="ghijklmnopqrstuvwxyz", min_size=2, max_size=12)
cjk_st = st.text(
    alphabet="東京会議設定変更移行予定計画日本語検索記憶のはにをがですカタナサーバデータ",
    min_size=2,
    max_size=10,
)
content_st = (
    st.lists(st.one_of(word_st, cjk_st), min_size=2, max_size=14)
    .map(" ".join)
    .filter(lambda text: len(text) >= 8)
)
_run = itertools.count()


def leaked(serialised: str, contents: Sequence[str]) -> list[str]:
    """Every 8-character window of every stored text that occurs in the serialised trace."""
    found = []
    for text in contents:
        for variant in {text, normalize(text)}:
            for i in range(len(variant) - 7):
                window = variant[i : i + 8]
                if window in serialised:
                    found.append(window)
    return found


def test_the_leak_check_would_see_text() -> None:
    trace = {"arms": {"vector_near": [{"ref": "mem:1", "rank": 0, "raw": 0.5}]}, "note": "xyz ghost words"}
    assert leaked(orjson.dumps(trace).decode(), ["ghost words here"]) == [
        "ghost wo",
        "host wor",
        "ost word",
        "st words",
    ]
    assert leaked(orjson.dumps(trace).decode(), ["nothing like it"]) == []


@hsettings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    memories=st.lists(content_st, min_size=1, max_size=6),
    episodes=st.lists(content_st, max_size=2),
    profile=st.one_of(st.none(), content_st),
    data=st.data(),
)
async def test_a_trace_carries_no_stored_text(
    shared_engine: cpersona.Engine,
    memories: list[str],
    episodes: list[str],
    profile: str | None,
    data: st.DataObject,
) -> None:
    agent = f"x{next(_run)}{uuid.uuid4().hex[:6]}"
    await shared_engine.store_batch([{"content": text, "agent_id": agent} for text in memories])
    for summary in episodes:
        await shared_engine.archive_episode(summary, agent_id=agent)
    if profile is not None:
        await shared_engine.update_profile(agent, profile)
    await shared_engine.drain_blocks()
    contents = [*memories, *episodes, *([profile] if profile else [])]
    # The question shares words with the store: a stretch of one stored text, and some other words.
    source = data.draw(st.sampled_from(contents))
    start = data.draw(st.integers(0, max(0, len(source) - 8)))
    question = source[start : start + data.draw(st.integers(8, 40))] + " " + data.draw(content_st)
    for fields in ({}, {"deep": True, "limit": 50}, {"mode": "rsf"}, {"mode": "cascade"}):
        result = await shared_engine.recall(question, agent_id=agent, trace=True, **fields)
        assert result.trace is not None
        serialised = orjson.dumps(trace_json(result)).decode()
        assert leaked(serialised, contents) == []
        # the ledger still says which parts the returned records hold
        ledger = trace_json(result)["coverage"]
        assert "error" not in ledger
        assert ledger["records"] == len(result.rows)
        assert len(ledger["covered_by"]) == len(ledger["parts"]) >= 1


async def test_a_trace_that_cannot_be_built_never_fails_the_recall(
    shared_engine: cpersona.Engine, corpus: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = await shared_engine.recall("deploy key", agent_id=corpus)

    def broken(*args: object, **kwargs: object) -> dict[str, Any]:
        raise KeyError("injected")

    monkeypatch.setattr(recaller, "build_trace", broken)
    traced = await shared_engine.recall("deploy key", agent_id=corpus, trace=True)
    body = traced.model_dump(mode="json")
    assert body.pop("trace") == {"trace_version": 1, "error": "KeyError"}
    assert_same_answer(body, plain)
