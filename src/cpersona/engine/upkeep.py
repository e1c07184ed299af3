"""The upkeep of one agent's memories over time (Cerememory §3, §6, §7): the decay sweep, the decay
forecast, and forgetting by id, store, period or age.

**Decay is a function of elapsed time** (:mod:`cpersona.model.fidelity`), so the sweep has nothing to
compound. ``tick_duration_seconds`` ages every memory *beyond* the wall clock by moving its baseline that
far back: N ticks of d/N age exactly as much as one tick of d, and a tick of 0 (the default) writes
nothing and only reports what the elapsed time has done. The reference instead takes 3600 s by default
and multiplies the current score on each tick, so how often the tick ran decided what survived
(**(bug?)** in its spec); an ageing default would keep that flaw, so there is none here.

**Decayed, not deleted.** The reference deletes every record below the prune threshold on a tick. A
memory service should not delete silently: a memory below :data:`~cpersona.model.fidelity.PRUNE_THRESHOLD`
is *decayed* — counted in ``records_below_threshold`` and hidden by the recall operations unless they ask
for ``include_decayed`` — and the tick deletes it only when ``CPERSONA_DECAY_PRUNE`` is on, which the
answer reports (``pruning``).

Forget deletes through the engine's one delete path (:func:`cpersona.engine.deletes.delete`: document,
claims, vectors, block vectors and declared associations), only ever the caller's memories.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import TYPE_CHECKING

import anyio

from cpersona.engine.deletes import delete_memories
from cpersona.engine.disk import check_free_space
from cpersona.errors import ForgetUnconfirmed, RecordNotFound
from cpersona.model.fidelity import PRUNE_THRESHOLD, aged, current_fidelity, emotional_modulation, is_decayed
from cpersona.model.fields import validate
from cpersona.model.lifecycle_requests import (
    DecayForecastRequest,
    DecayTickRequest,
    ForgetRequest,
)
from cpersona.model.lifecycle_responses import (
    DecayForecast,
    DecayForecastResult,
    DecayTickResult,
    ForgetResult,
)
from cpersona.model.records import Fidelity, MemoryRecord, parse_ref
from cpersona.model.time_cue import MAX_TS

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable, Mapping, Sequence

    from cpersona.engine.lifecycle import Lifecycle

__all__ = ["agent_memories", "decay_forecast", "decay_tick", "forget", "threshold_time"]

_READ_BATCH = 64
# Memories deleted per batch by a forget: one Redis transaction and one vector delete each.
_DELETE_PAGE = 256


async def _read_memories(life: Lifecycle, agent_id: str, ids: Sequence[str]) -> list[MemoryRecord]:
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
        for record in await _read_memories(life, agent_id, ids[start : start + _READ_BATCH]):
            yield record


async def decay_tick(life: Lifecycle, body: Mapping[str, object]) -> DecayTickResult:
    req = validate(DecayTickRequest, body, life.settings)
    seconds = req.tick_duration_seconds or 0
    pruning = life.settings.decay_prune
    if seconds:
        await check_free_space(life.settings)
    now = time.time()
    updated = decayed = pruned = 0
    batch: list[tuple[str, Fidelity]] = []
    # Pruned a page at a time as the scan finds them, so a large agent's decayed memories are never
    # all held at once; the fidelities read so far are written first.
    doomed: list[MemoryRecord] = []
    async for record in agent_memories(life, req.agent_id):
        if seconds:
            fidelity = dataclasses.replace(aged(record.fidelity, seconds), last_decay_tick=now)
            record = dataclasses.replace(record, fidelity=fidelity)
            batch.append((record.id, fidelity))
            if len(batch) >= _READ_BATCH:
                await life.backends.records.set_fidelities(batch)
                batch = []
        updated += 1
        if is_decayed(record, now):
            decayed += 1
            if pruning:
                doomed.append(record)
        if len(doomed) >= _DELETE_PAGE:
            await life.backends.records.set_fidelities(batch)
            batch = []
            pruned += await delete_memories(life, doomed)
            doomed = []
    await life.backends.records.set_fidelities(batch)
    pruned += await delete_memories(life, doomed)
    return DecayTickResult(
        records_updated=updated,
        records_below_threshold=decayed,
        records_pruned=pruned,
        pruning=pruning,
        aged_seconds=seconds,
    )


def threshold_time(record: MemoryRecord) -> float | None:
    """When the memory's fidelity falls below the prune threshold, in closed form: the time ``t`` after
    its baseline where ``score · E · (1 + t/S)^-d`` equals the threshold. ``None`` when it never does
    within the times a record can show (or when it does not decay at all)."""
    f = record.fidelity
    start = f.score * emotional_modulation(record.emotion)
    if f.decay_rate <= 0 or start < PRUNE_THRESHOLD:
        return None
    try:
        t = max(f.stability, 1e-9) * (math.pow(start / PRUNE_THRESHOLD, 1.0 / f.decay_rate) - 1.0)
    except OverflowError:
        return None
    when = f.last_accessed_at + t
    return when if math.isfinite(when) and when <= MAX_TS else None


async def decay_forecast(life: Lifecycle, body: Mapping[str, object]) -> DecayForecastResult:
    """Every named memory's fidelity now and at ``forecast_at``; one unknown id is a 404 for all."""
    req = validate(DecayForecastRequest, body, life.settings)
    ids = list(dict.fromkeys(req.record_ids))
    records = {r.id: r for r in await _read_memories(life, req.agent_id, ids)}
    missing = [i for i in ids if i not in records]
    if missing:
        raise RecordNotFound(f"mem:{missing[0]}")
    now = time.time()
    out = []
    for record_id in req.record_ids:
        r = records[record_id]
        current = current_fidelity(r.fidelity, r.emotion, now)
        later = current_fidelity(r.fidelity, r.emotion, req.forecast_at)
        out.append(
            DecayForecast(
                record_id=record_id,
                current_fidelity=current,
                forecasted_fidelity=later,
                estimated_threshold_date=None if current < PRUNE_THRESHOLD else threshold_time(r),
            )
        )
    return DecayForecastResult(forecasts=tuple(out))


def _memory_target(target: str) -> str | None:
    """The memory an edge points to (its bare id), or ``None`` when the target names no memory."""
    ref = parse_ref(target if ":" in target else f"mem:{target}")
    return ref.id if ref is not None and ref.kind == "mem" else None


def _selected(req: ForgetRequest, record: MemoryRecord, now: float) -> bool:
    """Whether a scanned memory falls under the forget's store, period or age selector."""
    if req.store is not None and record.store == req.store:
        return True
    period = req.temporal_range
    if period is not None and period.start <= record.timestamp <= period.end:
        return True
    return req.older_than_seconds is not None and record.timestamp < now - req.older_than_seconds


async def _forget_pages(life: Lifecycle, req: ForgetRequest) -> AsyncIterator[list[MemoryRecord]]:
    """The memories the forget names, a page at a time: its ids (with ``cascade``, their edges'
    targets), then every memory of the agent its store, period or age selects; each once."""
    seen: set[str] = set()

    def fresh(records: Iterable[MemoryRecord]) -> list[MemoryRecord]:
        page = [r for r in records if r.id not in seen]
        seen.update(r.id for r in page)
        return page

    if req.record_ids:
        named = await _read_memories(life, req.agent_id, list(dict.fromkeys(req.record_ids)))
        targets = [t for r in named for a in r.associations if (t := _memory_target(a.target_id))]
        if page := fresh(named):
            yield page
        if req.cascade and (page := fresh(await _read_memories(life, req.agent_id, targets))):
            yield page
    if req.store is None and req.temporal_range is None and req.older_than_seconds is None:
        return
    now = time.time()
    page = []
    async for record in agent_memories(life, req.agent_id):
        if _selected(req, record, now):
            page.extend(fresh([record]))
            if len(page) >= _DELETE_PAGE:
                yield page
                page = []
    if page:
        yield page


async def forget_progress(life: Lifecycle, req: ForgetRequest) -> AsyncIterator[int]:
    """Run the forget ``req``, yielding how many memories are gone so far: 0 once it is accepted
    (confirmed), then the running total after each page deleted."""
    if not req.confirm:
        raise ForgetUnconfirmed("confirm", "must be true to forget; nothing was deleted")
    deleted = 0
    yield deleted
    async for page in _forget_pages(life, req):
        # A page is deleted whole even if the caller goes away meanwhile (a streamed forget's client
        # hanging up): no memory is left without its vector, nor a vector without its memory.
        with anyio.CancelScope(shield=True):
            deleted += await delete_memories(life, page)
        yield deleted


async def forget(life: Lifecycle, body: Mapping[str, object]) -> ForgetResult:
    deleted = 0
    async for so_far in forget_progress(life, validate(ForgetRequest, body, life.settings)):
        deleted = so_far
    return ForgetResult(records_deleted=deleted)
