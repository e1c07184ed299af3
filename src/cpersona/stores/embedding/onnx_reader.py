"""Read the nodes and constant tensors of an ONNX file with no ``onnx`` package: a protobuf wire reader.

An ONNX file is one serialized ``ModelProto``. The embedder needs only its graph's initializers (the
weights) and the node list (which says how the int8 weights turn back into floats and which bias follows
which product), so this module decodes just those messages and skips every other field by its wire type.
The field numbers are those of ``onnx/onnx.proto`` (IR version 3 onwards; they have not changed since).

The ``onnx`` package stays a test dependency: ``tests/test_embedding_contract.py`` checks that this reader
and ``onnx.load`` see the same tensors, byte for byte, in the shipped file.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import TYPE_CHECKING, Final

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    import numpy.typing as npt

__all__ = ["OnnxGraph", "OnnxNode", "read_graph"]

# Field numbers in onnx.proto.
_MODEL_GRAPH: Final = 7
_GRAPH_NODE, _GRAPH_INITIALIZER = 1, 5
_NODE_INPUT, _NODE_OUTPUT, _NODE_OP_TYPE = 1, 2, 4
_TENSOR_DIMS, _TENSOR_DATA_TYPE, _TENSOR_FLOAT_DATA, _TENSOR_INT32_DATA = 1, 2, 4, 5
_TENSOR_INT64_DATA, _TENSOR_NAME, _TENSOR_RAW_DATA, _TENSOR_DATA_LOCATION = 7, 8, 9, 14

# Wire types.
_VARINT, _FIXED64, _LENGTH, _FIXED32 = 0, 1, 2, 5

# TensorProto.DataType -> numpy dtype (little-endian, as raw_data is stored); the types a BERT export uses.
_DTYPES: Final[dict[int, np.dtype[np.generic]]] = {
    1: np.dtype("<f4"),
    2: np.dtype("u1"),
    3: np.dtype("i1"),
    4: np.dtype("<u2"),
    5: np.dtype("<i2"),
    6: np.dtype("<i4"),
    7: np.dtype("<i8"),
    9: np.dtype("?"),
    10: np.dtype("<f2"),
    11: np.dtype("<f8"),
}
# The types whose values sit in int32_data when there is no raw_data (onnx.proto's comment on the field).
_INT32_CARRIED: Final = frozenset({2, 3, 4, 5, 6, 9, 10})


@dataclasses.dataclass(frozen=True, slots=True)
class OnnxNode:
    """One graph node: its operator and the names of its input and output tensors."""

    op_type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class OnnxGraph:
    """The graph's nodes in file order and its initializers by name."""

    nodes: tuple[OnnxNode, ...]
    initializers: dict[str, npt.NDArray[np.generic]]


def read_graph(path: Path) -> OnnxGraph:
    """The nodes and initializers of the ONNX model in ``path``.

    Raises ``ValueError`` for a file that is no well-formed ONNX model or keeps tensors outside the file.
    """
    data = memoryview(path.read_bytes())
    graphs = [value for field, value in _fields(data) if field == _MODEL_GRAPH]
    if len(graphs) != 1 or not isinstance(graphs[0], memoryview):
        raise ValueError(f"{path}: not an ONNX model (no graph)")
    nodes: list[OnnxNode] = []
    initializers: dict[str, npt.NDArray[np.generic]] = {}
    for field, value in _fields(graphs[0]):
        if field == _GRAPH_NODE:
            nodes.append(_node(_bytes(value)))
        elif field == _GRAPH_INITIALIZER:
            name, array = _tensor(_bytes(value))
            initializers[name] = array
    return OnnxGraph(tuple(nodes), initializers)


def _varint(data: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def _fields(data: memoryview) -> Iterator[tuple[int, int | memoryview]]:
    """``(field number, value)`` for each field of one message: an int for varints and fixed-width
    numbers, the bytes for length-delimited fields (strings, sub-messages, packed arrays)."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        field, wire = key >> 3, key & 7
        if wire == _VARINT:
            value, pos = _varint(data, pos)
            yield field, value
        elif wire == _LENGTH:
            size, pos = _varint(data, pos)
            if pos + size > len(data):
                raise ValueError("a length-delimited field runs past the end of its message")
            yield field, data[pos : pos + size]
            pos += size
        elif wire in (_FIXED64, _FIXED32):
            width = 8 if wire == _FIXED64 else 4
            yield field, int.from_bytes(data[pos : pos + width], "little")
            pos += width
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")


def _bytes(value: int | memoryview) -> memoryview:
    if not isinstance(value, memoryview):
        raise ValueError("expected a length-delimited field, found a number")
    return value


def _text(value: int | memoryview) -> str:
    return bytes(_bytes(value)).decode("utf-8")


def _node(data: memoryview) -> OnnxNode:
    inputs: list[str] = []
    outputs: list[str] = []
    op_type = ""
    for field, value in _fields(data):
        if field == _NODE_INPUT:
            inputs.append(_text(value))
        elif field == _NODE_OUTPUT:
            outputs.append(_text(value))
        elif field == _NODE_OP_TYPE:
            op_type = _text(value)
    return OnnxNode(op_type, tuple(inputs), tuple(outputs))


@dataclasses.dataclass(slots=True)
class _TensorFields:
    name: str = ""
    data_type: int = 0
    dims: list[int] = dataclasses.field(default_factory=list)
    raw: bytes | None = None
    numbers: list[int | memoryview] = dataclasses.field(default_factory=list)
    number_field: int = 0


def _tensor(data: memoryview) -> tuple[str, npt.NDArray[np.generic]]:
    t = _TensorFields()
    for field, value in _fields(data):
        if field == _TENSOR_NAME:
            t.name = _text(value)
        elif field == _TENSOR_DATA_TYPE:
            t.data_type = int(_number(value))
        elif field == _TENSOR_DIMS:
            t.dims.extend(_ints(value, signed=True))
        elif field == _TENSOR_RAW_DATA:
            t.raw = bytes(_bytes(value))
        elif field in (_TENSOR_FLOAT_DATA, _TENSOR_INT32_DATA, _TENSOR_INT64_DATA):
            t.numbers.append(value)
            t.number_field = field
        elif field == _TENSOR_DATA_LOCATION and value != 0:
            raise ValueError(f"tensor {t.name!r} keeps its data in an external file")
    return t.name, _array(t)


def _number(value: int | memoryview) -> int:
    if isinstance(value, memoryview):
        raise ValueError("expected a number, found a length-delimited field")
    return value


def _ints(value: int | memoryview, *, signed: bool) -> list[int]:
    """A repeated integer field: one unpacked value, or a packed run of varints."""
    if not isinstance(value, memoryview):
        values = [value]
    else:
        values, pos = [], 0
        while pos < len(value):
            item, pos = _varint(value, pos)
            values.append(item)
    # Negative int32/int64 values are sign-extended to 64 bits on the wire.
    return [v - (1 << 64) if signed and v >= 1 << 63 else v for v in values]


def _array(t: _TensorFields) -> npt.NDArray[np.generic]:
    dtype = _DTYPES.get(t.data_type)
    if dtype is None:
        raise ValueError(f"tensor {t.name!r} has data type {t.data_type}, which this reader does not decode")
    if t.raw is not None:
        flat = np.frombuffer(t.raw, dtype=dtype)
    elif t.number_field == _TENSOR_FLOAT_DATA:
        flat = np.asarray(_floats(t.numbers), dtype=dtype)
    else:
        ints = [v for value in t.numbers for v in _ints(value, signed=True)]
        if t.data_type in _INT32_CARRIED and dtype.kind == "f":
            # float16 values travel as their bit patterns in int32_data.
            flat = np.asarray(ints, dtype=np.uint16).view(dtype)
        else:
            flat = np.asarray(ints, dtype=dtype)
    count = int(np.prod(t.dims, dtype=np.int64))
    if flat.size != count:
        raise ValueError(f"tensor {t.name!r} holds {flat.size} values for dims {t.dims}")
    return flat.reshape(t.dims).copy()


def _floats(values: list[int | memoryview]) -> list[float]:
    """float_data: packed little-endian float32s, or one fixed32 per value when not packed."""
    out: list[float] = []
    for value in values:
        if isinstance(value, memoryview):
            out.extend(v for (v,) in struct.iter_unpack("<f", value))
        else:
            out.append(struct.unpack("<f", value.to_bytes(4, "little"))[0])
    return out
