"""Blocks: the splitter (tables and properties), block ids, the block arm, and the block worker end to end.

The end-to-end tests run the real engine on the session's Redis with the ONNX embedder and Qdrant's
in-process mode, opened with ``background=False`` (a pytest fixture enters and exits in different
tasks, which a task group does not allow) and built with ``drain_blocks()``. The background worker is
exercised separately, inside single test bodies, through ``cpersona.open`` and the HTTP lifespan.
"""

from __future__ import annotations

import itertools
import uuid
from typing import TYPE_CHECKING

import anyio
import numpy as np
import pytest
from benchmarks.in_process import running
from hypothesis import given, settings
from hypothesis import strategies as st

import cpersona
from cpersona import Settings
from cpersona.edges.http.app import create_app
from cpersona.engine.workers.blocks import BlockBuilder
from cpersona.keys import Keys
from cpersona.model.blocks import ParentKind, block_id, block_ids, split_blocks
from cpersona.model.scope import ReadScope
from cpersona.recall.arms.block import block_arm, parent_kind_of
from cpersona.recall.policy import load_policies
from cpersona.stores.protocols import VectorFilter, VectorHit, VectorPoint
from cpersona.stores.redis.block_queue import RedisBlockQueue
from cpersona.stores.vectors.common import TIE_EPSILON, open_tail_start
from cpersona.stores.vectors.factory import open_vector_store

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from cpersona.stores.protocols import VectorStore
    from cpersona.stores.redis.connection import RedisClient

# ------------------------------------------------------------------------------------------ splitter


def pieces(text: str, max_chars: int = 739) -> list[str]:
    return [text[s:e] for s, e in split_blocks(text, max_chars=max_chars)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", []),
        ("One sentence", ["One sentence"]),
        ("First one. Second one! Third? Done.", ["First one. ", "Second one! ", "Third? ", "Done."]),
        ("Line one\nline two", ["Line one\n", "line two"]),
        ("Para one.\n\nPara two.", ["Para one.\n\n", "Para two."]),
        # Whitespace before the first words has nowhere else to go: it folds into the first block.
        ("\n\n  Leading blank.", ["\n\n  Leading blank."]),
        ("   ", ["   "]),
        # A period inside a word or number is not a sentence end; one before a space is.
        ("Pi is 3.14 and v1.2 shipped. Next", ["Pi is 3.14 and v1.2 shipped. ", "Next"]),
        ("See e.g. this", ["See e.g. ", "this"]),
        # Nothing is cut inside brackets or quotes; a sentence mark closing a quote ends the sentence.
        ("Before (one. two) after. End", ["Before (one. two) after. ", "End"]),
        ('He said "Stop. Now." Then left.', ['He said "Stop. Now." ', "Then left."]),
        ("List [a.\nb] done", ["List [a.\nb] done"]),
        # Unmatched brackets do not silence the rest of the text.
        ("Smile :) ok. Next", ["Smile :) ok. ", "Next"]),
        ("Open ( never closed. Next", ["Open ( never closed. ", "Next"]),
        # ...and a paragraph break always cuts outside code.
        ("(open.\n\nclosed later)", ["(open.\n\n", "closed later)"]),
        # Fenced code is one block, whatever it holds.
        (
            "Run this:\n```\nx = 1. y = 2.\n\nz = (3\n```\nThen stop.",
            ["Run this:\n", "```\nx = 1. y = 2.\n\nz = (3\n```\n", "Then stop."],
        ),
        ("Commas, never, cut, here", ["Commas, never, cut, here"]),
    ],
)
def test_english_table(text: str, expected: list[str]) -> None:
    assert pieces(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("今日は晴れ。明日は雨！本当？", ["今日は晴れ。", "明日は雨！", "本当？"]),  # noqa: RUF001
        # The full-width period always ends a sentence, even between digits.
        ("数値は３．５です", ["数値は３．", "５です"]),  # noqa: RUF001
        ("「こんにちは。」と彼は言った。次の文。", ["「こんにちは。」と彼は言った。", "次の文。"]),
        ("『本。題』と（注。記）の後。終わり", ["『本。題』と（注。記）の後。", "終わり"]),  # noqa: RUF001
        ("一行目\n二行目", ["一行目\n", "二行目"]),
        ("読点、では、切らない", ["読点、では、切らない"]),
    ],
)
def test_japanese_table(text: str, expected: list[str]) -> None:
    assert pieces(text) == expected


@pytest.mark.parametrize(
    ("text", "max_chars", "expected"),
    [
        # Forced splits only when a span has no allowed boundary: at a comma or space near the limit...
        ("alpha, beta, gamma, delta, epsilon", 14, ["alpha, beta,", " gamma, delta,", " epsilon"]),
        ("aaaa bbbb cccc dddd", 10, ["aaaa bbbb ", "cccc dddd"]),
        # ...else hard at the limit.
        ("abcdefghij", 4, ["abcd", "efgh", "ij"]),
        # A newline inside quotes is stronger than a space for a forced split.
        ('"one two\nthree four five"', 18, ['"one two\n', 'three four five"']),
        # A fence that fits is never cut, even when the span around it must be.
        ("(xxxxxx ```ab cd``` yy)", 12, ["(xxxxxx ", "```ab cd``` ", "yy)"]),
    ],
)
def test_forced_splits(text: str, max_chars: int, expected: list[str]) -> None:
    assert pieces(text, max_chars) == expected


@pytest.mark.parametrize("bad", [0, -1, True, 2.5])
def test_max_chars_must_be_a_positive_integer(bad: object) -> None:
    with pytest.raises(ValueError, match="max_chars"):
        split_blocks("text", max_chars=bad)  # type: ignore[arg-type]


_TOKENS = st.sampled_from(
    [
        "word",
        "Word",
        "x",
        "日本語",
        " ",
        "  ",
        "\n",
        "\n\n",
        "\t",
        ".",
        ". ",
        "!",
        "?",
        "。",
        "？",  # noqa: RUF001
        ",",
        "、",
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        "「",
        "」",
        "『",
        "』",
        "\uff08",
        "\uff09",
        '"',
        "```",
        "e.g.",
        "3.14",
    ]
)
_TEXTS = st.lists(_TOKENS, max_size=120).map("".join) | st.text(max_size=300)


def _fences(text: str) -> list[tuple[int, int]]:
    spans, pos = [], 0
    while (start := text.find("```", pos)) != -1:
        close = text.find("```", start + 3)
        end = len(text) if close == -1 else close + 3
        spans.append((start, end))
        pos = end
    return spans


@settings(max_examples=200, deadline=None)
@given(text=_TEXTS, max_chars=st.integers(1, 80) | st.just(739))
def test_spans_cover_the_text_in_order_within_the_limit(text: str, max_chars: int) -> None:
    spans = split_blocks(text, max_chars=max_chars)
    assert spans == split_blocks(text, max_chars=max_chars)  # deterministic
    if not text:
        assert spans == []
        return
    assert spans[0][0] == 0
    assert spans[-1][1] == len(text)
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert end == start
    for start, end in spans:
        assert 0 < end - start <= max_chars
    assert "".join(text[s:e] for s, e in spans) == text


@settings(max_examples=200, deadline=None)
@given(text=_TEXTS, max_chars=st.integers(1, 80) | st.just(739))
def test_fences_that_fit_are_never_cut(text: str, max_chars: int) -> None:
    cuts = {start for start, _ in split_blocks(text, max_chars=max_chars)[1:]}
    for start, end in _fences(text):
        if end - start <= max_chars:
            assert not any(start < c < end for c in cuts), (start, end)


_WORDS = st.lists(st.text("abcxyzAQ", min_size=1, max_size=8), min_size=1, max_size=6).map(" ".join)
_SENTENCES = st.lists(st.tuples(_WORDS, st.sampled_from(".!?")).map("".join), min_size=1, max_size=10)


@settings(max_examples=100, deadline=None)
@given(sentences=_SENTENCES)
def test_plain_sentences_become_one_block_each(sentences: list[str]) -> None:
    text = " ".join(sentences)
    assert [p.strip() for p in pieces(text)] == sentences


# ------------------------------------------------------------------------------------------ block ids


def test_block_ids_are_deterministic_and_tell_the_parent_kind() -> None:
    parent = str(uuid.uuid4())
    assert block_id("memory", parent, 3) == block_id("memory", parent.upper(), 3)
    assert block_id("memory", parent, 3) != block_id("episode", parent, 3)
    assert len(set(block_ids("memory", parent, 64))) == 64
    for kind in ("memory", "episode"):
        hit = VectorHit(block_id(kind, parent, 5), 0.5, "block", parent, 1, 0.0, block_index=5)
        assert parent_kind_of(hit) == kind
    assert parent_kind_of(VectorHit(str(uuid.uuid4()), 0.5, "block", parent, 1, 0.0, block_index=5)) is None


@settings(max_examples=300, deadline=None)
@given(
    parent=st.uuids(),
    index=st.integers(min_value=0, max_value=10_000),
    kind=st.sampled_from(["memory", "episode", None]),
    spelling=st.sampled_from(["canonical", "upper", "braces", "hex"]),
)
def test_parent_kind_of_agrees_with_block_id(
    parent: uuid.UUID, index: int, kind: str | None, spelling: str
) -> None:
    # parent_kind_of hashes on bytes for speed; it must say exactly what recomputing block_id says,
    # whatever spelling of the parent id a payload holds.
    written = {
        "canonical": str(parent),
        "upper": str(parent).upper(),
        "braces": "{" + str(parent) + "}",
        "hex": parent.hex,
    }[spelling]
    hit_id = str(uuid.uuid4()) if kind is None else block_id(kind, str(parent), index)  # type: ignore[arg-type]
    hit = VectorHit(hit_id, 0.5, "block", written, 1, 0.0, block_index=index)
    expected = next((k for k in ("memory", "episode") if block_id(k, written, index) == hit_id), None)
    assert expected == kind
    assert parent_kind_of(hit) == expected


# ------------------------------------------------------------------------------------------ the arm

DIM = 8
# The block arm reads as many hits as the default policy says.
HITS = load_policies()["single-pass-v0"].blocks.search_hits


def _unit(*values: float) -> np.typing.NDArray[np.float32]:
    v = np.zeros(DIM, dtype=np.float32)
    v[: len(values)] = values
    return v / np.linalg.norm(v)


def _block(
    kind: str, parent: str, index: int, vector: np.typing.NDArray[np.float32], agent: str = "a"
) -> VectorPoint:
    return VectorPoint(
        id=block_id(kind, parent, index),  # type: ignore[arg-type]
        vector=vector,
        kind="block",
        agent_id=agent,
        project_id="",
        channel="",
        timestamp=1.0,
        seq=1,
        parent=parent,
        block_index=index,
    )


@pytest.fixture
async def block_store(tmp_path: Path) -> AsyncIterator[VectorStore]:
    store = await open_vector_store(
        Settings(data_dir=tmp_path, qdrant_url=":memory:"), "blocks", DIM, binary_quantized=True
    )
    try:
        yield store
    finally:
        await store.aclose()


async def test_arm_collapses_to_the_best_block_and_never_sums(block_store: VectorStore) -> None:
    many, one, episode, other_agent = (str(uuid.uuid4()) for _ in range(4))
    query = _unit(1.0)
    await block_store.upsert(
        [
            # Three fairly close blocks of one memory: summed they would beat the single best block.
            _block("memory", many, 0, _unit(1.0, 0.9)),
            _block("memory", many, 1, _unit(1.0, 0.8)),
            _block("memory", many, 2, _unit(1.0, 0.85)),
            _block("memory", one, 0, _unit(0.1, 1.0)),
            _block("memory", one, 1, _unit(1.0, 0.2)),
            _block("episode", episode, 4, _unit(1.0, 0.5)),
            _block("memory", other_agent, 0, _unit(1.0), agent="b"),
            # A point the builder did not write (its id fits neither namespace) is ignored.
            VectorPoint(str(uuid.uuid4()), _unit(1.0), "block", "a", "", "", 1.0, 1, many, 7),
        ]
    )
    result = await block_arm(block_store, query, ReadScope("a"), limit=10, max_hits=HITS)
    assert result.arm == "block"
    assert [(r.ref, r.block_index, r.rank) for r in result.rows] == [
        (f"mem:{one}", 1, 0),
        (f"ep:{episode}", 4, 1),
        (f"mem:{many}", 1, 2),
    ]
    assert result.rows[0].raw == pytest.approx(float(_unit(1.0, 0.2) @ query), abs=1e-5)
    limited = await block_arm(block_store, query, ReadScope("a"), limit=2, max_hits=HITS)
    assert [r.ref for r in limited.rows] == [r.ref for r in result.rows[:2]]
    assert (await block_arm(block_store, query, ReadScope("a"), limit=0, max_hits=HITS)).rows == ()
    assert [
        r.ref for r in (await block_arm(block_store, query, ReadScope("b"), limit=5, max_hits=HITS)).rows
    ] == [f"mem:{other_agent}"]


class _FixedHits:
    """Only what block_arm calls: a search that answers with given hits, best first."""

    def __init__(self, hits: list[VectorHit]) -> None:
        self.hits = hits

    async def search(
        self, vector: object, flt: VectorFilter, limit: int, *, open_tail: bool = False
    ) -> list[VectorHit]:
        return sorted(self.hits, key=lambda h: (-h.score, h.seq, h.block_index, h.id))[:limit]


def _collapse_every_hit(hits: list[VectorHit], limit: int) -> list[tuple[str, int, float, int]]:
    """The arm's answer computed over every hit, without skipping any."""
    best: dict[str, tuple[float, str, str, int]] = {}
    for hit in hits:
        kind = next(
            (k for k in ("memory", "episode") if block_id(k, hit.parent, hit.block_index) == hit.id), None
        )
        if kind is None:
            continue
        ref = ("mem:" if kind == "memory" else "ep:") + hit.parent
        held = best.get(ref)
        if held is None or (-hit.score, hit.block_index) < (-held[0], held[3]):
            best[ref] = (hit.score, kind, hit.parent, hit.block_index)
    ranked = sorted(best.items(), key=lambda item: (-item[1][0], item[1][1], item[1][2], item[1][3]))
    return [(ref, rank, score, index) for rank, (ref, (score, _, _, index)) in enumerate(ranked[:limit])]


_PARENTS = [str(uuid.UUID(int=n + 1)) for n in range(6)]

_RAW_HITS = st.lists(
    st.tuples(
        st.sampled_from(_PARENTS),
        st.integers(min_value=0, max_value=3),
        st.sampled_from(["memory", "episode", None]),
        st.sampled_from([0.9, 0.8, 0.8, 0.7, 0.5, 0.5, 0.3]),
    ),
    max_size=40,
)
"""Block hits as (parent, block index, parent kind or None for a point not written as a block, score):
ties in score, equal-scored blocks of one record and foreign points."""


def _hits_of(raw: list[tuple[str, int, ParentKind | None, float]]) -> list[VectorHit]:
    hits: dict[str, VectorHit] = {}
    for parent, index, kind, score in raw:
        point = (
            block_id(kind, parent, index)
            if kind is not None
            else str(uuid.uuid5(uuid.NAMESPACE_URL, parent + str(index)))
        )
        hits.setdefault(point, VectorHit(point, score, "block", parent, 1, 0.0, block_index=index))
    return list(hits.values())


@settings(max_examples=300, deadline=None)
@given(raw=_RAW_HITS, limit=st.integers(min_value=1, max_value=8))
async def test_arm_answers_as_if_it_read_every_hit(
    raw: list[tuple[str, int, ParentKind | None, float]], limit: int
) -> None:
    # The arm stops reading hits once they cannot change its first `limit` records; with ties in score,
    # equal-scored blocks of one record and foreign points, its rows must equal a full collapse.
    store = _FixedHits(_hits_of(raw))
    result = await block_arm(store, _unit(1.0), ReadScope("a"), limit=limit, max_hits=HITS)  # type: ignore[arg-type]
    expected = _collapse_every_hit(await store.search(None, VectorFilter("a"), 200), limit)
    assert [(r.ref, r.rank, r.raw, r.block_index) for r in result.rows] == expected


class _OpenTailHits(_FixedHits):
    """Answers an ``open_tail`` search as an engine may: the last run of tied scores holds the run's
    *last* points instead of its first (in protocol order among themselves). Counts the searches."""

    def __init__(self, hits: list[VectorHit]) -> None:
        super().__init__(hits)
        self.calls: list[bool] = []

    async def search(
        self, vector: object, flt: VectorFilter, limit: int, *, open_tail: bool = False
    ) -> list[VectorHit]:
        self.calls.append(open_tail)
        every = await super().search(vector, flt, len(self.hits))
        answer = every[:limit]
        if not open_tail or not answer:
            return answer
        start = open_tail_start(answer)
        end = start
        while end < len(every) and abs(every[end].score - answer[start].score) <= TIE_EPSILON:
            end += 1
        return answer[:start] + every[end - (len(answer) - start) : end]


@settings(max_examples=300, deadline=None)
@given(
    raw=_RAW_HITS,
    limit=st.integers(min_value=1, max_value=6),
    max_hits=st.integers(min_value=1, max_value=12),
)
async def test_an_open_tail_never_changes_the_arm(
    raw: list[tuple[str, int, ParentKind | None, float]], limit: int, max_hits: int
) -> None:
    # The arm searches with the tied run at the far end left open and repeats the search only when its
    # cut falls in that run: its rows must equal a collapse of the complete answer.
    store = _OpenTailHits(_hits_of(raw))
    result = await block_arm(store, _unit(1.0), ReadScope("a"), limit=limit, max_hits=max_hits)  # type: ignore[arg-type]
    assert store.calls[0] is True
    assert len(store.calls) <= 2
    expected = _collapse_every_hit(
        await _FixedHits(store.hits).search(None, VectorFilter("a"), max_hits), limit
    )
    assert [(r.ref, r.rank, r.raw, r.block_index) for r in result.rows] == expected


async def test_the_arm_searches_once_when_its_cut_is_above_the_open_tail() -> None:
    parents = [str(uuid.UUID(int=n + 1)) for n in range(8)]
    scores = [0.9, 0.85, 0.8, 0.5, 0.5, 0.5, 0.5, 0.5]
    hits = [
        VectorHit(block_id("memory", p, 0), s, "block", p, 1, 0.0)
        for p, s in zip(parents, scores, strict=True)
    ]
    store = _OpenTailHits(hits)
    result = await block_arm(store, _unit(1.0), ReadScope("a"), limit=2, max_hits=5)  # type: ignore[arg-type]
    assert [r.ref for r in result.rows] == [f"mem:{parents[0]}", f"mem:{parents[1]}"]
    assert store.calls == [True]
    # A cut inside the tied run needs the run complete: the search is repeated once.
    store = _OpenTailHits(hits)
    result = await block_arm(store, _unit(1.0), ReadScope("a"), limit=4, max_hits=5)  # type: ignore[arg-type]
    assert store.calls == [True, False]
    assert [r.ref for r in result.rows][-1] == f"mem:{parents[3]}"


# ------------------------------------------------------------------------------------------ end to end

LONG = (
    "Our team offsite planning notes cover several topics that came up this quarter.\n\n"
    "The catering budget for the spring event was approved at four thousand euros. "
    "Vegetarian options must make up half of every menu.\n\n"
    "The badge printer in the lobby jams whenever the humidity is high. "
    "Facilities promised to move it next to the mail room.\n\n"
    "Marta's cat, a grey tabby called Pixel, learned to open the pantry door during the office visit. "
    "Everyone agreed this was the highlight of the week.\n\n"
    "Parking passes for contractors are issued by the front desk on weekdays only."
)


@pytest.fixture
def engine_settings(vector_settings: Settings) -> Settings:
    return vector_settings


def _ids(kind: str, text: str, parent: str) -> list[str]:
    return [block_id(kind, parent, i) for i in range(len(split_blocks(text)))]  # type: ignore[arg-type]


async def _block_count(engine: cpersona.Engine, agent: str) -> int:
    assert engine.backends.blocks is not None
    return await engine.backends.blocks.count(VectorFilter(agent_id=agent, kinds=("block",)))


async def test_store_queues_and_drain_builds_every_block(vector_engine: cpersona.Engine) -> None:
    stored = await vector_engine.store(LONG, agent_id="a", project_id="p", channel="c")
    episode = await vector_engine.archive_episode(
        "We fixed the badge printer. Then we went home.", agent_id="a"
    )
    assert await vector_engine.backends.stores.redis.xlen(vector_engine.keys.block_stream) == 2
    assert await vector_engine.drain_blocks() == 2
    assert await vector_engine.backends.stores.redis.xlen(vector_engine.keys.block_stream) == 0
    assert await vector_engine.drain_blocks() == 0
    assert vector_engine.backends.blocks is not None
    wanted = _ids("memory", LONG, stored.id)
    assert len(wanted) == 8
    assert await vector_engine.backends.blocks.existing(wanted) == set(wanted)
    ep_ids = _ids("episode", "We fixed the badge printer. Then we went home.", episode.ref[3:])
    assert await vector_engine.backends.blocks.existing(ep_ids) == set(ep_ids)
    assert await _block_count(vector_engine, "a") == len(wanted) + len(ep_ids)
    # Blocks carry the parent's scope: a project the record is not in does not see them.
    flt = VectorFilter(agent_id="a", project_ids=("other", ""), kinds=("block",))
    assert await vector_engine.backends.blocks.count(flt) == len(ep_ids)
    # Draining again (an event processed twice) rewrites the same points.
    await vector_engine.backends.stores.redis.xadd(
        vector_engine.keys.block_stream, {"key": vector_engine.keys.memory(stored.id)}
    )
    assert await vector_engine.drain_blocks() == 1
    assert await _block_count(vector_engine, "a") == len(wanted) + len(ep_ids)


async def test_a_short_record_gets_one_block(vector_engine: cpersona.Engine) -> None:
    stored = await vector_engine.store("The wifi password is on the fridge", agent_id="a")
    await vector_engine.drain_blocks()
    assert vector_engine.backends.blocks is not None
    assert await vector_engine.backends.blocks.existing([block_id("memory", stored.id, 0)]) == {
        block_id("memory", stored.id, 0)
    }
    assert await _block_count(vector_engine, "a") == 1


async def test_update_rebuilds_and_delete_removes(vector_engine: cpersona.Engine) -> None:
    assert vector_engine.backends.blocks is not None
    stored = await vector_engine.store("One. Two. Three. Four. Five.", agent_id="a")
    await vector_engine.drain_blocks()
    assert await _block_count(vector_engine, "a") == 5
    await vector_engine.update(stored.ref, agent_id="a", metadata={"k": "v"})
    assert (
        await vector_engine.backends.stores.redis.xlen(vector_engine.keys.block_stream) == 0
    )  # no text change, no rebuild
    await vector_engine.update(stored.ref, agent_id="a", content="Only one. And two.")
    assert await vector_engine.drain_blocks() == 1
    assert await _block_count(vector_engine, "a") == 2
    old = block_ids("memory", stored.id, 5)
    assert await vector_engine.backends.blocks.existing(old) == set(old[:2])
    await vector_engine.delete(stored.ref, agent_id="a")
    assert await _block_count(vector_engine, "a") == 0
    # An event left for a record deleted before it was built is acknowledged and builds nothing.
    gone = await vector_engine.store("Stored and deleted. Before any build.", agent_id="a")
    await vector_engine.delete(gone.ref, agent_id="a")
    assert await vector_engine.drain_blocks() == 1
    assert await _block_count(vector_engine, "a") == 0
    assert await vector_engine.backends.stores.redis.xlen(vector_engine.keys.block_stream) == 0


async def test_delete_agent_data_removes_the_agents_blocks_only(vector_engine: cpersona.Engine) -> None:
    await vector_engine.store("Alpha fact. Beta fact.", agent_id="a")
    await vector_engine.store("Gamma fact. Delta fact.", agent_id="b")
    await vector_engine.drain_blocks()
    await vector_engine.delete_agent_data("a")
    assert await _block_count(vector_engine, "a") == 0
    assert await _block_count(vector_engine, "b") == 2


QUESTION = "What is the name of Marta's cat?"


async def test_the_block_arm_finds_the_paragraph_that_answers(vector_engine: cpersona.Engine) -> None:
    stored = await vector_engine.store(LONG, agent_id="a")
    for i, filler in enumerate(("The quarterly report is due on Friday.", "Lunch is served at noon.")):
        await vector_engine.store(filler, agent_id="a", id=f"f{i}")
    await vector_engine.drain_blocks()
    assert vector_engine.backends.blocks is not None
    assert vector_engine.backends.embedder is not None
    vector = await vector_engine.backends.embedder.embed_query(QUESTION)
    result = await block_arm(vector_engine.backends.blocks, vector, ReadScope("a"), limit=3, max_hits=HITS)
    top = result.rows[0]
    assert top.ref == stored.ref
    spans = split_blocks(LONG)
    assert top.block_index is not None
    assert "Pixel" in LONG[slice(*spans[top.block_index])]


async def test_recall_holds_a_block_seat_for_a_record_the_arms_did_not_return(
    vector_engine: cpersona.Engine,
) -> None:
    # Two long records answer; with limit=1 only one can be returned, and the other gets a block seat.
    first = await vector_engine.store(LONG, agent_id="a")
    second_text = LONG.replace(
        "Marta's cat, a grey tabby called Pixel", "Marta's other cat, a black one called Ink"
    )
    second = await vector_engine.store(second_text, agent_id="a")
    await vector_engine.drain_blocks()
    result = await vector_engine.recall(QUESTION, agent_id="a", limit=1)
    returned = [row.ref for row in result.rows if (row.match_reason or {}).get("signal") != "block"]
    seats = [row for row in result.rows if (row.match_reason or {}).get("signal") == "block"]
    assert len(returned) == 1
    assert seats, result.model_dump(mode="json")
    seat = seats[0]
    assert seat.ref in {first.ref, second.ref} - set(returned)
    reason = dict(seat.match_reason or {})
    assert reason["signal"] == "block"
    assert reason["admission"] == "reservation"
    assert reason["order"] == "vector"
    text = LONG if seat.ref == first.ref else second_text
    assert "cat" in text[slice(*split_blocks(text)[reason["block"]])]
    assert 0.0 < reason["cosine"] <= 1.0
    assert len(result.rows) <= 1 + 2


async def test_no_other_agents_blocks_ever_appear(vector_engine: cpersona.Engine) -> None:
    mine = await vector_engine.store("The launch code word is marmalade. Keep it quiet.", agent_id="a")
    theirs = await vector_engine.store(LONG, agent_id="b")
    await vector_engine.store(LONG, agent_id="a", project_id="secret")
    await vector_engine.drain_blocks()
    assert vector_engine.backends.blocks is not None
    assert vector_engine.backends.embedder is not None
    vector = await vector_engine.backends.embedder.embed_query(QUESTION)
    rows = (
        await block_arm(
            vector_engine.backends.blocks, vector, ReadScope("a", project_id=""), limit=10, max_hits=HITS
        )
    ).rows
    assert [r.ref for r in rows] == [mine.ref]
    result = await vector_engine.recall(QUESTION, agent_id="a", project_id="", limit=5)
    assert {row.ref for row in result.rows} <= {mine.ref}
    assert theirs.ref not in {
        row.ref for row in (await vector_engine.recall(QUESTION, agent_id="a", limit=5)).rows
    }


async def test_pending_events_of_a_dead_consumer_are_built_after_restart(engine_settings: Settings) -> None:
    async with cpersona.open(engine_settings, background=False) as first:
        refs = [(await first.store(f"Fact number {i}. It matters.", agent_id="a")).ref for i in range(3)]
        # A worker reads the events and dies before acknowledging them.
        read = await first.backends.stores.redis.xreadgroup(
            first.keys.block_group, "dead-worker", {first.keys.block_stream: ">"}, count=10
        )
        assert len(read[0][1]) == 3
        assert await _block_count(first, "a") == 0
    async with cpersona.open(engine_settings, background=False) as second:
        assert await second.drain_blocks() == 3
        assert await _block_count(second, "a") == 6
        # types-redis (which redis-om installs) leaves the stream commands unannotated.
        pending = await second.backends.stores.redis.xpending(  # type: ignore[no-untyped-call]
            second.keys.block_stream, second.keys.block_group
        )
        assert pending["pending"] == 0
        assert await second.backends.stores.redis.xlen(second.keys.block_stream) == 0
        for ref in refs:
            assert await second.backends.blocks.existing([block_id("memory", ref[4:], 0)])  # type: ignore[union-attr]


async def test_events_that_keep_failing_are_dropped_not_retried_forever(
    vector_engine: cpersona.Engine,
) -> None:
    builder = BlockBuilder(
        records=vector_engine.backends.records,
        queue=RedisBlockQueue(vector_engine.backends.stores.redis, vector_engine.keys, consumer="flaky"),
        blocks=vector_engine.backends.blocks,  # type: ignore[arg-type]
        embedder=vector_engine.backends.embedder,  # type: ignore[arg-type]
        max_per_record=64,
        max_chars=739,
        redis_timeout_secs=5.0,
    )
    await vector_engine.store("A record whose build keeps failing.", agent_id="a")
    stream, group = vector_engine.keys.block_stream, vector_engine.keys.block_group
    await vector_engine.backends.stores.redis.xreadgroup(group, "flaky", {stream: ">"}, count=10)
    for _ in range(11):  # each read of the pending entry is one more delivery
        await vector_engine.backends.stores.redis.xreadgroup(group, "flaky", {stream: "0"}, count=10)
    assert await builder.drain() == 0
    pending = await vector_engine.backends.stores.redis.xpending(stream, group)  # type: ignore[no-untyped-call]  # types-redis: XPENDING unannotated
    assert pending["pending"] == 0
    assert await _block_count(vector_engine, "a") == 0


async def test_without_an_embedder_no_blocks_are_queued(
    redis: object, redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    settings_ = Settings(data_dir=tmp_path, redis_url=redis_url, key_prefix=key_prefix, embedding_mode="none")
    async with cpersona.open(settings_) as memory:
        await memory.store("No vectors. No blocks.", agent_id="a")
        assert memory.backends.blocks is None
        assert await memory.backends.stores.redis.exists(memory.keys.block_stream) == 0
        assert await memory.drain_blocks() == 0
        result = await memory.recall("vectors", agent_id="a", limit=3)
        assert not any((row.match_reason or {}).get("signal") == "block" for row in result.rows)


async def _wait_for_blocks(memory: cpersona.Engine, agent: str, count: int) -> None:
    """Until the worker has written ``count`` blocks and acknowledged (and so deleted) every event."""
    with anyio.fail_after(15):
        for _ in itertools.count():
            if (
                await _block_count(memory, agent) >= count
                and await memory.backends.stores.redis.xlen(memory.keys.block_stream) == 0
            ):
                return
            await anyio.sleep(0.05)


async def test_open_runs_the_worker_in_the_background(engine_settings: Settings) -> None:
    async with cpersona.open(engine_settings) as memory:
        await memory.store("Built in the background. Without a drain.", agent_id="a")
        await _wait_for_blocks(memory, "a", 2)
        # The stream and its group vanish (a flush, say): the worker recreates them and carries on.
        await memory.backends.stores.redis.delete(memory.keys.block_stream)
        await memory.store("Stored after the flush. Still built.", agent_id="a")
        await _wait_for_blocks(memory, "a", 4)


async def test_the_http_lifespan_runs_the_worker(engine_settings: Settings, redis: RedisClient) -> None:
    app = create_app(engine_settings)
    async with running(app) as (_, state):
        memory = state["engine"]
        await memory.store("Served over HTTP. Built by the lifespan's worker.", agent_id="a")
        await _wait_for_blocks(memory, "a", 2)
    keys = Keys(engine_settings.key_prefix)
    # A worker with nothing pending leaves the consumer group when the app stops.
    assert await redis.xinfo_consumers(keys.block_stream, keys.block_group) == []  # type: ignore[no-untyped-call]
