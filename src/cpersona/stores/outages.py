"""A backend's own error that got past the adapters unmapped, seen as the outage it stands for.

Every adapter maps its backend's errors where it calls it (the Redis client maps its own), so above
the stores a failing backend is a :class:`~cpersona.BackendUnavailable`. The edges' outermost handlers still
ask here about any other exception, so that a call no adapter wrapped (a bug) is answered as the outage it is,
a 503, not a 500; the edges need not know any backend's types.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cpersona.stores.redis.connection import escaped_outage as escaped_redis_outage

if TYPE_CHECKING:
    from cpersona.errors import BackendUnavailable

__all__ = ["escaped_outage"]


def escaped_outage(exc: BaseException) -> BackendUnavailable | None:
    """``exc`` as an outage when it is a backend's error meaning the backend cannot serve now, else
    ``None``. Only the backends' own error types count: a bare ``TimeoutError`` that far out may come from
    any deadline, not from a backend."""
    return escaped_redis_outage(exc)
