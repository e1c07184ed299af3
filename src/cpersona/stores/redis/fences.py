"""The fence an agent's delete puts up, and the check every record write of the agent makes against it.

Two keys per agent (:meth:`~cpersona.keys.Keys.agent_fence`, :meth:`~cpersona.keys.Keys.agent_fence_seq`):
the fence, a count of that agent's deletes under way, with a short lifetime each of them renews while it
runs; and its bound, the insertion sequence number (:attr:`~cpersona.keys.Keys.sequence`) when the latest
delete began and again when it ended, with a lifetime past that of any live write. A record takes its
sequence number before its vector is written, so a record numbered at or below the bound may have had its
vector deleted by that delete.

A write is refused (:class:`~cpersona.AgentBeingDeleted`) when, at the moment its transaction runs, one
of its agents is fenced, or it writes a record numbered at or below the agent's bound. The check and the
transaction are one step: the write's pipeline ``WATCH``-es the keys, runs :data:`CHECK`, then its
``MULTI`` … ``EXEC`` and its ``WAITAOF``, in its one round trip. :data:`CHECK` that refuses rewrites the
key that refused (the same value, its lifetime kept), and a watched key written by anyone, the watcher
included, makes Redis drop the ``EXEC``; so does a delete that raises the fence between the check and the
``EXEC``. A dropped ``EXEC`` wrote nothing and is answered as a refusal.

``WATCH`` is queued with :meth:`pipeline_execute_command`: redis-py's pipeline runs a ``WATCH`` given to
``execute_command`` at once, on a connection it then holds, which would split the round trip (and the
``WAITAOF`` would wait on another connection's writes, see :mod:`.durable`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cpersona.errors import AgentBeingDeleted
from cpersona.stores.redis.durable import applied, flushed
from cpersona.stores.redis.record_space import RecordRole
from cpersona.stores.redis.write_scripts import queue_script

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from cpersona.keys import Keys
    from cpersona.stores.redis.connection import RedisClient

__all__ = [
    "CHECK",
    "LOWER",
    "RAISE",
    "Fenced",
    "RedisFences",
    "commit_fenced",
    "fenced_transaction",
    "lowest",
]

Fenced = dict[str, int | None]
"""The agents a write touches, each with the lowest sequence number among its records of that agent
(``None``: none of them is numbered, as raw entries and profiles are not)."""

# KEYS: the fence, its bound, the sequence counter. ARGV: the fence's lifetime (ms), the bound's (ms).
# One more delete under way; the bound rises to the sequence number now (never falls).
RAISE = """
redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[1])
local now, bound = tonumber(redis.call('GET', KEYS[3]) or '0'), tonumber(redis.call('GET', KEYS[2]) or '-1')
redis.call('SET', KEYS[2], math.max(now, bound), 'PX', ARGV[2])
return 0
"""

# KEYS and ARGV as RAISE's, without the fence's lifetime. The bound rises to the sequence number now,
# after the delete's last step: a record numbered before this ended may have lost its vector to it. Then
# one delete fewer; the last one takes the fence down.
LOWER = """
local now, bound = tonumber(redis.call('GET', KEYS[3]) or '0'), tonumber(redis.call('GET', KEYS[2]) or '-1')
redis.call('SET', KEYS[2], math.max(now, bound), 'PX', ARGV[1])
if redis.call('DECR', KEYS[1]) <= 0 then redis.call('DEL', KEYS[1]) end
return 0
"""

# KEYS: per agent its fence and its bound. ARGV: per agent the lowest sequence number of its records in
# the write, or '' when none is numbered. Returns 0, or the 1-based position of the first agent that
# refuses the write, after rewriting the key that refused it (see the module's docstring).
CHECK = """
for i = 1, #ARGV do
  local fence, bound = KEYS[2 * i - 1], KEYS[2 * i]
  local refused = nil
  if redis.call('EXISTS', fence) == 1 then
    refused = fence
  elseif ARGV[i] ~= '' then
    local at = redis.call('GET', bound)
    if at and tonumber(ARGV[i]) <= tonumber(at) then refused = bound end
  end
  if refused then
    redis.call('SET', refused, redis.call('GET', refused), 'KEEPTTL')
    return i
  end
end
return 0
"""


def lowest(records: Iterable[tuple[str, int | None]]) -> Fenced:
    """The :data:`Fenced` of a write of records given as ``(agent, sequence number or None)``."""
    found: Fenced = {}
    for agent, seq in records:
        held = found.get(agent)
        found[agent] = seq if held is None else held if seq is None else min(held, seq)
    return found


def fenced_transaction(client: RedisClient, keys: Keys, agents: Mapping[str, int | None]) -> Any:
    """A pipeline that checks ``agents`` against their fences and then runs its commands as one ``MULTI``
    / ``EXEC``: queue them, then :func:`commit_fenced` it."""
    watched = [key for agent in agents for key in (keys.agent_fence(agent), keys.agent_fence_seq(agent))]
    pipe: Any = client.pipeline(transaction=False)
    pipe.pipeline_execute_command("WATCH", *watched)
    queue_script(pipe, CHECK, watched, ["" if seq is None else str(seq) for seq in agents.values()])
    pipe.execute_command("MULTI")
    return pipe


async def commit_fenced(pipe: Any, client: RedisClient, agents: Mapping[str, int | None]) -> list[Any]:
    """Run the transaction of :func:`fenced_transaction` and wait until it is on disk; its replies.

    Raises :class:`~cpersona.AgentBeingDeleted` when the check refused it (naming the agent that did) or
    a fence moved before its ``EXEC`` (naming its first agent); otherwise as :func:`.durable.commit`.
    """
    pipe.execute_command("EXEC")
    replies = await flushed(pipe, client)
    refused, result = int(replies[1]), replies[-1]
    if result is None:  # the EXEC dropped, nothing written
        names = list(agents)
        raise AgentBeingDeleted(names[refused - 1] if refused else names[0])
    return applied(result)


class RedisFences(RecordRole):
    """The fence operations of :class:`~cpersona.stores.redis.store.RedisRecordStore`."""

    async def raise_fence(self, agent_id: str, *, fence_secs: float, bound_secs: float) -> None:
        await self._run(RAISE, agent_id, [_ms(fence_secs), _ms(bound_secs)])

    async def renew_fence(self, agent_id: str, *, fence_secs: float) -> None:
        await self.client.pexpire(self.keys.agent_fence(agent_id), int(_ms(fence_secs)))

    async def lower_fence(self, agent_id: str, *, bound_secs: float) -> None:
        await self._run(LOWER, agent_id, [_ms(bound_secs)])

    async def _run(self, script: str, agent_id: str, args: list[str]) -> None:
        keys = [self.keys.agent_fence(agent_id), self.keys.agent_fence_seq(agent_id), self.keys.sequence]
        pipe = self.client.pipeline(transaction=False)
        queue_script(pipe, script, keys, args)
        await flushed(pipe, self.client)


def _ms(secs: float) -> str:
    return str(max(1, round(secs * 1000)))
