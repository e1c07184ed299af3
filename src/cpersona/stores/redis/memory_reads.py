"""The Redis adapter of :class:`~cpersona.stores.memory_reads.MemoryReadStore`: a range of the memory
index's ``ts`` field (the memory's own timestamp, ``NUMERIC SORTABLE``) and ``JSON.MGET`` by id, of
whole documents or of their emotion and fidelity alone."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from cpersona.model.records import EmotionVector, Fidelity
from cpersona.stores.memory_reads import TimeRangeIds
from cpersona.stores.redis.connection import json_ops
from cpersona.stores.redis.documents import memory_from_doc
from cpersona.stores.redis.record_space import RecordRole
from cpersona.stores.redis.replies import search_page
from cpersona.stores.redis.scope import scope_query

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cpersona.model.records import MemoryRecord
    from cpersona.model.scope import ReadScope

__all__ = ["RedisMemoryReads"]

_MGET_PAGE = 500


class RedisMemoryReads(RecordRole):
    """Memories by time and by id, on one record space."""

    async def memory_ids_in_time(self, scope: ReadScope, start: float, end: float, most: int) -> TimeRangeIds:
        # repr() of a float reads back as the same double, so the range's ends are exactly the caller's.
        query = f"{scope_query(scope, with_source=True)} @ts:[{start!r} {end!r}]"
        args = ("NOCONTENT", "SORTBY", "ts", "ASC", "LIMIT", "0", str(most), "DIALECT", "2")
        reply = await cast("Any", self.client).execute_command(
            "FT.SEARCH", self.keys.memory_index, query, *args
        )
        page = search_page(reply, content=False)
        prefix = self.keys.memory_prefix
        return TimeRangeIds(tuple(key.removeprefix(prefix) for key in page.keys), page.total)

    async def memories_by_id(self, scope: ReadScope, ids: Sequence[str]) -> dict[str, MemoryRecord]:
        out: dict[str, MemoryRecord] = {}
        unique = list(dict.fromkeys(ids))
        for at in range(0, len(unique), _MGET_PAGE):
            names = [self.keys.memory(record_id) for record_id in unique[at : at + _MGET_PAGE]]
            found = await json_ops(self.client).mget(names, "$")
            for values in found:
                if not values:
                    continue
                record = memory_from_doc(values[0])
                # Checked here, not trusted to the caller: an id from an edge may name any agent's record.
                if scope.sees(record.scope, record.source):
                    out[record.id] = record
        return out

    async def memory_vitals(self, ids: Sequence[str]) -> list[tuple[EmotionVector, Fidelity] | None]:
        names = [self.keys.memory(record_id) for record_id in ids]
        pipe = self.client.pipeline(transaction=False)
        json_ops(pipe).mget(names, "$.emotion")
        json_ops(pipe).mget(names, "$.fidelity")
        emotions, fidelities = await pipe.execute()
        return [
            (EmotionVector(**e[0]), Fidelity(**f[0])) if e and f else None
            for e, f in zip(emotions, fidelities, strict=True)
        ]
