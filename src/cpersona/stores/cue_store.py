"""The reads and the one write of the recall operations (``recall.query`` with a cue, ``recall.associate``)
beyond what :class:`~cpersona.stores.protocols.RecordStore` already searches: memories by id in one
batch, the emotion index, the memories of a time range, and reconsolidation.

A protocol of its own, beside the record store's, so the operations are written against an interface
and the record store (pinned by its own contract suite) keeps its shape.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from cpersona.model.records import EmotionVector, Fidelity, MemoryRecord, StoreKind
    from cpersona.model.scope import ReadScope
    from cpersona.stores.record_values import Period

__all__ = ["CueStore", "Reconsolidation"]


@runtime_checkable
class Reconsolidation(Protocol):
    """How a recall strengthens a memory: the new fidelity from the stored one, at a moment."""

    def __call__(self, fidelity: Fidelity, emotion: EmotionVector, now: float) -> Fidelity: ...


@runtime_checkable
class CueStore(Protocol):
    async def memories(self, ids: Sequence[str]) -> dict[str, MemoryRecord]:
        """The memories of these ids that exist, by id (one round trip)."""
        ...

    async def emotion_nearest(
        self,
        scope: ReadScope,
        axes: Sequence[float],
        fetch: int,
        *,
        stores: Sequence[StoreKind],
        period: Period | None,
    ) -> list[tuple[str, float]]:
        """``(id, cosine)`` of the ``fetch`` memories of ``scope`` (in ``stores``, inside the inclusive
        ``period``) whose emotion axes are nearest ``axes``, best first; only positive cosines, and never
        a memory without an emotion."""
        ...

    async def in_period(
        self, scope: ReadScope, period: Period, fetch: int, *, stores: Sequence[StoreKind]
    ) -> list[str]:
        """The ids of the ``fetch`` newest memories of ``scope`` (in ``stores``) whose own time lies in
        the inclusive ``period``, newest first."""
        ...

    async def reconsolidate(
        self, record_ids: Sequence[str], request_id: str, now: float, rule: Reconsolidation, *, ttl_secs: int
    ) -> list[bool]:
        """Strengthen these memories once per request: apply ``rule`` to each one's stored fidelity unless
        this request already did (its marker lives ``ttl_secs``). Durable when it returns; per memory,
        ``True`` when this call wrote, ``False`` when the request had already, or the memory is gone."""
        ...

    async def stored_fidelity(self, record_id: str) -> Mapping[str, float] | None:
        """The stored fidelity document of a memory (for tools and tests)."""
        ...
