"""A memory's document as the JSON text a batch writes: orjson's, where orjson can write it (9 µs for a
LoCoMo turn); pydantic's encoder otherwise.

The document (:func:`~.documents.memory_to_doc`) is JSON data already, the record's schema having given
its typed fields their types (a ``float`` field an int was given is written as ``5.0``). Its free parts
(metadata, meta, associations) are written by orjson only when they hold nothing but the exact JSON types
(:func:`~cpersona.model.json_values.plain`), and otherwise by pydantic's encoder, which writes what every
document of such a record was written as. A test holds both to the same document for any record.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import orjson
from pydantic_core import to_json

from cpersona.model.json_values import plain
from cpersona.stores.redis.documents import memory_to_doc

if TYPE_CHECKING:
    from cpersona.model.records import MemoryRecord

__all__ = ["memory_json"]

_FREE = ("metadata", "meta", "associations")


def memory_json(rec: MemoryRecord) -> bytes:
    """The JSON text of ``rec``'s document, :func:`~.documents.memory_to_doc`."""
    doc = memory_to_doc(rec)
    if all(plain(doc[key]) for key in _FREE):
        try:
            return orjson.dumps(doc)
        except TypeError:  # an integer beyond 64 bits, a lone surrogate: pydantic's encoder writes it
            pass
    return to_json(doc)
