"""``cpersona trace tail``: follow the recall traces that engines publish on Redis, as they happen.

This is the tail for when no server is the target: with ``CPERSONA_URL`` set, or a ``cpersona serve``
holding the data dir, the command follows that server's trace stream with its API key instead
(:mod:`~cpersona.edges.cli.trace_follow`), so that a key sees only its agents' traces. The tailer only
listens. It connects to the Redis the engines use — ``CPERSONA_REDIS_URL``, or, when that
is unset, the embedded server that a running engine started for the data dir, found through the
``redis/redis.url`` file that :class:`~cpersona.stores.redis.server.EmbeddedRedis` writes (it never starts a
Redis of its own: the data dir belongs to the engine) — subscribes to one agent's trace channel or to the
pattern of all of them, and prints each trace: one JSON object per line (``--json``), or a short readable
account of the recall, stage by stage. When that Redis goes away (the server restarts) the tailer says
so and subscribes again once it is back, reading the URL file anew (a restarted server may listen
elsewhere). The readable account is :func:`~cpersona.edges.cli.trace_render.render_trace`'s.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from typing import TYPE_CHECKING, Any, TextIO, cast

import anyio

from cpersona.edges.cli.trace_render import read_trace, render_trace, trace_project
from cpersona.errors import BackendUnavailable, RedisUnavailable
from cpersona.keys import Keys
from cpersona.stores.redis.connection import close_redis, connect_redis, redact_url, redis_errors

if TYPE_CHECKING:
    from cpersona.model.trace import AnyTrace
    from cpersona.settings import Settings

__all__ = ["Tail", "render_trace", "tail_traces", "trace_redis_url"]

# How long one wait for a message lasts. The wait is repeated forever; a bounded wait keeps every read
# under a deadline, so a dead connection shows up as an error instead of a silent hang.
_POLL_SECS = 1.0
# The pause before the first attempt to reach a Redis that went away; it doubles up to the max.
_BACKOFF_FIRST_SECS = 0.5
_BACKOFF_MAX_SECS = 10.0


async def trace_redis_url(settings: Settings) -> str:
    """The Redis to listen on: ``CPERSONA_REDIS_URL``, else the embedded server running on the data dir.

    Raises :class:`RedisUnavailable` when neither is there: starting a Redis here would take the data dir
    from the engine that owns it, and would carry no traces anyway.
    """
    if settings.redis_url is not None:
        return settings.redis_url
    # EmbeddedRedis's layout: <data_dir>/redis/redis.url holds the running server's URL, and is removed
    # when the server stops cleanly.
    url_file = anyio.Path(settings.data_dir) / "redis" / "redis.url"
    try:
        url = (await url_file.read_text()).strip()
    except FileNotFoundError:
        url = ""
    if not url:
        raise RedisUnavailable(
            f"no cpersona Redis is running for the data dir {settings.data_dir} (no {url_file}): start an "
            "engine there (cpersona serve), or set CPERSONA_REDIS_URL to the Redis your engines use"
        )
    return url


async def tail_traces(
    settings: Settings,
    *,
    agent: str | None = None,
    project: str | None = None,
    as_json: bool = False,
    count: int | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Print the traces published for ``agent`` (or every agent) until ``count`` were printed, or forever.

    ``project`` keeps the traces whose scope names that project. Returns how many traces were printed.
    A line ``listening on <channel>`` goes to ``err`` each time the subscription is in place. A Redis
    that cannot be reached at the start is an error (:class:`RedisUnavailable`); one lost later (the
    server restarts) is waited for, with a pause that doubles up to ``_BACKOFF_MAX_SECS``, and each
    attempt is said on ``err``.
    """
    keys = Keys(settings.key_prefix)
    tail = Tail(
        settings,
        target=keys.trace_pattern if agent is None else keys.trace_channel(agent),
        pattern=agent is None,
        project=project,
        as_json=as_json,
        count=count,
        out=sys.stdout if out is None else out,
        err=sys.stderr if err is None else err,
    )
    await tail.follow()
    return tail.printed


@dataclasses.dataclass(slots=True)
class Tail:
    """One ``trace tail``: what it listens to, where it prints, and how far it got.

    ``listen`` subscribes once and prints until done; :class:`~cpersona.edges.cli.trace_follow.ServerTail`
    listens to a server's stream instead, and keeps the rest (the reconnecting, the printing).
    """

    settings: Settings
    target: str
    pattern: bool
    project: str | None
    as_json: bool
    count: int | None
    out: TextIO
    err: TextIO
    printed: int = 0
    subscribed: bool = False
    pause: float = _BACKOFF_FIRST_SECS

    def done(self) -> bool:
        return self.count is not None and self.printed >= self.count

    async def follow(self) -> None:
        while not self.done():
            try:
                await self.listen()
            except BackendUnavailable as exc:  # Redis here; the server, for a tail that follows one
                if not self.subscribed:
                    raise  # never reached: there is nothing to wait for
                print(
                    f"lost the traces ({exc}); reconnecting in {self.pause:.1f} s", file=self.err, flush=True
                )
                await anyio.sleep(self.pause)
                self.pause = min(self.pause * 2, _BACKOFF_MAX_SECS)

    async def listen(self) -> None:
        """Subscribe once and print until done; raises :class:`RedisUnavailable` when Redis goes away."""
        url = await trace_redis_url(self.settings)
        client = await connect_redis(self.settings, url, writes=False)
        try:
            pubsub = client.pubsub()
            try:
                async with redis_errors(f"cannot subscribe to {self.target} on {redact_url(url)}"):
                    await _subscribe(pubsub, self.target, pattern=self.pattern, settings=self.settings)
                self.listening(f"{self.target} at {redact_url(url)}")
                while not self.done():
                    received = await _next_trace(pubsub, self.err)
                    if received is not None:
                        self.show(*received)
            finally:
                with anyio.CancelScope(shield=True), anyio.move_on_after(self.settings.redis_timeout_secs):
                    # The type stubs predate aclose (close is deprecated in redis-py and warns).
                    await cast("Any", pubsub).aclose()
        finally:
            await close_redis(client)

    def listening(self, where: str) -> None:
        """Say that the subscription is in place: from now on nothing published is missed."""
        again = "reconnected: " if self.subscribed else ""
        print(f"{again}listening on {where} (Ctrl-C to stop)", file=self.err, flush=True)
        self.subscribed, self.pause = True, _BACKOFF_FIRST_SECS

    def show(self, payload: bytes, trace: AnyTrace) -> None:
        if self.project is not None and trace_project(trace) != self.project:
            return
        if self.as_json:
            print(payload.decode("utf-8", "replace"), file=self.out, flush=True)
        else:
            print(render_trace(trace, received=time.time()), file=self.out, flush=True)
        self.printed += 1


async def _subscribe(pubsub: Any, target: str, *, pattern: bool, settings: Settings) -> None:
    if pattern:
        await pubsub.psubscribe(target)
    else:
        await pubsub.subscribe(target)
    # Wait for the server's confirmation: from then on nothing published is missed.
    with anyio.fail_after(settings.redis_timeout_secs):
        while True:
            reply = await pubsub.get_message(timeout=_POLL_SECS)
            if reply is not None and _text(reply.get("type")) in ("subscribe", "psubscribe"):
                return


async def _next_trace(pubsub: Any, err: TextIO) -> tuple[bytes, AnyTrace] | None:
    """The next published trace (its bytes and its model), or ``None`` when the poll brought none."""
    async with redis_errors("lost the trace subscription"):
        message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=_POLL_SECS)
    if message is None or _text(message.get("type")) not in ("message", "pmessage"):
        return None
    payload = message.get("data")
    if not isinstance(payload, bytes):
        return None
    trace = read_trace(payload)
    if trace is None:
        channel = _text(message.get("channel"))
        print(f"skipped a message on {channel} that is not a trace", file=err, flush=True)
        return None
    return payload, trace


def _text(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
