"""The parser of RedisJSON replies: orjson, and ``json`` for a reply orjson refuses (an integer beyond 64
bits), so every value is the one redis-py's default parser (the standard ``json`` module) gives.

redis-py parses them with ``json`` by default: 40% of the samples of reading 100,000 memories' states
(py-spy) were that parse. Its JSON object registers the parser on the client for every JSON command, so
each :func:`~.connection.json_ops` passes this one; a plain ``client.json()`` registers the default again
until the next, and both give the same values.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

__all__ = ["JSON_REPLIES"]


class _JsonReplies:
    """What redis-py's JSON commands call to parse a reply (``decode``)."""

    @staticmethod
    def decode(reply: str | bytes) -> Any:
        try:
            return orjson.loads(reply)
        except orjson.JSONDecodeError:
            return json.loads(reply)


JSON_REPLIES = _JsonReplies()
