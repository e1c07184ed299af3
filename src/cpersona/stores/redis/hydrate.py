"""Hydration: the fields a recall reads of each row its arms found, in one ``JSON.MGET`` per record kind.

This sits on every recall's critical path, so it asks only for the fields a recall uses (one union path)
and never parses a whole record unless a record lacks one of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cpersona.stores.record_values import HydratedRecord
from cpersona.stores.redis.connection import json_ops, redis_errors

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from cpersona.keys import Keys
    from cpersona.stores.redis.connection import RedisClient

__all__ = ["hydrate"]

_HYDRATED: dict[str, tuple[str, ...]] = {
    "mem:": ("content", "source", "msg_id", "ts", "created_at", "embedded"),
    "ep:": ("summary", "ts", "created_at", "embedded"),
}
"""The record fields a recall reads, by ref prefix: text, source and message id for the row, times for
scoring, ``embedded`` for the single-arm rule."""


async def hydrate(client: RedisClient, keys: Keys, refs: Iterable[str]) -> dict[str, HydratedRecord]:
    """The records behind ``refs`` (deleted ones left out), reading only the fields :data:`_HYDRATED`
    names: a stored record carries far more (emotion, fidelity, meta, stems...), and reading whole records
    cost most of the hydration at 100k memories."""
    unique = list(dict.fromkeys(refs))
    docs: dict[str, HydratedRecord] = {}
    for prefix, key_of in (("mem:", keys.memory), ("ep:", keys.episode)):
        wanted = [ref for ref in unique if ref.startswith(prefix)]
        if wanted:
            found = await _read_fields(client, wanted, [key_of(r[len(prefix) :]) for r in wanted], prefix)
            docs.update((ref, _record(ref, doc)) for ref, doc in found.items())
    return docs


async def _read_fields(
    client: RedisClient, refs: Sequence[str], keys: Sequence[str], prefix: str
) -> dict[str, Mapping[str, Any]]:
    fields = _HYDRATED[prefix]
    async with redis_errors():
        replies = await json_ops(client).mget(keys, _union_path(fields))
    docs: dict[str, Mapping[str, Any]] = {}
    partial: list[int] = []
    for i, (ref, values) in enumerate(zip(refs, replies, strict=True)):
        if values is None:
            continue  # deleted since the arm found it
        # A union path returns the fields it found, in the asked order, and skips absent ones: a record
        # missing one (written by an older engine) is read whole instead.
        if len(values) == len(fields):
            docs[ref] = dict(zip(fields, values, strict=True))
        else:
            partial.append(i)
    if partial:
        async with redis_errors():
            whole = await json_ops(client).mget([keys[i] for i in partial], "$")
        docs.update((refs[i], doc[0]) for i, doc in zip(partial, whole, strict=True) if doc)
    return docs


def _union_path(fields: Sequence[str]) -> str:
    return "$[" + ",".join(f"'{name}'" for name in fields) + "]"


def _record(ref: str, doc: Mapping[str, Any]) -> HydratedRecord:
    memory = ref.startswith("mem:")
    field = "content" if memory else "summary"
    src = (doc.get("source") or {}) if memory else {}
    return HydratedRecord(
        ref,
        str(doc[field]) if field in doc else None,
        src.get("type", "Agent"),
        src.get("id", ""),
        src.get("name", ""),
        str(doc.get("msg_id", "")),
        float(doc["ts"]) if "ts" in doc else None,
        float(doc.get("created_at", 0.0)),
        bool(doc.get("embedded", False)),
    )
