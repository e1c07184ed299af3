"""``cpersona trace tail`` against a server: its ``GET /v1/traces/stream``, with the CLI's API key.

When a server is the target (``CPERSONA_URL``, or the ``cpersona serve`` that holds the data dir, found as
every other command finds it), the tail follows the server's event stream instead of the Redis channel,
so the server's key checks bind it: a key sees its own agents' traces only, and naming another agent is
refused. The events are the stream's (``ready``, then ``trace`` with the trace's JSON as published,
``lost`` when the server's Redis goes away, and ``end`` when the key is revoked), printed exactly as the
Redis tail prints them.

Refusals end the tail at once, one line and exit 2: a 401 (no key, or one the server does not know)
and an ``end`` (the key revoked while the tail ran) name ``CPERSONA_API_KEY``, a 403 names ``--agent``.
A server that cannot be reached at the start is an error (exit 3); one lost later (it restarts, or its
Redis does) is waited for, as the Redis tail waits, finding the server anew at each attempt (a restarted
server may listen elsewhere).

Every read has a deadline: the server sends a comment line every 15 s on an idle stream, so a stream
silent for ``_QUIET_SECS`` is taken as lost.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, TextIO

import httpx
import orjson

from cpersona.edges.cli.service import ServerUnavailable, _error, server_url
from cpersona.edges.cli.trace_render import read_trace
from cpersona.edges.cli.trace_tail import Tail
from cpersona.edges.http.trace_stream import STREAM_PATH
from cpersona.errors import InvalidRequest, InvalidSetting

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from cpersona.settings import Settings

__all__ = ["ServerTail", "follow_server_traces"]

# Three of the server's 15 s keep-alive comments missed: the stream (or the server) is gone.
_QUIET_SECS = 45.0
_CONNECT_SECS = 5.0


async def follow_server_traces(
    settings: Settings,
    *,
    agent: str | None = None,
    project: str | None = None,
    as_json: bool = False,
    count: int | None = None,
    out: TextIO,
    err: TextIO,
) -> int:
    """Print the traces the server streams to this key until ``count`` were printed, or forever."""
    key = None if settings.api_key is None else settings.api_key.get_secret_value()
    tail = ServerTail(
        settings,
        target=STREAM_PATH,
        pattern=False,
        project=project,
        as_json=as_json,
        count=count,
        out=out,
        err=err,
        agent=agent,
        api_key=key,
    )
    await tail.follow()
    return tail.printed


@dataclasses.dataclass(slots=True)
class ServerTail(Tail):
    """A tail that listens to a server's trace stream; reconnecting and printing are :class:`Tail`'s."""

    agent: str | None = None
    api_key: str | None = dataclasses.field(default=None, repr=False)  # a secret: never in a repr

    async def listen(self) -> None:
        """Open the stream once and print until done; raises :class:`ServerUnavailable` when it is lost."""
        url = server_url(self.settings)
        if url is None:
            raise ServerUnavailable(f"no cpersona server holds the data dir {self.settings.data_dir} now")
        headers = {"authorization": f"Bearer {self.api_key}"} if self.api_key else None
        params = {k: v for k, v in (("agent_id", self.agent), ("project_id", self.project)) if v}
        timeout = httpx.Timeout(_QUIET_SECS, connect=_CONNECT_SECS)
        where = f"{url.rstrip('/')}{STREAM_PATH}"
        try:
            async with (
                httpx.AsyncClient(timeout=timeout, headers=headers) as client,
                client.stream("GET", where, params=params) as response,
            ):
                if not response.is_success:
                    raise await self.refusal(response, url)
                await self.print_events(_events(response), where)
        except httpx.HTTPError as exc:
            raise ServerUnavailable(f"the trace stream of {url} broke off ({exc!r})") from None

    async def print_events(self, events: AsyncIterator[tuple[str, str]], where: str) -> None:
        async for event, data in events:
            if event == "ready":
                self.listening(f"{where}{_scope(data)}")
            elif event == "lost":
                raise ServerUnavailable(f"the server lost its trace Redis ({data})")
            elif event == "end":
                # The key was revoked while the stream was open: a reconnect would be refused (401).
                raise InvalidSetting("CPERSONA_API_KEY", f"ended the trace stream: {_reason(data)}")
            elif event == "trace":
                trace = read_trace(data)
                if trace is not None:
                    self.show(data.encode(), trace)
            if self.done():
                return
        raise ServerUnavailable("the server ended the trace stream")

    async def refusal(self, response: httpx.Response, url: str) -> Exception:
        """What a status that is not 2xx means for the tail: a refusal, or a server to wait for."""
        try:
            body = orjson.loads(await response.aread())
        except (orjson.JSONDecodeError, httpx.HTTPError):
            body = None
        if not isinstance(body, dict):
            return ServerUnavailable(f"the server at {url} answered {response.status_code}, not JSON")
        error = body.get("error")
        message = str(error.get("message", "")) if isinstance(error, dict) else ""
        if response.status_code == 401:
            return InvalidSetting("CPERSONA_API_KEY", f"was refused by the server at {url}: {message}")
        if response.status_code == 403:
            return InvalidRequest("--agent" if self.agent else "CPERSONA_API_KEY", message)
        if response.status_code == 429:
            return ServerUnavailable(message)
        return _error(response.status_code, body)


async def _events(response: httpx.Response) -> AsyncIterator[tuple[str, str]]:
    """The stream's events as ``(name, data)``; comment lines (the server's keep-alives) are skipped."""
    event, data = "message", list[str]()
    async for line in response.aiter_lines():
        if not line:
            if data:
                yield event, "\n".join(data)
            event, data = "message", []
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            event = value
        elif name == "data":
            data.append(value)


def _object(data: str) -> dict[str, Any] | None:
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _scope(data: str) -> str:
    """What the ``ready`` event says the stream follows, as a suffix of the ``listening on`` line."""
    ready = _object(data) or {}
    if ready.get("agent_id"):
        return f" (agent {ready['agent_id']})"
    agents = ready.get("agents")
    if isinstance(agents, list):
        return f" (this key's agents: {', '.join(map(str, agents))})"
    return " (every agent)"


def _reason(data: str) -> str:
    try:
        body = orjson.loads(data)
    except orjson.JSONDecodeError:
        return data
    return str(body.get("reason", data)) if isinstance(body, dict) else data
