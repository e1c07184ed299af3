"""The adapter's writes: each a transaction that keeps a record, its claims, its pending mark and its
block event together, so a crash leaves all of them or none.

Documents go through their redis-om model (:func:`~.documents.validated`) before they are written, and
are written with ``JSON.SET`` in the transaction rather than with redis-om's ``save``: ``save`` runs its
own round trip per document and cannot join a ``MULTI`` with the claims and the stream event.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from cpersona.model.records import EpisodeRecord, MemoryRecord
from cpersona.model.scope import ReadScope
from cpersona.stores.redis import search
from cpersona.stores.redis.connection import json_ops
from cpersona.stores.redis.documents import (
    episode_from_doc,
    episode_to_doc,
    memory_from_doc,
    memory_to_doc,
    raw_to_doc,
    validated,
)
from cpersona.stores.redis.scope import scope_query

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cpersona.keys import Keys
    from cpersona.model.records import RawRecord
    from cpersona.stores.protocols import MemoryWrite
    from cpersona.stores.redis.connection import RedisClient
    from cpersona.stores.redis.documents import DocumentModels

__all__ = ["Writer"]

_DELETE_PAGE = 500


@dataclasses.dataclass(frozen=True, slots=True)
class Writer:
    """The write transactions of one engine's store."""

    client: RedisClient
    keys: Keys
    docs: DocumentModels

    def _queue_blocks(self, pipe: Any, record_key: str) -> None:
        # In the transaction that writes the record: an acknowledged write always has its event.
        pipe.xadd(self.keys.block_stream, {"key": record_key})

    async def put_memories(self, writes: Sequence[MemoryWrite], *, queue_blocks: bool) -> None:
        pipe = self.client.pipeline(transaction=True)
        for write in writes:
            rec, key = write.record, self.keys.memory(write.record.id)
            json_ops(pipe).set(key, "$", validated(self.docs.memory, memory_to_doc(rec)))
            for claim in write.claims:
                pipe.set(claim, rec.id)
            if rec.vector_pending:
                pipe.sadd(self.keys.vector_pending, key)
            if queue_blocks:
                self._queue_blocks(pipe, key)
        await pipe.execute()

    async def replace_memory(
        self, rec: MemoryRecord, *, drop_claims: Sequence[str], add_claims: Sequence[str], queue_blocks: bool
    ) -> None:
        key = self.keys.memory(rec.id)
        pipe = self.client.pipeline(transaction=True)
        json_ops(pipe).set(key, "$", validated(self.docs.memory, memory_to_doc(rec)))
        for claim in drop_claims:
            pipe.delete(claim)
        for claim in add_claims:
            pipe.set(claim, rec.id)
        if rec.vector_pending:
            pipe.sadd(self.keys.vector_pending, key)
        if queue_blocks:
            self._queue_blocks(pipe, key)
        await pipe.execute()

    async def put_episode(self, rec: EpisodeRecord, *, queue_blocks: bool) -> None:
        key = self.keys.episode(rec.id)
        pipe = self.client.pipeline(transaction=True)
        json_ops(pipe).set(key, "$", validated(self.docs.episode, episode_to_doc(rec)))
        if rec.vector_pending:
            pipe.sadd(self.keys.vector_pending, key)
        if queue_blocks:
            self._queue_blocks(pipe, key)
        await pipe.execute()

    async def put_raw(self, records: Sequence[RawRecord]) -> None:
        pipe = self.client.pipeline(transaction=True)
        for rec in records:
            json_ops(pipe).set(self.keys.raw(rec.id), "$", validated(self.docs.raw, raw_to_doc(rec)))
        await pipe.execute()

    async def delete(self, key: str, claims: Sequence[str]) -> None:
        pipe = self.client.pipeline(transaction=True)
        pipe.delete(key)
        pipe.srem(self.keys.vector_pending, key)
        for claim in claims:
            pipe.delete(claim)
        await pipe.execute()

    async def delete_agent(self, agent_id: str) -> int:
        query = scope_query(ReadScope(agent_id), with_source=False)
        deleted = 0
        for index in (self.keys.memory_index, self.keys.episode_index, self.keys.raw_index):
            while found := await search.keys_page(self.client, index, query, 0, _DELETE_PAGE):
                pipe = self.client.pipeline(transaction=False)
                pipe.delete(*found)
                pipe.srem(self.keys.vector_pending, *found)
                await pipe.execute()
                deleted += len(found)
        for pattern in self.keys.claims_of_agent(agent_id):
            batch: list[bytes] = []
            async for claim in self.client.scan_iter(match=pattern, count=1000):
                batch.append(claim)
                if len(batch) >= _DELETE_PAGE:
                    await self.client.delete(*batch)
                    batch = []
            if batch:
                await self.client.delete(*batch)
        await self.client.delete(self.keys.profile(agent_id), self.keys.calibration(agent_id))
        return deleted

    async def load_pending(self, keys: Sequence[str]) -> list[MemoryRecord | EpisodeRecord]:
        docs = await json_ops(self.client).mget(list(keys), "$")
        records: list[MemoryRecord | EpisodeRecord] = []
        gone: list[str] = []
        for key, found in zip(keys, docs, strict=True):
            if not found:
                gone.append(key)
            elif key.startswith(self.keys.memory_prefix):
                records.append(memory_from_doc(found[0]))
            else:
                records.append(episode_from_doc(found[0]))
        if gone:
            await self.client.srem(self.keys.vector_pending, *gone)
        return records

    async def mark_vectors_written(
        self, records: Sequence[MemoryRecord | EpisodeRecord], model: str
    ) -> list[str]:
        pipe = self.client.pipeline(transaction=True)
        for r in records:
            key = self.keys.memory(r.id) if isinstance(r, MemoryRecord) else self.keys.episode(r.id)
            # Only touch documents that still exist: a delete may have raced this write.
            json_ops(pipe).merge(key, "$", {"vector_pending": 0, "embedded": True, "embedding_model": model})
            pipe.srem(self.keys.vector_pending, key)
        replies = await pipe.execute(raise_on_error=False)
        return [r.id for r, reply in zip(records, replies[::2], strict=True) if isinstance(reply, Exception)]
