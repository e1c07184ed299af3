"""The keys-and-limits role: API keys bound to agents, and the rate limit each key's requests count
against. The engine's key methods (:mod:`~cpersona.engine.api_keys`) and ``cpersona keys`` use it; the
Redis adapters are :class:`~cpersona.stores.redis.api_keys.ApiKeyStore` and
:class:`~cpersona.stores.redis.api_keys.RedisRateLimits`. Every call raises
:class:`~cpersona.BackendUnavailable` when the backend cannot serve.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cpersona.model.api_keys import ApiKey

__all__ = ["KeyStore", "RateLimits"]


@runtime_checkable
class KeyStore(Protocol):
    """Make, list, revoke and check API keys. What is stored of a token is its digest, never the token."""

    async def create(self, agents: Sequence[str], *, admin: bool, name: str | None) -> tuple[str, ApiKey]:
        """A new key: its token (shown once, never stored) and what is stored of it."""
        ...

    async def list(self) -> list[ApiKey]:
        """Every key (without secrets), oldest first."""
        ...

    async def revoke(self, key_id: str) -> bool:
        """Delete the key and its count; ``False`` when there was none of that id."""
        ...

    async def verify(self, token: str) -> ApiKey | None:
        """The key ``token`` is, or ``None`` when it is no live key."""
        ...


@runtime_checkable
class RateLimits(Protocol):
    """One rate limit per key, shared by every worker on the same backend."""

    async def acquire(self, key_id: str) -> float:
        """Count one request of the key: 0 when it may go, else the seconds until it could."""
        ...

    async def admit(self, token: str) -> tuple[ApiKey | None, float]:
        """:meth:`KeyStore.verify` and :meth:`acquire` in one round trip: the key ``token`` is (``None``,
        and nothing counted, when it is none) and the seconds it must wait (0: it may go)."""
        ...
