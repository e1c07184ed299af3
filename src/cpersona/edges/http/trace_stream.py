"""``GET /v1/traces/stream``: the trace channel as server-sent events, for the live trace page.

Each request opens its own reader connection to the Redis the engines publish on (the one ``trace tail``
listens to: :func:`~cpersona.stores.attach.running_redis_url`), subscribes, and only then answers:
a Redis that cannot be reached is the usual 503 envelope, and from the first event on nothing published is
missed. The first event is ``ready`` (what the stream follows); then one ``trace`` event per recall or
reconstruct trace, its data the trace's JSON exactly as published; a ``lost`` event ends the stream when
the Redis goes away (the page reconnects after a pause).

A stream outlives the admission of its key, so it asks again whether the key is live before each trace
it sends and every :data:`KEY_CHECK_SECS` while none comes; once the key is revoked it sends nothing more
but an ``end`` event saying why (``{"reason": "key revoked"}``), and ends.

Which traces: those of ``agent_id`` when given (refused with 403 unless the request's key may act for it,
:mod:`~cpersona.edges.http.access`), else those of every agent the request may see: every channel when
no key is in force, the key's agents' own channels otherwise (a channel per agent, never a pattern, so an
agent id with glob characters reaches nothing else). ``project_id`` keeps the traces whose scope names
that project (a reconstruct's scope is its recall's).

The subscription lives inside the response's own call: it ends, and its connection closes, when the
client goes, when the server shuts down, or when Redis is lost; no task outlives the request. Every
network call has a deadline: the connect and the subscription (``CPERSONA_REDIS_TIMEOUT_SECS``), each wait
for a message (:class:`~cpersona.stores.trace_subscription.TraceSubscription`, which also tells a quiet
Redis from a hung one), and each send to the client (a client that reads nothing for ``_SEND_SECS`` is
dropped).

The stream is in the OpenAPI document as ``text/event-stream``; the fuzzer leaves it out
(``benchmarks/fuzz.toml``), since a valid request never ends.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any, ClassVar

import orjson
from pydantic import Field
from sse_starlette import EventSourceResponse, ServerSentEvent

from cpersona.edges.cli.trace_render import read_trace, trace_project
from cpersona.edges.http.access import key_agents, permit
from cpersona.edges.http.auth import key_check
from cpersona.edges.http.operation import Operation
from cpersona.edges.http.reading import read_query
from cpersona.edges.http.state import engine_of
from cpersona.errors import BackendUnavailable
from cpersona.keys import Keys
from cpersona.model.fields import KeyText, QueryModel
from cpersona.stores.attach import subscribe_traces

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.types import Receive, Scope, Send

    from cpersona.settings import Settings
    from cpersona.stores.trace_subscription import TraceSubscription

__all__ = ["STREAM_PATH", "TRACE_STREAM_OPERATIONS", "TraceStreamQuery", "TraceStreamsFull", "settings_of"]

STREAM_PATH = "/v1/traces/stream"

# A comment line this often keeps proxies from closing an idle stream and finds a dead client.
_PING_SECS = 15.0
# The deadline of one send to the client.
_SEND_SECS = 10.0
# What the browser waits before reconnecting after the stream ended (the SSE ``retry`` field), in ms.
_RETRY_MS = 2000
KEY_CHECK_SECS = 5.0
"""How often a stream with no trace to send asks whether its key is still live (before a trace it always
asks): the longest an idle stream outlives its key's revocation, give or take one wait for a message."""
KEY_REVOKED = "key revoked"


class TraceStreamsFull(BackendUnavailable):
    """This worker already serves ``CPERSONA_TRACE_STREAMS_MAX`` streams (each holds a Redis connection)."""

    code = "TRACE_STREAMS_FULL"
    backend = "trace stream"


class TraceStreamQuery(QueryModel):
    """Which traces to follow."""

    # Without agent_id the stream follows the key's own agents' channels, never every agent's.
    unnamed_agent_is_every_agent: ClassVar[bool] = False

    agent_id: KeyText | None = Field(
        default=None, description="Only this agent's traces (default: every agent the request may see)"
    )
    project_id: KeyText | None = Field(
        default=None, description="Only the traces whose scope names this project"
    )


def _targets(
    keys: Keys, agent_id: str | None, agents: frozenset[str] | None
) -> tuple[tuple[str, ...], str | None]:
    """The channels (and the pattern, for every agent) a stream subscribes to."""
    if agent_id is not None:
        return (keys.trace_channel(agent_id),), None
    if agents is None:
        return (), keys.trace_pattern
    return tuple(keys.trace_channel(a) for a in sorted(agents)), None


class _TraceEvents(EventSourceResponse):
    """The event stream, which closes its subscription however the response ends."""

    def __init__(
        self, subscription: TraceSubscription, content: AsyncIterator[ServerSentEvent], seats: _Seats
    ) -> None:
        super().__init__(
            content,
            ping=_PING_SECS,
            send_timeout=_SEND_SECS,
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )
        self._subscription = subscription
        self._seats = seats

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._seats.taken -= 1
            await self._subscription.aclose()


@dataclasses.dataclass(slots=True)
class _Seats:
    """How many streams this app serves now (one event loop per worker: a plain count)."""

    taken: int = 0


def _take_seat(request: Request, settings: Settings) -> _Seats:
    state = request.app.state
    seats = getattr(state, "trace_stream_seats", None)
    if not isinstance(seats, _Seats):
        seats = state.trace_stream_seats = _Seats()
    if seats.taken >= settings.trace_streams_max:
        raise TraceStreamsFull(
            f"this worker already serves {seats.taken} trace stream(s), its limit "
            "(CPERSONA_TRACE_STREAMS_MAX); retry later or close another"
        )
    seats.taken += 1
    return seats


@dataclasses.dataclass(slots=True)
class _KeyWatch:
    """Whether the stream's key is still live, asked when a trace is to be sent or every KEY_CHECK_SECS."""

    live: Callable[[], Awaitable[bool]] | None
    asked: float = dataclasses.field(default_factory=time.monotonic)

    async def revoked(self, *, now: bool) -> bool:
        if self.live is None or not (now or time.monotonic() - self.asked >= KEY_CHECK_SECS):
            return False
        self.asked = time.monotonic()
        return not await self.live()


def _end(reason: str) -> ServerSentEvent:
    return ServerSentEvent(data=orjson.dumps({"reason": reason}).decode(), event="end")


def _lost(exc: BackendUnavailable) -> ServerSentEvent:
    return ServerSentEvent(data=orjson.dumps({"error": str(exc)}).decode(), event="lost")


async def _events(
    subscription: TraceSubscription, ready: dict[str, Any], project_id: str | None, key: _KeyWatch
) -> AsyncIterator[ServerSentEvent]:
    yield ServerSentEvent(data=orjson.dumps(ready).decode(), event="ready", retry=_RETRY_MS)
    while True:
        try:
            if await key.revoked(now=False):
                yield _end(KEY_REVOKED)
                return
            message = await subscription.next_message()
        except BackendUnavailable as exc:
            yield _lost(exc)
            return
        if message is None:
            continue
        payload = message.payload
        try:
            decoded = orjson.loads(payload)
        except orjson.JSONDecodeError:
            continue  # not JSON: nothing of it is shown
        if not isinstance(decoded, dict):
            continue
        # The page reads any object defensively; a project is matched on a trace this version reads.
        if project_id is not None and _project(payload) != project_id:
            continue
        try:
            revoked = await key.revoked(now=True)
        except BackendUnavailable as exc:
            yield _lost(exc)
            return
        if revoked:
            yield _end(KEY_REVOKED)
            return
        yield ServerSentEvent(data=payload.decode("utf-8", "replace"), event="trace")


async def _stream(request: Request) -> Response:
    query = read_query(request, TraceStreamQuery)
    settings = settings_of(request)
    agents = key_agents(request)
    if query.agent_id is not None:
        permit(agents, query.agent_id)
    channels, pattern = _targets(Keys(settings.key_prefix), query.agent_id, agents)
    seats = _take_seat(request, settings)
    try:
        subscription = await subscribe_traces(
            settings, channels, pattern, action="cannot subscribe to the traces"
        )
    except BaseException:
        seats.taken -= 1
        raise
    ready = {
        "agent_id": query.agent_id,
        "project_id": query.project_id,
        "agents": None if agents is None or query.agent_id is not None else sorted(agents),
    }
    events = _events(subscription, ready, query.project_id, _KeyWatch(key_check(request)))
    return _TraceEvents(subscription, events, seats)


def settings_of(request: Request) -> Settings:
    """The settings of the engine serving ``request``."""
    return engine_of(request).settings


TRACE_STREAM_OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "GET",
        STREAM_PATH,
        _stream,
        "Follow the recall and reconstruct traces as they happen (server-sent events)",
        None,
        query=TraceStreamQuery,
        errors=(400, 403, 503),
        media_type="text/event-stream",
        description="First a `ready` event once the subscription is in place (nothing published after it "
        "is missed), then one `trace` event per traced recall or reconstruct, its data the trace's JSON as "
        "published (refs, ranks, scores, reasons; never stored text); a `lost` event ends the stream when "
        'Redis goes away, an `end` event (`{"reason": "key revoked"}`) when the request\'s key is '
        "revoked (checked before each trace and every few seconds). Only the agents the request's key may "
        "act for; another agent's is a 403.",
    ),
)


def _project(payload: bytes) -> str | None:
    trace = read_trace(payload)
    return None if trace is None else trace_project(trace)
