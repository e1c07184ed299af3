"""Rate limits kept in Redis, so that one limit holds across every worker on the same Redis.

The generic cell rate algorithm (GCRA) in one Lua script: a subject's state is one number, the
theoretical arrival time (TAT) of its next request. Each request moves it on by the emission interval
(``1 / rate``); a request is refused while the TAT lies more than ``burst`` intervals ahead of now, and
the refusal says how long until it would not. The clock is Redis's own (``TIME``), so workers whose
clocks differ still agree.

It is no record: losing it (a restart, a failover) only forgets recent counts, so the script keeps its
write out of the append-only file and the replicas (``redis.set_repl(redis.REPL_NONE)``) and it is not
written through the durable path. Written to the AOF, each request's counting cost an fsync
(``appendfsync always``), about 2 ms a request on this machine; so does an expiry, whose ``DEL`` Redis
always writes there, which is why the state has none. There is one such key per API key (revoking a key
deletes it), so nothing accumulates.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from cpersona.keys import Keys
    from cpersona.stores.redis.connection import RedisClient

__all__ = ["RateLimiter"]

# KEYS[1] the subject's TAT (ms, as text); ARGV[1] the emission interval (ms), ARGV[2] the tolerance
# (ms: burst - 1 intervals ahead of now). With KEYS[2] (a RedisJSON document) and ARGV[3], the request is
# counted only when the document is there and its ``digest`` is ARGV[3] (a key that proves itself, so
# that a stranger who knows a key's id cannot spend its limit), in the same round trip. Returns the
# document's JSON text (or nil) and the wait in ms as text ("0": allowed; Lua numbers come back as integers).
_GCRA = """
redis.set_repl(redis.REPL_NONE)
local doc = false
if #KEYS > 1 then
  doc = redis.call('JSON.GET', KEYS[2])
  if not doc or cjson.decode(doc)['digest'] ~= ARGV[3] then return {false, '0'} end
end
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) * 1000 + tonumber(now_parts[2]) / 1000
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local wait = tat - tolerance - now
if wait > 0 then return {doc, tostring(wait)} end
redis.call('SET', KEYS[1], tostring(tat + interval))
return {doc, '0'}
"""


class RateLimiter:
    """``rate`` requests a second on average per subject, ``burst`` of them at once."""

    def __init__(self, client: RedisClient, keys: Keys, *, rate: float, burst: int) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("a rate limit needs rate > 0 and burst >= 1")
        self._keys = keys
        self._interval_ms = 1000.0 / rate
        self._tolerance_ms = self._interval_ms * (burst - 1)
        # register_script sends EVALSHA, and the script itself once when Redis does not know it yet.
        self._script = cast("Any", client).register_script(_GCRA)

    async def acquire(self, subject: str) -> float:
        """Count one request of ``subject``: 0 when it may go, else the seconds until it could."""
        _, wait = await self._run([self._keys.rate_limit(subject)], [])
        return wait

    async def admit(self, subject: str, doc_key: str, digest: str) -> tuple[bytes | None, float]:
        """Count one request of ``subject`` if the JSON document at ``doc_key`` has this ``digest``: the
        document (``None``, and nothing counted, when it is not there or has another) and the wait."""
        return await self._run([self._keys.rate_limit(subject), doc_key], [digest])

    async def _run(self, keys: list[str], extra: list[str]) -> tuple[bytes | None, float]:
        doc, wait = await self._script(
            keys=keys, args=[repr(self._interval_ms), repr(self._tolerance_ms), *extra]
        )
        text = wait.decode() if isinstance(wait, bytes) else str(wait)
        return doc, max(0.0, float(text)) / 1000.0
