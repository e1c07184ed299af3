"""reconstruct, the read-only exit over one recall: bounds, cues, bundling, order, the relation walk,
structure, quoting and allocation, against the real Redis (and, for the write-nothing property, the
real Qdrant and ONNX embedder). Stages whose inputs the store cannot produce (two live versions with one
``msg_id`` in a project: the msg_id claim forbids them) are checked on the stage functions directly.

A blank query lists the newest records and the gate passes them all, so it gives a test the whole
store as the pool; a question is used where the cues or the quoting are what is checked."""

from __future__ import annotations

import itertools
import uuid
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cpersona
from cpersona import InvalidRequest, ReconstructResult, Settings
from cpersona.edges.http.app import create_app, openapi_document
from cpersona.operations.reconstruct.allocation import allocate, allocate_passages
from cpersona.operations.reconstruct.bundling import bundle
from cpersona.operations.reconstruct.candidates import Candidate
from cpersona.operations.reconstruct.order import order_items
from cpersona.operations.reconstruct.quoting import quote_span
from cpersona.operations.reconstruct.structure import structure
from traced import trace_json

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from contextlib import AbstractAsyncContextManager
    from pathlib import Path

    import httpx
    from starlette.applications import Starlette

_n = itertools.count()
SRC = {"type": "User", "id": "u1"}


def agent() -> str:
    return f"r{next(_n)}-{uuid.uuid4().hex[:6]}"


async def put(engine: cpersona.Engine, text: str, who: str, ts: float, **kw: Any) -> str:
    return (await engine.store(text, agent_id=who, timestamp=ts, **kw)).ref


def clusters(result: ReconstructResult) -> list[tuple[set[str], str | None]]:
    assert result.trace is not None
    return [(set(c["refs"]), c.get("why")) for c in trace_json(result)["clusters"]]


def cited(result: ReconstructResult) -> list[set[str]]:
    return [{c.ref for c in item.claims} for item in result.items]


# ------------------------------------------------------------------------------------------ bounds


async def test_count_zero_returns_nothing(engine: cpersona.Engine) -> None:
    who = agent()
    await put(engine, "something stored", who, 1_000.0)
    result = await engine.reconstruct("something", agent_id=who, count=0)
    assert result.model_dump(mode="json") == {
        "ok": True,
        "items": [],
        "effective_count": 0,
        "returned_count": 0,
        "shortfall_reason": "count_zero",
    }


async def test_each_clamp_is_reported(engine: cpersona.Engine) -> None:
    who = agent()
    for i in range(3):
        await put(engine, f"note number {i} about the roadmap", who, 1_000.0 + 1_000 * i)
    many = await engine.reconstruct("", agent_id=who, count=50, trace=True)
    assert (many.effective_count, many.requested_count) == (10, 50)
    assert many.count_policy is not None
    assert many.count_policy.model_dump() == {"source": "requested", "clamped": True, "reason": "max_count"}
    big = await engine.reconstruct("", agent_id=who, budget=99_999)
    assert big.budget_policy is not None
    assert big.budget_policy.reason == "max_budget"
    assert (big.requested_budget, big.effective_budget) == (99_999, 20_000)
    tiny = await engine.reconstruct("", agent_id=who, budget=10)
    assert tiny.budget_policy is not None
    assert tiny.budget_policy.reason == "below_one_head_quote"
    assert tiny.effective_budget == 800
    assert len(tiny.items) >= 1
    narrow = await engine.reconstruct("", agent_id=who, top_k=1)
    assert narrow.bounds is not None
    assert narrow.bounds.reached == ["top_k"]
    assert narrow.shortfall_reason == "exhausted_candidates"
    plain = (await engine.reconstruct("", agent_id=who)).model_dump(mode="json")
    assert not {"count_policy", "budget_policy", "effective_budget", "bounds"} & set(plain)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("count", -1),
        ("top_k", 0),
        ("top_k", 10_001),
        ("max_hops", 6),
        ("max_hops", -1),
        ("max_evidence", 0),
        ("max_evidence", 101),
        ("budget", -1),
    ],
)
async def test_a_value_out_of_range_is_refused_by_name(
    engine: cpersona.Engine, field: str, value: int
) -> None:
    with pytest.raises(InvalidRequest) as err:
        await engine.reconstruct("q", agent_id="x", **{field: value})  # type: ignore[arg-type]
    assert err.value.field == field


# ------------------------------------------------------------------------------------------ bundling


async def test_adjacency_is_anchored_at_the_bursts_first_row(engine: cpersona.Engine) -> None:
    who = agent()
    refs = [
        await put(engine, f"line {i} of the chat", who, 10_000.0 + t, source=SRC)
        for i, t in enumerate((0, 40, 70, 100))
    ]
    other = await put(engine, "a note from elsewhere", who, 10_030.0, source={"type": "User", "id": "u2"})
    result = await engine.reconstruct("", agent_id=who, trace=True)
    found = clusters(result)
    # Chained, 40 → 70 → 100 would all join; anchored at 0, 70 starts the next burst.
    assert ({refs[0], refs[1]}, "cluster:adjacent") in found
    assert ({refs[2], refs[3]}, "cluster:adjacent") in found
    assert ({other}, None) in found
    assert [item.independence_reason for item in result.items].count("cluster:adjacent") == 2


async def test_an_episode_bundles_the_memories_it_spans_and_supports_them(engine: cpersona.Engine) -> None:
    who = agent()
    inside = await put(engine, "we chose the blue logo", who, 50_000.0)
    outside = await put(engine, "lunch was late", who, 90_000.0)
    ep = (
        await engine.archive_episode("design review", agent_id=who, start_time=49_000.0, end_time=51_000.0)
    ).ref
    result = await engine.reconstruct("design review blue logo lunch", agent_id=who, deep=True, trace=True)
    assert ({ep, inside}, "cluster:episode") in clusters(result)
    assert ({outside}, None) in clusters(result)
    item = next(i for i in result.items if inside in {c.ref for c in i.claims})
    claim = next(c for c in item.claims if c.ref == inside)
    assert claim.why == "cluster:episode" or item.head_ref == inside
    assert claim.roles is not None
    assert {"ref": ep, "role": "supports"} in [r.model_dump() for r in claim.roles]


async def test_a_record_relation_bundles_and_a_role_word_becomes_a_role(engine: cpersona.Engine) -> None:
    who = agent()
    old = await put(engine, "the launch is on Monday", who, 1_000.0)
    fix = await put(engine, "correction: the launch is on Tuesday", who, 900_000.0)
    relation = {"subject": fix, "predicate": "corrects", "object": old}
    await engine.declare_associations(who, {"relations": [relation]})
    result = await engine.reconstruct("", agent_id=who, trace=True)
    assert ({old, fix}, "cluster:relation") in clusters(result)
    (item,) = result.items
    assert [c.ref for c in item.claims] == [fix, old]  # newest first
    roles = {c.ref: [r.model_dump() for r in c.roles or ()] for c in item.claims}
    assert roles[old] == [{"ref": fix, "role": "corrects"}]


def cand(
    ref: str, rank: int, *, msg_id: str = "", ts: float | None = None, reserved: bool = False
) -> Candidate:
    return Candidate(ref, rank, reserved, True, f"text of {ref}", msg_id, ts, "", "", ("User", ref))


def test_msg_id_versions_bundle_and_the_newest_is_head() -> None:
    pool = [
        cand("mem:a", 0, msg_id="m1", ts=100.0),
        cand("mem:b", 1, msg_id="m1", ts=300.0),
        cand("mem:c", 2, msg_id="m1", ts=200.0),
        cand("mem:d", 3, msg_id="m1", ts=200.0),
        cand("mem:e", 4, msg_id="m2", ts=200.0),
    ]
    found = bundle(pool, {}, 60.0)
    assert [(c.members, c.reason) for c in found] == [((0, 1, 2, 3), "cluster:msg_id"), ((4,), None)]
    s = structure(found[0], pool, (), {}, 40)
    assert s.head.ref == "mem:b"  # the most relevant is mem:a; mem:b is its newest version
    # Newest first; equal times by relevance.
    assert [row.ref for row, _ in s.claims] == ["mem:b", "mem:c", "mem:d", "mem:a"]
    roles = {row.ref: [(r.ref, r.role) for r in rs] for row, rs in s.claims}
    assert roles["mem:a"] == [("mem:c", "supersedes")]
    assert roles["mem:c"] == [("mem:b", "supersedes")]
    assert roles["mem:b"] == []
    assert [(c.refs, c.msg_id) for c in s.conflicts] == [(["mem:c", "mem:d"], "m1")]
    capped = structure(found[0], pool, (), {}, 2)
    assert (len(capped.claims), capped.omitted) == (2, 2)


def test_held_clusters_follow_the_window_and_take_no_place_in_it() -> None:
    pool = [
        cand("mem:h1", 0, reserved=True),
        cand("mem:a", 1),
        cand("mem:b", 2),
        cand("mem:h2", 3, reserved=True),
        cand("mem:c", 4),
    ]
    found = bundle(pool, {}, 60.0)
    ordered = order_items(found, pool, 2)
    assert [pool[c.members[0]].ref for c in ordered.window] == ["mem:a", "mem:b"]
    assert [pool[c.members[0]].ref for c in ordered.held] == ["mem:h1", "mem:h2"]
    assert ordered.dropped == 1


# ------------------------------------------------------------------------------------------ the walk


def ents(*names: str) -> dict[str, Any]:
    return {"entities": [{"name": n} for n in names]}


async def test_the_relation_walk_is_bounded_by_max_hops(engine: cpersona.Engine) -> None:
    who = agent()
    far = await put(engine, "Cy runs the lab", who, 1_000.0, associations=ents("Cy"))
    near = await put(engine, "Ben plays chess", who, 2_000.0, associations=ents("Ben"))
    head = await put(engine, "Ann paints", who, 3_000.0, associations=ents("Ann"))
    rels = [{"subject": "Ann", "predicate": "knows", "object": "Ben"},
            {"subject": "Ben", "predicate": "mentors", "object": "Cy"}]  # fmt: skip
    await engine.declare_associations(who, {"relations": rels})
    # top_k 1: the pool is the newest record only, so the others can come only by the walk.
    none = await engine.reconstruct("", agent_id=who, top_k=1, max_hops=0)
    assert cited(none) == [{head}]
    one = await engine.reconstruct("", agent_id=who, top_k=1, max_hops=1)
    (item,) = one.items
    walked = [(c.ref, c.why, c.hops) for c in item.claims if c.ref != head]
    assert walked == [(near, "relation:knows", 1)]
    assert one.bounds is not None
    assert "max_hops" in (one.bounds.reached or [])
    two = await engine.reconstruct("", agent_id=who, top_k=1, max_hops=2)
    walked = [(c.ref, c.why, c.hops) for c in two.items[0].claims if c.ref != head]
    assert walked == [(near, "relation:knows", 1), (far, "relation:mentors", 2)]  # newest first
    assert two.bounds is None or "max_hops" not in (two.bounds.reached or [])
    # Evidence is never a pool row: with every record in the pool, nothing is walked in.
    whole = await engine.reconstruct("", agent_id=who, max_hops=2)
    assert all(c.hops is None for i in whole.items for c in i.claims)


# ------------------------------------------------------------------------------------------ cues


async def test_entity_matches_feed_the_lexical_arms_and_stay_in_their_scope(engine: cpersona.Engine) -> None:
    who, stranger = agent(), agent()
    bob = await put(engine, "Bob fixed the flaky build", who, 1_000.0)
    await put(engine, "the cafeteria menu changed", who, 2_000.0)
    before = await engine.reconstruct("what did Robert do", agent_id=who, trace=True)
    assert bob not in {c.ref for i in before.items for c in i.claims}
    await engine.declare_associations(stranger, {"entities": [{"name": "Robert", "aliases": ["Bob"]}]})
    isolated = await engine.reconstruct("what did Robert do", agent_id=who, trace=True)
    assert isolated.trace is not None
    assert trace_json(isolated)["cues"] == {"entities": [], "terms": []}
    await engine.declare_associations(who, {"entities": [{"name": "Robert", "aliases": ["Bob"]}]})
    after = await engine.reconstruct("what did Robert do", agent_id=who, trace=True)
    assert after.trace is not None
    assert trace_json(after)["cues"] == {"entities": ["Robert"], "terms": ["Bob"]}
    assert after.items[0].head_ref == bob
    assert trace_json(after)["recall"]["trace_version"] == 1
    assert trace_json(after)["recall"]["request"]["keyword_seats"] == 1
    assert trace_json(after)["recall"]["request"]["lexical_terms"] == 1
    # Its recall's trace went to the trace channel like any traced recall's; untraced, nothing goes.
    queued = engine.trace_stats().queued
    await engine.reconstruct("what did Robert do", agent_id=who)
    assert engine.trace_stats().queued == queued
    await engine.reconstruct("what did Robert do", agent_id=who, trace=True)
    assert engine.trace_stats().queued == queued + 1


# ------------------------------------------------------------------------------------------ quoting


def test_a_quote_is_one_span_of_the_record_within_its_cap() -> None:
    text = " ".join(f"Sentence {i} talks about topic {i % 7}." for i in range(200))
    start, end = quote_span(text, "topic 3", 800)
    assert 0 < end - start <= 800
    assert "topic 3" in text[start:end]
    assert quote_span("short", "x", 800) == (0, 5)
    assert quote_span("a" * 2_000, "a", 300) == (0, 300)


async def test_a_long_head_is_quoted_in_part_with_its_span(engine: cpersona.Engine) -> None:
    who = agent()
    text = (
        " ".join(f"Paragraph {i} is filler about nothing much." for i in range(60))
        + " The vault code is 4711."
    )
    ref = await put(engine, text, who, 1_000.0)
    result = await engine.reconstruct("vault code", agent_id=who)
    (item,) = result.items
    assert item.head_ref == ref
    assert item.content_len == len(text)
    assert item.span is not None
    assert item.content == text[item.span[0] : item.span[1]]
    assert "4711" in item.content
    assert len(item.content) <= 800


# ------------------------------------------------------------------------------------------ allocation


@given(
    heads=st.lists(st.integers(1, 900), min_size=1, max_size=8),
    excerpts=st.lists(st.lists(st.integers(1, 500), max_size=4), min_size=8, max_size=8),
    budget=st.integers(900, 20_000),
    more=st.integers(0, 10_000),
)
def test_raising_the_budget_never_removes_an_item_or_an_excerpt(
    heads: list[int], excerpts: list[list[int]], budget: int, more: int
) -> None:
    ex = excerpts[: len(heads)]
    low, high = allocate(heads, ex, budget), allocate(heads, ex, budget + more)
    assert low.chosen
    assert low.used <= budget
    assert len(high.chosen) >= len(low.chosen)
    assert all(h >= lo for (_, h), (_, lo) in zip(high.chosen, low.chosen, strict=False))


@given(
    passages=st.lists(st.lists(st.integers(1, 800), min_size=1, max_size=4), min_size=1, max_size=8),
    whole=st.lists(st.booleans(), min_size=8, max_size=8),
    budget=st.integers(800, 20_000),
    more=st.integers(0, 10_000),
)
def test_the_evidence_and_whole_sequences_never_lose_a_piece_to_a_larger_budget(
    passages: list[list[int]], whole: list[bool], budget: int, more: int
) -> None:
    w = [flag and len(p) == 1 for flag, p in zip(whole, passages, strict=False)]
    low, used, _ = allocate_passages(passages, w, budget)
    high, _, _ = allocate_passages(passages, w, budget + more)
    assert any(low)
    assert used <= budget
    assert all(set(lo) <= set(hi) for lo, hi in zip(low, high, strict=True))


@pytest.mark.parametrize("sequence", ["evidence", "whole"])
async def test_the_evidence_sequences_quote_head_passages_only(
    redis: object, redis_url: str, key_prefix: str, tmp_path: Path, sequence: str
) -> None:
    settings_ = Settings(
        data_dir=tmp_path,
        redis_url=redis_url,
        key_prefix=key_prefix,
        embedding_mode="none",
        reconstruct_sequence=sequence,
    )
    long = (
        " ".join(f"Paragraph {i} is filler about nothing much." for i in range(80))
        + " The vault code is 4711."
    )
    async with cpersona.open(settings_, background=False) as memory:
        who = agent()
        short = await put(
            memory, "the vault is in the cellar", who, 1_000.0, source={"type": "User", "id": "a"}
        )
        big = await put(memory, long, who, 900_000.0, source={"type": "User", "id": "b"})
        texts = {short: "the vault is in the cellar", big: long}
        result = await memory.reconstruct("", agent_id=who, budget=1_000)
    assert result.items
    for item in result.items:
        assert item.content in texts[item.head_ref]
        assert all(e.ref == item.head_ref and e.content in texts[e.ref] for e in item.excerpts or ())
    assert result.used_budget is not None
    assert result.used_budget <= 1_000
    if sequence == "whole":  # the short record comes first, whole
        assert any(i.head_ref == short and i.content == texts[short] for i in result.items)


# ------------------------------------------------------------------------------------------ surfaces


async def test_reconstruct_over_http(
    settings: Settings,
    redis: object,
    serve_asgi: Callable[[Starlette], AbstractAsyncContextManager[httpx.AsyncClient]],
) -> None:
    assert "/v1/reconstruct" in openapi_document()["paths"]
    app = create_app(settings.with_(qdrant_url=":memory:", embedding_mode="none"), background=False)
    async with serve_asgi(app) as client:
        stored = await client.post("/v1/encode", json={"content": "Eve builds boats", "agent_id": "h"})
        ref = stored.json()["ref"]
        answer = await client.post("/v1/reconstruct", json={"agent_id": "h", "query": ""})
        assert answer.status_code == 200, answer.text
        parsed = ReconstructResult.model_validate(answer.json())
        assert [i.head_ref for i in parsed.items] == [ref]
        assert "shortfall_reason" in answer.json()
        assert "bounds" not in answer.json()
        bad = await client.post("/v1/reconstruct", json={"agent_id": "h", "query": "", "max_hops": 6})
        assert (bad.status_code, bad.json()["error"]["field"]) == (400, "max_hops")
        cue = {"after": "2020-01-01", "confidence": "vague"}
        cued = await client.post("/v1/reconstruct", json={"agent_id": "h", "query": "boats", "time_cue": cue})
        assert cued.status_code == 200, cued.text
        assert "time_cue" in cued.json()
        extra = await client.post("/v1/reconstruct", json={"agent_id": "h", "query": "", "mood": 1})
        assert extra.status_code == 400


# ------------------------------------------------------------------------------------------ properties

WORDS = ["Ann", "Ben", "boat", "build", "chess", "logo", "launch", "Monday", "vault", "menu"]
record_st = st.tuples(
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join),
    st.integers(0, 400),  # seconds: some rows fall in one adjacency window, some do not
    st.sampled_from(["u1", "u2"]),
    st.lists(st.sampled_from(["Ann", "Ben", "Cy"]), max_size=2, unique=True),
)
store_st = st.lists(record_st, min_size=1, max_size=8)
query_st = st.sampled_from(["", "Ann", "what about the boat", "Ben and the launch", "vault menu"])


async def fill(engine: cpersona.Engine, who: str, rows: list[tuple[str, int, str, list[str]]]) -> list[str]:
    refs = []
    for i, (text, t, src, names) in enumerate(rows):
        assoc = {"entities": [{"name": n} for n in names]} if names else None
        got = await engine.store(
            f"{text} #{i}",
            agent_id=who,
            timestamp=1_000_000.0 + t,
            source={"type": "User", "id": src},
            associations=assoc,
        )
        refs.append(got.ref)
    await engine.declare_associations(
        who, {"relations": [{"subject": "Ann", "predicate": "knows", "object": "Cy"}]}
    )
    return refs


@pytest.fixture(scope="module")
async def onnx_engine(open_test_engine: Callable[..., Any]) -> AsyncIterator[cpersona.Engine]:
    async with open_test_engine("rc") as memory:
        yield memory


_PROPS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


async def _snapshot(engine: cpersona.Engine, refs: list[str]) -> tuple[Any, ...]:
    client = engine.backends.stores.redis
    prefix = engine.settings.key_prefix
    keys = sorted([k async for k in client.scan_iter(match=f"{prefix}*", count=1_000)])
    dumps = [await client.dump(k) for k in keys]
    vectors = engine.backends.vectors
    ids = [r.partition(":")[2] for r in refs]
    counted = None if vectors is None else (await vectors.count_all(), sorted(await vectors.existing(ids)))
    return keys, dumps, counted


@_PROPS
@given(rows=store_st, query=query_st, budget=st.integers(0, 6_000), more=st.integers(1, 8_000))
async def test_reconstruct_writes_nothing_and_quotes_only_what_it_cites(
    onnx_engine: cpersona.Engine,
    rows: list[tuple[str, int, str, list[str]]],
    query: str,
    budget: int,
    more: int,
) -> None:
    who = agent()
    refs = await fill(onnx_engine, who, rows)
    texts = {ref: (await onnx_engine.get(ref, agent_id=who)).content for ref in refs}  # type: ignore[union-attr]
    before = await _snapshot(onnx_engine, refs)
    assert before[0]
    assert before[2] is not None
    assert len(before[2][1]) == len(refs)  # every record has its vector: the snapshot sees Qdrant too
    low = await onnx_engine.reconstruct(query, agent_id=who, budget=budget, max_hops=2, trace=True)
    high = await onnx_engine.reconstruct(query, agent_id=who, budget=budget + more, max_hops=2)
    assert await _snapshot(onnx_engine, refs) == before
    for item in low.items:
        claims = {c.ref for c in item.claims}
        assert item.head_ref in claims
        assert item.content in texts[item.head_ref]
        for ex in item.excerpts or ():
            assert ex.ref in claims
            assert ex.content in texts[ex.ref]
    assert [i.head_ref for i in high.items][: len(low.items)] == [i.head_ref for i in low.items]
    for lo, hi in zip(low.items, high.items, strict=False):
        assert [e.ref for e in hi.excerpts or ()][: len(lo.excerpts or ())] == [
            e.ref for e in lo.excerpts or ()
        ]
    # The trace carries refs, ranks and keys, never stored text.
    assert low.trace is not None
    dumped = low.trace.model_dump_json()
    assert not [text for text in texts.values() if text in dumped]


@_PROPS
@given(rows=store_st, query=query_st)
async def test_entities_of_another_scope_never_become_cues(
    engine: cpersona.Engine, rows: list[tuple[str, int, str, list[str]]], query: str
) -> None:
    who, other = agent(), agent()
    await fill(engine, other, rows)
    await engine.declare_associations(other, {"entities": [{"name": w} for w in WORDS]}, project_id="p")
    await engine.store("plain words only", agent_id=who)
    result = await engine.reconstruct(query, agent_id=who, trace=True)
    assert result.trace is not None
    assert trace_json(result)["cues"] == {"entities": [], "terms": []}
    assert all(c.ref.startswith(("mem:", "ep:")) and c.hops is None for i in result.items for c in i.claims)


async def test_the_recall_gives_reconstruct_one_keyword_seat(engine: cpersona.Engine) -> None:
    who = agent()
    words = ("office opens", "weather report", "train strike")
    refs = [
        await put(engine, f"Berlin {w}", who, 10_000.0 * (i + 1), source={"type": "User", "id": f"s{i}"})
        for i, w in enumerate(words)
    ]
    plain = await engine.recall("Berlin", agent_id=who, limit=20)
    assert not [r for r in plain.rows if r.match_reason.get("signal") == "keyword"]
    result = await engine.reconstruct("Berlin weather", agent_id=who, trace=True)
    assert result.trace is not None
    seats = [s for s in trace_json(result)["recall"]["reservation"] if s["kind"] == "keyword"]
    assert len(seats) == 1
    held = [item for item in result.items if item.admission == "reservation"]
    assert [item.head_ref for item in held] == [seats[0]["ref"]]
    assert result.reserved_count == 1
    assert {item.head_ref for item in result.items} <= set(refs)


async def test_a_time_cue_goes_to_the_recall(engine: cpersona.Engine) -> None:
    who = agent()
    await put(engine, "the March offsite was in Lisbon", who, 1_772_400_000.0)  # 2026-03-02
    await put(engine, "the May offsite was in Porto", who, 1_778_000_000.0)  # 2026-05-05
    cue = {"after": "2026-03-01", "before": "2026-03-31", "confidence": "sure"}
    result = await engine.reconstruct("where was the offsite", agent_id=who, time_cue=cue, trace=True)
    assert result.time_cue is not None
    assert result.trace is not None
    assert trace_json(result)["recall"]["policy"]["process"] == "cued-v0.5"
    assert trace_json(result)["recall"]["request"]["time_cue"] is not None
