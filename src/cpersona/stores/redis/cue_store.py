"""The Redis adapter of :class:`~cpersona.stores.cue_store.CueStore`.

The emotion search is a KNN over the memory index's ``emotion`` vector field (FLAT, cosine, the eight
Plutchik axes; see :mod:`.indexes`), filtered by the scope, stores and period before ranking, so it
ranks every memory of the scope exactly, not an approximate neighbourhood.

Reconsolidation is a compare-and-set: the fidelity is read, strengthened in Python (the formula lives
only in :mod:`cpersona.model.fidelity`), and written by a script only if the stored fidelity is still
the one read and the request's marker is absent; the script sets the marker in the same step. A lost
race reads again. The script runs in a pipeline behind a WAITAOF, as every acknowledged write does.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import orjson
import pydantic

from cpersona.stores.redis import search
from cpersona.stores.redis.connection import json_ops, redis_errors
from cpersona.stores.redis.documents import memory_from_doc
from cpersona.stores.redis.durable import flushed
from cpersona.stores.redis.scope import scope_query

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from cpersona.keys import Keys
    from cpersona.model.records import Fidelity, MemoryRecord, StoreKind
    from cpersona.model.scope import ReadScope
    from cpersona.stores.cue_store import Reconsolidation
    from cpersona.stores.record_values import Period
    from cpersona.stores.redis.connection import RedisClient

__all__ = ["RedisCueStore"]

log = logging.getLogger("cpersona")

_CAS = """
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
local current = redis.call('JSON.GET', KEYS[1], '$.fidelity')
if not current then return -2 end
if current ~= ARGV[1] then return -1 end
redis.call('JSON.SET', KEYS[1], '$.fidelity', ARGV[2])
redis.call('SET', KEYS[2], '1', 'EX', ARGV[3])
return 1
"""
# Read by a script too, so the text compared is the server's own (redis-py parses a JSON.GET reply).
_READ = "return redis.call('JSON.GET', KEYS[1], '$.fidelity')"
_RETRIES = 5


def _filters(scope: ReadScope, stores: Sequence[StoreKind], period: Period | None) -> str:
    parts = [scope_query(scope, with_source=True), "@store:{" + "|".join(stores) + "}"]
    if period is not None:
        parts.append(f"@ts:[{period[0]!r} {period[1]!r}]")
    return " ".join(parts)


def _id_of(key: str) -> str:
    return key.rsplit(":", 1)[-1]


class RedisCueStore:
    """The recall operations' reads and reconsolidation on one engine's Redis."""

    def __init__(self, client: RedisClient, keys: Keys) -> None:
        self.client = client
        self.keys = keys

    async def memories(self, ids: Sequence[str]) -> dict[str, MemoryRecord]:
        if not ids:
            return {}
        async with redis_errors():
            docs = await json_ops(self.client).mget([self.keys.memory(i) for i in ids], "$")
        out: dict[str, MemoryRecord] = {}
        for found in docs:
            if not found:
                continue
            try:
                record = memory_from_doc(found[0])
            except (KeyError, TypeError, ValueError, pydantic.ValidationError) as exc:
                log.warning("unreadable memory document: %s", exc)
                continue
            out[record.id] = record
        return out

    async def emotion_nearest(
        self,
        scope: ReadScope,
        axes: Sequence[float],
        fetch: int,
        *,
        stores: Sequence[StoreKind],
        period: Period | None,
    ) -> list[tuple[str, float]]:
        vector = np.asarray(axes, dtype=np.float32).tobytes()
        query = _filters(scope, stores, period)
        async with redis_errors("emotion search failed"):
            hits = await search.nearest(self.client, self.keys.memory_index, query, "emotion", vector, fetch)
        # Cosine distance is 1 - cosine: a distance of 1 or more shares no direction with the cue.
        return [(_id_of(key), 1.0 - distance) for key, distance in hits if distance < 1.0]

    async def in_period(
        self, scope: ReadScope, period: Period, fetch: int, *, stores: Sequence[StoreKind]
    ) -> list[str]:
        query = _filters(scope, stores, period)
        async with redis_errors("time range search failed"):
            keys = await search.newest_by_time(self.client, self.keys.memory_index, query, fetch)
        return [_id_of(key) for key in keys]

    async def stored_fidelity(self, record_id: str) -> Mapping[str, float] | None:
        async with redis_errors():
            raw = await cast("Any", self.client).eval(_READ, 1, self.keys.memory(record_id))
        if raw is None:
            return None
        found = orjson.loads(raw)
        return cast("Mapping[str, float]", found[0]) if found else None

    async def reconsolidate(
        self, record_id: str, request_id: str, now: float, rule: Reconsolidation, *, ttl_secs: int
    ) -> bool:
        key, marker = self.keys.memory(record_id), self.keys.reconsolidated(request_id, record_id)
        for _ in range(_RETRIES):
            async with redis_errors("reconsolidation failed"):
                raw = await cast("Any", self.client).eval(_READ, 1, key)
                if raw is None:
                    return False
                record = await self.memories([record_id])
                if record_id not in record:
                    return False
                stored = record[record_id]
                new = rule(stored.fidelity, stored.emotion, now)
                applied = await self._cas(key, marker, raw, new, ttl_secs)
            if applied != -1:
                return applied == 1
        log.warning("reconsolidation of %s lost %d races; left as it is", record_id, _RETRIES)
        return False

    async def _cas(self, key: str, marker: str, raw: bytes, new: Fidelity, ttl_secs: int) -> int:
        pipe: Any = self.client.pipeline(transaction=False)
        expected = raw.decode() if isinstance(raw, bytes) else str(raw)
        pipe.eval(_CAS, 2, key, marker, expected, orjson.dumps(dataclasses.asdict(new)), ttl_secs)
        (applied,) = await flushed(pipe, self.client)
        return int(applied)
