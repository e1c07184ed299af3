"""The Redis adapter of :class:`~cpersona.stores.cue_store.CueStore`.

The emotion search is a KNN over the memory index's ``emotion`` vector field (FLAT, cosine, the eight
Plutchik axes; see :mod:`.indexes`), filtered by the scope, stores and period before ranking, so it
ranks every memory of the scope exactly, not an approximate neighbourhood.

Reconsolidation is a compare-and-set: the fidelity is read, strengthened in Python (the formula lives
only in :mod:`cpersona.model.fidelity`), and written by a script only if the stored fidelity is still
the one read and the request's marker is absent; the script sets the marker in the same step. A lost
race reads again. One request's memories are read in one round trip and written in one pipeline behind
one WAITAOF (one fsync per request, not per memory), as every acknowledged write is.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import orjson
import pydantic

from cpersona.model.records import EmotionVector, Fidelity
from cpersona.stores.redis import search
from cpersona.stores.redis.connection import json_ops
from cpersona.stores.redis.documents import memory_from_doc
from cpersona.stores.redis.durable import flushed
from cpersona.stores.redis.scope import scope_query

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from cpersona.keys import Keys
    from cpersona.model.records import MemoryRecord, StoreKind
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
_READ_BOTH = (
    "return {redis.call('JSON.GET', KEYS[1], '$.fidelity'), redis.call('JSON.GET', KEYS[1], '$.emotion')}"
)
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
        hits = await search.nearest(self.client, self.keys.memory_index, query, "emotion", vector, fetch)
        # Cosine distance is 1 - cosine: a distance of 1 or more shares no direction with the cue.
        return [(_id_of(key), 1.0 - distance) for key, distance in hits if distance < 1.0]

    async def in_period(
        self, scope: ReadScope, period: Period, fetch: int, *, stores: Sequence[StoreKind]
    ) -> list[str]:
        query = _filters(scope, stores, period)
        keys = await search.newest_by_time(self.client, self.keys.memory_index, query, fetch)
        return [_id_of(key) for key in keys]

    async def stored_fidelity(self, record_id: str) -> Mapping[str, float] | None:
        raw = await cast("Any", self.client).eval(_READ, 1, self.keys.memory(record_id))
        if raw is None:
            return None
        found = orjson.loads(raw)
        return cast("Mapping[str, float]", found[0]) if found else None

    async def reconsolidate(
        self, record_ids: Sequence[str], request_id: str, now: float, rule: Reconsolidation, *, ttl_secs: int
    ) -> list[bool]:
        pending = list(dict.fromkeys(record_ids))
        wrote: dict[str, bool] = {}
        for _ in range(_RETRIES):
            if not pending:
                break
            read = await self._read(pending)
            wrote.update({rid: False for rid in pending if rid not in read})
            batch = [
                (rid, raw, _strengthened(raw, emotion, rule, now)) for rid, (raw, emotion) in read.items()
            ]
            applied = await self._cas(batch, request_id, ttl_secs)
            wrote.update(
                {rid: result == 1 for (rid, _, _), result in zip(batch, applied, strict=True) if result != -1}
            )
            pending = [rid for (rid, _, _), result in zip(batch, applied, strict=True) if result == -1]
        for rid in pending:
            log.warning("reconsolidation of %s lost %d races; left as it is", rid, _RETRIES)
            wrote[rid] = False
        return [wrote[rid] for rid in record_ids]

    async def _read(self, ids: Sequence[str]) -> dict[str, tuple[str, Mapping[str, float]]]:
        """The stored fidelity text and emotion of each memory that exists, in one round trip."""
        pipe: Any = self.client.pipeline(transaction=False)
        for rid in ids:
            pipe.eval(_READ_BOTH, 1, self.keys.memory(rid))
        out: dict[str, tuple[str, Mapping[str, float]]] = {}
        for rid, found in zip(ids, await pipe.execute(), strict=True):
            if not found or found[0] is None:
                continue
            raw = found[0].decode() if isinstance(found[0], bytes) else str(found[0])
            emotion = orjson.loads(found[1])[0] if found[1] else {}
            out[rid] = (raw, emotion)
        return out

    async def _cas(
        self, batch: Sequence[tuple[str, str, Fidelity]], request_id: str, ttl_secs: int
    ) -> list[int]:
        """Write each new fidelity where the stored one is still the one read, in one pipeline behind one
        WAITAOF: 1 written, 0 already written by this request, -2 gone, -1 changed meanwhile."""
        if not batch:
            return []
        pipe: Any = self.client.pipeline(transaction=False)
        for rid, raw, new in batch:
            key, marker = self.keys.memory(rid), self.keys.reconsolidated(request_id, rid)
            pipe.eval(_CAS, 2, key, marker, raw, orjson.dumps(dataclasses.asdict(new)), ttl_secs)
        return [int(result) for result in await flushed(pipe, self.client)]


def _strengthened(raw: str, emotion: Mapping[str, float], rule: Reconsolidation, now: float) -> Fidelity:
    stored = orjson.loads(raw)[0]
    return rule(Fidelity(**stored), EmotionVector(**emotion), now)
