"""Hydration: the fields a recall reads of each row its arms found, in one ``JSON.MGET`` per record kind.

This sits on every recall's critical path, so it asks only for the fields a recall uses (one union path)
and never parses a whole record unless a record lacks one of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cpersona.stores.record_values import HydratedRecord
from cpersona.stores.redis.json_fields import read_fields

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
    docs = await read_fields(client, keys, _HYDRATED[prefix])
    return {ref: doc for ref, doc in zip(refs, docs, strict=True) if doc is not None}


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
