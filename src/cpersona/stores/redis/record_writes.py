"""The Redis adapter of :class:`~cpersona.stores.record_writes.RecordWrites`: each write one transaction of
:mod:`.writes` (checked against the agent's fence and confirmed on disk), each delete one durable step."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cpersona.stores.record_values import ClaimHolder
from cpersona.stores.redis.record_space import RecordRole
from cpersona.stores.redis.writes import Writer

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from cpersona.model.records import EpisodeRecord, MemoryRecord, ProfileRecord, RawRecord
    from cpersona.stores.record_values import MemoryWrite, RecordKind
    from cpersona.stores.redis.record_space import RecordSpace

__all__ = ["RedisRecordWrites"]


class RedisRecordWrites(RecordRole):
    """Record writes and deletes, on one record space."""

    def __init__(self, space: RecordSpace) -> None:
        super().__init__(space)
        self._writer = Writer(space.client, space.keys)

    def key(self, kind: RecordKind, record_id: str) -> str:
        """The Redis key of a record's document."""
        named = {"memory": self.keys.memory, "episode": self.keys.episode, "raw": self.keys.raw}
        return named[kind](record_id)

    async def next_seq(self, count: int = 1) -> int:
        if count == 1:
            return int(await self.client.incr(self.keys.sequence))
        return int(await self.client.incrby(self.keys.sequence, count)) - count + 1

    async def live_claim(self, claims: Sequence[str]) -> ClaimHolder | None:
        holders = await self.client.mget(claims)
        for claim, holder in zip(claims, holders, strict=True):
            if holder is None:
                continue
            record_id = holder.decode() if isinstance(holder, bytes) else str(holder)
            if await self.client.exists(self.keys.memory(record_id)):
                return ClaimHolder(claim, record_id)
        return None

    async def put_memories(self, writes: Sequence[MemoryWrite], *, queue_blocks: bool) -> None:
        await self._writer.put_memories(writes, queue_blocks=queue_blocks)

    async def replace_memory(
        self,
        record: MemoryRecord,
        *,
        drop_claims: Sequence[str],
        add_claims: Sequence[str],
        queue_blocks: bool,
    ) -> None:
        await self._writer.replace_memory(
            record, drop_claims=drop_claims, add_claims=add_claims, queue_blocks=queue_blocks
        )

    async def put_episode(self, record: EpisodeRecord, *, queue_blocks: bool) -> None:
        await self._writer.put_episode(record, queue_blocks=queue_blocks)

    async def put_raw(self, records: Sequence[RawRecord]) -> None:
        await self._writer.put_raw(records, self.space.sealer)

    async def put_profile(self, record: ProfileRecord) -> None:
        await self._writer.put_profile(self.space.profiles, record)

    async def put_calibration(self, agent_id: str, doc: Mapping[str, object]) -> None:
        await self._writer.set_json(self.keys.calibration(agent_id), "$", dict(doc))

    async def select_calibration(self, agent_id: str, selected: bool) -> None:
        await self._writer.set_json(self.keys.calibration(agent_id), "$.selected", selected)

    async def delete(self, kind: RecordKind, record_id: str, claims: Sequence[str]) -> None:
        await self._writer.delete(self.key(kind, record_id), record_id, claims)

    async def delete_many(self, kind: RecordKind, records: Sequence[tuple[str, Sequence[str]]]) -> int:
        keyed = [(self.key(kind, record_id), record_id, claims) for record_id, claims in records]
        return await self._writer.delete_many(keyed)
