"""The embedder without onnx, onnxruntime or tokenizers, held to what those packages compute.

The default install runs all-MiniLM-L6-v2 in numpy (:mod:`cpersona.stores.embedding.bert`), reads the int8
weights with its own protobuf reader (:mod:`.onnx_reader`) and tokenizes in pure Python
(:mod:`.wordpiece`). The three packages are in the ``test`` extra only, as the reference here:

* the reader sees the same tensors as ``onnx.load``, byte for byte, and so the same weights;
* the vectors equal the onnxruntime graph's (``benchmarks/embedding_ort.py``, the embedder before) within
  1e-5 on LoCoMo turns and on long, near-empty, CJK and emoji texts, alone and in batches of mixed length;
* the token ids equal ``tokenizers``' for every LoCoMo string, for hand-made Unicode edge cases, and the
  normalizer and pre-tokenizer agree on every code point Python's Unicode tables know;
* embedding a sentence with the default embedder imports neither onnxruntime nor tokenizers.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import unicodedata
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from benchmarks.quality.locomo import DEFAULT_DATA

from cpersona.settings import Settings
from cpersona.stores.embedding import wordpiece
from cpersona.stores.embedding.embedders import ONNX_MAX_TOKENS, OnnxEmbedder
from cpersona.stores.embedding.model_files import ModelFiles
from cpersona.stores.embedding.onnx_graph import OrtReference
from cpersona.stores.embedding.onnx_reader import OnnxGraph, OnnxNode, read_graph
from cpersona.stores.embedding.quantized import dequantized_weights, weights_of_graph

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

onnx = pytest.importorskip("onnx")
tokenizers = pytest.importorskip("tokenizers")
pytest.importorskip("onnxruntime")

FILES = ModelFiles.default()

EDGE_TEXTS = [
    "",
    " ",
    "\n\t ",
    ".",
    "ok",
    "Héllo Wörld ÅÉÎÕÜ, naïve café résumé",
    "ΟΔΟΣ Σίσυφος İstanbul ǅ ẞ ß ﬁ \uff26\uff35\uff2c\uff2c \U0001d41b\U0001d428\U0001d425\U0001d41d",
    "日本語のテキストと中文分词测试、한국어 텍스트",
    "ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "emoji 😀🎉👨‍👩‍👧 🥰 party 🇯🇵 ❤️",
    "tab\there\nnew\rline\x0bvt\x0cff\x1cfs",
    "zero\u200bwidth\ufeffbom\u200djoiner\u2060wj",
    "ctrl\x00\x01\x7f\x85chars\ufffd\ue000private",
    "\u0301leading combining, a\u0308 e\u0301\u0327",
    "\u3000ideographic\u00a0nbsp\u2028line\u2029para\u202fnarrow",
    "a" * 100,
    "a" * 101,
    "supercalifragilisticexpialidocious" * 3,
    "[CLS] in text [SEP]x[MASK]y[PAD][UNK] [cls]",
    "$100 + 5% = <cheap>? ^_^ `code` |pipe| ~tilde~ @user #tag",
    "«guillemets» „quotes“ — dash… ¿qué? ¡sí! 【括弧】「かぎ」",
    "x" * 3000,
    "word " * 500,
    "The quick brown fox jumps over the lazy dog. " * 40,
]


def _locomo_strings() -> list[str]:
    """Every string in the LoCoMo file (turns, captions, questions, answers, names); none without it."""
    if not DEFAULT_DATA.is_file():
        return []

    def walk(value: Any) -> Iterator[str]:
        if isinstance(value, str):
            yield value
        elif isinstance(value, dict):
            for item in value.values():
                yield from walk(item)
        elif isinstance(value, list):
            for item in value:
                yield from walk(item)

    return list(walk(json.loads(DEFAULT_DATA.read_text("utf-8"))))


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> OrtReference:
    return OrtReference(
        FILES, tmp_path_factory.mktemp("ort-reference"), threads=2, max_tokens=ONNX_MAX_TOKENS
    )


# --------------------------------------------------------------------------- the weights


def _onnx_graph(path: Path) -> OnnxGraph:
    """The same view of the file, read by the onnx package."""
    from onnx import numpy_helper

    graph = onnx.load(str(path)).graph
    nodes = tuple(OnnxNode(n.op_type, tuple(n.input), tuple(n.output)) for n in graph.node)
    return OnnxGraph(nodes, {t.name: numpy_helper.to_array(t) for t in graph.initializer})


def _assert_same_tensors(
    ours: dict[str, np.ndarray[Any, Any]], theirs: dict[str, np.ndarray[Any, Any]]
) -> None:
    assert list(ours) == list(theirs)
    for name, array in theirs.items():
        assert ours[name].dtype == array.dtype, name
        assert ours[name].shape == array.shape, name
        assert ours[name].tobytes() == array.tobytes(), name


def test_reader_sees_what_onnx_sees_and_the_weights_are_the_same_bytes() -> None:
    ours, theirs = read_graph(FILES.weights), _onnx_graph(FILES.weights)
    assert ours.nodes == theirs.nodes
    _assert_same_tensors(ours.initializers, theirs.initializers)
    _assert_same_tensors(dequantized_weights(FILES.weights), weights_of_graph(theirs))


def test_reader_decodes_the_typed_data_fields_too(tmp_path: Path) -> None:
    """Tensors kept in float_data / int32_data / int64_data rather than raw_data, packed as onnx writes."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(3)
    tensors = [
        helper.make_tensor("f", TensorProto.FLOAT, [2, 3], rng.standard_normal(6).astype(np.float32)),
        helper.make_tensor("i8", TensorProto.INT8, [4], [-128, -1, 0, 127]),
        helper.make_tensor("u8", TensorProto.UINT8, [2], [0, 255]),
        helper.make_tensor("i32", TensorProto.INT32, [3], [-(2**31), 0, 2**31 - 1]),
        helper.make_tensor("i64", TensorProto.INT64, [2, 1], [-(2**63), 2**63 - 1]),
        helper.make_tensor("b", TensorProto.BOOL, [2], [True, False]),
        helper.make_tensor("h", TensorProto.FLOAT16, [2], np.array([1.5, -2.25], dtype=np.float16)),
        helper.make_tensor("scalar", TensorProto.FLOAT, [], [7.0]),
        helper.make_tensor("raw", TensorProto.FLOAT, [2], np.array([1, 2], np.float32).tobytes(), raw=True),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    node = helper.make_node("Identity", ["x"], ["y"], name="n")
    onnx.save(helper.make_model(helper.make_graph([node], "g", [x], [y], tensors)), str(tmp_path / "m.onnx"))
    ours, theirs = read_graph(tmp_path / "m.onnx"), _onnx_graph(tmp_path / "m.onnx")
    assert ours.nodes == theirs.nodes == (OnnxNode("Identity", ("x",), ("y",)),)
    _assert_same_tensors(ours.initializers, theirs.initializers)


def test_reader_refuses_what_is_no_onnx_model(tmp_path: Path) -> None:
    (tmp_path / "junk.onnx").write_bytes(b"\xff\xff\xff")
    with pytest.raises(ValueError, match=r"varint|wire type|not an ONNX model"):
        read_graph(tmp_path / "junk.onnx")
    (tmp_path / "empty.onnx").write_bytes(b"")
    with pytest.raises(ValueError, match="not an ONNX model"):
        read_graph(tmp_path / "empty.onnx")


# --------------------------------------------------------------------------- the vectors


async def test_numpy_vectors_equal_onnxruntime_alone_and_in_mixed_batches(
    reference: OrtReference, tmp_path: Path
) -> None:
    turns = [text for text in _locomo_strings() if len(text) > 20][:300]
    corpus = [*EDGE_TEXTS, *turns]
    expected = np.concatenate([reference.embed([text]) for text in corpus])
    for threads in (1, 2):  # one thread, and a batch cut into parts that run in two threads
        embedder = await OnnxEmbedder.open(Settings(data_dir=tmp_path, embedding_threads=threads))
        try:
            batched = np.stack(await embedder.embed(corpus))
            alone = np.stack([await embedder.embed_query(text) for text in EDGE_TEXTS])
        finally:
            await embedder.aclose()
        assert batched.dtype == np.float32
        np.testing.assert_allclose(batched, expected, rtol=0, atol=1e-5)
        np.testing.assert_allclose(alone, expected[: len(EDGE_TEXTS)], rtol=0, atol=1e-5)
        assert float((batched * expected).sum(axis=1).min()) >= 1 - 1e-5


# --------------------------------------------------------------------------- the tokens


def _hf_tokenizer() -> Any:
    tokenizer = tokenizers.Tokenizer.from_file(str(FILES.tokenizer))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=ONNX_MAX_TOKENS)
    return tokenizer


def test_wordpiece_ids_equal_tokenizers_on_locomo_and_edge_cases() -> None:
    strings = _locomo_strings()
    if DEFAULT_DATA.is_file():
        assert len(strings) > 30_000
    hf, ours = _hf_tokenizer(), wordpiece.WordPieceTokenizer.from_file(FILES.tokenizer, ONNX_MAX_TOKENS)
    for text in [*EDGE_TEXTS, *strings]:
        assert ours.encode(text) == hf.encode(text).ids, text[:80]
    assert len(ours.encode("word " * 500)) == ONNX_MAX_TOKENS


# Characters of Unicode 15-16, which Python 3.11's tables (14.0) do not have, so it cannot know their
# lowercase; and one whose decomposition tokenizers' tables do not apply.
_KNOWN_UNMATCHED = frozenset({"\U00011938"})


def test_normalizer_and_pre_tokenizer_agree_on_every_code_point() -> None:
    normalizer = tokenizers.normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True
    )
    pre = tokenizers.pre_tokenizers.BertPreTokenizer()
    wrong = []
    for cp in range(0x110000):
        char = chr(cp)
        if 0xD800 <= cp <= 0xDFFF or char in _KNOWN_UNMATCHED:
            continue
        known = unicodedata.category(char) != "Cn"
        text = f"a{char}b"
        theirs = [word for word, _ in pre.pre_tokenize_str(normalizer.normalize_str(text))]
        if theirs != wordpiece._words(text) and known:
            wrong.append(f"U+{cp:04X}")
    assert not wrong, wrong[:50]


# --------------------------------------------------------------------------- what the default install needs


def test_default_embedder_imports_no_onnxruntime_onnx_or_tokenizers(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import sys, anyio
        from pathlib import Path
        import cpersona
        from cpersona.settings import Settings
        from cpersona.stores.embedding.embedders import open_embedder

        async def main():
            embedder = await open_embedder(Settings(data_dir=Path({str(tmp_path)!r})))
            vector = await embedder.embed_query("the default embedder needs no runtime")
            await embedder.aclose()
            assert vector.shape == (384,), vector.shape

        anyio.run(main)
        loaded = [name for name in ("onnxruntime", "onnx", "tokenizers", "torch") if name in sys.modules]
        print(",".join(loaded))
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", f"the default embedder imported {result.stdout.strip()}"
