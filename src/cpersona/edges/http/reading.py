"""Reading a request: its JSON body (size-capped, parsed off the loop when large) and its query string."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import orjson

from cpersona.edges.http.errors import UnsupportedMediaType
from cpersona.errors import ContentTooLarge, InvalidRequest

if TYPE_CHECKING:
    from starlette.requests import Request

__all__ = ["json_object", "query_params"]

# Bodies above this size are parsed in a worker thread: orjson holds the event loop for about a
# millisecond per 100 KiB, and a 64 MiB batch would otherwise stall every other request.
_PARSE_IN_THREAD_BYTES = 1024 * 1024


async def json_object(request: Request, limit: int) -> dict[str, Any]:
    """The request body as a JSON object; errors name ``body`` (or the header, or the repeated key)."""
    _require_json(request.headers.get("content-type", ""))
    raw = await _read(request, limit)
    if not raw.strip():
        raise InvalidRequest("body", "is required: send a JSON object")
    if len(raw) > _PARSE_IN_THREAD_BYTES:
        body = await anyio.to_thread.run_sync(_parse, raw)
    else:
        body = _parse(raw)
    if not isinstance(body, dict):
        raise InvalidRequest("body", f"must be a JSON object, got {_json_kind(body)}")
    return body


def _require_json(content_type: str) -> None:
    # A browser sends text/plain, form and multipart bodies cross-site without asking (a "simple"
    # request); insisting on application/json makes it ask first, which this server never grants.
    media = content_type.partition(";")[0].strip().lower()
    if media != "application/json":
        shown = f"is {media!r}" if media else "is missing"
        raise UnsupportedMediaType("content-type", f"{shown}; send the body as application/json")


async def _read(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise ContentTooLarge("body", f"is {declared} bytes; the limit is {limit}")
    chunks: list[bytes] = []
    size = 0
    # Counted as it arrives, so a body without a (truthful) length is dropped at the limit, not buffered.
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ContentTooLarge("body", f"is larger than the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _parse(raw: bytes) -> object:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest("body", f"is not valid JSON ({exc})") from None
    # orjson keeps the last of a repeated key, so {"agent_id": "bi", "agent_id": "bob"} would be bob's
    # write; the second reading only looks for repeats (orjson has already refused what is not JSON).
    try:
        json.loads(raw, object_pairs_hook=_refuse_repeated_keys)
    except RecursionError:
        # The stdlib parser recurses once a level and stops near Python's recursion limit, a little
        # short of orjson's 1024 levels; no request of this API nests anywhere near that deep.
        raise InvalidRequest("body", "nests too deeply to read") from None
    return body


def _refuse_repeated_keys(pairs: list[tuple[str, object]]) -> None:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise InvalidRequest(key, "is given more than once in one object")
        seen.add(key)


def _json_kind(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number"


def query_params(request: Request) -> dict[str, str]:
    """The query parameters, each given at most once (which ones a route knows, its model says)."""
    params = request.query_params
    out: dict[str, str] = {}
    for key in params:
        values = params.getlist(key)
        if len(values) > 1:
            raise InvalidRequest(key, "must be given once")
        out[key] = values[0]
    return out
