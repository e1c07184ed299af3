"""The write steps that must read and write in one atomic step, as Lua scripts run by the server.

A transaction (``MULTI``) cannot decide on what it reads, so a dedup claim taken by concurrent stores,
and a vector mark cleared on a document that a delete may have removed meanwhile, are scripts: the
server runs each one whole, with no other command between its reads and its writes. Every claim is
taken, kept and given up here, by one rule: a claim is held when it names another record that exists, or
one still in flight; a held claim is never overwritten, and a record gives up only a claim that names it.
:data:`KEEP` and :data:`DROP` run inside the transactions that write and delete documents.

A write in flight is an entry of one sorted set, scored by when it began: ``[kind, id, claim...]`` as
JSON. It is taken with the claims, before the vector is written, and dropped in the transaction that
writes the document; so an entry left behind names a record whose vector may exist without a document.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from cpersona.stores.record_values import InFlightWrite
from cpersona.stores.redis.connection import command

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cpersona.stores.redis.connection import RedisClient

__all__ = [
    "CLAIM",
    "DROP",
    "KEEP",
    "MARK_WRITTEN",
    "QUEUE_BLOCKS",
    "RELEASE",
    "claim_args",
    "in_flight_member",
    "parse_member",
    "queue_script",
    "release_args",
    "reservation_args",
    "run_script",
]

# KEYS: the in-flight set, then each record's claims in turn. ARGV: the record key prefix, the claims'
# lifetime (ms), the time (the entries' score), then per record its id, in-flight member and claim count.
# A claim is held when it names another record that exists, or one still in flight (its claim has a
# lifetime; a written record's claims have none). A record that finds one held takes nothing and gets
# {claim, holder}; one that finds none takes all its claims and its in-flight entry, and gets {}.
CLAIM = """
local prefix, ttl, now = ARGV[1], ARGV[2], ARGV[3]
local out, k = {}, 2
for a = 4, #ARGV, 3 do
  local id, member, n = ARGV[a], ARGV[a + 1], tonumber(ARGV[a + 2])
  local held = {}
  for i = k, k + n - 1 do
    local holder = redis.call('GET', KEYS[i])
    if holder and holder ~= id and
        (redis.call('EXISTS', prefix .. holder) == 1 or redis.call('PTTL', KEYS[i]) > 0) then
      held = {KEYS[i], holder}
      break
    end
  end
  if #held == 0 then
    for i = k, k + n - 1 do redis.call('SET', KEYS[i], id, 'PX', ttl) end
    redis.call('ZADD', KEYS[1], now, member)
  end
  out[#out + 1] = held
  k = k + n
end
return out
"""

# KEYS: claims, in groups. ARGV: the record key prefix, then per group a record id and its claim count.
# The written record takes each claim of its group for good (no lifetime) unless another holds it: a
# store whose reservation lapsed while it ran does not overwrite the claim a later store took meanwhile,
# and an update to a content another record holds leaves that record its claim.
KEEP = """
local prefix, k = ARGV[1], 1
for a = 2, #ARGV, 2 do
  local id, n = ARGV[a], tonumber(ARGV[a + 1])
  for i = k, k + n - 1 do
    local holder = redis.call('GET', KEYS[i])
    if not holder or holder == id or
        (redis.call('EXISTS', prefix .. holder) == 0 and redis.call('PTTL', KEYS[i]) <= 0) then
      redis.call('SET', KEYS[i], id)
    end
  end
  k = k + n
end
return 0
"""

# KEYS: claims, in groups. ARGV: per group a record id and its claim count. Each claim that names its
# group's record is deleted; one that names another record is that record's, and stays.
DROP = """
local k = 1
for a = 1, #ARGV, 2 do
  local id, n = ARGV[a], tonumber(ARGV[a + 1])
  for i = k, k + n - 1 do
    if redis.call('GET', KEYS[i]) == id then redis.call('DEL', KEYS[i]) end
  end
  k = k + n
end
return 0
"""

# KEYS: the in-flight set, then per record its key and its claims. ARGV: per record its id, in-flight
# member and claim count. A record that was written (its transaction ran, though its caller may not have
# heard) only loses its in-flight entry. One never written gives up the claims that still name it and
# keeps its entry (for the caller to drop once its vector is deleted); its 1-based position is returned.
RELEASE = """
local out, k, n_record = {}, 2, 0
for a = 1, #ARGV, 3 do
  local id, member, n = ARGV[a], ARGV[a + 1], tonumber(ARGV[a + 2])
  n_record = n_record + 1
  if redis.call('EXISTS', KEYS[k]) == 1 then
    redis.call('ZREM', KEYS[1], member)
  else
    for i = k + 1, k + n do
      if redis.call('GET', KEYS[i]) == id then redis.call('DEL', KEYS[i]) end
    end
    out[#out + 1] = n_record
  end
  k = k + n + 1
end
return out
"""

# KEYS: the pending set, then the record keys. ARGV: the JSON patch. Merging into a key that is gone
# would create a partial document, so only existing ones are patched; the 1-based positions of the
# missing ones are returned. Every key loses its pending mark.
MARK_WRITTEN = """
local missing = {}
for i = 2, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    redis.call('JSON.MERGE', KEYS[i], '$', ARGV[1])
  else
    missing[#missing + 1] = i - 1
  end
  redis.call('SREM', KEYS[1], KEYS[i])
end
return missing
"""


# KEYS: the block stream. ARGV: record keys. One event per key, in order, as one XADD each would add: a
# batch's events in one command instead of one per record (each reply parsed on the client's side).
QUEUE_BLOCKS = """
for i = 1, #ARGV do
  redis.call('XADD', KEYS[1], '*', 'key', ARGV[i])
end
return #ARGV
"""


def in_flight_member(write: InFlightWrite) -> str:
    """The in-flight entry of one write (the transaction that writes the record drops the same text)."""
    return json.dumps([write.kind, write.record_id, *write.claims])


def parse_member(member: bytes | str) -> InFlightWrite | None:
    """The write an in-flight entry names; ``None`` for one this engine did not write."""
    try:
        kind, record_id, *claims = json.loads(member)
    except ValueError:
        return None
    if kind not in ("memory", "episode") or not isinstance(record_id, str):
        return None
    return InFlightWrite(kind, record_id, tuple(str(c) for c in claims))


def reservation_args(in_flight_key: str, writes: Sequence[InFlightWrite]) -> tuple[list[str], list[str]]:
    """The KEYS and the per-record ARGV of CLAIM."""
    keys: list[str] = [in_flight_key]
    args: list[str] = []
    for write in writes:
        keys.extend(write.claims)
        args.extend((write.record_id, in_flight_member(write), str(len(write.claims))))
    return keys, args


def claim_args(groups: Sequence[tuple[str, Sequence[str]]]) -> tuple[list[str], list[str]]:
    """The KEYS and the per-record ARGV of KEEP and DROP, from ``(record id, claims)`` pairs."""
    keys: list[str] = []
    args: list[str] = []
    for record_id, claims in groups:
        keys.extend(claims)
        args.extend((record_id, str(len(claims))))
    return keys, args


def release_args(
    in_flight_key: str, writes: Sequence[InFlightWrite], record_keys: Sequence[str]
) -> tuple[list[str], list[str]]:
    """The KEYS and ARGV of RELEASE; ``record_keys`` are the writes' document keys, in order."""
    keys: list[str] = [in_flight_key]
    args: list[str] = []
    for write, record_key in zip(writes, record_keys, strict=True):
        keys.extend((record_key, *write.claims))
        args.extend((write.record_id, in_flight_member(write), str(len(write.claims))))
    return keys, args


def queue_script(pipe: Any, script: str, keys: Sequence[str], args: Sequence[str]) -> None:
    """Queue one script in a pipeline or transaction (its reply comes with the others')."""
    pipe.execute_command("EVAL", script, len(keys), *keys, *args)


async def run_script(client: RedisClient, script: str, keys: Sequence[str], args: Sequence[str]) -> Any:
    """Run one script. EVAL sends its text each time (a few hundred bytes), which is simpler than
    EVALSHA's load-and-retry; the server caches the compiled script by its digest anyway."""
    return await command(client, "EVAL", script, len(keys), *keys, *args)
