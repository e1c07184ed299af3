"""The Redis :class:`~cpersona.stores.protocols.TraceSink`: each trace ``PUBLISH``ed on its agent's channel.

``PUBLISH`` hands the message to whoever subscribes to :meth:`Keys.trace_channel` (or to
:attr:`Keys.trace_pattern`) at that moment and forgets it, so a tailer on any worker that shares the Redis
sees every trace and nobody waits for one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import redis.exceptions

from cpersona.errors import RedisUnavailable
from cpersona.stores.redis.connection import describe_error

if TYPE_CHECKING:
    from cpersona.keys import Keys
    from cpersona.stores.redis.connection import RedisClient

__all__ = ["RedisTraceSink"]


class RedisTraceSink:
    """Publishes traces through one client under one key prefix."""

    def __init__(self, client: RedisClient, keys: Keys) -> None:
        self._client = client
        self._keys = keys

    async def publish(self, agent_id: str, payload: bytes) -> None:
        try:
            await self._client.publish(self._keys.trace_channel(agent_id), payload)
        except (redis.exceptions.RedisError, OSError) as exc:
            # Every failure, not only an outage (which the client maps itself): a refused publish (an ACL,
            # say) loses the trace just the same, and the publisher counts it rather than failing.
            raise RedisUnavailable(f"publishing a trace failed: {describe_error(exc)}") from exc
