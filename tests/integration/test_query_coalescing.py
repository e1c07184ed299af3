"""Concurrent query embeddings run together: the same vectors as one at a time (within the embedder's
promise, ``VECTOR_TOLERANCE``), in fewer batches, and no caller stranded by another's failure or
cancellation. The batches run the real MiniLM
embedder; where a test has to hold a batch open or make it fail, it wraps that embedder in a gate."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import numpy as np
import pytest

from cpersona.errors import EmbedderUnavailable
from cpersona.settings import Settings
from cpersona.stores.embedding.coalesce import QueryCoalescer
from cpersona.stores.embedding.embedders import VECTOR_TOLERANCE, OnnxEmbedder
from suite_model import SUITE_MODEL

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence
    from pathlib import Path

QUESTIONS = [
    "where did Caroline go hiking last summer?",
    "what instrument does Melanie play?",
    "when did Jon lose his job?",
    "which book did Gina recommend?",
    "how many children does Nate have?",
    "what did John cook for the party?",
    "who painted the sunrise picture?",
    "why did Maria move to a new city?",
]


@pytest.fixture(scope="module")
async def embedder(model_dir: Path) -> AsyncIterator[OnnxEmbedder]:
    # Gate embeds the questions as they are; MiniLM puts no prefix before a query, so the two agree.
    settings = Settings(data_dir=model_dir, embedding_cache_size=0, embedding_model=SUITE_MODEL)
    embedder = await OnnxEmbedder.open(settings)
    yield embedder
    await embedder.aclose()


class Gate:
    """The real embedder behind gates the test opens, one per batch, counting the batches it is given."""

    def __init__(self, embedder: OnnxEmbedder, *, fail: bool = False) -> None:
        self.embedder = embedder
        self.fail = fail
        self.gates = [anyio.Event() for _ in range(8)]
        self.batches: list[list[str]] = []

    def open_all(self) -> None:
        for gate in self.gates:
            gate.set()

    async def __call__(self, texts: Sequence[str]) -> list[Any]:
        self.batches.append(list(texts))
        await self.gates[len(self.batches) - 1].wait()
        if self.fail:
            raise EmbedderUnavailable("the embedder is down")
        return await self.embedder.embed(texts)


# Questions of many lengths, several of each: one padded batch of these changed the last bits of most of
# them (a batch of the eight short QUESTIONS alone happened not to).
THINGS = ["garden", "old piano", "trip to the coast", "new job", "painting class", "dog", "sister's wedding"]
VARIED = [
    f"what did {name} say about the {' and the '.join(THINGS[: 1 + (k % len(THINGS))])}?"
    for k, name in enumerate(["Caroline", "Melanie", "Jon", "Gina", "Nate", "John", "Maria"] * 4)
]


async def test_concurrent_queries_get_their_own_vectors_in_fewer_batches(embedder: OnnxEmbedder) -> None:
    asks = QUESTIONS + VARIED
    alone = [await embedder.embed_query(q) for q in asks]
    before = (embedder.queries.batches, embedder.queries.queries)
    got: dict[int, Any] = {}

    async def ask(i: int) -> None:
        got[i] = await embedder.embed_query(asks[i % len(asks)])

    callers = len(asks) + 8
    async with anyio.create_task_group() as tg:
        for i in range(callers):
            tg.start_soon(ask, i)
    batches = embedder.queries.batches - before[0]
    assert embedder.queries.queries - before[1] == callers
    # The first caller runs at once, alone; the rest queued behind it and share the next batch.
    assert batches == 2
    assert len({len(embedder._tokenizer.encode(q)) for q in asks}) > 5
    # What each query gets alone, up to the rounding its company may change.
    for i in range(callers):
        np.testing.assert_allclose(got[i], alone[i % len(asks)], rtol=0, atol=VECTOR_TOLERANCE)
    # Callers asking the same question hold distinct arrays.
    got[0][0] = 99.0
    assert got[len(QUESTIONS)][0] != 99.0


async def test_with_coalescing_off_each_query_runs_alone_with_the_same_bits(
    tmp_path: Path,
    built_models: Path,
) -> None:
    settings = Settings(
        data_dir=tmp_path / "alone",
        embedding_cache_size=0,
        embedding_coalesce=False,
        embedding_model=SUITE_MODEL,
        models_dir=built_models,
    )
    embedder = await OnnxEmbedder.open(settings)
    try:
        alone = [await embedder.embed_query(q) for q in QUESTIONS]
        got: dict[int, Any] = {}

        async def ask(i: int) -> None:
            got[i] = await embedder.embed_query(QUESTIONS[i])

        async with anyio.create_task_group() as tg:
            for i in range(len(QUESTIONS)):
                tg.start_soon(ask, i)
        assert embedder.queries.batches == 0
        for i, vector in enumerate(alone):
            np.testing.assert_array_equal(got[i], vector)
    finally:
        await embedder.aclose()


async def test_a_lone_query_runs_at_once_without_waiting_for_company(embedder: OnnxEmbedder) -> None:
    gate = Gate(embedder)
    coalescer = QueryCoalescer(gate, max_batch=8)
    gate.open_all()
    vector = await coalescer.embed_one(QUESTIONS[0])
    assert gate.batches == [[QUESTIONS[0]]]
    np.testing.assert_allclose(
        vector, await embedder.embed_query(QUESTIONS[0]), rtol=0, atol=VECTOR_TOLERANCE
    )


async def test_batches_are_capped_and_a_repeated_question_is_embedded_once(embedder: OnnxEmbedder) -> None:
    gate = Gate(embedder)
    coalescer = QueryCoalescer(gate, max_batch=3)
    asks = [QUESTIONS[0], QUESTIONS[1], QUESTIONS[1], QUESTIONS[2], QUESTIONS[3], QUESTIONS[4]]
    results: dict[int, Any] = {}

    async def ask(i: int) -> None:
        results[i] = await coalescer.embed_one(asks[i])

    async with anyio.create_task_group() as tg:
        for i in range(len(asks)):
            tg.start_soon(ask, i)
        await anyio.wait_all_tasks_blocked()
        gate.open_all()
    assert gate.batches == [[QUESTIONS[0]], [QUESTIONS[1], QUESTIONS[2]], [QUESTIONS[3], QUESTIONS[4]]]
    np.testing.assert_array_equal(results[1], results[2])
    assert len(results) == len(asks)


async def test_a_failed_batch_fails_each_of_its_callers_and_not_the_next(embedder: OnnxEmbedder) -> None:
    gate = Gate(embedder, fail=True)
    coalescer = QueryCoalescer(gate, max_batch=8)
    outcomes: dict[int, BaseException | None] = {}

    async def ask(i: int) -> None:
        try:
            await coalescer.embed_one(QUESTIONS[i])
        except EmbedderUnavailable as exc:
            outcomes[i] = exc
        else:
            outcomes[i] = None

    async with anyio.create_task_group() as tg:
        for i in range(4):
            tg.start_soon(ask, i)
        await anyio.wait_all_tasks_blocked()
        gate.open_all()
    assert all(isinstance(outcomes[i], EmbedderUnavailable) for i in range(4))
    gate.fail = False
    np.testing.assert_allclose(
        await coalescer.embed_one(QUESTIONS[5]),
        await embedder.embed_query(QUESTIONS[5]),
        rtol=0,
        atol=VECTOR_TOLERANCE,
    )


async def test_a_cancelled_runner_still_serves_the_callers_in_its_batch(embedder: OnnxEmbedder) -> None:
    gate = Gate(embedder)
    coalescer = QueryCoalescer(gate, max_batch=8)
    served: dict[int, Any] = {}
    runner = anyio.CancelScope()

    async def ask(i: int) -> None:
        served[i] = await coalescer.embed_one(QUESTIONS[i])

    async def ask_then_give_up(i: int) -> None:
        with runner:
            await ask(i)

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask, 0)  # runs the first batch, held open
        await anyio.wait_all_tasks_blocked()
        tg.start_soon(ask_then_give_up, 1)  # queued first, so it runs the second batch
        tg.start_soon(ask, 2)
        await anyio.wait_all_tasks_blocked()
        gate.gates[0].set()
        await anyio.wait_all_tasks_blocked()
        assert gate.batches == [[QUESTIONS[0]], [QUESTIONS[1], QUESTIONS[2]]]
        runner.cancel()  # while its batch, holding caller 2's query, is still open
        gate.gates[1].set()
    assert 0 in served
    assert 2 in served
    np.testing.assert_allclose(
        served[2], await embedder.embed_query(QUESTIONS[2]), rtol=0, atol=VECTOR_TOLERANCE
    )
    assert len(gate.batches) == 2


async def test_a_cancelled_waiter_leaves_the_queue(embedder: OnnxEmbedder) -> None:
    gate = Gate(embedder)
    coalescer = QueryCoalescer(gate, max_batch=8)
    served: dict[int, Any] = {}

    async def ask(i: int) -> None:
        served[i] = await coalescer.embed_one(QUESTIONS[i])

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask, 0)  # runs the first batch, held open by the gate
        await anyio.wait_all_tasks_blocked()
        with anyio.CancelScope() as waiter:
            async with anyio.create_task_group() as inner:
                inner.start_soon(ask, 1)
                await anyio.wait_all_tasks_blocked()
                waiter.cancel()
        tg.start_soon(ask, 2)
        await anyio.wait_all_tasks_blocked()
        gate.open_all()
    assert set(served) == {0, 2}
    assert gate.batches == [[QUESTIONS[0]], [QUESTIONS[2]]]


def test_max_batch_must_be_positive(embedder: OnnxEmbedder) -> None:
    with pytest.raises(ValueError, match="max_batch"):
        QueryCoalescer(embedder.embed, max_batch=0)
