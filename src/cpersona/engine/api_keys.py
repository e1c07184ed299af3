"""The keys service: making, listing, revoking and checking API keys, and counting a key's requests
against its rate limit, through the keys-and-limits role (:mod:`cpersona.stores.key_store`). The HTTP
edge's auth middleware asks it; ``cpersona keys`` and the key routes call it too."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cpersona.model.api_keys import CreatedKey, KeyListResponse, RevokedKey

if TYPE_CHECKING:
    from cpersona.engine.lifecycle import Lifecycle
    from cpersona.model.api_keys import ApiKey, CreateKeyRequest
    from cpersona.stores.key_store import KeyStore

__all__ = ["KeyService"]


class KeyService:
    """API keys bound to agents, and the rate limit of each key."""

    def __init__(self, life: Lifecycle) -> None:
        self._life = life

    @property
    def _store(self) -> KeyStore:
        return self._life.backends.stores.api_keys

    async def create(self, req: CreateKeyRequest) -> CreatedKey:
        """A key bound to ``req.agents`` (or an ``admin`` key for every agent); its token is in the answer
        only, never stored (its SHA-256 is)."""
        token, info = await self._store.create(req.agents, admin=req.admin, name=req.name)
        return CreatedKey(key=token, info=info)

    async def list(self) -> KeyListResponse:
        """Every key, oldest first, without secrets."""
        return KeyListResponse(keys=await self._store.list())

    async def revoke(self, key_id: str) -> RevokedKey:
        """Revoke the key ``key_id`` (a checked :data:`~cpersona.model.api_keys.KeyId`); the next request
        with it is refused, on every worker."""
        return RevokedKey(key_id=key_id, revoked=await self._store.revoke(key_id))

    async def verify(self, token: str) -> ApiKey | None:
        """The key ``token`` is, or ``None`` when it is none (unknown, revoked or malformed)."""
        return await self._store.verify(token)

    async def rate_limit(self, key_id: str) -> float:
        """Count one request of the key: 0 when it may go, else the seconds until it may
        (``CPERSONA_RATE_LIMIT_PER_SEC`` and ``..._BURST``; a rate of 0 never limits)."""
        limits = self._life.backends.stores.rate_limits
        return 0.0 if limits is None else await limits.acquire(key_id)

    async def admit(self, token: str) -> tuple[ApiKey | None, float]:
        """:meth:`verify` and :meth:`rate_limit` in one round trip: the key ``token`` is (``None`` when it
        is none, and then nothing is counted) and the seconds it must wait (0: it may go)."""
        limits = self._life.backends.stores.rate_limits
        if limits is None:
            return await self.verify(token), 0.0
        return await limits.admit(token)
