"""Deleting one record, or all of an agent's data, from every place it reached.

A record lives in its document, its dedup claims and pending mark (one Redis transaction), its vector and
its block vectors; a delete removes each, Redis first. It is marked in flight (as a store is, see
:mod:`~cpersona.engine.vector_writes`) until its vectors are gone, so a failure part way leaves vectors
without a document, which recall skips, only until the next start's sweep deletes them.

An agent's delete races that agent's writes. A store writes its vector first and its document second
(:func:`~cpersona.engine.vector_writes.with_vectors`), so a document written after the delete swept Redis,
of a store whose vector went in before the delete deleted the agent's vectors, would be a record
acknowledged with no vector and no pending mark, which nothing ever repairs. So the delete puts up a
fence first (:meth:`~cpersona.stores.protocols.RecordStore.raise_fence`, see
:mod:`~cpersona.stores.redis.fences`) and takes it down last, and every record write checks it in the
transaction that writes the document: while the fence is up, the agent's writes are refused
(:class:`~cpersona.AgentBeingDeleted`, HTTP 409). A write begun before the fence came down may have had
its vector deleted even if its document lands later, so the fence leaves a bound behind: the insertion
sequence number when the delete ended. A record takes its number before its vector is written, so one
numbered at or below the bound is refused too, whenever its document comes. A refused store gives its
claims and vector up as any failed store does (:func:`~cpersona.engine.vector_writes.abandoned_on_failure`);
a refused update deletes the vector it wrote if its record has gone. Either the write loses (refused,
nothing kept) or it wins whole (its document written before the fence, and its vector before that, both
then deleted with the agent; or both written after the delete). Nothing waits for the writes in flight:
they are refused, not awaited, so a write that died with its process holds no delete up.

The fence lives :data:`FENCE_SECS` unless the delete renews it, which it does while it runs; a fence left
by a delete that died lapses on its own. The bound lives as long as a store's reservation
(:func:`~cpersona.engine.claims.reservation_secs`), past which the write path counts a write as dead.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING

import anyio

from cpersona.engine.claims import record_claims, reservation_secs
from cpersona.engine.reads import get, record_ref
from cpersona.errors import BackendUnavailable
from cpersona.model.blocks import ParentKind, block_ids
from cpersona.model.fields import KeyText, check
from cpersona.model.records import MemoryRecord, RawRecord
from cpersona.model.results import DeleteResult
from cpersona.model.scope import ReadScope
from cpersona.recall.arms.block import block_filter
from cpersona.stores.protocols import InFlightWrite, scope_filter

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator, Sequence

    from cpersona.engine.backends import Backends
    from cpersona.engine.lifecycle import Lifecycle
    from cpersona.stores.protocols import RecordStore

__all__ = ["FENCE_SECS", "delete", "delete_agent_data", "delete_memories"]

log = logging.getLogger("cpersona.engine")

FENCE_SECS = 30.0
"""How long an agent's fence stays up unless its delete renews it: how long a delete that died keeps the
agent's writes refused. Renewed three times over each lifetime, so a slow renewal does not let it lapse."""


async def delete(life: Lifecycle, ref: str, agent_id: str) -> DeleteResult:
    b = life.backends
    kind, record_id = record_ref(ref)
    # A sealed raw entry is read by no GET, but erasing it by its ref is never refused to its agent.
    if kind == "raw" and await b.records.delete_sealed(
        check(KeyText, agent_id, "agent_id", life.settings), record_id
    ):
        return DeleteResult(deleted=1)
    record = await get(life, ref, agent_id)
    claims = record_claims(life.keys, record) if isinstance(record, MemoryRecord) else []
    if isinstance(record, RawRecord):
        await b.records.delete(kind, record_id, claims)
        return DeleteResult(deleted=1)
    parent: ParentKind = "memory" if isinstance(record, MemoryRecord) else "episode"
    deleting = [InFlightWrite(parent, record.id)] if b.vectors is not None else []
    await b.records.reserve_writes(deleting, ttl_secs=reservation_secs(life.settings))
    await b.records.delete(kind, record_id, claims)
    # After the record: a crash between leaves mentions of nothing, which reads skip.
    await b.records.forget_record_associations(record.scope.agent_id, record.ref)
    await _delete_vectors(b, parent, [record.id])
    await b.records.forget_writes(deleting)
    return DeleteResult(deleted=1)


async def delete_memories(life: Lifecycle, records: Sequence[MemoryRecord]) -> int:
    """Delete memories as :func:`delete` deletes one, each step once for them all: one reservation, one
    Redis transaction, one vector delete per store; return how many were still there to delete.

    A forget of many memories is this, a page at a time: one by one, each memory waited on four disk
    syncs and two vector-store round trips of its own.
    """
    if not records:
        return 0
    b = life.backends
    deleting = [InFlightWrite("memory", r.id) for r in records] if b.vectors is not None else []
    await b.records.reserve_writes(deleting, ttl_secs=reservation_secs(life.settings))
    deleted = await b.records.delete_many("memory", [(r.id, record_claims(life.keys, r)) for r in records])
    for record in records:
        await b.records.forget_record_associations(record.scope.agent_id, record.ref)
    await _delete_vectors(b, "memory", [r.id for r in records])
    await b.records.forget_writes(deleting)
    return deleted


async def _delete_vectors(b: Backends, parent: ParentKind, record_ids: Sequence[str]) -> None:
    if b.vectors is not None:
        await b.vectors.delete(record_ids)
    if b.builder is not None and b.blocks is not None:
        per_record = b.builder.max_per_record
        await b.blocks.delete([block for rid in record_ids for block in block_ids(parent, rid, per_record)])


async def delete_agent_data(life: Lifecycle, agent_id: str) -> DeleteResult:
    b = life.backends
    agent = check(KeyText, agent_id, "agent_id", life.settings)
    async with _fenced(b.records, agent, reservation_secs(life.settings)):
        deleted = await b.records.delete_agent(agent)
        await b.records.delete_agent_associations(agent)
        if b.vectors is not None:
            await b.vectors.delete_where(scope_filter(ReadScope(agent)))
        if b.blocks is not None:
            await b.blocks.delete_where(block_filter(agent))
    life.recaller.stats.forget(agent)
    return DeleteResult(deleted=deleted)


@contextlib.asynccontextmanager
async def _fenced(records: RecordStore, agent: str, bound_secs: float) -> AsyncIterator[None]:
    """The agent's writes refused while the block runs, and after it those begun before it ended."""
    await records.raise_fence(agent, fence_secs=FENCE_SECS, bound_secs=bound_secs)
    try:
        with _plain_error():
            async with anyio.create_task_group() as tg:
                tg.start_soon(_renew, records, agent)
                yield
                tg.cancel_scope.cancel()
    except BaseException:
        # The delete failed or was cancelled: that stands, not an error lowering the fence (which
        # lapses on its own), so a cancellation is never turned into a backend error.
        with anyio.CancelScope(shield=True):
            try:
                await records.lower_fence(agent, bound_secs=bound_secs)
            except BackendUnavailable as exc:
                log.warning("agent %s: its fence stays until it lapses: %s", agent, exc)
        raise
    # Lowered (and the bound raised) once the delete succeeded. Should this fail, the delete answers
    # that error: the writes it raced are refused only until the fence lapses.
    with anyio.CancelScope(shield=True):
        await records.lower_fence(agent, bound_secs=bound_secs)


@contextlib.contextmanager
def _plain_error() -> Iterator[None]:
    """A failed task group's one error raised as itself: the delete's caller expects the store's error
    (or the renewal's), not an ``ExceptionGroup`` around it."""
    try:
        yield
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise


async def _renew(records: RecordStore, agent: str) -> None:
    while True:
        await anyio.sleep(FENCE_SECS / 3)
        await records.renew_fence(agent, fence_secs=FENCE_SECS)
