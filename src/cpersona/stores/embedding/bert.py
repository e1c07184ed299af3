"""A BERT sentence encoder's forward pass in numpy: token ids in, unit sentence vectors out.

This is all-MiniLM-L6-v2 as sentence-transformers runs it: embeddings (word + absolute position + token
type, then LayerNorm), N post-norm transformer layers with the exact (erf) GELU, mean pooling over the
attention mask and L2 normalisation. Everything is float32 and every product is a BLAS matmul, which
releases the GIL; the caller runs :meth:`BertEncoder.encode` in a worker thread.

numpy has no ``erf``. GELU here uses Abramowitz & Stegun 7.1.26 (``erfc(z) ~ poly(t) exp(-z^2)``,
``t = 1/(1 + p z)``, absolute error at most 1.5e-7 over all z, so at most 0.75e-7 on ``Phi``), in a form
that needs no ``1 - erfc`` for negative inputs, where GELU is tiny and that subtraction would cost its
relative precision.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import TYPE_CHECKING, Final

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

__all__ = ["BertConfig", "BertEncoder", "FloatArray", "IntArray"]

FloatArray = npt.NDArray[np.float32]
IntArray = npt.NDArray[np.int64]

# HF BERT adds the float32 minimum to masked attention scores: exp() of it underflows to exactly zero.
_MASK_FILL: Final = float(np.finfo(np.float32).min)
# sentence-transformers clamps the token count before dividing, and F.normalize clamps the norm.
_MIN_TOKEN_COUNT: Final = 1e-9
_MIN_NORM: Final = 1e-12

# Abramowitz & Stegun 7.1.26.
_AS_P: Final = 0.3275911
_AS_A: Final = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)
_INV_SQRT2: Final = 1.0 / math.sqrt(2.0)
# Tokens per feed-forward block (1024 x 1536 float32 activations are 6 MiB). Measured on 64 texts of 60
# tokens, 2 cores: 64-256 rows lose more to BLAS's per-call thread hand-off than they win in cache, the
# whole 3,840 rows at once spend twice as long in GELU.
_FFN_BLOCK_ROWS: Final = 1024
# Up to this many rows a product runs as (W @ x.T).T (see _Linear). With one BLAS thread that form was
# the faster one at every count measured up to 200 rows (1,536 x 384 weights).
_THIN_ROWS: Final = 256
# Attention scores per block of texts (floats): 4 Mi, 16 MiB.
_SCORES_BLOCK: Final = 1 << 22


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


@dataclasses.dataclass(frozen=True, slots=True)
class _Norm:
    weight: FloatArray
    bias: FloatArray


@dataclasses.dataclass(frozen=True, slots=True)
class _Linear:
    """``x @ weight.T + bias``, ``weight`` ``[out, in]`` as the checkpoint stores it, contiguous."""

    weight: FloatArray
    bias: FloatArray

    def __call__(self, x: FloatArray, out: FloatArray | None = None) -> FloatArray:
        """The product into ``out`` (a new array when ``None``), plus the bias."""
        rows = x.shape[0]
        if rows <= _THIN_ROWS:
            # For a few rows (a query) OpenBLAS is faster with the weight on the left: the 6 layers'
            # 7 x 384 by 384 x 1536 products took 1.6 ms as (W @ x.T).T, 2.7 ms as x @ W (1 thread).
            product = (self.weight @ _rows_padded(x).T)[:, :rows].T
            if out is None:
                out = np.ascontiguousarray(product)
            else:
                out[...] = product
        else:
            out = np.matmul(x, self.weight.T, out=out)
        out += self.bias
        return out


def _rows_padded(x: FloatArray) -> FloatArray:
    """``x`` with zero rows added up to a count OpenBLAS's kernels take whole (4, then multiples of 8).

    This is for speed: the kernel handles a remainder of rows slowly (a 1,536 x 384 product took 320 us
    for 7 rows and 204 us for 8, 308 us for 13 and 245 us for 16, one thread); a whole query embeds in
    0.95x the time. Each row of the product still depends on its own row of ``x`` only; its last bits
    may depend on how many rows share the call, which the embedder's promise allows for (see
    :data:`cpersona.stores.embedding.embedders.VECTOR_TOLERANCE`). One row stays alone: it runs as a
    matrix-vector product, the fastest of all.
    """
    rows = x.shape[0]
    full = rows if rows <= 1 or rows % 8 == 0 else (4 if rows <= 4 else -(-rows // 8) * 8)
    if full == rows:
        return x
    padded = np.zeros((full, x.shape[1]), dtype=x.dtype)
    padded[:rows] = x
    return padded


@dataclasses.dataclass(frozen=True, slots=True)
class _Layer:
    qkv: _Linear
    """The query, key and value projections side by side: one matmul instead of three."""
    attention_out: _Linear
    attention_norm: _Norm
    intermediate: _Linear
    output: _Linear
    output_norm: _Norm


class BertEncoder:
    """The encoder's weights, laid out once for the forward pass, and the pass itself."""

    def __init__(self, weights: Mapping[str, FloatArray], config: BertConfig) -> None:
        """Raises ``ValueError`` when a tensor the config calls for is missing."""
        self.config = config
        self._weights = weights
        self._words = self._tensor("embeddings.word_embeddings.weight")
        self._positions = self._tensor("embeddings.position_embeddings.weight")
        self._types = self._tensor("embeddings.token_type_embeddings.weight")
        self._embedding_norm = self._norm("embeddings.LayerNorm")
        self._layers = [self._layer(f"encoder.layer.{i}") for i in range(config.num_hidden_layers)]
        del self._weights

    def _tensor(self, key: str) -> FloatArray:
        try:
            return np.ascontiguousarray(self._weights[key], dtype=np.float32)
        except KeyError:
            raise ValueError(f"the weights have no tensor {key!r}") from None

    def _norm(self, prefix: str) -> _Norm:
        return _Norm(self._tensor(f"{prefix}.weight"), self._tensor(f"{prefix}.bias"))

    def _linear(self, *prefixes: str) -> _Linear:
        weight = np.concatenate([self._tensor(f"{p}.weight") for p in prefixes], axis=0)
        bias = np.concatenate([self._tensor(f"{p}.bias") for p in prefixes])
        return _Linear(np.ascontiguousarray(weight), bias)

    def _layer(self, p: str) -> _Layer:
        attention = f"{p}.attention.self"
        return _Layer(
            qkv=self._linear(f"{attention}.query", f"{attention}.key", f"{attention}.value"),
            attention_out=self._linear(f"{p}.attention.output.dense"),
            attention_norm=self._norm(f"{p}.attention.output.LayerNorm"),
            intermediate=self._linear(f"{p}.intermediate.dense"),
            output=self._linear(f"{p}.output.dense"),
            output_norm=self._norm(f"{p}.output.LayerNorm"),
        )

    def encode(self, ids: IntArray, mask: IntArray, types: IntArray | None = None) -> FloatArray:
        """Sentence vectors ``[batch, hidden]`` for right-padded ``[batch, sequence]`` ids and their mask
        (1 for a token, 0 for padding); ``types`` are the token type ids, all 0 when left out."""
        batch, width = ids.shape
        if width > self.config.max_position_embeddings:
            raise ValueError(f"{width} tokens exceed the model's {self.config.max_position_embeddings}")
        hidden = self._words[ids]
        hidden += self._types[0] if types is None else self._types[types]
        hidden += self._positions[:width]
        flat = self._layer_norm(hidden.reshape(batch * width, -1), self._embedding_norm)
        # [batch, 1, 1, keys]: broadcast over heads and query positions, so no query attends to padding.
        bias = ((1.0 - mask.astype(np.float32)) * np.float32(_MASK_FILL))[:, None, None, :]
        for layer in self._layers:
            flat = self._encoder_layer(flat, bias, layer, batch, width)
        return _mean_pooled(flat.reshape(batch, width, -1), mask)

    def _encoder_layer(
        self, x: FloatArray, bias: FloatArray, layer: _Layer, batch: int, width: int
    ) -> FloatArray:
        """One post-norm transformer layer on ``x`` ``[batch * width, hidden]``."""
        c = self.config
        qkv = layer.qkv(x).reshape(batch, width, 3, c.num_attention_heads, c.head_size)
        context = self._attention(qkv.transpose(2, 0, 3, 1, 4), bias)
        attended = layer.attention_out(context.reshape(batch * width, c.hidden_size))
        attended += x
        x = self._layer_norm(attended, layer.attention_norm)
        out = _feed_forward(x, layer)
        out += x
        return self._layer_norm(out, layer.output_norm)

    def _attention(self, qkv: FloatArray, bias: FloatArray) -> FloatArray:
        """Scaled dot-product attention of ``qkv`` ``[3, batch, heads, width, head_size]``, as
        ``[batch, width, heads, head_size]``, a few texts at a time.

        The scores are ``heads * width^2`` floats per text: 3 MiB at 128 tokens, so a batch of 64 long
        texts at once would push 200 MiB through softmax's passes; a block of texts keeps that bounded.
        """
        _, batch, heads, width, size = qkv.shape
        context = np.empty((batch, width, heads, size), dtype=np.float32)
        block = max(1, _SCORES_BLOCK // (heads * width * width))
        scale = np.float32(1.0 / math.sqrt(size))
        for start in range(0, batch, block):
            stop = min(batch, start + block)
            # Scaling the queries, not the scores, is the same product on a smaller tensor (as ORT runs it).
            query: FloatArray = qkv[0, start:stop] * scale
            scores: FloatArray = query @ qkv[1, start:stop].transpose(0, 1, 3, 2)
            scores += bias[start:stop]
            _softmax_in_place(scores)
            context[start:stop] = (scores @ qkv[2, start:stop]).transpose(0, 2, 1, 3)
        return context

    def _layer_norm(self, x: FloatArray, norm: _Norm) -> FloatArray:
        centred: FloatArray = x - x.mean(axis=-1, keepdims=True)
        variance: FloatArray = np.einsum("ij,ij->i", centred, centred)[:, None] / np.float32(x.shape[-1])
        centred *= 1.0 / np.sqrt(variance + np.float32(self.config.layer_norm_eps))
        centred *= norm.weight
        centred += norm.bias
        return centred


def _softmax_in_place(scores: FloatArray) -> None:
    scores -= scores.max(axis=-1, keepdims=True)
    np.exp(scores, out=scores)
    scores /= scores.sum(axis=-1, keepdims=True)


def _feed_forward(x: FloatArray, layer: _Layer) -> FloatArray:
    """``output(gelu(intermediate(x)))``, a block of rows at a time.

    The intermediate activations are four times wider than the hidden state; GELU takes a dozen numpy
    passes over them, and on the whole batch at once each pass streams them through memory (on 64 texts of
    60 tokens that made GELU alone 110 ms of a 300 ms layer). In blocks the buffers are reused and far
    less of them leaves the cache.
    """
    rows = x.shape[0]
    out = np.empty((rows, layer.output.weight.shape[0]), dtype=np.float32)
    block = min(rows, _FFN_BLOCK_ROWS)
    inner = np.empty((block, layer.intermediate.weight.shape[0]), dtype=np.float32)
    scratch = (np.empty_like(inner), np.empty_like(inner), np.empty_like(inner))
    for start in range(0, rows, block):
        stop = min(rows, start + block)
        size = stop - start
        part = inner[:size]
        layer.intermediate(x[start:stop], out=part)
        _gelu_in_place(part, *(buffer[:size] for buffer in scratch))
        layer.output(part, out=out[start:stop])
    return out


def _gelu_in_place(x: FloatArray, absolute: FloatArray, t: FloatArray, poly: FloatArray) -> None:
    """``x * Phi(x)``, written as ``max(x, 0) - |x| * erfc(|x| / sqrt 2) / 2``: for ``x >= 0`` that is
    ``x * (1 - erfc/2)``, for ``x < 0`` it is ``x * erfc/2``, and ``x * Phi(x)`` either way.

    ``erfc`` is Abramowitz & Stegun 7.1.26 with the 1/2 folded into its coefficients; the three other
    arrays are scratch of ``x``'s shape.
    """
    np.abs(x, out=absolute)
    np.multiply(absolute, np.float32(_AS_P * _INV_SQRT2), out=t)
    t += np.float32(1.0)
    np.reciprocal(t, out=t)
    halved = [np.float32(a / 2.0) for a in _AS_A]
    np.multiply(t, halved[4], out=poly)
    for coefficient in reversed(halved[:4]):
        poly += coefficient
        poly *= t
    # exp(-x^2 / 2) = exp(-z^2) with z = |x| / sqrt 2; t is free again.
    np.multiply(x, x, out=t)
    t *= np.float32(-0.5)
    np.exp(t, out=t)
    poly *= t
    poly *= absolute
    np.maximum(x, np.float32(0.0), out=x)
    x -= poly


def _mean_pooled(hidden: FloatArray, mask: IntArray) -> FloatArray:
    weights = mask.astype(np.float32)
    summed = (weights[:, None, :] @ hidden)[:, 0, :]
    counts = np.maximum(weights.sum(axis=1, keepdims=True), np.float32(_MIN_TOKEN_COUNT))
    mean = summed / counts
    norms = np.maximum(np.sqrt(np.einsum("bh,bh->b", mean, mean))[:, None], np.float32(_MIN_NORM))
    out: FloatArray = (mean / norms).astype(np.float32, copy=False)
    return out
