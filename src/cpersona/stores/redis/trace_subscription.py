"""The :class:`~cpersona.stores.trace_subscription.TraceSubscription` role on Redis pub/sub: a reader
connection of its own, subscribed to trace channels (or to their pattern).

A subscribed connection that brings nothing looks the same whether Redis is quiet or hung, so after
``_LIVENESS_SECS`` without a message it sends a ``PING``; no ``pong`` within ``CPERSONA_REDIS_TIMEOUT_SECS``
means the Redis is lost. Every redis-py error is mapped here (:class:`redis_errors`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, cast

import anyio

from cpersona.errors import RedisUnavailable
from cpersona.stores.redis.connection import close_redis, connect_redis, redact_url, redis_errors
from cpersona.stores.trace_subscription import TraceMessage

if TYPE_CHECKING:
    from cpersona.settings import Settings
    from cpersona.stores.redis.connection import RedisClient

__all__ = ["RedisTraceSubscription"]

# One wait for a message; a bounded wait keeps every read under a deadline.
_POLL_SECS = 1.0
# After this long without a message the subscription is pinged, to tell a quiet Redis from a hung one.
_LIVENESS_SECS = 5.0
_PING_TEXT = "cpersona-trace-stream"


class RedisTraceSubscription:
    """Open with :meth:`open`; close with :meth:`aclose`."""

    def __init__(self, settings: Settings, client: RedisClient, where: str) -> None:
        self._settings = settings
        self._client = client
        self._pubsub: Any = client.pubsub()
        self._where = where
        self._heard = time.monotonic()
        self._pinged: float | None = None

    @classmethod
    async def open(
        cls, settings: Settings, url: str, channels: tuple[str, ...], pattern: str | None, *, action: str
    ) -> RedisTraceSubscription:
        """Connect a reader to ``url`` and subscribe; return once Redis confirmed every subscription.
        ``action`` names the attempt in the error raised when it fails."""
        where = redact_url(url)
        client = await connect_redis(settings, url, writes=False)
        subscription = cls(settings, client, where)
        try:
            await subscription._subscribe(channels, pattern, action)
        except BaseException:
            await subscription.aclose()
            raise
        return subscription

    @property
    def where(self) -> str:
        return self._where

    async def _subscribe(self, channels: tuple[str, ...], pattern: str | None, action: str) -> None:
        wanted = len(channels) + (pattern is not None)
        async with redis_errors(f"{action} at {self._where}"):
            with anyio.fail_after(self._settings.redis_timeout_secs):
                if channels:
                    await self._pubsub.subscribe(*channels)
                if pattern is not None:
                    await self._pubsub.psubscribe(pattern)
                confirmed = 0
                while confirmed < wanted:
                    reply = await self._pubsub.get_message(timeout=_POLL_SECS)
                    if reply is not None and _text(reply.get("type")) in ("subscribe", "psubscribe"):
                        confirmed += 1

    async def next_message(self) -> TraceMessage | None:
        deadline = self._settings.redis_timeout_secs
        async with redis_errors(f"lost the trace subscription at {self._where}"):
            with anyio.fail_after(_POLL_SECS + deadline):
                if self._pinged is None and time.monotonic() - self._heard >= _LIVENESS_SECS:
                    await self._pubsub.ping(_PING_TEXT)
                    self._pinged = time.monotonic()
                message = await self._pubsub.get_message(ignore_subscribe_messages=True, timeout=_POLL_SECS)
        now = time.monotonic()
        if message is not None:
            self._heard, self._pinged = now, None
        elif self._pinged is not None and now - self._pinged > deadline:
            raise RedisUnavailable(f"lost the trace subscription at {self._where}: no answer to a ping")
        if message is None or _text(message.get("type")) not in ("message", "pmessage"):
            return None
        data = message.get("data")
        return TraceMessage(_text(message.get("channel")), data) if isinstance(data, bytes) else None

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True), anyio.move_on_after(self._settings.redis_timeout_secs):
            # The type stubs predate aclose (close is deprecated in redis-py and warns).
            await cast("Any", self._pubsub).aclose()
        await close_redis(self._client)


def _text(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
