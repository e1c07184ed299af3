"""Rate limits kept in Redis, so that one limit holds across every worker on the same Redis.

The generic cell rate algorithm (GCRA) in one Lua script: a subject's state is one number, the
theoretical arrival time (TAT) of its next request. Each request moves it on by the emission interval
(``1 / rate``); a request is refused while the TAT lies more than ``burst`` intervals ahead of now, and
the refusal says how long until it would not. The clock is Redis's own (``TIME``), so workers whose
clocks differ still agree. The state expires once it has caught up with now, so an idle key costs
nothing. It is no record: losing it (a restart) only forgets recent counts, so it is not written
through the durable path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from cpersona.stores.redis.connection import redis_errors

if TYPE_CHECKING:
    from cpersona.keys import Keys
    from cpersona.stores.redis.connection import RedisClient

__all__ = ["RateLimiter"]

# KEYS[1] the subject's TAT (ms, as text); ARGV[1] the emission interval (ms), ARGV[2] the tolerance
# (ms: burst - 1 intervals ahead of now). Returns the wait in ms as text ("0": allowed), because Lua
# numbers come back to the client truncated to integers.
_GCRA = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) * 1000 + tonumber(now_parts[2]) / 1000
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local wait = tat - tolerance - now
if wait > 0 then return tostring(wait) end
local next_tat = tat + interval
redis.call('SET', KEYS[1], tostring(next_tat), 'PX', math.ceil(next_tat - now) + 1)
return '0'
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
        async with redis_errors("cannot check the rate limit"):
            reply = await self._script(
                keys=[self._keys.rate_limit(subject)],
                args=[repr(self._interval_ms), repr(self._tolerance_ms)],
            )
        text = reply.decode() if isinstance(reply, bytes) else str(reply)
        return max(0.0, float(text)) / 1000.0
