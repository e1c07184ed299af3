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

from cpersona.engine import upkeep_archive, upkeep_consolidate
from cpersona.engine.deletes import delete_memories
from cpersona.engine.disk import check_free_space
from cpersona.engine.reads import agent_memories, read_memories
from cpersona.errors import ForgetUnconfirmed, RecordNotFound
from cpersona.model.fidelity import (
    PRUNE_THRESHOLD,
    FidelityCurve,
    aged,
    current_fidelity,
    emotional_modulation,
    is_decayed,
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
    from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable

    from cpersona.engine.lifecycle import Lifecycle
    from cpersona.model.lifecycle_requests import (
        ConsolidateRequest,
        DecayForecastRequest,
        DecayTickRequest,
        ExportRequest,
        ForgetRequest,
        ImportRequest,
    )
    from cpersona.model.lifecycle_responses import ConsolidateResult, ExportResult, ImportResult

__all__ = ["UpkeepService", "threshold_time"]

_READ_BATCH = 64
# Memories deleted per batch by a forget: one Redis transaction and one vector delete each.
_DELETE_PAGE = 256


def threshold_time(record: MemoryRecord, curve: FidelityCurve) -> float | None:
    """When the memory's fidelity falls below the prune threshold, in closed form: the time ``t`` after
    its baseline where ``score · E · (1 + t/S)^-d`` equals the threshold (``t`` and ``S`` in the curve's
    unit). ``None`` when it never does within the times a record can show (or when it does not decay)."""
    f = record.fidelity
    start = f.score * emotional_modulation(record.emotion)
    if f.decay_rate <= 0 or start < PRUNE_THRESHOLD:
        return None
    try:
        units = max(f.stability, 1e-9) * (math.pow(start / PRUNE_THRESHOLD, 1.0 / f.decay_rate) - 1.0)
        when = f.last_accessed_at + units * curve.unit_secs
    except OverflowError:
        return None
    return when if math.isfinite(when) and when <= MAX_TS else None


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
        named = await read_memories(life, req.agent_id, list(dict.fromkeys(req.record_ids)))
        targets = [t for r in named for a in r.associations if (t := _memory_target(a.target_id))]
        if page := fresh(named):
            yield page
        if req.cascade and (page := fresh(await read_memories(life, req.agent_id, targets))):
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


class UpkeepService:
    """Decay, forgetting, consolidation and archives of one agent's memories."""

    def __init__(self, life: Lifecycle) -> None:
        self._life = life

    async def decay_tick(self, req: DecayTickRequest) -> DecayTickResult:
        """Sweep the agent's memories: count those decayed below the prune threshold (deleted only with
        ``CPERSONA_DECAY_PRUNE``). ``tick_duration_seconds`` ages every memory that much beyond the wall
        clock (default 0); ageing adds up, so N ticks of d/N equal one tick of d."""
        life = self._life
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
            if is_decayed(record, now, curve=life.curve):
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

    async def decay_forecast(self, req: DecayForecastRequest) -> DecayForecastResult:
        """Every named memory's fidelity now and at ``forecast_at``; one unknown id is a 404 for all."""
        life = self._life
        ids = list(dict.fromkeys(req.record_ids))
        records = {r.id: r for r in await read_memories(life, req.agent_id, ids)}
        missing = [i for i in ids if i not in records]
        if missing:
            raise RecordNotFound(f"mem:{missing[0]}", f"record_ids[{req.record_ids.index(missing[0])}]")
        now = time.time()
        out = []
        for record_id in req.record_ids:
            r = records[record_id]
            current = current_fidelity(r.fidelity, r.emotion, now, curve=life.curve)
            later = current_fidelity(r.fidelity, r.emotion, req.forecast_at, curve=life.curve)
            out.append(
                DecayForecast(
                    record_id=record_id,
                    current_fidelity=current,
                    forecasted_fidelity=later,
                    estimated_threshold_date=None
                    if current < PRUNE_THRESHOLD
                    else threshold_time(r, life.curve),
                )
            )
        return DecayForecastResult(forecasts=tuple(out))

    async def forget(self, req: ForgetRequest) -> ForgetResult:
        """Delete the agent's memories that any selector names (ids, with ``cascade`` their edges'
        targets; a store; a period of their own timestamps; an age). ``confirm`` must be true."""
        deleted = 0
        async for so_far in self.forget_progress(req):
            deleted = so_far
        return ForgetResult(records_deleted=deleted)

    async def forget_progress(self, req: ForgetRequest) -> AsyncIterator[int]:
        """Run the forget ``req``, yielding how many memories are gone so far: 0 once it is accepted
        (confirmed), then the running total after each page deleted."""
        life = self._life
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

    async def consolidate(self, req: ConsolidateRequest) -> ConsolidateResult:
        """Merge near-duplicate episodic memories and give the rest a semantic copy, idempotently."""
        return await upkeep_consolidate.consolidate(self._life, req)

    def export_lines(self, req: ExportRequest) -> AsyncGenerator[bytes, None]:
        """The agent's archive, one JSON line at a time (header, records, footer with its SHA-256)."""
        return upkeep_archive.export_lines(self._life, req)

    async def export(self, req: ExportRequest) -> ExportResult:
        """The agent's archive whole, with its checksum and id (:meth:`export_lines` streams it); with
        ``encryption_key``, encrypted (AES-256-GCM under a scrypt-stretched key)."""
        return await upkeep_archive.export(self._life, req)

    async def import_archive(
        self, req: ImportRequest, progress: Callable[[int], None] | None = None
    ) -> ImportResult:
        """Import ``req.archive_data`` into ``req.agent_id`` (``decryption_key`` opens an encrypted one);
        every line and the checksum are checked before anything is written. ``progress`` is told how many
        records each written batch held."""
        return await upkeep_archive.import_archive(self._life, req, progress)

    async def import_lines(
        self,
        req: ImportRequest,
        lines: Callable[[], Iterable[bytes]],
        progress: Callable[[int], None] | None = None,
    ) -> ImportResult:
        """:meth:`import_archive` of the lines ``lines()`` gives (called twice: check, then write), under
        ``req``'s agent, strategy and conflict rule (its ``archive_data`` and key are not read)."""
        return await upkeep_archive.import_lines(self._life, req, lines, progress)
