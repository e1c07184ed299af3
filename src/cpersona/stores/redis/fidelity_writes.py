"""Writing memories' fidelity alone: the decay tick's ageing.

Each memory's ``$.fidelity`` is set only where the memory still exists (``JSON.SET … XX``), so a memory
deleted since it was read is not brought back, and nothing else of it (content, metadata, edges) is
written, so an update that ran meanwhile is not undone. One transaction and one WAITAOF per call, not
one per memory.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from cpersona.stores.redis.connection import json_ops, redis_errors
from cpersona.stores.redis.durable import commit, transaction

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cpersona.keys import Keys
    from cpersona.model.records import Fidelity
    from cpersona.stores.redis.connection import RedisClient

__all__ = ["RedisFidelityWrites"]


class RedisFidelityWrites:
    """:meth:`~cpersona.stores.protocols.RecordStore.set_fidelities` over the memory documents."""

    client: RedisClient
    keys: Keys

    async def set_fidelities(self, updates: Sequence[tuple[str, Fidelity]]) -> int:
        if not updates:
            return 0
        pipe = transaction(self.client)
        for record_id, fidelity in updates:
            json_ops(pipe).set(
                self.keys.memory(record_id), "$.fidelity", dataclasses.asdict(fidelity), xx=True
            )
        async with redis_errors():
            applied = await commit(pipe, self.client)
        return sum(1 for reply in applied if reply is not None)
