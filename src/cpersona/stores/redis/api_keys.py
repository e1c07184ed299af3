"""API keys in Redis: one JSON document per key (``Keys.api_key``), redis-om's model of the key
(:class:`ApiKeyDocument`) holding the SHA-256 of its token, and a set of every key id
(``Keys.api_key_ids``), so that listing never scans.

The token is ``cpk_<id>_<secret>`` with 256 random bits of secret; a digest of it needs no salt or slow
hash (nothing about it can be guessed), and it is compared in constant time. A lookup is one
``JSON.GET``: a revoked key is refused by the next request, on every worker.

redis-om writes, reads and deletes a key's document (``save``, ``get``, ``delete``), in the store's own
transactions where the key's id set and rate limit change with it. Two reads go around it: a listing
reads every document in one ``JSON.MGET`` (redis-om's ``get`` is one round trip per key, and it has no
read of several), and the rate limiter's script reads the document of the key it counts for, in the
same round trip (:mod:`.rate_limit`). Both read what they find through the same model.

An engine before redis-om carried these documents stored each key as a JSON *string* (``SET``);
:meth:`ApiKeyStore.upgrade`, run where a key store is opened, turns each such string into the same
document in place (its key and text unchanged), since redis-om reads only JSON documents.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from typing import TYPE_CHECKING, Any, Self

import orjson
from aredis_om import NotFoundError

from cpersona.model.api_keys import ApiKey, parse_token
from cpersona.stores.redis.connection import json_ops
from cpersona.stores.redis.durable import commit, flushed, transaction
from cpersona.stores.redis.om_models import UNBOUND, JsonDocument, bind
from cpersona.stores.redis.rate_limit import RateLimiter
from cpersona.stores.redis.write_scripts import queue_script

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from cpersona.keys import Keys
    from cpersona.stores.redis.connection import RedisClient

__all__ = ["ApiKeyDocument", "ApiKeyStore", "RedisRateLimits", "token_digest"]

# KEYS[1] one API key: a JSON string becomes the JSON document of the same text; anything else is left.
_UPGRADE = """
if redis.call('TYPE', KEYS[1])['ok'] ~= 'string' then return 0 end
local text = redis.call('GET', KEYS[1])
redis.call('DEL', KEYS[1])
redis.call('JSON.SET', KEYS[1], '$', text)
return 1
"""


def token_digest(token: str) -> str:
    """What is stored of a token: its SHA-256, hex."""
    return hashlib.sha256(token.encode()).hexdigest()


class ApiKeyDocument(ApiKey, JsonDocument):
    """A key's document: what is known of the key (:class:`~cpersona.model.api_keys.ApiKey`, its one
    declaration), the digest of its token, and redis-om's primary key ``pk``, the key's id, under
    ``keys.api_key(key_id)`` (the key of the bound model, :func:`~.om_models.bind`). A document of an
    earlier engine has no ``pk``; it is read with its id, as redis-om's ``get`` reads every document."""

    class Meta:
        database = UNBOUND

    digest: str

    @classmethod
    def read(cls, stored: Mapping[str, Any], key_id: str) -> Self:
        return cls.model_validate({**stored, "pk": key_id})

    def proves(self, token: str) -> bool:
        """Whether ``token`` is this key's token (compared in constant time)."""
        return hmac.compare_digest(self.digest, token_digest(token))

    def info(self) -> ApiKey:
        """What is known of the key, without its digest."""
        return ApiKey.model_validate(self.model_dump(exclude={"pk", "digest"}))


class ApiKeyStore:
    """The :class:`~cpersona.stores.key_store.KeyStore` role on one Redis."""

    def __init__(self, client: RedisClient, keys: Keys) -> None:
        self._redis = client
        self._keys = keys
        self._documents = bind(ApiKeyDocument, client, keys.api_key)

    async def upgrade(self) -> int:
        """Turn the keys an earlier engine stored as JSON strings into JSON documents (durably); how
        many were. Each key is turned in one script, so engines opening at once do it once."""
        ids = await self._redis.smembers(self._keys.api_key_ids)
        if not ids:
            return 0
        pipe = self._redis.pipeline(transaction=False)
        for key_id in ids:
            queue_script(pipe, _UPGRADE, [self._keys.api_key(key_id.decode())], [])
        replies = await flushed(pipe, self._redis)
        return sum(int(turned) for turned in replies)

    async def create(self, agents: Sequence[str], *, admin: bool, name: str | None) -> tuple[str, ApiKey]:
        """A new key: its token (shown once, never stored) and what is stored of it."""
        key_id = secrets.token_hex(6)
        token = f"cpk_{key_id}_{secrets.token_urlsafe(32)}"
        doc = self._documents.model_validate(
            {
                "pk": key_id,
                "key_id": key_id,
                "name": name,
                "agents": tuple(agents),
                "admin": admin,
                "created_at": time.time(),
                "digest": token_digest(token),
            }
        )
        pipe = transaction(self._redis)
        # NX: 48 random bits make a clash unlikely, never silent.
        await doc.save(pipeline=pipe, nx=True)
        pipe.sadd(self._keys.api_key_ids, key_id)
        replies = await commit(pipe, self._redis)
        if not replies[0]:  # pragma: no cover - a 1-in-2**48 clash: try again with a new id
            return await self.create(agents, admin=admin, name=name)
        return token, doc.info()

    async def list(self) -> list[ApiKey]:
        """Every key (without secrets), oldest first."""
        ids = sorted(m.decode() for m in await self._redis.smembers(self._keys.api_key_ids))
        docs = await json_ops(self._redis).mget([self._keys.api_key(i) for i in ids], "$") if ids else []
        found = [ApiKeyDocument.read(doc[0], i).info() for i, doc in zip(ids, docs, strict=True) if doc]
        return sorted(found, key=lambda k: (k.created_at, k.key_id))

    async def revoke(self, key_id: str) -> bool:
        """Delete the key; ``False`` when there was none of that id."""
        pipe = transaction(self._redis)
        await self._documents.delete(key_id, pipeline=pipe)
        pipe.srem(self._keys.api_key_ids, key_id)
        pipe.delete(self._keys.rate_limit(key_id))
        replies = await commit(pipe, self._redis)
        return bool(replies[0])

    async def verify(self, token: str) -> ApiKey | None:
        """The key ``token`` is, or ``None`` when it is no live key."""
        key_id = parse_token(token)
        if key_id is None:
            return None
        try:
            doc = await self._documents.get(key_id)
        except NotFoundError:
            return None
        return doc.info() if doc.proves(token) else None


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
        text, wait = await self._limiter.admit(key_id, self._keys.api_key(key_id), token_digest(token))
        doc = None if text is None else ApiKeyDocument.read(orjson.loads(text), key_id)
        if doc is None or not doc.proves(token):
            return None, 0.0
        return doc.info(), wait
