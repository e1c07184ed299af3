"""A memory's document as the JSON text a batch writes: orjson's, where that is what the model's own
encoder writes (9 µs for a LoCoMo turn with the checks below, 2 of them orjson's; pydantic took 22).

The document's typed fields are given the types the model declares (its ``float`` fields take floats,
as pydantic would coerce an int); its free parts (metadata, meta, associations) are written by orjson
only when they hold nothing but the exact JSON types (:func:`~cpersona.model.json_values.plain`), and
otherwise by the model (:func:`~.documents.validated_json`), as every document was before. A test holds
both to the same document for any record.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from cpersona.model.json_values import plain
from cpersona.stores.redis.documents import memory_to_doc, validated_json

if TYPE_CHECKING:
    from aredis_om import JsonModel

    from cpersona.model.records import MemoryRecord

__all__ = ["memory_json"]

_FREE = ("metadata", "meta", "associations")
_FLOATS = ("ts", "created_at", "updated_at")
_FLOAT_MAPS = ("emotion", "fidelity")


def memory_json(model: type[JsonModel], rec: MemoryRecord) -> bytes | str:
    """The JSON text of ``rec``'s document, as ``validated_json(model, memory_to_doc(rec))`` gives it."""
    doc = memory_to_doc(rec)
    if all(plain(doc[key]) for key in _FREE):
        try:
            return orjson.dumps(_typed(doc))
        except TypeError:  # an integer beyond 64 bits, a lone surrogate: the model decides, as before
            pass
    return validated_json(model, doc)


def _typed(doc: dict[str, Any]) -> dict[str, Any]:
    for key in _FLOATS:
        doc[key] = float(doc[key])
    for key in _FLOAT_MAPS:
        doc[key] = {name: float(value) for name, value in doc[key].items()}
    return doc
