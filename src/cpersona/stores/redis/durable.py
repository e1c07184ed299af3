"""A write is acknowledged only once Redis has it on disk.

Each write the engine acknowledges (a store, a batch, an update, a delete, an episode, raw entries) is one
pipeline that ends with ``WAITAOF 1 0 <ms>``: Redis answers it once every earlier write of the same
connection is fsynced to its append-only file. The pipeline is sent in one round trip on one connection,
which is what WAITAOF needs (it waits for the writes of its own connection; sent on another one from
the pool it would wait for the wrong writes). A transaction is ``MULTI`` ... ``EXEC`` queued by hand in
that pipeline, because redis-py's transaction pipeline cannot send a command after its ``EXEC``.

The embedded server runs with ``appendfsync always``: it fsyncs before it answers, so the WAITAOF answers
at once and, riding in the write's own round trip, costs nothing measurable; the fsyncs do (see
``benchmarks/results/store_durability.md``). On a Redis that fsyncs once a second (``everysec``) the
WAITAOF waits for that fsync, up to a second per write (measured: one sequential write a second), which
is why the embedded server does not run that way with a WAITAOF instead. A WAITAOF that answers 0 — its
timeout passed, or the server never fsyncs — fails the write with :class:`~cpersona.RedisUnavailable`
(``REDIS_NOT_DURABLE``, HTTP 503): the write may be applied in memory, but it is not acknowledged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from cpersona.errors import RedisUnavailable

if TYPE_CHECKING:
    from cpersona.stores.redis.connection import RedisClient

__all__ = ["NOT_DURABLE", "applied", "commit", "flushed", "transaction", "wait_ms"]

NOT_DURABLE = "REDIS_NOT_DURABLE"
"""The code of the :class:`~cpersona.RedisUnavailable` of a write that Redis did not confirm on disk."""

# The WAITAOF's own timeout is this share of the client's reply deadline, so that Redis answers "not yet"
# (0) before the client gives up on the reply: the failure then says what went wrong.
_WAIT_SHARE = 0.5
_DEFAULT_REPLY_SECS = 5.0


def wait_ms(client: RedisClient) -> int:
    """How long a WAITAOF of ``client`` may wait, in ms: half of the client's reply deadline."""
    pool = cast("Any", client).connection_pool
    reply_secs = pool.connection_kwargs.get("socket_timeout") or _DEFAULT_REPLY_SECS
    return max(1, round(float(reply_secs) * 1000 * _WAIT_SHARE))


def transaction(client: RedisClient) -> Any:
    """A pipeline whose commands run as one ``MULTI``/``EXEC``; queue them, then :func:`commit` it."""
    pipe = client.pipeline(transaction=False)
    pipe.execute_command("MULTI")
    return pipe


async def commit(pipe: Any, client: RedisClient) -> list[Any]:
    """Run the transaction of :func:`transaction` and wait until it is on disk; return its replies.

    A command refused while queued (``MISCONF``, ``OOM``...) raises its error, the transaction not run; a
    reply of the transaction that is an error raises it too. Not on disk in time: ``REDIS_NOT_DURABLE``.
    """
    pipe.execute_command("EXEC")
    replies = await flushed(pipe, client)
    return applied(replies[-1])


def applied(result: Any) -> list[Any]:
    """The replies of a transaction from what its ``EXEC`` answered; raises the first that is an error,
    and :class:`~cpersona.RedisUnavailable` when the transaction was not run."""
    if not isinstance(result, list):
        raise RedisUnavailable(f"the write transaction was not run (EXEC answered {result!r})")
    failed = next((r for r in result if isinstance(r, Exception)), None)
    if failed is not None:
        raise failed
    return result


async def flushed(pipe: Any, client: RedisClient) -> list[Any]:
    """Send ``pipe`` (not a transaction) with a WAITAOF behind it; the replies before the WAITAOF's.

    Raises :class:`~cpersona.RedisUnavailable` (``REDIS_NOT_DURABLE``) when Redis does not confirm the
    writes on its disk within :func:`wait_ms`.
    """
    timeout = wait_ms(client)
    pipe.execute_command("WAITAOF", 1, 0, timeout)
    *replies, synced = cast("list[Any]", await pipe.execute(raise_on_error=False))
    failed = next((r for r in replies if isinstance(r, Exception)), None)
    if failed is not None:
        raise failed
    if isinstance(synced, Exception) or int(synced[0]) < 1:
        # An error here is a server that cannot confirm at all (its AOF turned off since the start).
        why = f"Redis answered {synced}" if isinstance(synced, Exception) else f"no fsync within {timeout} ms"
        raise RedisUnavailable(f"the write is not confirmed on disk ({why})", code=NOT_DURABLE)
    return replies
