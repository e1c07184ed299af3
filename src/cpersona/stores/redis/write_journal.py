"""The Redis adapter of :class:`~cpersona.stores.write_journal.WriteJournal`: the in-flight marks and the
set of pending vector writes that :mod:`.writes` keeps beside the records."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cpersona.stores.redis.durable import commit, transaction
from cpersona.stores.redis.record_space import RecordRole
from cpersona.stores.redis.refs import key_of_ref, ref_of_key
from cpersona.stores.redis.write_scripts import QUEUE_BLOCKS, queue_script
from cpersona.stores.redis.writes import Writer

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cpersona.model.records import EpisodeRecord, MemoryRecord
    from cpersona.stores.record_values import ClaimHolder, InFlightWrite
    from cpersona.stores.redis.record_space import RecordSpace

__all__ = ["RedisWriteJournal"]

_MARK_BATCH = 1_000


class RedisWriteJournal(RecordRole):
    """Writes in flight and vectors still to write, on one record space."""

    def __init__(self, space: RecordSpace) -> None:
        super().__init__(space)
        self._writer = Writer(space.client, space.keys)

    async def reserve_writes(
        self, writes: Sequence[InFlightWrite], *, ttl_secs: float
    ) -> list[ClaimHolder | None]:
        return await self._writer.reserve_writes(writes, ttl_secs)

    async def release_writes(self, writes: Sequence[InFlightWrite]) -> list[InFlightWrite]:
        return await self._writer.release_writes(writes)

    async def forget_writes(self, writes: Sequence[InFlightWrite]) -> None:
        await self._writer.forget_writes(writes)

    async def abandoned_writes(self, started_before: float) -> list[InFlightWrite]:
        return await self._writer.abandoned_writes(started_before)

    async def mark_all_pending(self, *, queue_blocks: bool) -> int:
        marked = 0
        for prefix in (self.keys.memory_prefix, self.keys.episode_prefix):
            batch: list[bytes] = []
            async for key in self.client.scan_iter(match=f"{prefix}*", count=_MARK_BATCH):
                batch.append(key)
                if len(batch) >= _MARK_BATCH:
                    marked += await self._mark_pending(batch, queue_blocks=queue_blocks)
                    batch = []
            if batch:
                marked += await self._mark_pending(batch, queue_blocks=queue_blocks)
        return marked

    async def _mark_pending(self, keys: list[bytes], *, queue_blocks: bool) -> int:
        pipe = transaction(self.client)
        pipe.sadd(self.keys.vector_pending, *keys)
        if queue_blocks:
            queue_script(pipe, QUEUE_BLOCKS, [self.keys.block_stream], [key.decode() for key in keys])
        await commit(pipe, self.client)
        return len(keys)

    async def pending_refs(self) -> list[str]:
        members = sorted(m.decode() for m in await self.client.smembers(self.keys.vector_pending))
        return [ref for key in members if (ref := ref_of_key(self.keys, key)) is not None]

    async def load_pending(self, refs: Sequence[str]) -> list[MemoryRecord | EpisodeRecord]:
        return await self._writer.load_pending([key_of_ref(self.keys, ref) for ref in refs])

    async def mark_vectors_written(
        self, records: Sequence[MemoryRecord | EpisodeRecord], model: str
    ) -> list[str]:
        return await self._writer.mark_vectors_written(records, model)
