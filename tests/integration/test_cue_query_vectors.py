"""The cue query's vector arm with the real ONNX embedder and vector engine: the text embedded, a
caller's embedding taking precedence, a wrong dimension refused naming `cue.embedding`, and an image
accepted when its embedding stands for it."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import pytest

from cpersona import InvalidRequest
from traced import trace_json

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    import cpersona


@pytest.fixture(scope="module")
async def shared_engine(open_test_engine: Callable[..., Any]) -> AsyncIterator[cpersona.Engine]:
    async with open_test_engine("v") as memory:
        yield memory


def _texts(result: Any) -> list[str]:
    return [bytes(m.record.content["blocks"][0]["data"]).decode() for m in result.memories]


async def test_text_is_embedded_and_a_caller_vector_takes_precedence(shared_engine: cpersona.Engine) -> None:
    agent = "vq" + uuid.uuid4().hex[:8]
    await shared_engine.store("the cat sleeps on the sofa", agent_id=agent)
    await shared_engine.store("quarterly revenue grew strongly", agent_id=agent)
    await shared_engine.finish_pending()
    # No word in common with either: only the vector arm can find the cat.
    by_text = await shared_engine.query({"text": "kitten napping on a couch"}, agent_id=agent, trace=True)
    assert _texts(by_text)[0] == "the cat sleeps on the sofa"
    assert by_text.trace is not None
    assert trace_json(by_text)["arms"]["vector"]["status"] == "ok"
    assert embedder_of(shared_engine) is not None
    money = await embedder_of(shared_engine).embed_query("company earnings and profits")
    by_vector = await shared_engine.query(
        {"text": "kitten napping on a couch", "embedding": [float(x) for x in money]},
        agent_id=agent,
        activation_depth=0,
        trace=True,
    )
    assert by_vector.trace is not None
    vector_rows = trace_json(by_vector)["arms"]["vector"]["rows"]
    assert vector_rows[0]["ref"] == by_vector.memories[0].record.ref
    assert _texts(by_vector)[0] == "quarterly revenue grew strongly"
    # An image with its embedding is searched by the embedding.
    with_image = await shared_engine.query(
        {"image": [137, 80, 78, 71], "embedding": [float(x) for x in money]}, agent_id=agent
    )
    assert _texts(with_image)[0] == "quarterly revenue grew strongly"


async def test_a_wrong_dimension_is_refused(shared_engine: cpersona.Engine) -> None:
    for embedding in ([0.1] * 3, [0.0] * embedder_of(shared_engine).dim):
        with pytest.raises(InvalidRequest) as err:
            await shared_engine.query({"embedding": embedding}, agent_id="vq-dim")
        assert err.value.field == "cue.embedding"


def embedder_of(engine: cpersona.Engine) -> Any:
    return engine.backends.embedder
