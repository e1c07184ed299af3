"""all-MiniLM-L6-v2 (or any BERT sentence encoder of that shape) written as one ONNX graph for onnxruntime.

The graph is built directly with ``onnx.helper`` from the checkpoint's float32 weights: embeddings (word +
absolute position + token type, then LayerNorm), N post-norm transformer layers with the exact (erf) GELU,
then mean pooling over the attention mask and L2 normalisation, so a run returns finished sentence vectors,
as sentence-transformers computes them.

The graph's interface and the cache of built files live in :mod:`cpersona.stores.embedding.graph_file`,
which imports this module only when it has a graph to build. Everything here is blocking: callers run it in a
worker thread.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper, numpy_helper

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from cpersona.stores.embedding.model_files import ModelFiles


from cpersona.stores.embedding.graph_file import BUILDER_VERSION, INPUT_NAMES, OPSET, OUTPUT_NAME

__all__ = ["BertConfig", "BlockQuantized", "build_encoder_graph", "encoder_graph_bytes"]

_IR_VERSION = 8
"""The IR version that goes with opset 17, pinned so a newer ``onnx`` cannot stamp one the runtime refuses."""

# HF BERT adds the float32 minimum to masked attention scores; any value that makes exp() underflow to
# zero would do, and keeping the same one keeps us bit-close to the reference implementation.
_MASK_FILL = float(np.finfo(np.float32).min)
# sentence-transformers clamps the token count before dividing, and F.normalize clamps the norm.
_MIN_TOKEN_COUNT = 1e-9
_MIN_NORM = 1e-12

FloatArray = npt.NDArray[np.float32]


@dataclasses.dataclass(frozen=True, slots=True)
class BertConfig:
    """The part of a Hugging Face ``config.json`` that shapes the encoder."""

    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    layer_norm_eps: float
    vocab_size: int
    max_position_embeddings: int
    type_vocab_size: int

    @classmethod
    def from_file(cls, path: Path) -> BertConfig:
        """Read ``config.json``; refuse the variants this encoder does not compute (other activations,
        relative position embeddings), so a different model fails loudly instead of giving wrong vectors."""
        raw = json.loads(path.read_text(encoding="utf-8"))
        if raw.get("model_type", "bert") != "bert":
            raise ValueError(f"{path}: model_type {raw.get('model_type')!r} is not bert")
        if raw.get("hidden_act", "gelu") != "gelu":
            raise ValueError(f"{path}: hidden_act {raw.get('hidden_act')!r} is not supported (only gelu)")
        if raw.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(f"{path}: only absolute position embeddings are supported")
        config = cls(
            hidden_size=int(raw["hidden_size"]),
            num_hidden_layers=int(raw["num_hidden_layers"]),
            num_attention_heads=int(raw["num_attention_heads"]),
            intermediate_size=int(raw["intermediate_size"]),
            layer_norm_eps=float(raw.get("layer_norm_eps", 1e-12)),
            vocab_size=int(raw["vocab_size"]),
            max_position_embeddings=int(raw["max_position_embeddings"]),
            type_vocab_size=int(raw.get("type_vocab_size", 2)),
        )
        if config.hidden_size % config.num_attention_heads:
            raise ValueError(f"{path}: hidden_size is not a multiple of num_attention_heads")
        return config

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads


class _Graph:
    """Collects nodes and initializers, handing out unique tensor names."""

    def __init__(self, weights: Mapping[str, FloatArray]) -> None:
        self._weights = weights
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._counter = 0

    def _fresh(self, hint: str) -> str:
        self._counter += 1
        return f"{hint}_{self._counter}"

    def op(self, op_type: str, *inputs: str, hint: str = "", **attrs: Any) -> str:
        out = self._fresh(hint or op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=out, **attrs))
        return out

    def const(self, value: npt.ArrayLike, dtype: type[np.generic], hint: str = "const") -> str:
        name = self._fresh(hint)
        self.initializers.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def weight(self, key: str, *, transpose: bool = False) -> str:
        """Add a checkpoint tensor as an initializer. Linear weights are stored ``[out, in]`` by PyTorch;
        transposing once here lets every projection be a plain ``MatMul(x, W)``."""
        try:
            array = self._weights[key]
        except KeyError:
            raise ValueError(f"the weights have no tensor {key!r}") from None
        array = np.asarray(array, dtype=np.float32)
        if transpose:
            array = array.T
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(array), key))
        return key

    def linear(self, x: str, prefix: str) -> str:
        product = self.op("MatMul", x, self.weight(f"{prefix}.weight", transpose=True), hint="matmul")
        return self.op("Add", product, self.weight(f"{prefix}.bias"), hint="linear")

    def layer_norm(self, x: str, prefix: str, eps: float) -> str:
        return self.op(
            "LayerNormalization",
            x,
            self.weight(f"{prefix}.weight"),
            self.weight(f"{prefix}.bias"),
            axis=-1,
            epsilon=eps,
            hint="layernorm",
        )


@dataclasses.dataclass(frozen=True, slots=True)
class BlockQuantized:
    """A matrix kept as small integers with one float scale per block of a row: ``codes * scale``.

    The word embeddings of a large vocabulary stay this way inside the graph (a quarter of their float32
    size) and only the rows a batch gathers are turned into floats, each to exactly the float32 value
    ``code * scale`` the file's own engine computes.
    """

    codes: npt.NDArray[np.int8]
    """``[rows, columns]``."""
    scales: FloatArray
    """``[rows, columns // block]``."""

    @property
    def block(self) -> int:
        return int(self.codes.shape[1] // self.scales.shape[1])

    def dequantized(self) -> FloatArray:
        rows, columns = self.codes.shape
        blocks = self.codes.reshape(rows, -1, self.block).astype(np.float32) * self.scales[:, :, None]
        return blocks.reshape(rows, columns)


def build_encoder_graph(
    weights: Mapping[str, FloatArray],
    config: BertConfig,
    *,
    word_embeddings: BlockQuantized | None = None,
) -> onnx.ModelProto:
    """The whole sentence encoder as one ONNX model.

    Inputs are int64 ``[batch, sequence]`` tensors named :data:`INPUT_NAMES`; the output
    :data:`OUTPUT_NAME` is float32 ``[batch, hidden]``, mean-pooled over the attention mask and of unit
    length. ``word_embeddings`` stands in for ``embeddings.word_embeddings.weight`` when given.
    Raises ``ValueError`` when a tensor the config calls for is missing.
    """
    # The steps below add nodes in the graph's order; node names come from that order, so keep it.
    g = _Graph(weights)
    hidden = _embedded(g, config, word_embeddings)
    mask_f, attn_bias = _attention_bias(g)
    consts = _LayerConsts.of(g, config)
    for layer in range(config.num_hidden_layers):
        hidden = _encoder_layer(g, config, consts, hidden, attn_bias, f"encoder.layer.{layer}")
    _mean_pooled(g, hidden, mask_f)

    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "sequence"]) for n in INPUT_NAMES]
    outputs = [helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, ["batch", config.hidden_size])]
    graph = helper.make_graph(g.nodes, "bert_sentence_encoder", inputs, outputs, g.initializers)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="cpersona",
        producer_version=BUILDER_VERSION,
    )
    model.ir_version = _IR_VERSION
    onnx.checker.check_model(model)
    return model


def _embedded(g: _Graph, config: BertConfig, word_embeddings: BlockQuantized | None) -> str:
    """Word, token-type and position embeddings, summed and normalised."""
    ids, _mask, types = INPUT_NAMES
    i64 = np.int64
    seq_len = g.op("Shape", ids, start=1, end=2, hint="seq_len")
    positions = g.op(
        "Slice",
        g.weight("embeddings.position_embeddings.weight"),
        g.const([0], i64),
        seq_len,
        g.const([0], i64),
        hint="positions",
    )
    if word_embeddings is None:
        words = g.op("Gather", g.weight("embeddings.word_embeddings.weight"), ids, hint="words")
    else:
        words = _gathered_blocks(g, word_embeddings, ids, config.hidden_size)
    token_types = g.op("Gather", g.weight("embeddings.token_type_embeddings.weight"), types, hint="types")
    summed = g.op("Add", g.op("Add", words, token_types), positions, hint="embedded")
    return g.layer_norm(summed, "embeddings.LayerNorm", config.layer_norm_eps)


def _gathered_blocks(g: _Graph, matrix: BlockQuantized, ids: str, width: int) -> str:
    """The rows ``ids`` of a block-quantized matrix as float32 ``[batch, sequence, width]``."""
    i64 = np.int64
    name = "embeddings.word_embeddings"
    g.initializers.append(numpy_helper.from_array(np.ascontiguousarray(matrix.codes), f"{name}.codes"))
    g.initializers.append(
        numpy_helper.from_array(np.ascontiguousarray(matrix.scales, dtype=np.float32), f"{name}.scales")
    )
    codes = g.op("Cast", g.op("Gather", f"{name}.codes", ids), to=TensorProto.FLOAT, hint="word_codes")
    blocked = g.op("Reshape", codes, g.const([0, 0, -1, matrix.block], i64), hint="word_blocks")
    scales = g.op("Unsqueeze", g.op("Gather", f"{name}.scales", ids), g.const([3], i64), hint="word_scales")
    return g.op("Reshape", g.op("Mul", blocked, scales), g.const([0, 0, width], i64), hint="words")


def _attention_bias(g: _Graph) -> tuple[str, str]:
    """The float mask and the additive attention bias that keeps padding keys out of attention."""
    f32, i64 = np.float32, np.int64
    mask_f = g.op("Cast", INPUT_NAMES[1], to=TensorProto.FLOAT, hint="mask_f")
    # [batch, 1, 1, seq]: broadcasts over heads and query positions, so padding keys get no attention.
    blocked = g.op("Sub", g.const(1.0, f32), mask_f, hint="blocked")
    attn_bias = g.op(
        "Unsqueeze", g.op("Mul", blocked, g.const(_MASK_FILL, f32)), g.const([1, 2], i64), hint="attn_bias"
    )
    return mask_f, attn_bias


@dataclasses.dataclass(frozen=True, slots=True)
class _LayerConsts:
    """The constants every encoder layer shares (made once, before the first layer)."""

    split_heads: str
    merge_heads: str
    query_scale: str
    inv_sqrt2: str
    one: str
    half: str

    @classmethod
    def of(cls, g: _Graph, config: BertConfig) -> _LayerConsts:
        f32, i64 = np.float32, np.int64
        return cls(
            split_heads=g.const(
                [0, 0, config.num_attention_heads, config.head_size], i64, hint="split_heads"
            ),
            merge_heads=g.const([0, 0, config.hidden_size], i64, hint="merge_heads"),
            # Scaling the queries instead of the scores is the same product with a smaller tensor.
            query_scale=g.const(1.0 / math.sqrt(config.head_size), f32, hint="query_scale"),
            inv_sqrt2=g.const(1.0 / math.sqrt(2.0), f32, hint="inv_sqrt2"),
            one=g.const(1.0, f32, hint="one"),
            half=g.const(0.5, f32, hint="half"),
        )


def _encoder_layer(
    g: _Graph, config: BertConfig, c: _LayerConsts, hidden: str, attn_bias: str, p: str
) -> str:
    """One transformer layer: self-attention and the feed-forward block, each with its residual norm."""

    def heads(x: str, perm: list[int]) -> str:
        return g.op("Transpose", g.op("Reshape", x, c.split_heads), perm=perm)

    q = heads(g.op("Mul", g.linear(hidden, f"{p}.attention.self.query"), c.query_scale), [0, 2, 1, 3])
    k_t = heads(g.linear(hidden, f"{p}.attention.self.key"), [0, 2, 3, 1])
    v = heads(g.linear(hidden, f"{p}.attention.self.value"), [0, 2, 1, 3])
    scores = g.op("Add", g.op("MatMul", q, k_t), attn_bias, hint="scores")
    probs = g.op("Softmax", scores, axis=-1, hint="probs")
    context = g.op("Transpose", g.op("MatMul", probs, v), perm=[0, 2, 1, 3])
    context = g.op("Reshape", context, c.merge_heads, hint="context")
    attended = g.op("Add", g.linear(context, f"{p}.attention.output.dense"), hidden)
    hidden = g.layer_norm(attended, f"{p}.attention.output.LayerNorm", config.layer_norm_eps)

    inner = g.linear(hidden, f"{p}.intermediate.dense")
    # The exact (erf) GELU that BERT was trained with, not the tanh approximation.
    erf = g.op("Erf", g.op("Mul", inner, c.inv_sqrt2))
    gelu = g.op("Mul", g.op("Mul", inner, c.half), g.op("Add", erf, c.one), hint="gelu")
    out = g.op("Add", g.linear(gelu, f"{p}.output.dense"), hidden)
    return g.layer_norm(out, f"{p}.output.LayerNorm", config.layer_norm_eps)


def _mean_pooled(g: _Graph, hidden: str, mask_f: str) -> None:
    """Mean over the unmasked tokens, scaled to unit length, as the graph's output."""
    f32, i64 = np.float32, np.int64
    mask_3d = g.op("Unsqueeze", mask_f, g.const([2], i64), hint="mask_3d")
    axis_seq = g.const([1], i64, hint="axis_seq")
    token_sum = g.op("ReduceSum", g.op("Mul", hidden, mask_3d), axis_seq, keepdims=0, hint="token_sum")
    token_count = g.op("ReduceSum", mask_3d, axis_seq, keepdims=0, hint="token_count")
    token_count = g.op("Max", token_count, g.const(_MIN_TOKEN_COUNT, f32))
    mean = g.op("Div", token_sum, token_count, hint="mean")
    squares = g.op("ReduceSum", g.op("Mul", mean, mean), axis_seq, keepdims=1, hint="squares")
    norm = g.op("Max", g.op("Sqrt", squares), g.const(_MIN_NORM, f32), hint="norm")
    g.nodes.append(helper.make_node("Div", [mean, norm], [OUTPUT_NAME], name=OUTPUT_NAME))


def encoder_graph_bytes(files: ModelFiles) -> bytes:
    """The serialized graph of the model in ``files``, as :func:`.graph_file.ensure_onnx_model` caches it."""
    graph = build_encoder_graph(files.load_weights(), BertConfig.from_file(files.config))
    payload: bytes = graph.SerializeToString()
    return payload
