"""Reading a request: its JSON body (size-capped, parsed off the loop when large) and its query string."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import orjson

from cpersona.errors import ContentTooLarge, InvalidRequest

if TYPE_CHECKING:
    from starlette.requests import Request

__all__ = ["json_object", "query_params"]

# Bodies above this size are parsed in a worker thread: orjson holds the event loop for about a
# millisecond per 100 KiB, and a 64 MiB batch would otherwise stall every other request.
_PARSE_IN_THREAD_BYTES = 1024 * 1024


async def json_object(request: Request, limit: int) -> dict[str, Any]:
    """The request body as a JSON object; errors name ``body``."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise ContentTooLarge("body", f"is {declared} bytes; the limit is {limit}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ContentTooLarge("body", f"is larger than the limit of {limit} bytes")
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip():
        raise InvalidRequest("body", "is required: send a JSON object")
    try:
        if len(raw) > _PARSE_IN_THREAD_BYTES:
            body = await anyio.to_thread.run_sync(orjson.loads, raw)
        else:
            body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest("body", f"is not valid JSON ({exc})") from None
    if not isinstance(body, dict):
        raise InvalidRequest("body", f"must be a JSON object, got {_json_kind(body)}")
    return body


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
