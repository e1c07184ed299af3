"""API keys and their rate limits as methods of :class:`~cpersona.Engine` (a base class of it): making,
listing, revoking and checking keys (:mod:`cpersona.stores.redis.api_keys`), and counting a key's
requests against its limit (:mod:`cpersona.stores.redis.rate_limit`). The HTTP edge's auth middleware
asks these; ``cpersona keys`` and the key routes call them too."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cpersona.model.api_keys import CreatedKey, CreateKeyRequest, KeyId, KeyListResponse, RevokedKey
from cpersona.model.fields import check, given, validate
from cpersona.stores.redis.api_keys import ApiKeyStore
from cpersona.stores.redis.rate_limit import RateLimiter

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cpersona.engine.lifecycle import Lifecycle
    from cpersona.model.api_keys import ApiKey
    from cpersona.stores.redis.connection import RedisClient

__all__ = ["ApiKeys"]


class ApiKeys:
    """API keys bound to agents, and the rate limit of each key."""

    _life: Lifecycle
    _limiter: tuple[RedisClient, RateLimiter] | None = None

    def _key_store(self) -> ApiKeyStore:
        return ApiKeyStore(self._life.backends.redis, self._life.keys)

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
        settings = self._life.settings
        if settings.rate_limit_per_sec == 0:
            return 0.0
        client = self._life.backends.redis
        cached = self._limiter
        if cached is None or cached[0] is not client:
            limiter = RateLimiter(
                client, self._life.keys, rate=settings.rate_limit_per_sec, burst=settings.rate_limit_burst
            )
            self._limiter = cached = (client, limiter)
        return await cached[1].acquire(key_id)
