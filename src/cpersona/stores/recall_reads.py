"""The recall-reads role: the searches the recall arms run over the records, and what a recall reads of
the records it returns.

Consumers: the recall graph (:mod:`~cpersona.recall.fanout` for the keyword arms, the profile and the
calibrated gate; :mod:`~cpersona.recall.retrieve` for hydration and the newest times; the vector arm's
statistics in :mod:`~cpersona.recall.arms.vector`; the cue arm in :mod:`~cpersona.recall.arms.cue`), the
cue query's keyword arm (:mod:`~cpersona.operations.query.arms`) and the reconstruct walk
(:mod:`~cpersona.operations.reconstruct.walk`). The Redis adapter is
:class:`~cpersona.stores.redis.recall_reads.RedisRecallReads`.

A read sees only its scope (:meth:`~cpersona.model.scope.ReadScope.sees`); refs are ``mem:<id>`` and
``ep:<id>``. Every call raises :class:`~cpersona.BackendUnavailable` when the backend cannot serve.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from cpersona.model.candidates import ArmResult
    from cpersona.model.scope import ReadScope
    from cpersona.stores.record_values import HydratedRecord, Period, SearchedKind, SeqAt, StoredProfile

__all__ = ["RecallReads"]


@runtime_checkable
class RecallReads(Protocol):
    """The recall arms' searches, and the fields a recall shows of each record it found."""

    async def memory_keyword(
        self,
        scope: ReadScope,
        query: str,
        fetch: int,
        *,
        extra_terms: Sequence[str] = (),
        period: Period | None = None,
    ) -> ArmResult:
        """BM25 over the memories of ``scope``, best first, with the whole-query fallback."""
        ...

    async def episode_fts(
        self,
        scope: ReadScope,
        query: str,
        fetch: int,
        *,
        extra_terms: Sequence[str] = (),
        period: Period | None = None,
    ) -> ArmResult:
        """BM25 over the episodes of ``scope``, best first."""
        ...

    def terms_held(self, query: str, text: str) -> tuple[int, int]:
        """How many of the terms the memory keyword arm searches for ``query`` ``text`` holds (matched
        as that arm's index matches them), and how many terms it searches; pure, no I/O."""
        ...

    async def seq_at(self, kind: SearchedKind, scope: ReadScope, rank: int) -> SeqAt:
        """The count of ``kind`` in ``scope`` (source ignored) and the ``seq`` at 0-based ``rank`` from
        the newest by insertion."""
        ...

    async def time_span(self, scope: ReadScope) -> Period | None:
        """``(oldest, newest)`` record time of the memories ``scope`` sees, exact; ``None`` when none."""
        ...

    async def memory_sources(self, ids: Sequence[str]) -> list[str | None]:
        """The ``source.id`` of each memory, in order (``None`` for one that does not exist)."""
        ...

    async def hydrate(self, refs: Iterable[str]) -> dict[str, HydratedRecord]:
        """The fields a recall reads of each record behind ``refs``, by ref (deleted ones left out)."""
        ...

    async def recall_profile(self, agent_id: str) -> StoredProfile | None:
        """The agent's profile as a recall renders it, or ``None`` when it has none."""
        ...

    async def calibrated_gate(self, agent_id: str) -> float | None:
        """The agent's calibrated gate threshold, when a calibration selected one."""
        ...

    async def newest_episode_time(self, scope: ReadScope) -> float | None:
        """When the newest episode of ``scope`` (source ignored) was created; ``None`` when it has none."""
        ...

    async def newest_memory_time(self, scope: ReadScope) -> float | None:
        """The record time of the newest memory of ``scope`` (source ignored), to within 10 ms; ``None``
        when it has none."""
        ...
