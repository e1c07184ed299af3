"""The benchmarks' "same rows as one caller" check holds rankings to the embedder's promise and no more:
rows may trade places only where their cosines lie within ``COSINE_TOLERANCE`` of each other."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest
from benchmarks.same_rows import compare, ranked

from answers import differences
from cpersona.stores.embedding.embedders import COSINE_TOLERANCE
from test_query_coalescing import QUESTIONS

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from contextlib import AbstractAsyncContextManager

    import cpersona

AGENT = "same-rows"
NOTES = [
    "Caroline went hiking in the Alps last summer with her sister.",
    "Melanie plays the cello in a community orchestra on Thursdays.",
    "Jon lost his job at the bank in March and started a bakery.",
    "Gina recommended a novel about a lighthouse keeper.",
    "Nate has three children, the youngest just started school.",
    "John cooked a big pot of chili for the office party.",
    "Maria painted a sunrise over the harbour for her mother.",
    "Maria moved to Lisbon for a new job in design.",
]


def test_rows_in_the_same_order_are_the_same() -> None:
    rows = (("a", 0.9), ("b", 0.8), ("k", None))
    assert compare(rows, rows) == "same"


def test_rows_may_trade_places_only_inside_the_cosine_tolerance() -> None:
    near = 0.5 + COSINE_TOLERANCE / 2
    assert compare((("a", 0.5), ("b", near)), (("b", near), ("a", 0.5))) == "tied"
    # A last row that gave way to one of (nearly) its cosine.
    assert compare((("a", 0.9), ("b", 0.5)), (("a", 0.9), ("c", near))) == "tied"
    far = 0.5 + COSINE_TOLERANCE * 2
    assert compare((("a", 0.5), ("b", far)), (("b", far), ("a", 0.5))) == "different"
    # Rows without a cosine (a keyword hit) cannot be tied, nor lists of another length.
    assert compare((("a", None), ("b", None)), (("b", None), ("a", None))) == "different"
    assert compare((("a", 0.5),), (("a", 0.5), ("b", 0.4))) == "different"


@pytest.fixture(scope="module")
async def memory(
    open_test_engine: Callable[..., AbstractAsyncContextManager[cpersona.Engine]],
) -> AsyncIterator[cpersona.Engine]:
    # No query cache: every recall embeds its question, alone or coalesced with the others.
    async with open_test_engine("samerows", embedding_cache_size=0) as engine:
        await engine.store_batch([{"agent_id": AGENT, "content": note} for note in NOTES])
        yield engine


async def test_concurrent_recalls_return_the_rows_of_one_caller_up_to_near_ties(
    memory: cpersona.Engine,
) -> None:
    alone = [
        ranked(await memory.recall(q, agent_id=AGENT, limit=5), key=lambda row: row.ref) for q in QUESTIONS
    ]
    together: dict[int, tuple[tuple[str, float | None], ...]] = {}

    async def ask(i: int) -> None:
        result = await memory.recall(QUESTIONS[i], agent_id=AGENT, limit=5)
        together[i] = ranked(result, key=lambda row: row.ref)

    async with anyio.create_task_group() as tg:
        for i in range(len(QUESTIONS)):
            tg.start_soon(ask, i)
    assert all(rows for rows in alone)
    assert any(cos is not None for rows in alone for _, cos in rows)
    assert "different" not in [compare(together[i], alone[i]) for i in range(len(QUESTIONS))]


def test_two_answers_agree_up_to_the_cosine_tolerance_and_nothing_else() -> None:
    want = {"rows": [{"ref": "mem:a", "match_reason": {"cosine": 0.5, "rrf": 0.0325}}], "count": 1}
    near = {
        "rows": [{"ref": "mem:a", "match_reason": {"cosine": 0.5 + COSINE_TOLERANCE / 2, "rrf": 0.0325}}],
        "count": 1,
    }
    assert differences(near, want) == []
    far = {
        "rows": [{"ref": "mem:a", "match_reason": {"cosine": 0.5 + COSINE_TOLERANCE * 2, "rrf": 0.0325}}],
        "count": 1,
    }
    assert differences(far, want) == [".rows[0].match_reason.cosine"]
    assert differences({**want, "count": 2}, want) == [".count"]
    assert differences({"rows": [], "count": 1}, want) == [".rows length 0 != 1"]
    assert differences({**want, "extra": None}, want) == [" keys ['extra']"]
