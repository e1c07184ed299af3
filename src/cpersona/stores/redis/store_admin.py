"""The Redis adapter of :class:`~cpersona.stores.store_admin.StoreAdmin`: the search indexes
(:mod:`.indexes`), the search module's collector, and an agent's whole removal (:mod:`.writes`)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import redis.exceptions

from cpersona.errors import BackendUnavailable
from cpersona.model.drafts import CALLER_EMBEDDING
from cpersona.stores.redis.connection import command
from cpersona.stores.redis.indexes import ensure_indexes
from cpersona.stores.redis.raw_search import seal_plain_entries
from cpersona.stores.redis.record_space import RecordRole
from cpersona.stores.redis.writes import Writer

if TYPE_CHECKING:
    from cpersona.stores.redis.record_space import RecordSpace

__all__ = ["RedisStoreAdmin"]

log = logging.getLogger("cpersona")

_SCAN_BATCH = 1_000


class RedisStoreAdmin(RecordRole):
    """The record store's lifecycle, on one record space."""

    def __init__(self, space: RecordSpace) -> None:
        super().__init__(space)
        self._writer = Writer(space.client, space.keys)

    async def ensure_indexes(self) -> None:
        # Sealed first: what an older version stored in the clear is sealed before the index is brought
        # up to date, so no index ever holds it.
        sealed = await seal_plain_entries(self.client, self.keys, self.space.sealer)
        if sealed:
            log.info("sealed %d raw entries an older version stored in the clear", sealed)
        await ensure_indexes(self.client, self.keys)

    async def ping(self) -> None:
        await self.client.ping()

    async def collect_garbage(self) -> None:
        """Run the search module's garbage collector on every index now.

        A Redis that reloads its append-only file replays every write, and the search module then keeps
        the index entries of each superseded document version until its collector next runs; until
        then BM25 counts those entries too (measured on a reopened LoCoMo conversation: every score rose
        about tenfold). Best effort: a server that refuses the debug command (a managed Redis) only
        loses this repair.
        """
        for name in (self.keys.memory_index, self.keys.episode_index, self.keys.raw_index):
            try:
                await command(self.client, "FT.DEBUG", "GC_FORCEINVOKE", name)
            except (redis.exceptions.ResponseError, BackendUnavailable) as exc:
                log.warning("could not run the search index collector on %s: %s", name, exc)
                return

    async def vector_model(self) -> str | None:
        stored = await self.client.get(self.keys.vector_model)
        return None if stored is None else bytes(stored).decode()

    async def record_vector_model(self, identity: str, *, replace: bool = False) -> str | None:
        # SET ... GET answers the value it replaced; with NX it replaces nothing and still answers it.
        before = await self.client.set(self.keys.vector_model, identity, nx=not replace, get=True)
        return None if before is None else bytes(before).decode()

    async def legacy_vector_model(self) -> str | None:
        for prefix in (self.keys.memory_prefix, self.keys.episode_prefix):
            batch: list[bytes] = []
            async for key in self.client.scan_iter(match=f"{prefix}*", count=_SCAN_BATCH):
                batch.append(key)
                if len(batch) >= _SCAN_BATCH and (found := await self._named_model(batch)):
                    return found
            if batch and (found := await self._named_model(batch)):
                return found
        return None

    async def _named_model(self, keys: list[bytes]) -> str | None:
        """The first model the documents at ``keys`` name for their vectors (emptying ``keys``)."""
        values = await self.client.json().mget(keys, "$.embedding_model")  # type: ignore[no-untyped-call]
        keys.clear()
        for found in values:
            name = found[0] if found else None
            if isinstance(name, str) and name and name != CALLER_EMBEDDING:
                return name
        return None

    async def delete_agent(self, agent_id: str) -> int:
        return await self._writer.delete_agent(agent_id)
