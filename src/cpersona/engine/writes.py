"""The writes service: memories (with dedup), episodes, raw journal entries, updates, the profile and
deletes.

Each write validates the whole request before anything is written, refuses to start while an
embedded store's disk is under the free-space floor (:func:`~cpersona.engine.disk.check_free_space`),
takes its dedup claims and marks itself in flight in one atomic step
(:func:`~cpersona.engine.claims.dedup`), gives its records their vectors
(:func:`~cpersona.engine.vector_writes.with_vectors`), then writes each document to Redis once, in one
transaction with its claims, its pending mark, its block event and the end of its in-flight mark;
so a write that returns is acknowledged durably. A write that fails on the way gives its claims and its
vectors up (:func:`~cpersona.engine.vector_writes.abandoned_on_failure`); so does one refused because its
agent's data is being deleted (:class:`~cpersona.AgentBeingDeleted`, see :mod:`~cpersona.engine.deletes`).
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING

from cpersona.engine import deletes, vector_writes
from cpersona.engine.associations import check_declared_refs
from cpersona.engine.claims import content_claim, dedup, follower_results, reservation_secs
from cpersona.engine.disk import check_free_space
from cpersona.engine.reads import get, read_memories
from cpersona.engine.vector_writes import abandoned_on_failure, with_vectors
from cpersona.errors import AgentBeingDeleted, InvalidRequest
from cpersona.model.agent_requests import ProfileText
from cpersona.model.drafts import CALLER_EMBEDDING
from cpersona.model.fidelity import as_read
from cpersona.model.fields import AgentId, check
from cpersona.model.records import EpisodeRecord, MemoryRecord, ProfileRecord, RawRecord, new_id
from cpersona.model.results import BatchResult, StoreResult
from cpersona.model.update_request import updated_record
from cpersona.stores.protocols import InFlightWrite, MemoryWrite
from cpersona.stores.vector_values import caller_vectors

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cpersona.engine.backends import Backends
    from cpersona.engine.claims import Fresh
    from cpersona.engine.lifecycle import Lifecycle
    from cpersona.model.drafts import MemoryDraft, RawDraft
    from cpersona.model.episode_request import EpisodeRequest
    from cpersona.model.memory_request import BatchRequest, StoreRequest
    from cpersona.model.raw_request import RawBatchRequest, RawRequest
    from cpersona.model.results import DeleteResult
    from cpersona.model.update_request import UpdateRequest
    from cpersona.stores.protocols import Vector

__all__ = ["WriteService"]


async def _store_memories(life: Lifecycle, drafts: Sequence[MemoryDraft]) -> list[StoreResult]:
    """Store the drafts not already claimed; one result per draft, in order (a duplicate is skipped)."""
    b = life.backends
    vectors = _caller_vectors(b, drafts)
    await check_free_space(life.settings)
    await check_declared_refs(b.records, drafts)
    results, fresh, follows = await dedup(b.records, life.keys, drafts, reservation_secs(life.settings))
    results = await _held_stores(life, drafts, results)
    if fresh:
        given = {f.record_id: v for f in fresh if (v := vectors[f.index]) is not None}
        async with abandoned_on_failure(b, [f.in_flight for f in fresh]):
            records = await with_vectors(b, await _new_memories(b, fresh), given)
            writes = [
                MemoryWrite(rec, f.in_flight.claims, f.draft.declared)
                for rec, f in zip(records, fresh, strict=True)
            ]
            await b.records.put_memories(writes, queue_blocks=b.builder is not None)
        for rec, f in zip(records, fresh, strict=True):
            results[f.index] = StoreResult(
                result="stored",
                ref=rec.ref,
                msg_id=f.draft.record.msg_id,
                embedded=rec.embedded,
                vector_pending=rec.vector_pending,
                warnings=f.draft.warnings,
                store=rec.store,
                associations_created=len(rec.associations),
            )
    return follower_results(results, drafts, follows)


async def _held_stores(
    life: Lifecycle, drafts: Sequence[MemoryDraft], results: list[StoreResult | None]
) -> list[StoreResult | None]:
    """Each skipped store's answer with the store of the record that holds its content or id, not the
    one it asked for: a Cerememory client reads ``record_id`` and ``store`` only (its SDK drops
    ``result``), so the two must describe one record. A holder still being written (a concurrent store
    that has taken the claim) has no document yet; its answer keeps the store asked for."""
    out = list(results)
    skipped = [i for i, r in enumerate(results) if r is not None and r.result == "skipped"]
    for agent in {drafts[i].record.scope.agent_id for i in skipped}:
        mine = [i for i in skipped if drafts[i].record.scope.agent_id == agent]
        ids = list(dict.fromkeys(r.record_id for i in mine if (r := out[i]) is not None))
        held = {m.id: m.store for m in await read_memories(life, agent, ids)}
        for i in mine:
            result = out[i]
            assert result is not None
            if result.record_id in held:
                out[i] = result.model_copy(update={"store": held[result.record_id]})
    return out


def _caller_vectors(b: Backends, drafts: Sequence[MemoryDraft]) -> list[Vector | None]:
    """Each draft's own vector (checked, at unit length, as the embedder's are), or ``None``; checked
    before anything is written. Without a vector index the field is refused, not dropped."""
    dim = None if b.vectors is None or b.embedder is None else b.embedder.dim
    return caller_vectors([d.embedding for d in drafts], dim, [d.embedding_field for d in drafts])


async def _new_memories(b: Backends, fresh: Sequence[Fresh]) -> list[MemoryRecord]:
    """The fresh drafts as records, numbered in order from one reserved run of sequence numbers."""
    now = time.time()
    first_seq = await b.records.next_seq(len(fresh))
    return [f.draft.written(f.record_id, first_seq + n, now) for n, f in enumerate(fresh)]


async def _store_raw(life: Lifecycle, drafts: Sequence[RawDraft]) -> BatchResult:
    b = life.backends
    await check_free_space(life.settings)
    now = time.time()
    # A batch's entries share one time; their ids, sorted, keep the batch's order where times tie.
    ids = sorted(new_id() for _ in drafts)
    recs = [
        RawRecord(
            id=record_id,
            scope=d.scope,
            session_id=d.session_id,
            source=d.source,
            speaker=d.speaker,
            visibility=d.visibility,
            secrecy_level=d.secrecy_level,
            content=d.content,
            created_at=now,
            turn_id=d.turn_id,
            topic_id=d.topic_id,
            metadata=d.metadata,
            meta=d.meta,
        )
        for record_id, d in zip(ids, drafts, strict=True)
    ]
    await b.records.put_raw(recs)
    return BatchResult(
        results=tuple(
            StoreResult(
                result="stored",
                ref=r.ref,
                session_id=r.session_id,
                visibility=r.visibility,
                secrecy_level=r.secrecy_level,
            )
            for r in recs
        )
    )


async def _drop_orphan_vector(b: Backends, record: MemoryRecord) -> None:
    """Delete the vector an update refused by its agent's delete wrote, once its record is gone: the
    delete may have deleted the agent's vectors before this one went in. A record still there keeps it
    until the delete removes both."""
    if b.vectors is not None and await b.records.get("memory", record.id) is None:
        await b.vectors.delete([record.id])


async def _kept_caller_vector(b: Backends, current: MemoryRecord, content_changed: bool) -> dict[str, Vector]:
    """The caller's vector of ``current`` to write again (its payload follows the new time and scope),
    when the text stays; empty otherwise.

    New text is embedded by the model and labelled with its name: the caller's vector described the old
    text. A caller vector gone from the collection is not there to keep, so the text is embedded then
    too, under the model's name; nothing is labelled ``caller`` that the caller did not send.
    """
    if content_changed or current.embedding_model != CALLER_EMBEDDING or b.vectors is None:
        return {}
    return await b.vectors.vectors([current.id])


class WriteService:
    """Every write of one engine: each validated request is checked whole before anything is written."""

    def __init__(self, life: Lifecycle) -> None:
        self._life = life

    async def store(self, req: StoreRequest) -> StoreResult:
        """Store one memory (``POST /v1/encode``)."""
        (result,) = await _store_memories(self._life, [req.draft(self._life.settings)])
        return result

    async def store_batch(self, batch: BatchRequest) -> BatchResult:
        """Store many memories: all are checked before any is written; one embedding call per chunk."""
        settings = self._life.settings
        drafts = [r.draft(settings, prefix=f"records[{i}].") for i, r in enumerate(batch.records)]
        # Dropped before the write's first wait: the request's models (and their lists of floats) are not
        # kept alive, and walked by the collector, while the batch is written.
        del batch
        return BatchResult(results=tuple(await _store_memories(self._life, drafts)))

    async def archive_episode(self, req: EpisodeRequest) -> StoreResult:
        """Archive a session summary (``POST /v1/encode/episode``)."""
        life = self._life
        b = life.backends
        d = req.draft(life.settings)
        await check_free_space(life.settings)
        now = time.time()
        seq = await b.records.next_seq()
        rec = EpisodeRecord(
            id=new_id(),
            scope=d.scope,
            summary=d.summary,
            seq=seq,
            keywords=d.keywords,
            start_time=d.start_time,
            end_time=d.end_time,
            resolved=d.resolved,
            created_at=now,
        )
        in_flight = [InFlightWrite("episode", rec.id)]
        await b.records.reserve_writes(in_flight, ttl_secs=reservation_secs(life.settings))
        async with abandoned_on_failure(b, in_flight):
            (rec,) = await with_vectors(b, [rec])
            await b.records.put_episode(rec, queue_blocks=b.builder is not None)
        return StoreResult(
            result="stored", ref=rec.ref, embedded=rec.embedded, vector_pending=rec.vector_pending
        )

    async def store_raw(self, req: RawRequest) -> StoreResult:
        """Append one verbatim journal entry (``POST /v1/encode/raw``)."""
        return (await _store_raw(self._life, [req.draft(self._life.settings)])).results[0]

    async def store_raw_batch(self, batch: RawBatchRequest) -> BatchResult:
        """Append many journal entries: all are checked before any is written."""
        settings = self._life.settings
        prefix = len(batch.records) > 1
        drafts = [
            r.draft(settings, prefix=f"records[{i}]." if prefix else "") for i, r in enumerate(batch.records)
        ]
        return await _store_raw(self._life, drafts)

    async def update(self, ref: str, req: UpdateRequest) -> MemoryRecord:
        """Replace the given fields of the memory ``ref`` of ``req.agent_id`` wholesale. A content change
        re-embeds the memory and moves its dedup claim; a field given as ``None`` is reset."""
        life = self._life
        b = life.backends
        changes = req.changes()
        await check_free_space(life.settings)
        current = await get(life, ref, req.agent_id)
        if not isinstance(current, MemoryRecord):
            raise InvalidRequest("ref", "only memories can be updated")
        if not changes:
            raise InvalidRequest("body", "names no field to update")
        new = updated_record(current, changes, life.settings, now=time.time(), reembed=b.embedder is not None)
        content_changed = new.content != current.content
        kept = await _kept_caller_vector(b, current, content_changed)
        if new.embedding_model == CALLER_EMBEDDING and not kept:
            new = dataclasses.replace(new, embedding_model="")  # until the model's vector of the text is in
        (new,) = await with_vectors(b, [new], kept)
        old_claim = content_claim(life.keys, current.scope, current.content)
        new_claim = content_claim(life.keys, new.scope, new.content)
        moved = (old_claim,), (new_claim,)
        try:
            await b.records.replace_memory(
                new,
                drop_claims=moved[0] if content_changed else (),
                add_claims=moved[1] if content_changed else (),
                # Blocks carry the text and the record's time; other fields do not reach them.
                queue_blocks=b.builder is not None
                and (content_changed or new.timestamp != current.timestamp),
            )
        except AgentBeingDeleted:
            await _drop_orphan_vector(b, new)
            raise
        return as_read(new, time.time(), curve=life.curve)

    async def update_profile(self, agent_id: str, profile: str) -> ProfileRecord:
        life = self._life
        b = life.backends
        agent = check(AgentId, agent_id, "agent_id", life.settings)
        content = check(ProfileText, profile, "profile", life.settings)
        await check_free_space(life.settings)
        rec = ProfileRecord(agent_id=agent, content=content, updated_at=time.time())
        await b.records.put_profile(rec)
        return rec

    async def delete(self, ref: str, agent_id: str) -> DeleteResult:
        """Delete one record of ``agent_id`` (its document, dedup claims, pending mark and vector)."""
        return await deletes.delete(self._life, ref, agent_id)

    async def delete_agent_data(self, agent_id: str) -> DeleteResult:
        """Delete every record, claim, profile and vector of one agent."""
        return await deletes.delete_agent_data(self._life, agent_id)

    async def finish_pending(self) -> int:
        """Write the vectors of every record marked pending. Returns how many were finished."""
        return await vector_writes.finish_pending(self._life.backends)

    async def optimize(self, timeout_secs: float = vector_writes.OPTIMIZE_TIMEOUT_SECS) -> None:
        """Build the vector indexes now (see :meth:`cpersona.Engine.optimize`)."""
        await vector_writes.optimize(self._life.backends, timeout_secs)
