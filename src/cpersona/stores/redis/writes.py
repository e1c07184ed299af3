"""The adapter's writes: each a transaction that keeps a record, its claims, its pending mark, its block
event and the end of its in-flight mark together, so a crash leaves all of them or none, and each
acknowledged only once it is on disk (:mod:`.durable`); each record write checked, in the same step,
against the fence of an agent whose data is being deleted (:mod:`.fences`); and the steps that must
decide on what they read (taking claims, clearing a pending mark), which are the scripts of
:mod:`.write_scripts`.

Documents are made from their record's schema (:mod:`.documents`) and written with ``JSON.SET`` in the
transaction with their claims and stream event; a batch of memories as one ``JSON.MSET`` of their JSON
text (:func:`~.memory_json.memory_json`), with one ``ZREM`` of its in-flight entries and one script for
its stream events, since a command per record cost more to pack and parse than the server spent on it.
A profile, one document alone, is written by redis-om (its document is a redis-om model) in a fenced
transaction of its own (:meth:`Writer.put_profile`), so that it too waits for the WAITAOF.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import TYPE_CHECKING, Any

from cpersona.model.records import EpisodeRecord, MemoryRecord
from cpersona.model.scope import ReadScope
from cpersona.stores.record_values import ClaimHolder, InFlightWrite
from cpersona.stores.redis import search
from cpersona.stores.redis.associations import queue_declaration
from cpersona.stores.redis.connection import json_ops
from cpersona.stores.redis.documents import (
    episode_from_doc,
    episode_to_doc,
    memory_from_doc,
    memory_to_doc,
)
from cpersona.stores.redis.durable import commit, flushed, transaction
from cpersona.stores.redis.fences import commit_fenced, fenced_transaction, lowest
from cpersona.stores.redis.memory_json import memory_json
from cpersona.stores.redis.raw_docs import raw_document
from cpersona.stores.redis.scope import scope_query
from cpersona.stores.redis.write_scripts import (
    CLAIM,
    DROP,
    KEEP,
    MARK_WRITTEN,
    QUEUE_BLOCKS,
    RELEASE,
    claim_args,
    in_flight_member,
    parse_member,
    queue_script,
    release_args,
    reservation_args,
    run_script,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cpersona.keys import Keys
    from cpersona.model.records import ProfileRecord, RawRecord
    from cpersona.stores.protocols import MemoryWrite
    from cpersona.stores.redis.connection import RedisClient
    from cpersona.stores.redis.documents import ProfileDocument
    from cpersona.stores.redis.sealing import Sealer

__all__ = ["Writer"]

_DELETE_PAGE = 500


@dataclasses.dataclass(frozen=True, slots=True)
class Writer:
    """The write transactions of one engine's store."""

    client: RedisClient
    keys: Keys

    def _queue_blocks(self, pipe: Any, record_key: str) -> None:
        # In the transaction that writes the record: an acknowledged write always has its event.
        pipe.xadd(self.keys.block_stream, {"key": record_key})

    async def put_memories(self, writes: Sequence[MemoryWrite], *, queue_blocks: bool) -> None:
        agents = lowest((w.record.scope.agent_id, w.record.seq) for w in writes)
        pipe = fenced_transaction(self.client, self.keys, agents) if agents else transaction(self.client)
        keys = [self.keys.memory(w.record.id) for w in writes]
        if writes:
            # One JSON.MSET and one ZREM for the batch: a command per record each cost a round of
            # packing and parsing, and the transaction applies them all or none either way.
            texts = [memory_json(w.record) for w in writes]
            # Through redis-py's JSON helper, as the JSON.SET it replaces was: making the helper registers
            # its reply parsers on the client, which plain JSON.GET callers (tests) have come to rely on.
            json_ops(pipe).execute_command(
                "JSON.MSET", *(arg for kt in zip(keys, texts, strict=True) for arg in _at_root(*kt))
            )
            members = [in_flight_member(InFlightWrite("memory", w.record.id, w.claims)) for w in writes]
            pipe.zrem(self.keys.writes_in_flight, *members)
        if pending := [key for key, w in zip(keys, writes, strict=True) if w.record.vector_pending]:
            pipe.sadd(self.keys.vector_pending, *pending)
        if queue_blocks and keys:
            # In the transaction that writes the records: an acknowledged write always has its event.
            queue_script(pipe, QUEUE_BLOCKS, [self.keys.block_stream], keys)
        for write in writes:
            if write.declared is not None:  # the associative layer's, in the record's own transaction
                queue_declaration(pipe, self.keys, write.record.scope, write.declared, write.record.ref)
        # The claims outlive their reservations now, unless a store that outlasted its own took one.
        self._keep_claims(pipe, [(w.record.id, w.claims) for w in writes])
        await (commit_fenced(pipe, self.client, agents) if agents else commit(pipe, self.client))

    def _keep_claims(self, pipe: Any, groups: Sequence[tuple[str, Sequence[str]]]) -> None:
        keys, args = claim_args(groups)
        if keys:
            queue_script(pipe, KEEP, keys, [self.keys.memory_prefix, *args])

    def _drop_claims(self, pipe: Any, record_id: str, claims: Sequence[str]) -> None:
        keys, args = claim_args([(record_id, claims)])
        if keys:
            queue_script(pipe, DROP, keys, args)

    async def replace_memory(
        self, rec: MemoryRecord, *, drop_claims: Sequence[str], add_claims: Sequence[str], queue_blocks: bool
    ) -> None:
        key = self.keys.memory(rec.id)
        agents = {rec.scope.agent_id: rec.seq}
        pipe = fenced_transaction(self.client, self.keys, agents)
        json_ops(pipe).set(key, "$", memory_to_doc(rec))
        self._drop_claims(pipe, rec.id, drop_claims)
        self._keep_claims(pipe, [(rec.id, add_claims)])
        if rec.vector_pending:
            pipe.sadd(self.keys.vector_pending, key)
        if queue_blocks:
            self._queue_blocks(pipe, key)
        await commit_fenced(pipe, self.client, agents)

    async def put_episode(self, rec: EpisodeRecord, *, queue_blocks: bool) -> None:
        key = self.keys.episode(rec.id)
        agents = {rec.scope.agent_id: rec.seq}
        pipe = fenced_transaction(self.client, self.keys, agents)
        json_ops(pipe).set(key, "$", episode_to_doc(rec))
        pipe.zrem(self.keys.writes_in_flight, in_flight_member(InFlightWrite("episode", rec.id)))
        if rec.vector_pending:
            pipe.sadd(self.keys.vector_pending, key)
        if queue_blocks:
            self._queue_blocks(pipe, key)
        await commit_fenced(pipe, self.client, agents)

    async def put_raw(self, records: Sequence[RawRecord], sealer: Sealer | None) -> None:
        if not records:
            return
        docs = [raw_document(rec, sealer) for rec in records]
        agents = dict.fromkeys(rec.scope.agent_id for rec in records)  # a raw entry has no number
        pipe = fenced_transaction(self.client, self.keys, agents)
        for rec, doc in zip(records, docs, strict=True):
            json_ops(pipe).set(self.keys.raw(rec.id), "$", doc)
        await commit_fenced(pipe, self.client, agents)

    async def put_profile(self, profiles: type[ProfileDocument], rec: ProfileRecord) -> None:
        """Write an agent's profile durably, checked against its agent's fence: redis-om's ``save`` of
        its document (the engine's bound model, ``profiles``) queued in the fenced transaction."""
        agents: dict[str, int | None] = {rec.agent_id: None}
        pipe = fenced_transaction(self.client, self.keys, agents)
        await profiles.of(rec).save(pipeline=pipe)
        await commit_fenced(pipe, self.client, agents)

    async def set_json(self, key: str, path: str, value: object) -> None:
        pipe = self.client.pipeline(transaction=False)
        json_ops(pipe).set(key, path, value)
        await flushed(pipe, self.client)

    async def delete(self, key: str, record_id: str, claims: Sequence[str]) -> None:
        pipe = transaction(self.client)
        pipe.delete(key)
        pipe.srem(self.keys.vector_pending, key)
        self._drop_claims(pipe, record_id, claims)
        await commit(pipe, self.client)

    async def delete_many(self, records: Sequence[tuple[str, str, Sequence[str]]]) -> int:
        """``(key, record id, claims)`` deleted as :meth:`delete` deletes one, in one transaction and one
        wait for the disk; the number of keys that were there."""
        if not records:
            return 0
        pipe = transaction(self.client)
        for key, _, _ in records:
            pipe.delete(key)
        pipe.srem(self.keys.vector_pending, *(key for key, _, _ in records))
        keys, args = claim_args([(record_id, claims) for _, record_id, claims in records])
        if keys:
            queue_script(pipe, DROP, keys, args)
        applied = await commit(pipe, self.client)
        return sum(int(gone) for gone in applied[: len(records)])

    async def delete_agent(self, agent_id: str) -> int:
        query = scope_query(ReadScope(agent_id), with_source=False)
        deleted = 0
        for index in (self.keys.memory_index, self.keys.episode_index, self.keys.raw_index):
            while found := await search.keys_page(self.client, index, query, 0, _DELETE_PAGE):
                pipe = self.client.pipeline(transaction=False)
                pipe.delete(*found)
                pipe.srem(self.keys.vector_pending, *found)
                await flushed(pipe, self.client)
                deleted += len(found)
        for pattern in self.keys.claims_of_agent(agent_id):
            batch: list[bytes] = []
            async for claim in self.client.scan_iter(match=pattern, count=1000):
                batch.append(claim)
                if len(batch) >= _DELETE_PAGE:
                    await self._delete_durably(batch)
                    batch = []
            if batch:
                await self._delete_durably(batch)
        await self._delete_durably([self.keys.profile(agent_id), self.keys.calibration(agent_id)])
        return deleted

    async def _delete_durably(self, keys: Sequence[bytes | str]) -> None:
        pipe = self.client.pipeline(transaction=False)
        pipe.delete(*keys)
        await flushed(pipe, self.client)

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
        if not records:
            return []
        keys = [
            self.keys.memory(r.id) if isinstance(r, MemoryRecord) else self.keys.episode(r.id)
            for r in records
        ]
        patch = json.dumps({"vector_pending": 0, "embedded": True, "embedding_model": model})
        missing = await run_script(self.client, MARK_WRITTEN, [self.keys.vector_pending, *keys], [patch])
        return [records[int(i) - 1].id for i in missing]

    # ------------------------------------------------------------------ writes in flight

    async def reserve_writes(
        self, writes: Sequence[InFlightWrite], ttl_secs: float
    ) -> list[ClaimHolder | None]:
        if not writes:
            return []
        keys, args = reservation_args(self.keys.writes_in_flight, writes)
        head = [self.keys.memory_prefix, str(max(1, round(ttl_secs * 1000))), repr(time.time())]
        held = await run_script(self.client, CLAIM, keys, [*head, *args])
        return [ClaimHolder(_text(h[0]), _text(h[1])) if h else None for h in held]

    async def release_writes(self, writes: Sequence[InFlightWrite]) -> list[InFlightWrite]:
        if not writes:
            return []
        keys, args = release_args(self.keys.writes_in_flight, writes, [self._key(w) for w in writes])
        unwritten = await run_script(self.client, RELEASE, keys, args)
        return [writes[int(i) - 1] for i in unwritten]

    async def forget_writes(self, writes: Sequence[InFlightWrite]) -> None:
        if writes:
            await self.client.zrem(self.keys.writes_in_flight, *(in_flight_member(w) for w in writes))

    async def abandoned_writes(self, started_before: float) -> list[InFlightWrite]:
        entries = await self.client.zrangebyscore(self.keys.writes_in_flight, "-inf", started_before)
        found: list[InFlightWrite] = []
        for entry in entries:
            write = parse_member(entry)
            if write is not None and not await self.client.exists(self._key(write)):
                found.append(write)
            else:  # not ours, or its document is written: nothing to sweep
                await self.client.zrem(self.keys.writes_in_flight, entry)
        return found

    def _key(self, write: InFlightWrite) -> str:
        return (
            self.keys.memory(write.record_id)
            if write.kind == "memory"
            else self.keys.episode(write.record_id)
        )


def _at_root(key: str, text: bytes | str) -> tuple[str, str, bytes | str]:
    return key, "$", text


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
