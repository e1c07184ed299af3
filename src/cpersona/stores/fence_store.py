"""The fence role: the fence an agent's delete puts up against that agent's record writes.

Its one consumer is an agent's delete (:mod:`~cpersona.engine.deletes`, which tells why there is a fence);
every record write of :class:`~cpersona.stores.record_writes.RecordWrites` is checked against it. The
Redis adapter is :class:`~cpersona.stores.redis.fences.RedisFences`.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["FenceStore"]


@runtime_checkable
class FenceStore(Protocol):
    """Per agent, a fence that refuses its record writes while its delete runs, and a bound (an insertion
    sequence number) that refuses its records numbered at or below it.

    Every record write of the store (``put_memories``, ``replace_memory``, ``put_episode``, ``put_raw``,
    ``put_profile``) raises :class:`~cpersona.AgentBeingDeleted`, and writes nothing, when one of its
    agents is fenced or one of its records is numbered at or below the agent's bound, decided in the same
    atomic step as the write.
    """

    async def raise_fence(self, agent_id: str, *, fence_secs: float, bound_secs: float) -> None:
        """Refuse the agent's record writes from now on, for ``fence_secs`` unless renewed or lowered, and
        raise its bound to the insertion sequence number now, for ``bound_secs``; on disk when it returns."""
        ...

    async def renew_fence(self, agent_id: str, *, fence_secs: float) -> None:
        """Keep the agent's fence up for ``fence_secs`` more (a delete under way renews it)."""
        ...

    async def lower_fence(self, agent_id: str, *, bound_secs: float) -> None:
        """Raise the agent's bound to the insertion sequence number now, for ``bound_secs``; then end one
        :meth:`raise_fence` (the last one takes the fence down); on disk when it returns."""
        ...
