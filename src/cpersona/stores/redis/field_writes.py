"""Writing one field of memories alone: the decay tick's fidelity, consolidation's edges.

Each memory's field is set only where the memory still exists (``JSON.SET … XX``), so a memory deleted
since it was read is not brought back, and nothing else of it (content, metadata, the other field) is
written, so an update that ran meanwhile is not undone. One transaction and one WAITAOF per call, not
one per memory.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from cpersona.stores.redis.connection import json_ops
from cpersona.stores.redis.durable import commit, transaction
from cpersona.stores.redis.record_space import RecordRole

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cpersona.model.records import Association, Fidelity

__all__ = ["RedisFieldWrites"]


class RedisFieldWrites(RecordRole):
    """:meth:`~cpersona.stores.protocols.RecordStore.set_fidelities` and ``set_associations`` over the
    memory documents."""

    async def set_fidelities(self, updates: Sequence[tuple[str, Fidelity]]) -> int:
        return await self._set("$.fidelity", [(i, dataclasses.asdict(f)) for i, f in updates])

    async def set_associations(self, updates: Sequence[tuple[str, Sequence[Association]]]) -> int:
        return await self._set(
            "$.associations", [(i, [dataclasses.asdict(a) for a in e]) for i, e in updates]
        )

    async def _set(self, path: str, updates: Sequence[tuple[str, Any]]) -> int:
        if not updates:
            return 0
        pipe = transaction(self.client)
        for record_id, value in updates:
            json_ops(pipe).set(self.keys.memory(record_id), path, value, xx=True)
        applied = await commit(pipe, self.client)
        return sum(1 for reply in applied if reply is not None)
