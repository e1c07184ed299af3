"""The writes of one field of memories, part of the :class:`~cpersona.stores.protocols.RecordStore`
protocol (which extends it): the decay tick's fidelity and consolidation's edges, each written alone and
only where the memory still exists, so a write from a read made earlier neither brings a deleted memory
back nor undoes an update that ran since."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cpersona.model.records import Association, Fidelity

__all__ = ["MemoryFieldStore"]


@runtime_checkable
class MemoryFieldStore(Protocol):
    """One field of many memories, in one durable transaction."""

    async def set_fidelities(self, updates: Sequence[tuple[str, Fidelity]]) -> int:
        """Set these memories' fidelity (by id) and nothing else where the memory exists; how many were."""
        ...

    async def set_associations(self, updates: Sequence[tuple[str, Sequence[Association]]]) -> int:
        """Set these memories' typed edges (by id) and nothing else where the memory exists; how many were."""
        ...
