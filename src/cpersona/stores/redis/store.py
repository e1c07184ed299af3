"""The Redis adapter of :class:`~cpersona.stores.protocols.RecordStore`.

Records are RedisJSON documents laid out by :mod:`.documents` from each record kind's schema (which
reads every document back, validating it on the way; a profile is read and written by redis-om, its
document being a redis-om model), searched through the indexes of :mod:`.indexes`;
the searches are :mod:`.search`'s and :mod:`.keyword`'s, built with redis-py's search API (they need
tags held in hex, ``BM25STD``, ``VERBATIM``, a scope filter repeated inside each alternative, an
aggregation sorted by two fields), the write transactions :mod:`.writes`'. Every call runs inside
:func:`~.connection.redis_errors`, so an outage surfaces as :class:`~cpersona.RedisUnavailable` whatever
the caller.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import pydantic
import redis.exceptions
from aredis_om import NotFoundError

from cpersona.errors import BackendUnavailable
from cpersona.model.scope import ReadScope
from cpersona.stores.protocols import BlockParent, ClaimHolder, RecordCounts, SeqAt, StoredProfile
from cpersona.stores.redis import keyword, search
from cpersona.stores.redis.associations import RedisAssociations
from cpersona.stores.redis.connection import command, json_ops, redis_errors
from cpersona.stores.redis.documents import (
    ProfileDocument,
    block_parent_of,
    episode_from_doc,
    memory_from_doc,
)
from cpersona.stores.redis.fences import RedisFences
from cpersona.stores.redis.field_writes import RedisFieldWrites
from cpersona.stores.redis.hydrate import hydrate
from cpersona.stores.redis.indexes import ensure_indexes
from cpersona.stores.redis.memory_reads import RedisMemoryReads
from cpersona.stores.redis.om_models import bind
from cpersona.stores.redis.raw_docs import raw_from_doc
from cpersona.stores.redis.raw_search import RedisRawJournal, unsealed
from cpersona.stores.redis.refs import key_of_ref, ref_of_key
from cpersona.stores.redis.scope import scope_query
from cpersona.stores.redis.sole_agent import SoleAgents
from cpersona.stores.redis.writes import Writer

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

    from cpersona.keys import Keys
    from cpersona.model.candidates import ArmResult
    from cpersona.model.records import EpisodeRecord, MemoryRecord, ProfileRecord, RawRecord
    from cpersona.stores.protocols import (
        HydratedRecord,
        InFlightWrite,
        MemoryWrite,
        RecordKind,
        SearchedKind,
    )
    from cpersona.stores.redis.connection import RedisClient
    from cpersona.stores.redis.sealing import Sealer

__all__ = ["RedisRecordStore"]

log = logging.getLogger("cpersona")

_SAMPLE_PAGE = 5_000


class RedisRecordStore(RedisAssociations, RedisRawJournal, RedisFieldWrites, RedisMemoryReads, RedisFences):
    """The record store of one engine: one client, one key prefix; the mixins it extends are its parts."""

    def __init__(self, client: RedisClient, keys: Keys, sealer: Sealer | None = None) -> None:
        self.client = client
        self.keys = keys
        self.sealer = sealer
        self._writer = Writer(client, keys)
        self._profiles = bind(ProfileDocument, client, keys.profile)
        self._lexical = keyword.LexicalIndexes(client, keys, SoleAgents(client))

    def key(self, kind: RecordKind, record_id: str) -> str:
        """The Redis key of a record's document."""
        named = {"memory": self.keys.memory, "episode": self.keys.episode, "raw": self.keys.raw}
        return named[kind](record_id)

    # ------------------------------------------------------------------ lifecycle

    async def ensure_indexes(self) -> None:
        async with redis_errors():
            await self.seal_plain_entries()
            await ensure_indexes(self.client, self.keys)

    async def ping(self) -> None:
        async with redis_errors():
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

    # ------------------------------------------------------------------ searches of the recall arms

    async def memory_keyword(
        self,
        scope: ReadScope,
        query: str,
        fetch: int,
        *,
        extra_terms: Sequence[str] = (),
        period: tuple[float, float] | None = None,
    ) -> ArmResult:
        return await keyword.memory_keyword(
            self._lexical, scope, query, fetch, extra_terms=extra_terms, period=period
        )

    async def episode_fts(
        self,
        scope: ReadScope,
        query: str,
        fetch: int,
        *,
        extra_terms: Sequence[str] = (),
        period: tuple[float, float] | None = None,
    ) -> ArmResult:
        return await keyword.episode_fts(
            self._lexical, scope, query, fetch, extra_terms=extra_terms, period=period
        )

    async def seq_at(self, kind: SearchedKind, scope: ReadScope, rank: int) -> SeqAt:
        index = self.keys.memory_index if kind == "memory" else self.keys.episode_index
        async with redis_errors():
            total, seq = await search.seq_at(self.client, index, _unsourced(scope), rank)
        return SeqAt(total, seq)

    async def time_span(self, scope: ReadScope) -> tuple[float, float] | None:
        async with redis_errors("reading the scope's time span failed"):
            return await search.time_span(
                self.client, self.keys.memory_index, scope_query(scope, with_source=True)
            )

    async def memory_sources(self, ids: Sequence[str]) -> list[str | None]:
        names = [self.keys.memory(record_id) for record_id in ids]
        async with redis_errors("reading the sources of the cue arm's vector hits failed"):
            found = await json_ops(self.client).mget(names, "$.source.id")
        return [values[0] if values and isinstance(values[0], str) else None for values in found]

    # ------------------------------------------------------------------ what a recall reads besides its arms

    async def hydrate(self, refs: Iterable[str]) -> dict[str, HydratedRecord]:
        return await hydrate(self.client, self.keys, refs)

    async def recall_profile(self, agent_id: str) -> StoredProfile | None:
        # Read as plain JSON, not through the model: a recall renders the content and nothing else.
        async with redis_errors():
            doc = await json_ops(self.client).get(self.keys.profile(agent_id))
        # A profile document without text (written by hand) is no profile, rather than a failed recall.
        content = doc.get("content") if isinstance(doc, dict) else None
        return StoredProfile(content) if isinstance(content, str) else None

    async def calibrated_gate(self, agent_id: str) -> float | None:
        doc = await self.calibration(agent_id)
        if not doc or not doc.get("selected"):
            return None
        value = doc.get("threshold")
        return float(value) if isinstance(value, int | float) else None

    async def newest_episode_time(self, scope: ReadScope) -> float | None:
        async with redis_errors():
            docs = await search.documents(self.client, self.keys.episode_index, _unsourced(scope), "seq", 1)
        return float(docs[0].get("created_at", 0.0)) if docs else None

    async def newest_memory_time(self, scope: ReadScope) -> float | None:
        # The sortable field as the search engine prints it (12 significant digits), as the recall has
        # always read it: the anchor of the age prior, where a centisecond moves nothing.
        async with redis_errors():
            value = await search.newest_field(
                self.client, self.keys.memory_index, _unsourced(scope), "ts", "ts"
            )
        return None if value is None else float(value)

    # ------------------------------------------------------------------ records

    async def next_seq(self, count: int = 1) -> int:
        async with redis_errors():
            if count == 1:
                return int(await self.client.incr(self.keys.sequence))
            return int(await self.client.incrby(self.keys.sequence, count)) - count + 1

    async def live_claim(self, claims: Sequence[str]) -> ClaimHolder | None:
        async with redis_errors():
            holders = await self.client.mget(claims)
            for claim, holder in zip(claims, holders, strict=True):
                if holder is None:
                    continue
                record_id = holder.decode() if isinstance(holder, bytes) else str(holder)
                if await self.client.exists(self.keys.memory(record_id)):
                    return ClaimHolder(claim, record_id)
        return None

    async def reserve_writes(
        self, writes: Sequence[InFlightWrite], *, ttl_secs: float
    ) -> list[ClaimHolder | None]:
        async with redis_errors():
            return await self._writer.reserve_writes(writes, ttl_secs)

    async def release_writes(self, writes: Sequence[InFlightWrite]) -> list[InFlightWrite]:
        async with redis_errors():
            return await self._writer.release_writes(writes)

    async def forget_writes(self, writes: Sequence[InFlightWrite]) -> None:
        async with redis_errors():
            await self._writer.forget_writes(writes)

    async def abandoned_writes(self, started_before: float) -> list[InFlightWrite]:
        async with redis_errors():
            return await self._writer.abandoned_writes(started_before)

    async def put_memories(self, writes: Sequence[MemoryWrite], *, queue_blocks: bool) -> None:
        async with redis_errors():
            await self._writer.put_memories(writes, queue_blocks=queue_blocks)

    async def replace_memory(
        self,
        record: MemoryRecord,
        *,
        drop_claims: Sequence[str],
        add_claims: Sequence[str],
        queue_blocks: bool,
    ) -> None:
        async with redis_errors():
            await self._writer.replace_memory(
                record, drop_claims=drop_claims, add_claims=add_claims, queue_blocks=queue_blocks
            )

    async def put_episode(self, record: EpisodeRecord, *, queue_blocks: bool) -> None:
        async with redis_errors():
            await self._writer.put_episode(record, queue_blocks=queue_blocks)

    async def get(self, kind: RecordKind, record_id: str) -> MemoryRecord | EpisodeRecord | RawRecord | None:
        key = {"memory": self.keys.memory, "episode": self.keys.episode, "raw": self.keys.raw}[kind](
            record_id
        )
        async with redis_errors():
            found = await json_ops(self.client).get(key)
        if found is None:
            return None
        try:
            record = _from_doc(kind, found)
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
        index, sort = _LISTED[kind](self.keys)
        query = scope_query(scope, with_source=kind == "memory")
        query = unsealed(query) if kind == "raw" else query
        async with redis_errors():
            docs = await search.documents(self.client, index, query, sort, limit)
        return [_from_doc(kind, doc) for doc in docs]

    async def counts(self, agent_id: str | None) -> RecordCounts:
        query = "*" if agent_id is None else scope_query(ReadScope(agent_id), with_source=False)
        async with redis_errors():
            indexes = (self.keys.memory_index, self.keys.episode_index, self.keys.raw_index)
            queries = (query, query, unsealed(query))
            found = [await search.count(self.client, i, q) for i, q in zip(indexes, queries, strict=True)]
            pending = int(await self.client.scard(self.keys.vector_pending))
        return RecordCounts(found[0], found[1], found[2], pending)

    async def delete(self, kind: RecordKind, record_id: str, claims: Sequence[str]) -> None:
        async with redis_errors():
            await self._writer.delete(self.key(kind, record_id), record_id, claims)

    async def delete_many(self, kind: RecordKind, records: Sequence[tuple[str, Sequence[str]]]) -> int:
        async with redis_errors():
            keyed = [(self.key(kind, record_id), record_id, claims) for record_id, claims in records]
            return await self._writer.delete_many(keyed)

    async def delete_agent(self, agent_id: str) -> int:
        async with redis_errors():
            return await self._writer.delete_agent(agent_id)

    # ------------------------------------------------------------------ vectors still to write

    async def pending_refs(self) -> list[str]:
        async with redis_errors():
            members = sorted(m.decode() for m in await self.client.smembers(self.keys.vector_pending))
        return [ref for key in members if (ref := ref_of_key(self.keys, key)) is not None]

    async def load_pending(self, refs: Sequence[str]) -> list[MemoryRecord | EpisodeRecord]:
        async with redis_errors():
            return await self._writer.load_pending([key_of_ref(self.keys, ref) for ref in refs])

    async def mark_vectors_written(
        self, records: Sequence[MemoryRecord | EpisodeRecord], model: str
    ) -> list[str]:
        async with redis_errors():
            return await self._writer.mark_vectors_written(records, model)

    # ------------------------------------------------------------------ blocks

    async def block_parents(self, refs: Sequence[str]) -> list[BlockParent | None]:
        if not refs:
            return []
        async with redis_errors():
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
                async with redis_errors():
                    found = await json_ops(self.client).mget(names, path)
                out.update((ref, str(v[0]) if v else None) for ref, v in zip(group, found, strict=True))
        return [out.get(ref) for ref in refs]

    # ------------------------------------------------------------------ per-agent documents

    async def memory_ids(self, agent_id: str) -> list[str]:
        return await self.record_ids("memory", agent_id)

    async def record_ids(self, kind: RecordKind, agent_id: str) -> list[str]:
        query, index = scope_query(ReadScope(agent_id), with_source=False), _LISTED[kind](self.keys)[0]
        async with redis_errors():
            keys = await search.every_key(self.client, index, query, _SAMPLE_PAGE, oldest_first=kind != "raw")
        ids = [key.rpartition(":")[2] for key in keys]  # a UUID holds no ':'
        return ids if kind != "raw" else sorted(ids)

    async def memory_samples(self, ids: Sequence[str]) -> list[tuple[str, float]]:
        names = [self.keys.memory(record_id) for record_id in ids]
        async with redis_errors():
            contents = await json_ops(self.client).mget(names, "$.content")
            stamps = await json_ops(self.client).mget(names, "$.ts")
        return [(c[0], float(t[0])) for c, t in zip(contents, stamps, strict=True) if c and t]

    async def profile(self, agent_id: str) -> ProfileRecord | None:
        async with redis_errors():
            try:
                found = await self._profiles.get(agent_id)
            except NotFoundError:
                return None
        return found.record()

    async def put_profile(self, record: ProfileRecord) -> None:
        async with redis_errors():
            await self._writer.put_profile(self._profiles, record)

    async def calibration(self, agent_id: str) -> Mapping[str, object] | None:
        async with redis_errors():
            doc: dict[str, Any] | None = await json_ops(self.client).get(self.keys.calibration(agent_id))
        return doc or None

    async def put_calibration(self, agent_id: str, doc: Mapping[str, object]) -> None:
        async with redis_errors():
            await self._writer.set_json(self.keys.calibration(agent_id), "$", dict(doc))

    async def select_calibration(self, agent_id: str, selected: bool) -> None:
        async with redis_errors():
            await self._writer.set_json(self.keys.calibration(agent_id), "$.selected", selected)


_LISTED: Mapping[RecordKind, Callable[[Keys], tuple[str, search.SortField]]] = {
    "memory": lambda keys: (keys.memory_index, "seq"),
    "episode": lambda keys: (keys.episode_index, "seq"),
    "raw": lambda keys: (keys.raw_index, "ts"),
}


def _unsourced(scope: ReadScope) -> str:
    """The query of ``scope`` with its source filter left out (a count or a newest time of the scope)."""
    return scope_query(ReadScope(scope.agent_id, scope.project_id, scope.channel), with_source=False)


def _from_doc(kind: RecordKind, doc: Mapping[str, Any]) -> MemoryRecord | EpisodeRecord | RawRecord:
    if kind == "memory":
        return memory_from_doc(doc)
    if kind == "episode":
        return episode_from_doc(doc)
    return raw_from_doc(doc)
