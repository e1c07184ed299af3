"""``cpersona trace tail``: follow the recall traces that engines publish on Redis, as they happen.

This is the tail for when no server is the target: with ``CPERSONA_URL`` set, or a ``cpersona serve``
holding the data dir, the command follows that server's trace stream with its API key instead
(:mod:`~cpersona.edges.cli.trace_follow`), so that a key sees only its agents' traces. The tailer only
listens. It connects to the Redis the engines use — ``CPERSONA_REDIS_URL``, or, when that
is unset, the embedded server that a running engine started for the data dir, found through the
``redis/redis.url`` file that the embedded server writes (:func:`~cpersona.stores.attach.running_redis_url`;
it never starts a Redis of its own: the data dir belongs to the engine) — subscribes to one agent's trace
channel or to the pattern of all of them, and prints each trace: one JSON object per line (``--json``),
or a short readable account of the recall, stage by stage. When that Redis goes away (the server
restarts) the tailer says so and subscribes again once it is back, reading the URL file anew (a restarted
server may listen elsewhere). The readable account is :func:`~cpersona.edges.cli.trace_render.render_trace`'s.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from typing import TYPE_CHECKING, TextIO

import anyio

from cpersona.edges.cli.trace_render import read_trace, render_trace, trace_project
from cpersona.errors import BackendUnavailable
from cpersona.keys import Keys
from cpersona.stores.attach import subscribe_traces

if TYPE_CHECKING:
    from cpersona.model.trace import AnyTrace
    from cpersona.settings import Settings
    from cpersona.stores.trace_subscription import TraceMessage

__all__ = ["Tail", "render_trace", "tail_traces"]

# The pause before the first attempt to reach a Redis that went away; it doubles up to the max.
_BACKOFF_FIRST_SECS = 0.5
_BACKOFF_MAX_SECS = 10.0


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
        channels, pattern = ((), self.target) if self.pattern else ((self.target,), None)
        subscription = await subscribe_traces(
            self.settings, channels, pattern, action=f"cannot subscribe to {self.target}"
        )
        try:
            self.listening(f"{self.target} at {subscription.where}")
            while not self.done():
                received = _trace_of(await subscription.next_message(), self.err)
                if received is not None:
                    self.show(*received)
        finally:
            await subscription.aclose()

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


def _trace_of(message: TraceMessage | None, err: TextIO) -> tuple[bytes, AnyTrace] | None:
    """The trace a message carries (its bytes and its model), or ``None`` when it carries none."""
    if message is None:
        return None
    trace = read_trace(message.payload)
    if trace is None:
        print(f"skipped a message on {message.channel} that is not a trace", file=err, flush=True)
        return None
    return message.payload, trace
