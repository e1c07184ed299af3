"""The Redis record store beyond the role contracts (``tests/contract``): the union of its role adapters,
and what only the Redis documents can show (a document another writer left, a field an older engine
did not write)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from cpersona.keys import Keys
from cpersona.model.records import EpisodeRecord, MemoryRecord, Scope, Source, new_id
from cpersona.stores.protocols import RecordStore
from cpersona.stores.record_values import MemoryWrite
from cpersona.stores.redis.store import ROLES, RedisRecordStore, role_members

if TYPE_CHECKING:
    from cpersona.stores.redis.connection import RedisClient


BASE = 1_700_000_000.123456


def memory(content: str, seq: int, *, source: str = "") -> MemoryRecord:
    return MemoryRecord(
        id=new_id(),
        scope=Scope("a"),
        source=Source("Agent", source, ""),
        content=content,
        timestamp=BASE + seq,
        seq=seq,
    )


def episode(summary: str, seq: int) -> EpisodeRecord:
    return EpisodeRecord(id=new_id(), scope=Scope("a"), summary=summary, seq=seq, created_at=BASE + seq)


async def put(store: RecordStore, *records: MemoryRecord) -> None:
    await store.put_memories([MemoryWrite(r, ()) for r in records], queue_blocks=False)


def test_the_union_serves_every_member_from_the_one_role_that_declares_it(
    redis: RedisClient, key_prefix: str
) -> None:
    store = RedisRecordStore(redis, Keys(key_prefix))
    assert isinstance(store, RecordStore)
    declared = [name for protocol in ROLES.values() for name in role_members(protocol)]
    assert len(declared) == len(set(declared))  # no member declared by two roles
    every = {name for name in dir(RecordStore) if not name.startswith("_")}
    assert set(declared) == every
    for field, protocol in ROLES.items():
        adapter = getattr(store.roles, field)
        assert isinstance(adapter, protocol)
        for name in role_members(protocol):
            assert getattr(store, name) == getattr(adapter, name)


async def test_a_document_the_store_did_not_write_reads_as_absent(
    redis: RedisClient, key_prefix: str
) -> None:
    keys = Keys(key_prefix)
    store = RedisRecordStore(redis, keys)
    record_id = new_id()
    await redis.json().set(keys.memory(record_id), "$", {"vector_pending": 0, "embedded": True})
    assert await store.get("memory", record_id) is None


async def test_a_record_missing_a_hydrated_field_is_read_whole(redis: RedisClient, key_prefix: str) -> None:
    # Hydration asks for the fields by one union path, which skips absent ones: a record written by an
    # older engine without one of them must come back with that field's default, the rest unshifted.
    keys = Keys(key_prefix)
    store = RedisRecordStore(redis, keys)
    await store.ensure_indexes()
    rec = dataclasses.replace(memory("the ferry leaves at nine", 1, source="slack:1"), msg_id="m1")
    ep = dataclasses.replace(episode("a week at the lake", 2), embedded=True)
    await put(store, rec)
    await store.put_episode(ep, queue_blocks=False)
    before = await store.hydrate([rec.ref, ep.ref])
    client = redis.json()
    await client.delete(keys.memory(rec.id), "$.msg_id")  # type: ignore[no-untyped-call]
    await client.delete(keys.episode(ep.id), "$.embedded")  # type: ignore[no-untyped-call]
    assert await store.hydrate([rec.ref, ep.ref]) == {
        rec.ref: before[rec.ref]._replace(msg_id=""),
        ep.ref: before[ep.ref]._replace(embedded=False),
    }
