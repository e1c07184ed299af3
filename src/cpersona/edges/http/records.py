"""Records as the HTTP API and the CLI show them: plain JSON, times as RFC 3339 text in UTC."""

from __future__ import annotations

from typing import Any

from cpersona.model.records import (
    EPISODE,
    MEMORY,
    PROFILE,
    RAW,
    TIMES_AS_TEXT,
    EpisodeRecord,
    MemoryRecord,
    ProfileRecord,
    RawRecord,
    format_time,
)

__all__ = ["record_json"]


def record_json(record: MemoryRecord | EpisodeRecord | RawRecord | ProfileRecord) -> dict[str, Any]:
    """A record as the HTTP API and the CLI show it: its schema's JSON form with times as text.

    Memories, episodes and raw entries get ``ref`` and ``kind`` first and their scope flattened to
    ``agent_id``/``project_id``/``channel`` (the names requests use). Only the record's own time fields
    become text, never a key inside caller metadata, whose keys mean whatever the caller wants.
    """
    if isinstance(record, ProfileRecord):
        profile: dict[str, Any] = PROFILE.dump_python(record, mode="json", context=TIMES_AS_TEXT)
        return profile
    if isinstance(record, MemoryRecord):
        kind, plain = "memory", MEMORY.dump_python(record, mode="json", context=TIMES_AS_TEXT)
    elif isinstance(record, EpisodeRecord):
        kind, plain = "episode", EPISODE.dump_python(record, mode="json", context=TIMES_AS_TEXT)
    else:
        kind, plain = "raw", RAW.dump_python(record, mode="json", context=TIMES_AS_TEXT)
    scope = plain.pop("scope")
    out: dict[str, Any] = {"ref": record.ref, "kind": kind, **scope, **plain}
    if isinstance(record, EpisodeRecord):
        out["timestamp"] = format_time(record.timestamp)
    return out
