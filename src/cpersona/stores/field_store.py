"""The field-writes role: one field of many memories, each written alone and only where the memory still
exists, so a write from a read made earlier neither brings a deleted memory back nor undoes an update
that ran since.

Consumers: the decay tick (:mod:`~cpersona.engine.upkeep`: fidelity) and consolidation
(:mod:`~cpersona.engine.upkeep_consolidate`: typed edges). The Redis adapter is
:class:`~cpersona.stores.redis.field_writes.RedisFieldWrites`.
"""

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
