"""The trace-subscription role: listening to the channels the engines publish their recall traces on
(:class:`~cpersona.stores.protocols.TraceSink` is the publishing side). ``cpersona trace tail`` and
``GET /v1/traces/stream`` listen through it; the Redis adapter is
:class:`~cpersona.stores.redis.trace_subscription.RedisTraceSubscription`, opened by
:func:`~cpersona.stores.attach.subscribe_traces`.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol, runtime_checkable

__all__ = ["TraceMessage", "TraceSubscription"]


@dataclasses.dataclass(frozen=True, slots=True)
class TraceMessage:
    """One published message: the channel it came on and its bytes (a trace, if the publisher is ours)."""

    channel: str
    payload: bytes


@runtime_checkable
class TraceSubscription(Protocol):
    """Channels subscribed to, confirmed by the backend: nothing published after it opened is missed."""

    @property
    def where(self) -> str:
        """Where it listens, fit to show (no password)."""
        ...

    async def next_message(self) -> TraceMessage | None:
        """The next published message, or ``None`` when a wait of about a second brought none.

        Raises :class:`~cpersona.BackendUnavailable` when the backend went away or stopped answering.
        """
        ...

    async def aclose(self) -> None:
        """Unsubscribe and close the connection; bounded, and never raises for a backend that is gone."""
        ...
