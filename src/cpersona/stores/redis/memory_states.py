"""Reading the state of every memory, without its text, for the statistics of the store.

A page of keys at a time (in insertion order, each page after the last one's sequence number), then one
JSON.MGET of the page's fields (:func:`~.json_fields.read_fields`), so a store of any size is read in
bounded replies, each page as cheap as the first, and no memory's content crosses the wire.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import TypeAdapter

from cpersona.model.records import EmotionVector, Fidelity
from cpersona.model.scope import ReadScope
from cpersona.stores.record_values import MemoryState
from cpersona.stores.redis import search
from cpersona.stores.redis.json_fields import read_fields
from cpersona.stores.redis.scope import scope_query

if TYPE_CHECKING:
    from cpersona.keys import Keys
    from cpersona.stores.redis.connection import RedisClient

__all__ = ["memory_states"]

_PAGE = 1_000
_FIELDS = ("store", "ts", "fidelity", "emotion", "associations")
_NEEDED = ("store", "ts", "fidelity")
# The document holds every fidelity number as a float (documents.memory_to_doc); read through the type,
# the counts are integers again, as the record reads give them.
_FIDELITY: TypeAdapter[Fidelity] = TypeAdapter(Fidelity)


async def memory_states(client: RedisClient, keys: Keys, agent_id: str | None) -> list[MemoryState]:
    """The state of every memory of the agent (of all, with ``None``), in insertion order."""
    query = "*" if agent_id is None else scope_query(ReadScope(agent_id), with_source=False)
    out: list[MemoryState] = []
    async for names in search.key_pages_in_order(client, keys.memory_index, query, _PAGE):
        out.extend(await _states(client, names))
    return out


async def _states(client: RedisClient, names: list[str]) -> list[MemoryState]:
    out: list[MemoryState] = []
    for doc in await read_fields(client, names, _FIELDS):
        # A memory deleted between the page and its read answers nothing; it is no longer counted.
        if doc is None or not all(doc.get(field) is not None for field in _NEEDED):
            continue
        edges = doc.get("associations")
        out.append(
            MemoryState(
                store=str(doc["store"]),
                timestamp=float(doc["ts"]),
                fidelity=_FIDELITY.validate_python(doc["fidelity"]),
                emotion=EmotionVector.model_validate(doc.get("emotion") or {}),
                associations=len(edges) if isinstance(edges, list) else 0,
            )
        )
    return out
