"""Some top-level fields of many JSON documents, in one ``JSON.MGET``.

A union path (``$['a','b']``) answers each document with the values of the fields it has, in the order
asked, and leaves out the ones it lacks; so a document missing one (written by an older engine) is read
whole instead, by a second ``JSON.MGET`` of those documents alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cpersona.stores.redis.connection import json_ops

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from cpersona.stores.redis.connection import RedisClient

__all__ = ["read_fields"]


async def read_fields(
    client: RedisClient, keys: Sequence[str], fields: Sequence[str]
) -> list[Mapping[str, Any] | None]:
    """For each of ``keys``, its document's ``fields`` by name (a document lacking some holds all its
    own fields instead), or ``None`` when the key holds no document (deleted since it was listed)."""
    if not keys:
        return []
    replies = await json_ops(client).mget(keys, _union_path(fields))
    docs: list[Mapping[str, Any] | None] = []
    partial: list[int] = []
    for i, values in enumerate(replies):
        if values is not None and len(values) == len(fields):
            docs.append(dict(zip(fields, values, strict=True)))
            continue
        docs.append(None)
        if values is not None:
            partial.append(i)
    if partial:
        whole = await json_ops(client).mget([keys[i] for i in partial], "$")
        for i, doc in zip(partial, whole, strict=True):
            docs[i] = doc[0] if doc else None
    return docs


def _union_path(fields: Sequence[str]) -> str:
    return "$[" + ",".join(f"'{name}'" for name in fields) + "]"
