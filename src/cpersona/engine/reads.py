"""The reads service: one record by ref, the newest records, every memory of an agent, counts, health and
the profile. A recall is the recall service's (:mod:`~cpersona.engine.recalls`)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import anyio

from cpersona.errors import InvalidRequest, RecordNotFound
from cpersona.model.cmp_stats import cmp_stats
from cpersona.model.fidelity import FidelityCurve, as_read
from cpersona.model.fields import AgentId, KeyText, check
from cpersona.model.records import EpisodeRecord, MemoryRecord, ProfileRecord, RawRecord, parse_ref
from cpersona.model.responses import StatsResponse
from cpersona.model.scope import ReadScope
from cpersona.stores.protocols import scope_filter

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping, Sequence

    from cpersona.engine.lifecycle import Lifecycle
    from cpersona.model.record_queries import ListQuery, RecordKind

__all__ = [
    "AnyRecord",
    "ReadService",
    "agent_memories",
    "get",
    "health",
    "read_memories",
    "record_ref",
    "shown",
]

AnyRecord = MemoryRecord | EpisodeRecord | RawRecord
_KINDS: Mapping[str, RecordKind] = {"mem": "memory", "ep": "episode", "raw": "raw"}


def record_ref(ref: str) -> tuple[RecordKind, str]:
    """The kind and id a record ref names, or :class:`InvalidRequest` for anything else."""
    if not isinstance(ref, str):
        raise InvalidRequest("ref", "must be a string like 'mem:<uuid>'")
    parsed = parse_ref(ref)
    if parsed is None and ref.startswith("profile:"):
        # A recall's profile row carries this ref; the profile is read through its own route.
        raise InvalidRequest(
            "ref",
            f"{ref!r} names an agent's profile, not a record: read it with get_profile "
            "(GET /v1/profile/<agent_id>)",
        )
    if parsed is None:
        raise InvalidRequest("ref", f"is not a record ref (mem:<uuid>, ep:<uuid> or raw:<uuid>): {ref!r}")
    return _KINDS[parsed.kind], parsed.id


async def get(life: Lifecycle, ref: str, agent_id: str) -> AnyRecord:
    agent = check(KeyText, agent_id, "agent_id", life.settings)
    kind, record_id = record_ref(ref)
    record = await life.backends.records.get(kind, record_id)
    if record is None or record.scope.agent_id != agent:
        raise RecordNotFound(str(ref))
    return record


def shown(record: AnyRecord, curve: FidelityCurve, now: float | None = None) -> AnyRecord:
    """A record as it is handed to a reader: a memory with its fidelity at the moment of reading."""
    if isinstance(record, MemoryRecord):
        return as_read(record, time.time() if now is None else now, curve=curve)
    return record


_READ_BATCH = 64


async def read_memories(life: Lifecycle, agent_id: str, ids: Sequence[str]) -> list[MemoryRecord]:
    """These memories of ``agent_id`` that exist, in order (read concurrently, one batch at a time)."""
    found: list[MemoryRecord | None] = [None] * len(ids)

    async def one(i: int, record_id: str) -> None:
        record = await life.backends.records.get("memory", record_id)
        if isinstance(record, MemoryRecord) and record.scope.agent_id == agent_id:
            found[i] = record

    async with anyio.create_task_group() as tg:
        for i, record_id in enumerate(ids):
            tg.start_soon(one, i, record_id)
    return [r for r in found if r is not None]


async def agent_memories(life: Lifecycle, agent_id: str) -> AsyncIterator[MemoryRecord]:
    """Every memory of the agent in insertion order, read a batch at a time (never all at once)."""
    ids = await life.backends.records.memory_ids(agent_id)
    for start in range(0, len(ids), _READ_BATCH):
        for record in await read_memories(life, agent_id, ids[start : start + _READ_BATCH]):
            yield record


async def health(life: Lifecycle) -> dict[str, Any]:
    b = life.backends
    await b.records.ping()
    return {
        "ok": True,
        "redis": {**b.stores.info, "embedded": life.settings.embedded_redis},
        "vector_engine": None if b.vectors is None else b.vectors.engine_name,
        "embedder": None if b.embedder is None else {"name": b.embedder.name, "dim": b.embedder.dim},
        "traces": b.trace_publisher.stats().model_dump(mode="json"),
    }


class ReadService:
    """Records as a reader sees them: by ref, the newest of a scope, the profile, and the counts."""

    def __init__(self, life: Lifecycle) -> None:
        self._life = life

    async def get(self, ref: str, agent_id: str) -> AnyRecord:
        """One record by ref, if it belongs to ``agent_id`` (else :class:`~cpersona.RecordNotFound`), a
        memory with its fidelity at the moment of reading."""
        return shown(await get(self._life, ref, agent_id), self._life.curve)

    async def list(self, query: ListQuery) -> list[AnyRecord]:
        """The newest records of one kind in a scope (by insertion order; raw entries by time)."""
        scope = ReadScope(query.agent_id, query.project_id, query.channel, query.source_id)
        now = time.time()
        found = await self._life.backends.records.newest(query.kind, scope, query.limit)
        return [shown(r, self._life.curve, now) for r in found]

    async def get_profile(self, agent_id: str) -> ProfileRecord | None:
        agent = check(AgentId, agent_id, "agent_id", self._life.settings)
        return await self._life.backends.records.profile(agent)

    async def stats(self, agent_id: str | None = None) -> dict[str, Any]:
        """Record counts (of one agent, or all), pending vector writes, and CMP's stats (model/cmp_stats)."""
        life = self._life
        b = life.backends
        agent = None if agent_id is None else check(KeyText, agent_id, "agent_id", life.settings)
        counts = await b.records.counts(agent)
        vectors = None
        if b.vectors is not None:
            # The vectors of records (not of blocks, which live in their own collection). A store that died
            # before its document can leave one more until the next start sweeps it.
            vectors = await (
                b.vectors.count_all() if agent is None else b.vectors.count(scope_filter(ReadScope(agent)))
            )
        # Through the response model, so every surface answers the types its schema declares.
        answer = {
            "ok": True,
            "memories": counts.memories,
            "episodes": counts.episodes,
            "raw_entries": counts.raw_entries,
            "vector_pending": counts.vector_pending,
            "vectors": vectors,
            **cmp_stats(await b.records.memory_states(agent), counts.raw_entries, time.time(), life.curve),
        }
        return StatsResponse.model_validate(answer).model_dump(mode="json")
