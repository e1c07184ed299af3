"""reconstruct's trace and its time cue, on the real Redis (the no-text property also on the real Qdrant
and ONNX embedder): the audit's sections agree with the response they describe, the coverage ledger is
over the records the items cite, the trace carries no stored text, one message per call goes to the trace
channel and ``trace tail`` tells it; a time cue reaches the recall with the recall's invariants."""

from __future__ import annotations

import datetime
import itertools
import time
import uuid
from typing import TYPE_CHECKING, Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cpersona
from answers import assert_same_answer
from cpersona import ReconstructResult, Settings
from cpersona.edges.cli.trace_render import render_trace
from cpersona.model.trace import ReconstructTrace
from cpersona.recall.trace.coverage import coverage
from test_publisher import Listener
from test_trace import content_st, leaked
from traced import recall_trace, trace_json

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from pathlib import Path

_n = itertools.count()
DAY = 86_400.0
NOW = time.time()
_PROPS = settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
async def onnx_engine(open_test_engine: Callable[..., Any]) -> AsyncIterator[cpersona.Engine]:
    async with open_test_engine("rt") as memory:
        yield memory


def agent() -> str:
    return f"t{next(_n)}-{uuid.uuid4().hex[:6]}"


def day(days_ago: float) -> str:
    moment = datetime.datetime.fromtimestamp(NOW - days_ago * DAY, datetime.UTC)
    return moment.date().isoformat()


async def burst(engine: cpersona.Engine, who: str, *, repeat: int = 1) -> dict[str, str]:
    """Two bursts of one source (adjacent within each) and a lone row of another; refs by text."""
    rows = [
        ("the harbour crane broke on Monday", 0.0, "u1"),
        ("the crane was fixed by Tuesday noon", 30.0, "u1"),
        ("the harbour pilot boat needs paint", 5_000.0, "u1"),
        ("the boat paint is ordered from Oslo", 5_020.0, "u1"),
        ("lunch at the harbour cafe was cold", 90_000.0, "u2"),
    ]
    refs = {}
    for line, t, src in rows:
        text = " ".join([line] * repeat)
        got = await engine.store(
            text, agent_id=who, timestamp=1_700_000_000.0 + t, source={"type": "User", "id": src}
        )
        refs[text] = got.ref
    return refs


def cited(result: ReconstructResult) -> list[str]:
    out: list[str] = []
    for item in result.items:
        out.extend(c.ref for c in item.claims if c.ref not in out)
    return out


# ------------------------------------------------------------------------------------------ the audit


async def test_the_trace_is_the_whole_audit_of_the_response(onnx_engine: cpersona.Engine) -> None:
    engine = onnx_engine
    who = agent()
    refs = await burst(engine, who)
    texts = {ref: text for text, ref in refs.items()}
    result = await engine.reconstruct("harbour crane boat", agent_id=who, count=1, trace=True)
    trace = trace_json(result)
    assert trace is not None
    assert trace["kind"] == "reconstruct"
    assert trace["recall"]["trace_version"] == 1
    # candidate_refs: the recall's rows, ranked 0..n-1.
    pool = [c["ref"] for c in trace["candidate_refs"]]
    assert [c["rank"] for c in trace["candidate_refs"]] == list(range(len(pool)))
    # clusters: every candidate once; each joined member names its key; the items' clusters their head.
    members = [m["ref"] for c in trace["clusters"] for m in c["members"]]
    assert sorted(members) == sorted(pool)
    for c in trace["clusters"]:
        assert [m["ref"] for m in c["members"]] == c["refs"]
        assert ("why" in c) == (len(c["refs"]) > 1)
        assert all("why" in m for m in c["members"][1:])
        assert ("item" in c) != bool(c.get("past_window"))
    heads = {c["item"]: c["head"] for c in trace["clusters"] if "item" in c}
    assert [heads[n] for n in range(len(result.items))] == [i.head_ref for i in result.items]
    assert sum(1 for c in trace["clusters"] if c.get("past_window")) >= 1  # count=1 left one out
    joined = {c["why"] for c in trace["clusters"] if "why" in c}
    assert "cluster:adjacent" in joined
    # items: what the response returned, with what each cites.
    assert [(i["head_ref"], i["cites"]) for i in trace["items"]] == [
        (i.head_ref, [c.ref for c in i.claims]) for i in result.items
    ]
    assert trace["cues"] == {"entities": [], "terms": []}
    # The coverage ledger is over the records the items cite, from their full stored text.
    ledger = coverage("harbour crane boat", [(r, texts[r]) for r in cited(result)])
    assert trace["coverage"] == ledger.model_dump(mode="json")
    assert trace["coverage"]["records"] == len(cited(result))
    # Untraced, none of it.
    assert (await engine.reconstruct("harbour crane boat", agent_id=who, count=1)).trace is None


async def test_the_sequence_shows_where_the_budget_stopped(engine: cpersona.Engine) -> None:
    who = agent()
    await burst(engine, who, repeat=12)  # about 400 characters a record: five heads pass one head cap
    wide = await engine.reconstruct("", agent_id=who, trace=True)
    assert wide.trace is not None
    seq = trace_json(wide)["sequence"]
    assert seq["name"] == "items"
    assert seq["cut"] is False
    assert seq["stopped_at"] is None
    assert all(p["admitted"] for p in seq["pieces"])
    heads = [p for p in seq["pieces"] if p["piece"] == "head"]
    assert [p["ref"] for p in heads] == [i.head_ref for i in wide.items]
    # Every head first, in item order, then the excerpts.
    kinds = [p["piece"] for p in seq["pieces"]]
    assert kinds == sorted(kinds, key=lambda k: k != "head")
    assert seq["used"] == sum(p["chars"] for p in seq["pieces"])
    # The least budget (one head cap): the sequence is the same, cut where it stopped.
    narrow = await engine.reconstruct("", agent_id=who, budget=1, trace=True)
    assert narrow.trace is not None
    cut = trace_json(narrow)["sequence"]
    assert cut["cut"] is True
    assert cut["stop"] == "budget"
    assert [(p["ref"], p["piece"]) for p in cut["pieces"]] == [(p["ref"], p["piece"]) for p in seq["pieces"]]
    stop = cut["stopped_at"]
    assert [p["admitted"] for p in cut["pieces"]] == [n < stop for n in range(len(cut["pieces"]))]
    assert stop == len(narrow.items) + sum(len(i.excerpts or ()) for i in narrow.items)
    assert cut["used"] == sum(p["chars"] for p in cut["pieces"][:stop]) <= cut["budget"]
    assert cut["pieces"][stop]["chars"] + cut["used"] > cut["budget"]


@pytest.mark.parametrize("sequence", ["evidence", "whole"])
async def test_the_passage_sequences_show_where_the_budget_stopped(
    redis: object, redis_url: str, key_prefix: str, tmp_path: Path, sequence: str
) -> None:
    settings_ = Settings(
        data_dir=tmp_path,
        redis_url=redis_url,
        key_prefix=key_prefix,
        embedding_mode="none",
        reconstruct_sequence=sequence,
    )
    async with cpersona.open(settings_, background=False) as memory:
        who = agent()
        await burst(memory, who, repeat=12)
        result = await memory.reconstruct("", agent_id=who, budget=1, trace=True)
        wide = await memory.reconstruct("", agent_id=who, budget=20_000, trace=True)
    assert result.trace is not None
    assert wide.trace is not None
    seq = trace_json(result)["sequence"]
    assert seq["name"] == sequence
    assert seq["cut"] is True
    # The whole sequence is listed, admitted or not; the budget stopped it at its first piece left out.
    pieces, stop = seq["pieces"], seq["stopped_at"]
    assert seq["stop"] == "budget"
    assert 0 < stop < len(pieces)
    assert [p["admitted"] for p in pieces] == [n < stop for n in range(len(pieces))]
    assert seq["used"] == sum(p["chars"] for p in pieces[:stop]) == result.used_budget
    assert pieces[stop]["chars"] + seq["used"] > seq["budget"]
    shown = [
        (ref, list(span))
        for item in result.items
        for ref, span in [
            (item.head_ref, item.span or (0, len(item.content))),
            *((e.ref, e.span) for e in item.excerpts or ()),
        ]
    ]
    assert sorted((p["ref"], p["span"]) for p in pieces[:stop]) == sorted(shown)
    # A piece's item is its place in the item order, as the clusters give it.
    heads = {c["item"]: c["head"] for c in trace_json(result)["clusters"] if "item" in c}
    assert all(heads[p["item"]] == p["ref"] for p in pieces)
    # The sequence does not depend on the budget: a wide one lists the same pieces, all admitted.
    whole = trace_json(wide)["sequence"]
    assert [(p["item"], p["ref"], p["span"]) for p in whole["pieces"]] == [
        (p["item"], p["ref"], p["span"]) for p in pieces
    ]
    assert all(p["admitted"] for p in whole["pieces"])
    assert (whole["stopped_at"], whole["stop"]) == (None, None)


async def test_the_sequence_says_when_the_count_ended_the_answer(engine: cpersona.Engine) -> None:
    who = agent()
    await burst(engine, who)  # three clusters: two bursts and a lone row
    one = await engine.reconstruct("", agent_id=who, count=1, trace=True)
    assert one.trace is not None
    seq = trace_json(one)["sequence"]
    # Everything the window held fitted; what ended the answer is the count, not the budget.
    assert (seq["cut"], seq["stopped_at"], seq["stop"]) == (False, None, "count")
    assert all(p["admitted"] for p in seq["pieces"])
    assert sum(1 for c in trace_json(one)["clusters"] if c.get("past_window")) == 2
    every = await engine.reconstruct("", agent_id=who, trace=True)
    assert every.trace is not None
    assert (trace_json(every)["sequence"]["stopped_at"], trace_json(every)["sequence"]["stop"]) == (
        None,
        None,
    )


async def test_count_zero_with_a_trace_returns_the_audit_of_its_recall(engine: cpersona.Engine) -> None:
    who = agent()
    refs = await burst(engine, who)
    plain = await engine.reconstruct("harbour crane boat", agent_id=who, count=0)
    assert plain.trace is None
    traced = await engine.reconstruct("harbour crane boat", agent_id=who, count=0, trace=True)
    # The answer is count 0's: nothing, with count_zero; the trace is the audit of the recall it made.
    assert_same_answer(traced.model_copy(update={"trace": None}), plain)
    trace = trace_json(traced)
    assert trace is not None
    assert trace["recall"]["trace_version"] == 1
    candidates = [c["ref"] for c in trace["candidate_refs"]]
    assert candidates
    assert set(candidates) <= set(refs.values())
    assert trace["clusters"]
    assert all(c.get("past_window") for c in trace["clusters"])
    assert sorted(r for c in trace["clusters"] for r in c["refs"]) == sorted(candidates)
    assert trace["items"] == []
    seq = trace["sequence"]
    assert (seq["pieces"], seq["used"], seq["stopped_at"], seq["stop"]) == ([], 0, None, "count")
    assert trace["coverage"]["records"] == 0
    # A mode's count 0 also reports itself, and its traced audit as well.
    lite = await engine.reconstruct("harbour crane boat", agent_id=who, count=0, mode="lite", trace=True)
    assert (lite.mode, lite.shortfall_reason, lite.items) == ("lite", "count_zero", [])
    assert lite.trace is not None
    assert trace_json(lite)["sequence"]["name"] == "whole"
    assert trace_json(lite)["items"] == []


async def test_the_cues_are_the_declared_names(engine: cpersona.Engine) -> None:
    who = agent()
    await engine.store("Robert fixed the crane", agent_id=who)
    await engine.declare_associations(who, {"entities": [{"name": "Robert", "aliases": ["Bob", "Bobby"]}]})
    result = await engine.reconstruct("what did Robert fix", agent_id=who, trace=True)
    assert result.trace is not None
    assert trace_json(result)["cues"] == {"entities": ["Robert"], "terms": ["Bob", "Bobby"]}
    text = render_trace(result.trace)
    assert "cues     Robert → Bob, Bobby" in text


# ------------------------------------------------------------------------------------------ no text

name_st = st.text(alphabet="ghijklmnopqrstuvwxyz", min_size=3, max_size=10)


@_PROPS
@given(
    memories=st.lists(content_st, min_size=1, max_size=6),
    names=st.lists(name_st, min_size=1, max_size=3, unique=True),
    data=st.data(),
)
async def test_a_reconstruct_trace_carries_no_stored_text(
    onnx_engine: cpersona.Engine, memories: list[str], names: list[str], data: st.DataObject
) -> None:
    who = agent()
    # Each record names some of the entities inside its text, and mentions them; two are related.
    contents = []
    for n, text in enumerate(memories):
        named = data.draw(st.lists(st.sampled_from(names), max_size=2, unique=True))
        content = " ".join([text, *named])
        assoc = {"entities": [{"name": e} for e in named]} if named else None
        await onnx_engine.store(
            content, agent_id=who, timestamp=1_700_000_000.0 + 20.0 * n, associations=assoc
        )
        contents.append(content)
    relations = [{"subject": a, "predicate": "knows", "object": b} for a, b in itertools.pairwise(names)]
    await onnx_engine.declare_associations(
        who, {"entities": [{"name": e} for e in names], "relations": relations}
    )
    await onnx_engine.drain_blocks()
    source = data.draw(st.sampled_from(contents))
    start = data.draw(st.integers(0, max(0, len(source) - 8)))
    question = source[start : start + data.draw(st.integers(8, 40))] + " " + data.draw(content_st)
    variants: list[dict[str, Any]] = [{}, {"budget": 1, "count": 1}, {"deep": True, "max_hops": 3}]
    for fields in variants:
        result = await onnx_engine.reconstruct(question, agent_id=who, trace=True, **fields)
        trace = trace_json(result)
        assert trace is not None
        # The cues name declared entities and nothing else (caller-declared keys, not record text) ...
        assert set(trace["cues"]["entities"]) | set(trace["cues"]["terms"]) <= set(names)
        # ... and, those aside, no window of a stored text is anywhere in the trace.
        serialised = orjson.dumps({**trace, "cues": None}).decode()
        assert leaked(serialised, contents) == []
        ledger = trace["coverage"]
        assert "error" not in ledger
        assert ledger["records"] == len(cited(result))


# ------------------------------------------------------------------------------------------ the channel


async def test_one_message_per_reconstruct_with_its_recall_inside(engine: cpersona.Engine) -> None:
    who = agent()
    await burst(engine, who)
    await engine.drain_traces()
    listener = Listener(engine.backends.stores.redis)
    try:
        await listener.subscribe(channel=engine.keys.trace_channel(who))
        await engine.reconstruct("harbour crane", agent_id=who)  # untraced: nothing
        traced = await engine.reconstruct("harbour crane", agent_id=who, trace=True)
        assert await engine.drain_traces() == 1
        [(channel, message)] = await listener.receive(1)
    finally:
        await listener.aclose()
    assert channel == engine.keys.trace_channel(who)
    assert message["kind"] == "reconstruct"
    assert message == orjson.loads(orjson.dumps(trace_json(traced)))
    assert message["recall"]["scope"]["agent_id"] == who


def test_render_tells_a_reconstruct() -> None:
    trace = {
        "kind": "reconstruct",
        "recall": recall_trace(
            scope={"agent_id": "a", "project_id": "p", "channel": None, "source_id": None},
            order={"before_cut": [{"ref": "mem:1"}, {"ref": "mem:2"}], "limit": 20, "cut_by_count": []},
            reservation=[{"ref": "mem:3", "kind": "keyword"}],
            timing_ms={"total": 4.25},
        ),
        "candidate_refs": [{"ref": "mem:1", "rank": 0}, {"ref": "mem:2", "rank": 1}],
        "clusters": [
            {
                "refs": ["mem:1", "mem:2"],
                "why": "cluster:adjacent",
                "item": 0,
                "head": "mem:1",
                "members": [],
            },
            {"refs": ["mem:3"], "past_window": True, "members": []},
        ],
        "cues": {"entities": [], "terms": []},
        "items": [{"head_ref": "mem:1", "cites": ["mem:1", "mem:2"]}],
        "sequence": {
            "name": "items",
            "budget": 10,
            "used": 8,
            "cut": True,
            "stopped_at": 1,
            "stop": "budget",
            "pieces": [
                {"item": 0, "ref": "mem:1", "piece": "head", "span": [0, 8], "chars": 8, "admitted": True},
                {
                    "item": 0,
                    "ref": "mem:2",
                    "piece": "excerpt",
                    "span": [0, 9],
                    "chars": 9,
                    "admitted": False,
                },
            ],
        },
        "coverage": {
            "normalization": "nfkc-lower",
            "parts": [{"span": [0, 3], "kind": "identifier"}],
            "covered_by": [["mem:1"]],
            "uncovered": [],
            "records": 1,
        },
    }
    text = render_trace(ReconstructTrace.model_validate(trace))
    lines = text.splitlines()
    assert lines[0] == "── reconstruct  agent a  project p"
    assert "   items    1 returned  [mem:1]" in lines
    assert "   clusters 2 from 3 candidate(s) (cluster:adjacent 1), 1 past the window" in lines
    assert "   cues     no entity named" in lines
    stopped = "the budget stopped at excerpt of mem:2"
    assert f"   sequence items: 1 of 2 piece(s) admitted, used 8 of 10 chars; {stopped}" in lines
    assert "   coverage 1 part(s): 1 covered, 0 uncovered" in lines
    summary = "policy single-pass-v1; limit 20: 2 ranked, cut 0, 2 kept; seats keyword mem:3; total 4.2 ms"
    assert f"   recall   {summary}" in lines


# ------------------------------------------------------------------------------------------ time cue


async def seed_months(engine: cpersona.Engine, who: str, **scope: Any) -> None:
    topics = ["the harbour crane broke", "the pilot boat needs paint", "lunch at the harbour cafe"]
    await engine.store_batch(
        [
            {"content": f"{t} ({n})", "agent_id": who, "timestamp": day(10 + 30 * n) + "T12:00:00Z", **scope}
            for n in range(4)
            for t in topics
        ]
    )


def without_cue(result: ReconstructResult) -> dict[str, Any]:
    body = result.model_dump(mode="json")
    body.pop("time_cue", None)
    return body


@pytest.mark.parametrize("confidence", ["sure", "likely", "vague"])
async def test_a_cue_over_an_empty_period_changes_nothing_but_its_report(
    engine: cpersona.Engine, confidence: str
) -> None:
    who = agent()
    await seed_months(engine, who)
    # Nothing was stored 300-330 days ago, nor within any widening of it.
    cue = {"after": day(330), "before": day(320), "confidence": confidence}
    for query in ("harbour crane", "", "paint"):
        plain = await engine.reconstruct(query, agent_id=who)
        cued = await engine.reconstruct(query, agent_id=who, time_cue=cue)
        assert cued.time_cue is not None
        assert cued.time_cue["moved"] == cued.time_cue["seated"] == 0
        assert_same_answer(without_cue(cued), without_cue(plain))


async def test_the_response_carries_its_recalls_cue_report(engine: cpersona.Engine) -> None:
    who = agent()
    await seed_months(engine, who)
    cue = {"after": day(45), "before": day(35), "confidence": "sure"}
    result = await engine.reconstruct("harbour", agent_id=who, time_cue=cue, trace=True)
    assert result.trace is not None
    recall = trace_json(result)["recall"]
    report = result.time_cue
    assert report is not None
    assert report["policy"] == recall["policy"]["process"]
    assert report["confidence"] == recall["cue"]["confidence"]
    assert report["moved"] == len(recall["cue"]["lifted"])
    assert report["seated"] == len(recall["cue"]["seated"])
    assert report["period"] is not None
    assert recall["request"]["time_cue"] is not None
    assert "time cue" in render_trace(result.trace)


@_PROPS
@given(
    confidence=st.sampled_from(["sure", "likely", "vague"]),
    days=st.integers(0, 120),
    query=st.sampled_from(["", "harbour crane", "boat paint", "lunch"]),
)
async def test_a_cue_never_widens_isolation(
    engine: cpersona.Engine, confidence: str, days: int, query: str
) -> None:
    who = agent()
    await seed_months(engine, who, project_id="p1")
    # Neighbours in every period the cue may name: another agent, and another project of this agent.
    await seed_months(engine, who + "-other")
    await seed_months(engine, who, project_id="p2")
    cue = {"after": day(days + 15), "before": day(days), "confidence": confidence}
    result = await engine.reconstruct(query, agent_id=who, project_id="p1", time_cue=cue, max_hops=3)
    assert result.items
    for ref in cited(result):
        record = await engine.get(ref, agent_id=who)
        assert record is not None
        assert record.scope.project_id in ("", "p1")
