"""``CPERSONA_EMBEDDING_MODEL``: one registry of models, a refused unknown name, and each model's query and
passage prefixes put before the texts by the embedder (the query cache keyed by the bare query).

A model with prefixes is registered here the way a new model is added: an entry in
``cpersona.embedding_models`` and a loader in ``loaders.LOADERS`` (here MiniLM's own files under
another name, so the test runs the real graph with prefixes MiniLM was not trained with)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import numpy as np
import pytest

from cpersona import InvalidSetting, Settings
from cpersona.embedding_models import DEFAULT_EMBEDDING_MODEL, EMBEDDING_MODELS, EmbeddingModel
from cpersona.stores.embedding.embedders import VECTOR_TOLERANCE, OnnxEmbedder
from cpersona.stores.embedding.loaders import LOADERS, ModelSource

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from pathlib import Path

PREFIXED = EmbeddingModel(
    name="minilm-with-prefixes", dim=384, max_tokens=256, query_prefix="query: ", passage_prefix="passage: "
)


@pytest.fixture
def prefixed_model(monkeypatch: pytest.MonkeyPatch) -> EmbeddingModel:
    """:data:`PREFIXED` registered for the length of one test."""
    monkeypatch.setitem(cast("dict[str, EmbeddingModel]", EMBEDDING_MODELS), PREFIXED.name, PREFIXED)
    loaders = cast("dict[str, Callable[[Path], ModelSource]]", LOADERS)
    monkeypatch.setitem(loaders, PREFIXED.name, LOADERS["all-MiniLM-L6-v2"])
    return PREFIXED


@pytest.fixture
async def plain(model_dir: Path) -> AsyncIterator[OnnxEmbedder]:
    embedder = await OnnxEmbedder.open(Settings(data_dir=model_dir, embedding_model="all-MiniLM-L6-v2"))
    yield embedder
    await embedder.aclose()


def test_the_default_is_e5_and_every_model_has_its_loader() -> None:
    assert Settings.from_env({}).embedding_model == DEFAULT_EMBEDDING_MODEL == "multilingual-e5-small"
    assert EMBEDDING_MODELS[DEFAULT_EMBEDDING_MODEL].dim == 384
    assert set(LOADERS) == set(EMBEDDING_MODELS)


def test_an_unknown_model_is_refused_naming_the_setting_and_the_choices() -> None:
    with pytest.raises(InvalidSetting) as err:
        Settings.from_env({"CPERSONA_EMBEDDING_MODEL": "multilingual-e5-large"})
    assert err.value.name == "CPERSONA_EMBEDDING_MODEL"
    assert "all-MiniLM-L6-v2" in err.value.problem
    assert "'multilingual-e5-large'" in err.value.problem


def test_a_registered_model_is_accepted(prefixed_model: EmbeddingModel) -> None:
    settings = Settings.from_env({"CPERSONA_EMBEDDING_MODEL": prefixed_model.name})
    assert settings.embedding_model == prefixed_model.name


async def test_the_models_prefixes_go_before_queries_and_passages(
    prefixed_model: EmbeddingModel, plain: OnnxEmbedder, model_dir: Path
) -> None:
    embedder = await OnnxEmbedder.open(Settings(data_dir=model_dir, embedding_model=prefixed_model.name))
    try:
        assert (embedder.name, embedder.dim) == ("onnx:minilm-with-prefixes", 384)
        text = "the staging database password rotates on Fridays"
        query = await embedder.embed_query(text)
        [passage] = await embedder.embed([text])
        [as_query, as_passage, bare] = [
            (await plain.embed([t]))[0] for t in ("query: " + text, "passage: " + text, text)
        ]
        np.testing.assert_allclose(query, as_query, atol=VECTOR_TOLERANCE)
        np.testing.assert_allclose(passage, as_passage, atol=VECTOR_TOLERANCE)
        # The prefixes change the vectors (else this test could not tell them apart).
        assert float(np.max(np.abs(query - bare))) > 1e-3
        assert float(np.max(np.abs(query - passage))) > 1e-3
        # The cache holds the query's vector under the bare query, and hands back the prefixed vector.
        assert embedder.is_cached(text)
        assert not embedder.is_cached("query: " + text)
        np.testing.assert_array_equal(await embedder.embed_query(text), query)
    finally:
        await embedder.aclose()


async def test_without_prefixes_a_query_and_a_passage_are_the_same_text(plain: OnnxEmbedder) -> None:
    text = "camping by the lake with melanie"
    [passage] = await plain.embed([text])
    np.testing.assert_allclose(await plain.embed_query(text), passage, atol=VECTOR_TOLERANCE)
