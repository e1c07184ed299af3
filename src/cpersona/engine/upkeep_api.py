"""The lifecycle operations as methods of :class:`~cpersona.Engine` (a base class of it, so the facade
stays one screenful per concept): the decay tick and forecast, forget, consolidate, export and import.
Each turns its typed keywords into one request body, validated by its model in
:mod:`cpersona.model.lifecycle_requests`, and run by :mod:`cpersona.engine.upkeep` and its siblings."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from cpersona.engine import upkeep, upkeep_archive, upkeep_consolidate
from cpersona.model.fields import given

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping, Sequence
    from datetime import datetime

    from cpersona.engine.lifecycle import Lifecycle
    from cpersona.model.lifecycle_requests import ConflictRule, ForgetRequest, ImportStrategy
    from cpersona.model.lifecycle_responses import (
        ConsolidateResult,
        DecayForecastResult,
        DecayTickResult,
        ExportResult,
        ForgetResult,
        ImportResult,
    )
    from cpersona.model.records import StoreKind

__all__ = ["UpkeepMethods"]


class UpkeepMethods:
    """Decay, forgetting, consolidation and archives of one agent's memories."""

    _life: Lifecycle

    async def decay_tick(self, agent_id: str, *, tick_duration_seconds: int | None = None) -> DecayTickResult:
        """Sweep the agent's memories: count those decayed below the prune threshold (deleted only with
        ``CPERSONA_DECAY_PRUNE``). ``tick_duration_seconds`` ages every memory that much beyond the wall
        clock (default 0); ageing adds up, so N ticks of d/N equal one tick of d."""
        body = given(agent_id=agent_id, tick_duration_seconds=tick_duration_seconds)
        return await upkeep.decay_tick(self._life, body)

    async def decay_forecast(
        self, agent_id: str, record_ids: Sequence[str], forecast_at: float | str | datetime
    ) -> DecayForecastResult:
        """Each memory's fidelity now and at ``forecast_at``, and when it falls below the threshold."""
        body = given(agent_id=agent_id, record_ids=record_ids, forecast_at=forecast_at)
        return await upkeep.decay_forecast(self._life, body)

    async def forget(
        self,
        agent_id: str,
        *,
        confirm: bool,
        record_ids: Sequence[str] | None = None,
        store: StoreKind | None = None,
        temporal_range: Mapping[str, Any] | None = None,
        older_than_seconds: int | None = None,
        cascade: bool = False,
    ) -> ForgetResult:
        """Delete the agent's memories that any selector names (ids, with ``cascade`` their edges'
        targets; a store; a period of their own timestamps; an age). ``confirm`` must be true."""
        body = given(
            agent_id=agent_id,
            confirm=confirm,
            record_ids=record_ids,
            store=store,
            temporal_range=temporal_range,
            older_than_seconds=older_than_seconds,
            cascade=cascade,
        )
        return await upkeep.forget(self._life, body)

    def forget_progress(self, request: ForgetRequest) -> AsyncIterator[int]:
        """The forget of :meth:`forget`, from its validated request, as it goes: yields 0 once it is
        accepted (a refusal raises before anything is deleted), then the running count of memories
        deleted after each page of them."""
        return upkeep.forget_progress(self._life, request)

    async def consolidate(
        self,
        agent_id: str,
        *,
        min_age_hours: int = 0,
        min_access_count: int = 0,
        dry_run: bool = False,
        strategy: Literal["full", "incremental", "selective"] = "incremental",
    ) -> ConsolidateResult:
        """Merge near-duplicate episodic memories and give the rest a semantic copy, idempotently."""
        body = given(
            agent_id=agent_id,
            min_age_hours=min_age_hours,
            min_access_count=min_access_count,
            dry_run=dry_run,
            strategy=strategy,
        )
        return await upkeep_consolidate.consolidate(self._life, body)

    def export_lines(
        self, agent_id: str, *, stores: Sequence[StoreKind] | None = None, include_raw_journal: bool = False
    ) -> AsyncGenerator[bytes, None]:
        """The agent's archive, one JSON line at a time (header, records, footer with its SHA-256)."""
        body = given(agent_id=agent_id, stores=stores, include_raw_journal=include_raw_journal)
        return upkeep_archive.export_lines(self._life, body)

    async def export(
        self,
        agent_id: str,
        *,
        stores: Sequence[StoreKind] | None = None,
        include_raw_journal: bool = False,
        encryption_key: str | None = None,
    ) -> ExportResult:
        """The agent's archive whole, with its checksum and id (:meth:`export_lines` streams it); with
        ``encryption_key``, encrypted (AES-256-GCM under a scrypt-stretched key)."""
        body = given(
            agent_id=agent_id,
            stores=stores,
            include_raw_journal=include_raw_journal,
            encrypt=encryption_key is not None,
            encryption_key=encryption_key,
        )
        return await upkeep_archive.export(self._life, body)

    async def import_archive(
        self,
        agent_id: str,
        archive: bytes | Callable[[], Iterable[bytes]],
        *,
        strategy: ImportStrategy = "merge",
        conflict_resolution: ConflictRule = "keep_newer",
        decryption_key: str | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> ImportResult:
        """Import an archive into ``agent_id``: its bytes (``decryption_key`` opens an encrypted one), or a
        callable giving its lines (called twice: every line and the checksum are checked before anything
        is written). ``progress`` is told how many records each written batch held."""
        rules = given(strategy=strategy, conflict_resolution=conflict_resolution)
        if callable(archive):
            return await upkeep_archive.import_lines(
                self._life, agent_id, archive, strategy, conflict_resolution, progress
            )
        body = given(agent_id=agent_id, archive_data=archive, decryption_key=decryption_key, **rules)
        return await upkeep_archive.import_archive(self._life, body, progress)
