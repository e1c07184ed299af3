"""API keys and their rate limits as methods of :class:`~cpersona.Engine` (a base class of it): making,
listing, revoking and checking keys, and counting a key's requests against its limit, through the
keys-and-limits role (:mod:`cpersona.stores.key_store`). The HTTP edge's auth middleware
asks these; ``cpersona keys`` and the key routes call them too."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cpersona.model.api_keys import (
    CreatedKey,
    CreateKeyRequest,
    KeyId,
    KeyListResponse,
    RevokedKey,
)
from cpersona.model.fields import check, given, validate

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cpersona.engine.lifecycle import Lifecycle
    from cpersona.model.api_keys import ApiKey
    from cpersona.stores.key_store import KeyStore

__all__ = ["ApiKeys"]


class ApiKeys:
    """API keys bound to agents, and the rate limit of each key."""

    _life: Lifecycle

    def _key_store(self) -> KeyStore:
        return self._life.backends.key_store

    async def create_key(
        self, agents: Sequence[str] = (), *, admin: bool = False, name: str | None = None
    ) -> CreatedKey:
        """A key bound to ``agents`` (or an ``admin`` key for every agent); its token is in the answer
        only, never stored (its SHA-256 is)."""
        body = given(agents=list(agents), admin=admin, name=name)
        req = validate(CreateKeyRequest, body, self._life.settings)
        token, info = await self._key_store().create(req.agents, admin=req.admin, name=req.name)
        return CreatedKey(key=token, info=info)

    async def list_keys(self) -> KeyListResponse:
        """Every key, oldest first, without secrets."""
        return KeyListResponse(keys=await self._key_store().list())

    async def revoke_key(self, key_id: str) -> RevokedKey:
        """Revoke a key by its id; the next request with it is refused, on every worker."""
        checked = check(KeyId, key_id, "key_id", self._life.settings)
        return RevokedKey(key_id=checked, revoked=await self._key_store().revoke(checked))

    async def verify_key(self, token: str) -> ApiKey | None:
        """The key ``token`` is, or ``None`` when it is none (unknown, revoked or malformed)."""
        return await self._key_store().verify(token)

    async def rate_limit(self, key_id: str) -> float:
        """Count one request of the key: 0 when it may go, else the seconds until it may
        (``CPERSONA_RATE_LIMIT_PER_SEC`` and ``..._BURST``; a rate of 0 never limits)."""
        limits = self._life.backends.rate_limits
        return 0.0 if limits is None else await limits.acquire(key_id)

    async def admit_key(self, token: str) -> tuple[ApiKey | None, float]:
        """:meth:`verify_key` and :meth:`rate_limit` in one round trip: the key ``token`` is (``None``
        when it is none, and then nothing is counted) and the seconds it must wait (0: it may go)."""
        limits = self._life.backends.rate_limits
        if limits is None:
            return await self.verify_key(token), 0.0
        return await limits.admit(token)
