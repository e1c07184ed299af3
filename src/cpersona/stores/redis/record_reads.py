"""The Redis adapter of :class:`~cpersona.stores.record_reads.RecordReads`: a record read back through its
kind's schema (validated on the way), listings and counts through the search indexes, and fields of many
documents in one ``JSON.MGET``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import pydantic
from aredis_om import NotFoundError

from cpersona.model.scope import ReadScope
from cpersona.stores.record_values import BlockParent, RecordCounts
from cpersona.stores.redis import search
from cpersona.stores.redis.connection import json_ops
from cpersona.stores.redis.documents import (
    block_parent_of,
    episode_from_doc,
    memory_from_doc,
)
from cpersona.stores.redis.memory_states import memory_states
from cpersona.stores.redis.raw_docs import raw_from_doc
from cpersona.stores.redis.raw_search import unsealed
from cpersona.stores.redis.record_space import RecordRole
from cpersona.stores.redis.refs import key_of_ref
from cpersona.stores.redis.scope import scope_query

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from cpersona.keys import Keys
    from cpersona.model.records import EpisodeRecord, MemoryRecord, ProfileRecord, RawRecord
    from cpersona.stores.record_values import MemoryState, RecordKind

__all__ = ["LISTED", "RedisRecordReads", "record_from_doc"]

log = logging.getLogger("cpersona")

_SAMPLE_PAGE = 5_000


class RedisRecordReads(RecordRole):
    """Whole records, listings, counts and an agent's documents, on one record space."""

    async def get(self, kind: RecordKind, record_id: str) -> MemoryRecord | EpisodeRecord | RawRecord | None:
        key = {"memory": self.keys.memory, "episode": self.keys.episode, "raw": self.keys.raw}[kind](
            record_id
        )
        found = await json_ops(self.client).get(key)
        if found is None:
            return None
        try:
            record = record_from_doc(kind, found)
        except (KeyError, TypeError, pydantic.ValidationError) as exc:
            # Not a record this engine wrote (every write goes through the schema): as good as absent.
            log.warning("unreadable %s document %s: %s", kind, record_id, exc)
            return None
        if kind == "raw" and found.get("visibility") == "sealed":
            return None  # read only by the raw query that asks for sealed entries (see .raw_search)
        return record

    async def newest(
        self, kind: RecordKind, scope: ReadScope, limit: int
    ) -> list[MemoryRecord | EpisodeRecord | RawRecord]:
        if kind == "episode" and scope.source_id and not scope.channel:
            return []  # episodes carry no source: a source filter excludes them unless a channel is set
        index, sort = LISTED[kind](self.keys)
        query = scope_query(scope, with_source=kind == "memory")
        query = unsealed(query) if kind == "raw" else query
        docs = await search.documents(self.client, index, query, sort, limit)
        return [record_from_doc(kind, doc) for doc in docs]

    async def counts(self, agent_id: str | None) -> RecordCounts:
        query = "*" if agent_id is None else scope_query(ReadScope(agent_id), with_source=False)
        indexes = (self.keys.memory_index, self.keys.episode_index, self.keys.raw_index)
        queries = (query, query, unsealed(query))
        found = [await search.count(self.client, i, q) for i, q in zip(indexes, queries, strict=True)]
        pending = int(await self.client.scard(self.keys.vector_pending))
        return RecordCounts(found[0], found[1], found[2], pending)

    async def memory_ids(self, agent_id: str) -> list[str]:
        return await self.record_ids("memory", agent_id)

    async def record_ids(self, kind: RecordKind, agent_id: str) -> list[str]:
        query, index = scope_query(ReadScope(agent_id), with_source=False), LISTED[kind](self.keys)[0]
        keys = await search.every_key(self.client, index, query, _SAMPLE_PAGE, oldest_first=kind != "raw")
        ids = [key.rpartition(":")[2] for key in keys]  # a UUID holds no ':'
        return ids if kind != "raw" else sorted(ids)

    async def memory_samples(self, ids: Sequence[str]) -> list[tuple[str, float]]:
        names = [self.keys.memory(record_id) for record_id in ids]
        contents = await json_ops(self.client).mget(names, "$.content")
        stamps = await json_ops(self.client).mget(names, "$.ts")
        return [(c[0], float(t[0])) for c, t in zip(contents, stamps, strict=True) if c and t]

    async def memory_states(self, agent_id: str | None) -> list[MemoryState]:
        return await memory_states(self.client, self.keys, agent_id)

    async def block_parents(self, refs: Sequence[str]) -> list[BlockParent | None]:
        if not refs:
            return []
        docs = await json_ops(self.client).mget([key_of_ref(self.keys, ref) for ref in refs], "$")
        return [
            block_parent_of(ref, found[0]) if found else None for ref, found in zip(refs, docs, strict=True)
        ]

    async def block_texts(self, refs: Sequence[str]) -> list[str | None]:
        out: dict[str, str | None] = {}
        for prefix, path in (("mem:", "$.content"), ("ep:", "$.summary")):
            group = [ref for ref in refs if ref.startswith(prefix)]
            if group:
                names = [key_of_ref(self.keys, ref) for ref in group]
                found = await json_ops(self.client).mget(names, path)
                out.update((ref, str(v[0]) if v else None) for ref, v in zip(group, found, strict=True))
        return [out.get(ref) for ref in refs]

    async def profile(self, agent_id: str) -> ProfileRecord | None:
        try:
            found = await self.space.profiles.get(agent_id)
        except NotFoundError:
            return None
        return found.record()

    async def calibration(self, agent_id: str) -> Mapping[str, object] | None:
        doc: dict[str, Any] | None = await json_ops(self.client).get(self.keys.calibration(agent_id))
        return doc or None


LISTED: Mapping[RecordKind, Callable[[Keys], tuple[str, search.SortField]]] = {
    "memory": lambda keys: (keys.memory_index, "seq"),
    "episode": lambda keys: (keys.episode_index, "seq"),
    "raw": lambda keys: (keys.raw_index, "ts"),
}
"""The index of each kind of record, and the field its listings sort by."""


def record_from_doc(kind: RecordKind, doc: Mapping[str, Any]) -> MemoryRecord | EpisodeRecord | RawRecord:
    if kind == "memory":
        return memory_from_doc(doc)
    if kind == "episode":
        return episode_from_doc(doc)
    return raw_from_doc(doc)
