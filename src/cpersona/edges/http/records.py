"""Records as the HTTP API and the CLI show them: plain JSON, times as RFC 3339 text in UTC."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, cast

from cpersona.model.records import (
    TIME_FIELDS,
    EpisodeRecord,
    MemoryRecord,
    ProfileRecord,
    RawRecord,
    format_time,
)

__all__ = ["record_json"]


def _plain(value: object) -> object:
    """A record value as JSON-ready data: dataclasses to objects, tuples to arrays, times to text.

    Time conversion applies to dataclass fields only, never inside caller metadata, whose keys mean
    whatever the caller wants them to mean.
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, object] = {}
        for field in dataclasses.fields(value):
            item = getattr(value, field.name)
            if field.name in TIME_FIELDS and isinstance(item, int | float) and not isinstance(item, bool):
                out[field.name] = format_time(item)
            else:
                out[field.name] = _plain(item)
        return out
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


def record_json(record: MemoryRecord | EpisodeRecord | RawRecord | ProfileRecord) -> dict[str, Any]:
    """A record as the HTTP API and the CLI show it.

    Memories, episodes and raw entries get ``ref`` and ``kind`` first and their scope flattened to
    ``agent_id``/``project_id``/``channel`` (the names requests use); times are RFC 3339 in UTC.
    """
    plain = cast("dict[str, Any]", _plain(record))
    if isinstance(record, ProfileRecord):
        return plain
    kind = (
        "memory"
        if isinstance(record, MemoryRecord)
        else "episode"
        if isinstance(record, EpisodeRecord)
        else "raw"
    )
    scope = plain.pop("scope")
    out: dict[str, Any] = {"ref": record.ref, "kind": kind, **scope, **plain}
    if isinstance(record, EpisodeRecord):
        out["timestamp"] = format_time(record.timestamp)
    return out
