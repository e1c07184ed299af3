"""API keys in Redis: one JSON string per key (``Keys.api_key``) holding the SHA-256 of its token, and a
set of every key id (``Keys.api_key_ids``), so that listing never scans.

The token is ``cpk_<id>_<secret>`` with 256 random bits of secret; a digest of it needs no salt or slow
hash (nothing about it can be guessed), and it is compared in constant time. A lookup is one ``GET``: a
revoked key is refused by the next request, on every worker.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from typing import TYPE_CHECKING

import orjson

from cpersona.model.api_keys import ApiKey, parse_token
from cpersona.stores.redis.durable import commit, transaction
from cpersona.stores.redis.rate_limit import RateLimiter

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cpersona.keys import Keys
    from cpersona.stores.redis.connection import RedisClient

__all__ = ["ApiKeyStore", "RedisRateLimits", "checked_key", "token_digest"]


def token_digest(token: str) -> str:
    """What is stored of a token: its SHA-256, hex."""
    return hashlib.sha256(token.encode()).hexdigest()


def checked_key(doc: bytes, token: str) -> ApiKey | None:
    """The key stored as ``doc`` if ``token`` is its token (compared in constant time), else ``None``."""
    stored = orjson.loads(doc)
    if not hmac.compare_digest(str(stored.get("digest", "")), token_digest(token)):
        return None
    return _info(doc)


class ApiKeyStore:
    """The :class:`~cpersona.stores.key_store.KeyStore` role on one Redis."""

    def __init__(self, client: RedisClient, keys: Keys) -> None:
        self._redis = client
        self._keys = keys

    async def create(self, agents: Sequence[str], *, admin: bool, name: str | None) -> tuple[str, ApiKey]:
        """A new key: its token (shown once, never stored) and what is stored of it."""
        key_id = secrets.token_hex(6)
        token = f"cpk_{key_id}_{secrets.token_urlsafe(32)}"
        info = ApiKey(key_id=key_id, name=name, agents=tuple(agents), admin=admin, created_at=time.time())
        doc = orjson.dumps({**info.model_dump(), "digest": token_digest(token)})
        pipe = transaction(self._redis)
        # NX: 48 random bits make a clash unlikely, never silent.
        pipe.set(self._keys.api_key(key_id), doc, nx=True)
        pipe.sadd(self._keys.api_key_ids, key_id)
        replies = await commit(pipe, self._redis)
        if not replies[0]:  # pragma: no cover - a 1-in-2**48 clash: try again with a new id
            return await self.create(agents, admin=admin, name=name)
        return token, info

    async def list(self) -> list[ApiKey]:
        """Every key (without secrets), oldest first."""
        ids = sorted(m.decode() for m in await self._redis.smembers(self._keys.api_key_ids))
        docs = await self._redis.mget([self._keys.api_key(i) for i in ids]) if ids else []
        found = [_info(doc) for doc in docs if doc is not None]
        return sorted(found, key=lambda k: (k.created_at, k.key_id))

    async def revoke(self, key_id: str) -> bool:
        """Delete the key; ``False`` when there was none of that id."""
        pipe = transaction(self._redis)
        pipe.delete(self._keys.api_key(key_id))
        pipe.srem(self._keys.api_key_ids, key_id)
        pipe.delete(self._keys.rate_limit(key_id))
        replies = await commit(pipe, self._redis)
        return bool(replies[0])

    async def verify(self, token: str) -> ApiKey | None:
        """The key ``token`` is, or ``None`` when it is no live key."""
        key_id = parse_token(token)
        if key_id is None:
            return None
        doc = await self._redis.get(self._keys.api_key(key_id))
        return None if doc is None else checked_key(doc, token)


class RedisRateLimits:
    """The :class:`~cpersona.stores.key_store.RateLimits` role on one Redis (:class:`RateLimiter`), whose
    ``admit`` checks the key in the script that counts it."""

    def __init__(self, client: RedisClient, keys: Keys, *, rate: float, burst: int) -> None:
        self._keys = keys
        self._limiter = RateLimiter(client, keys, rate=rate, burst=burst)

    async def acquire(self, key_id: str) -> float:
        return await self._limiter.acquire(key_id)

    async def admit(self, token: str) -> tuple[ApiKey | None, float]:
        key_id = parse_token(token)
        if key_id is None:
            return None, 0.0
        doc, wait = await self._limiter.admit(key_id, self._keys.api_key(key_id), token_digest(token))
        key = None if doc is None else checked_key(doc, token)
        return key, wait if key is not None else 0.0


def _info(doc: bytes) -> ApiKey:
    stored = orjson.loads(doc)
    stored.pop("digest", None)
    return ApiKey.model_validate(stored)
