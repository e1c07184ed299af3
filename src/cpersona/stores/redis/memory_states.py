"""Reading the state of every memory, without its text, for the statistics of the store.

A page of keys at a time (in insertion order, each page after the last one's sequence number), then one
JSON.MGET per field of the page, so a store of any size is read in bounded replies, each page as cheap as
the first, and no memory's content crosses the wire.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cpersona.model.records import EmotionVector, Fidelity
from cpersona.model.scope import ReadScope
from cpersona.stores.record_values import MemoryState
from cpersona.stores.redis import search
from cpersona.stores.redis.connection import json_ops, redis_errors
from cpersona.stores.redis.scope import scope_query

if TYPE_CHECKING:
    from cpersona.keys import Keys
    from cpersona.stores.redis.connection import RedisClient

__all__ = ["RedisMemoryStates"]

_PAGE = 1_000
_FIELDS = ("$.store", "$.ts", "$.fidelity", "$.emotion", "$.associations")


class RedisMemoryStates:
    """:meth:`~cpersona.stores.protocols.RecordStore.memory_states` over the memory index."""

    client: RedisClient
    keys: Keys

    async def memory_states(self, agent_id: str | None) -> list[MemoryState]:
        query = "*" if agent_id is None else scope_query(ReadScope(agent_id), with_source=False)
        out: list[MemoryState] = []
        async with redis_errors():
            async for keys in search.key_pages_in_order(self.client, self.keys.memory_index, query, _PAGE):
                out.extend(await self._states(keys))
        return out

    async def _states(self, names: list[str]) -> list[MemoryState]:
        if not names:
            return []
        columns = [await json_ops(self.client).mget(names, field) for field in _FIELDS]
        out: list[MemoryState] = []
        for store, ts, fidelity, emotion, edges in zip(*columns, strict=True):
            # A memory deleted between the page and its read answers nothing; it is no longer counted.
            if not (store and ts and fidelity):
                continue
            out.append(
                MemoryState(
                    store=str(store[0]),
                    timestamp=float(ts[0]),
                    fidelity=Fidelity(**_known(fidelity[0], Fidelity)),
                    emotion=EmotionVector(**_known(emotion[0] if emotion else {}, EmotionVector)),
                    associations=len(edges[0]) if edges and isinstance(edges[0], list) else 0,
                )
            )
        return out


def _known(doc: Any, kind: type) -> dict[str, Any]:
    fields = kind.__dataclass_fields__  # type: ignore[attr-defined]
    return {k: v for k, v in (doc or {}).items() if k in fields}
