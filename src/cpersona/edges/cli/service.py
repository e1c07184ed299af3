"""What a ``cpersona`` command talks to: the engine in this process, or the server that holds the data dir.

Both answer with the JSON the HTTP API answers with, so a command prints the same whichever it talks to.
A command validates its input with the request models before either is asked, so a bad flag is named
the same way too; the server validates again, and its error envelope is raised here as the exception
the engine would have raised (bad input exits 2, an unavailable backend 3, anything else 1).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

import httpx

from cpersona.edges.http.app import record_json
from cpersona.errors import BackendUnavailable, CpersonaError, InvalidRequest
from cpersona.model.fields import validate
from cpersona.model.memory_request import StoreRequest
from cpersona.model.raw_query import RawQueryRequest
from cpersona.model.recall_query import RecallQuery
from cpersona.model.reconstruct_request import ReconstructRequest
from cpersona.model.timeline_request import TimelineRequest
from cpersona.model.timeline_response import timeline_json
from cpersona.stores.server_record import running_server_url

if TYPE_CHECKING:
    from cpersona.engine.facade import Engine
    from cpersona.settings import Settings

__all__ = ["LocalService", "RemoteService", "Service", "ServerRefused", "ServerUnavailable", "server_url"]

JSON = dict[str, Any]
# One line of an import: the body as read (what the server is sent) and as validated (what the engine takes).
Validated = tuple[Mapping[str, Any], StoreRequest]

# A batch of records is embedded before it is answered; on a slow CPU that takes a while.
_READ_SECS = 300.0
_CONNECT_SECS = 5.0
_BAD_INPUT = frozenset(
    {"VALIDATION_ERROR", "CONTENT_TOO_LARGE", "FORGET_UNCONFIRMED", "CAP_BELOW_MINIMUM", "IMPORT_CONFLICT"}
)


def server_url(settings: Settings) -> str | None:
    """``CPERSONA_URL``, else the URL of the ``cpersona serve`` that holds the data dir, else ``None``."""
    return settings.url if settings.url is not None else running_server_url(settings.data_dir)


class ServerUnavailable(BackendUnavailable):
    """The server did not answer, or answered that one of its backends is unavailable (503) or that a
    disk is under the free-space floor (507)."""

    def __init__(self, message: str) -> None:
        self.detail = message
        CpersonaError.__init__(self, message)


class ServerRefused(CpersonaError):
    """The server refused the request for a reason that is not bad input (e.g. no such record)."""


class Service(Protocol):
    """What the commands ask, answered with the HTTP API's JSON; ``where`` is the server's URL, if any."""

    settings: Settings
    where: str | None

    async def store(self, body: Mapping[str, Any]) -> JSON: ...
    async def store_batch(self, batch: Sequence[Validated]) -> JSON: ...
    async def recall(self, body: Mapping[str, Any]) -> JSON: ...
    async def reconstruct(self, body: Mapping[str, Any]) -> JSON: ...
    async def timeline(self, body: Mapping[str, Any]) -> JSON: ...
    async def raw_query(self, body: Mapping[str, Any]) -> JSON: ...
    async def stats(self, agent: str | None) -> JSON: ...
    async def get(self, ref: str, agent: str) -> JSON: ...
    async def delete_agent(self, agent: str) -> JSON: ...
    async def drain_blocks(self) -> int | None: ...


class LocalService:
    """The engine opened by this command (no server holds the data dir)."""

    where: str | None = None

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.settings = engine.settings

    async def store(self, body: Mapping[str, Any]) -> JSON:
        request = validate(StoreRequest, body, self.settings)
        return (await self.engine.services.writes.store(request)).model_dump(mode="json")

    async def store_batch(self, batch: Sequence[Validated]) -> JSON:
        return (await self.engine.store_batch([request for _, request in batch])).model_dump(mode="json")

    async def recall(self, body: Mapping[str, Any]) -> JSON:
        request = validate(RecallQuery, body, self.settings)
        return (await self.engine.services.recall.recall(request)).model_dump(mode="json")

    async def reconstruct(self, body: Mapping[str, Any]) -> JSON:
        request = validate(ReconstructRequest, body, self.settings)
        return (await self.engine.services.recall.reconstruct(request)).model_dump(mode="json")

    async def timeline(self, body: Mapping[str, Any]) -> JSON:
        request = validate(TimelineRequest, body, self.settings)
        return timeline_json(await self.engine.services.recall.timeline(request))

    async def raw_query(self, body: Mapping[str, Any]) -> JSON:
        request = validate(RawQueryRequest, body, self.settings)
        return (await self.engine.services.recall.raw_query(request)).model_dump(mode="json")

    async def stats(self, agent: str | None) -> JSON:
        return await self.engine.stats(agent)

    async def get(self, ref: str, agent: str) -> JSON:
        return record_json(await self.engine.get(ref, agent_id=agent))

    async def delete_agent(self, agent: str) -> JSON:
        return (await self.engine.delete_agent_data(agent)).model_dump(mode="json")

    async def drain_blocks(self) -> int | None:
        # No worker runs in a one-shot command: the blocks of what it stored are built here.
        return await self.engine.drain_blocks() if self.engine.builds_blocks else None


class RemoteService:
    """The running server at ``url``, over its HTTP API."""

    def __init__(self, settings: Settings, url: str, client: httpx.AsyncClient) -> None:
        self.settings = settings
        self.where: str | None = url
        self._client = client

    @classmethod
    def client(cls, url: str, api_key: str | None = None) -> httpx.AsyncClient:
        # A server with API keys in force asks every request for one (CPERSONA_API_KEY).
        headers = {"authorization": f"Bearer {api_key}"} if api_key else None
        return httpx.AsyncClient(
            base_url=url.rstrip("/"),
            timeout=httpx.Timeout(_READ_SECS, connect=_CONNECT_SECS),
            headers=headers,
        )

    async def _call(self, method: str, path: str, **kwargs: Any) -> JSON:
        try:
            response = await self._client.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise ServerUnavailable(f"the cpersona server at {self.where} did not answer ({exc!r})") from None
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise ServerUnavailable(
                f"the cpersona server at {self.where} answered {response.status_code}, not JSON"
            )
        if response.is_success:
            return cast("JSON", body)
        raise _error(response.status_code, body)

    async def store(self, body: Mapping[str, Any]) -> JSON:
        validate(StoreRequest, body, self.settings)
        return await self._call("POST", "/v1/encode", json=dict(body))

    async def store_batch(self, batch: Sequence[Validated]) -> JSON:
        return await self._call("POST", "/v1/encode/batch", json={"records": [dict(b) for b, _ in batch]})

    async def recall(self, body: Mapping[str, Any]) -> JSON:
        validate(RecallQuery, body, self.settings)
        return await self._call("POST", "/v1/recall/query", json=dict(body))

    async def reconstruct(self, body: Mapping[str, Any]) -> JSON:
        validate(ReconstructRequest, body, self.settings)
        return await self._call("POST", "/v1/reconstruct", json=dict(body))

    async def timeline(self, body: Mapping[str, Any]) -> JSON:
        validate(TimelineRequest, body, self.settings)
        return await self._call("POST", "/v1/recall/timeline", json=dict(body))

    async def raw_query(self, body: Mapping[str, Any]) -> JSON:
        validate(RawQueryRequest, body, self.settings)
        return await self._call("POST", "/v1/recall/raw", json=dict(body))

    async def stats(self, agent: str | None) -> JSON:
        params = {} if agent is None else {"agent_id": agent}
        return await self._call("GET", "/v1/introspect/stats", params=params)

    async def get(self, ref: str, agent: str) -> JSON:
        answer = await self._call("GET", f"/v1/records/{_segment(ref)}", params={"agent_id": agent})
        return cast("JSON", answer["record"])

    async def delete_agent(self, agent: str) -> JSON:
        return await self._call("DELETE", f"/v1/agents/{_segment(agent)}", params={"confirm": "true"})

    async def drain_blocks(self) -> int | None:
        # The server's own worker builds the blocks.
        return None

    async def call(self, method: str, path: str, body: Mapping[str, Any]) -> JSON:
        """One request of the API with a JSON body, for a command whose operation has no method here."""
        return await self._call(method, path, json=dict(body))


def _segment(value: str) -> str:
    return urllib.parse.quote(value, safe=":")


def _error(status: int, body: Mapping[str, Any]) -> CpersonaError:
    """The server's error envelope as the exception the engine raises for it."""
    error = body.get("error")
    error = error if isinstance(error, Mapping) else {}
    code, message, field = error.get("code"), str(error.get("message", f"HTTP {status}")), error.get("field")
    if code in _BAD_INPUT and isinstance(field, str):
        return InvalidRequest(field, message.removeprefix(f"{field}: "))
    if status in (503, 507):  # a backend down, or a disk under the free-space floor: try again later
        return ServerUnavailable(message)
    return ServerRefused(message)
