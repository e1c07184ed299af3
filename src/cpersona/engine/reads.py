"""The reads: a recall (and its trace), one record by ref, the newest records, counts, health, the profile."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from cpersona.errors import InvalidRequest, RecordNotFound
from cpersona.model.cmp_stats import cmp_stats
from cpersona.model.fidelity import as_read
from cpersona.model.fields import AgentId, KeyText, check, validate
from cpersona.model.record_queries import ListQuery, RecordKind
from cpersona.model.records import EpisodeRecord, MemoryRecord, ProfileRecord, RawRecord, parse_ref
from cpersona.model.scope import ReadScope
from cpersona.recall.request import recall_request
from cpersona.stores.protocols import scope_filter

if TYPE_CHECKING:
    import random
    from collections.abc import Mapping

    from cpersona.engine.lifecycle import Lifecycle
    from cpersona.recall.request import RecallResult

__all__ = [
    "AnyRecord", "get", "get_profile", "health", "newest", "read", "recall", "record_ref", "shown", "stats",
]  # fmt: skip

AnyRecord = MemoryRecord | EpisodeRecord | RawRecord
_KINDS: Mapping[str, RecordKind] = {"mem": "memory", "ep": "episode", "raw": "raw"}


async def recall(
    life: Lifecycle, trace_rng: random.Random, body: Mapping[str, object], max_limit: int
) -> RecallResult:
    """Run one recall; publish its trace, and traced anyway at ``CPERSONA_TRACE_SAMPLE``'s rate."""
    req = recall_request(body, life.settings, life.policies, max_limit=max_limit)
    rate = life.settings.trace_sample
    sampled = not req.trace and rate > 0 and trace_rng.random() < rate
    result = await life.recaller.recall(req, want_trace=req.trace or sampled)
    if result.trace is not None:
        life.backends.trace_publisher.offer(req.scope.agent_id, result.trace)
        if sampled:
            # A sampled trace goes to the channel only: the caller's answer is what it asked for.
            result = result.model_copy(update={"trace": None})
    return result


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


def shown(record: AnyRecord, now: float | None = None) -> AnyRecord:
    """A record as it is handed to a reader: a memory with its fidelity at the moment of reading."""
    if isinstance(record, MemoryRecord):
        return as_read(record, time.time() if now is None else now)
    return record


async def read(life: Lifecycle, ref: str, agent_id: str) -> AnyRecord:
    """One record for a reader (:func:`get` is the one the write paths change and write back)."""
    return shown(await get(life, ref, agent_id))


async def newest(life: Lifecycle, body: Mapping[str, object]) -> list[AnyRecord]:
    req = validate(ListQuery, body, life.settings, strict=True)
    scope = ReadScope(req.agent_id, req.project_id, req.channel, req.source_id)
    now = time.time()
    return [shown(r, now) for r in await life.backends.records.newest(req.kind, scope, req.limit)]


async def stats(life: Lifecycle, agent_id: str | None) -> dict[str, Any]:
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
    return {
        "ok": True,
        "memories": counts.memories,
        "episodes": counts.episodes,
        "raw_entries": counts.raw_entries,
        "vector_pending": counts.vector_pending,
        "vectors": vectors,
        **cmp_stats(await b.records.memory_states(agent), counts.raw_entries, time.time()),
    }


async def health(life: Lifecycle) -> dict[str, Any]:
    b = life.backends
    await b.records.ping()
    return {
        "ok": True,
        "redis": {**b.redis_info, "embedded": life.settings.embedded_redis},
        "vector_engine": None if b.vectors is None else b.vectors.engine_name,
        "embedder": None if b.embedder is None else {"name": b.embedder.name, "dim": b.embedder.dim},
        "traces": b.trace_publisher.stats().model_dump(mode="json"),
    }


async def get_profile(life: Lifecycle, agent_id: str) -> ProfileRecord | None:
    b = life.backends
    agent = check(AgentId, agent_id, "agent_id", life.settings)
    return await b.records.profile(agent)
