"""API keys and their rate limits as methods of :class:`~cpersona.Engine` (a base class of it): making,
listing, revoking and checking keys (:mod:`cpersona.stores.redis.api_keys`), and counting a key's
requests against its limit (:mod:`cpersona.stores.redis.rate_limit`). The HTTP edge's auth middleware
asks these; ``cpersona keys`` and the key routes call them too."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cpersona.model.api_keys import (
    CreatedKey,
    CreateKeyRequest,
    KeyId,
    KeyListResponse,
    RevokedKey,
    parse_token,
)
from cpersona.model.fields import check, given, validate
from cpersona.stores.redis.api_keys import ApiKeyStore, checked_key, token_digest
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
        limiter = self._rate_limiter()
        return 0.0 if limiter is None else await limiter.acquire(key_id)

    async def admit_key(self, token: str) -> tuple[ApiKey | None, float]:
        """:meth:`verify_key` and :meth:`rate_limit` in one round trip: the key ``token`` is (``None``
        when it is none, and then nothing is counted) and the seconds it must wait (0: it may go)."""
        limiter = self._rate_limiter()
        key_id = parse_token(token)
        if limiter is None or key_id is None:
            return await self.verify_key(token), 0.0
        doc, wait = await limiter.admit(key_id, self._life.keys.api_key(key_id), token_digest(token))
        key = None if doc is None else checked_key(doc, token)
        return key, wait if key is not None else 0.0

    def _rate_limiter(self) -> RateLimiter | None:
        settings = self._life.settings
        if settings.rate_limit_per_sec == 0:
            return None
        client = self._life.backends.redis
        cached = self._limiter
        if cached is None or cached[0] is not client:
            limiter = RateLimiter(
                client, self._life.keys, rate=settings.rate_limit_per_sec, burst=settings.rate_limit_burst
            )
            self._limiter = cached = (client, limiter)
        return cached[1]
