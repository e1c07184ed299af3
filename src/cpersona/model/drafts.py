"""Turning a write request into a validated draft record.

A request arrives as a mapping (an HTTP body, a JSONL line, or the keyword arguments of a Python call)
and leaves as a frozen draft that the write path can store without further checks. Both seeds' shapes
are accepted for content: CPersona's plain text (``"content": "..."``) and Cerememory's
``{"blocks": [{"modality": "text", "format": "text/plain", "data": [72, 105]}], "summary": ...}``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cpersona.errors import InvalidRequest
from cpersona.model.records import (
    ASSOCIATION_TYPES,
    RAW_SOURCES,
    RAW_SPEAKERS,
    RAW_VISIBILITIES,
    SECRECY_LEVELS,
    STORE_KINDS,
    Association,
    CaptureStatus,
    EmotionVector,
    MetaMemory,
    RawSource,
    RawSpeaker,
    RawVisibility,
    Scope,
    SecrecyLevel,
    Source,
    StoreKind,
)
from cpersona.model.validate import (
    as_bool,
    as_choice,
    as_float,
    as_mapping,
    as_str,
    as_str_list,
    as_time,
    check_json_size,
    clean_text,
)

if TYPE_CHECKING:
    from cpersona.settings import Settings

__all__ = ["EpisodeDraft", "MemoryDraft", "RawDraft", "episode_draft", "memory_draft", "raw_draft"]

_MEMORY_FIELDS = frozenset(
    {
        "content", "agent_id", "project_id", "channel", "source", "id", "msg_id", "timestamp",
        "metadata", "store", "emotion", "meta", "associations", "lock", "context", "header",
    }
)  # fmt: skip
_EPISODE_FIELDS = frozenset(
    {
        "summary", "agent_id", "project_id", "channel", "keywords", "history", "start_time",
        "end_time", "resolved", "header",
    }
)  # fmt: skip
_RAW_FIELDS = frozenset(
    {
        "content", "agent_id", "project_id", "channel", "session_id", "turn_id", "topic_id",
        "source", "speaker", "visibility", "secrecy_level", "metadata", "meta", "header",
    }
)  # fmt: skip

_EMOTION_FIELDS = tuple(f.name for f in dataclasses.fields(EmotionVector))
_EMOTION_LABELS: dict[str, tuple[str, float]] = {
    "joy": ("joy", 1.0), "happy": ("joy", 1.0), "happiness": ("joy", 1.0),
    "trust": ("trust", 0.7), "fear": ("fear", -0.8), "surprise": ("surprise", 0.0),
    "sadness": ("sadness", -1.0), "sad": ("sadness", -1.0), "disgust": ("disgust", -0.9),
    "anger": ("anger", -0.9), "angry": ("anger", -0.9),
    "anticipation": ("anticipation", 0.4), "anticipatory": ("anticipation", 0.4),
}  # fmt: skip
_CAPTURE: tuple[CaptureStatus, ...] = ("provided", "inferred", "legacy", "unavailable")


@dataclasses.dataclass(frozen=True, slots=True)
class MemoryDraft:
    scope: Scope
    source: Source
    content: str
    timestamp: float
    msg_id: str
    metadata: Mapping[str, Any]
    store: StoreKind
    emotion: EmotionVector
    meta: MetaMemory
    associations: tuple[Association, ...]
    locked: bool
    warnings: tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class EpisodeDraft:
    scope: Scope
    summary: str
    keywords: tuple[str, ...]
    start_time: float | None
    end_time: float | None
    resolved: bool


@dataclasses.dataclass(frozen=True, slots=True)
class RawDraft:
    scope: Scope
    session_id: str
    source: RawSource
    speaker: RawSpeaker
    visibility: RawVisibility
    secrecy_level: SecrecyLevel
    content: str
    turn_id: str | None
    topic_id: str | None
    metadata: Mapping[str, Any]
    meta: MetaMemory


def _unknown(body: Mapping[str, Any], allowed: frozenset[str], prefix: str) -> None:
    for key in body:
        if key not in allowed:
            raise InvalidRequest(f"{prefix}{key}", "is not a known field")


def _scope(body: Mapping[str, Any], settings: Settings, prefix: str) -> Scope:
    if "agent_id" not in body:
        raise InvalidRequest(f"{prefix}agent_id", "is required")
    limit = settings.max_key_length
    agent = as_str(body["agent_id"], f"{prefix}agent_id", max_len=limit, allow_empty=False)
    project = as_str(body.get("project_id", ""), f"{prefix}project_id", max_len=limit)
    channel = as_str(body.get("channel", ""), f"{prefix}channel", max_len=limit)
    return Scope(agent, project, channel)


def _text_content(value: object, field: str, settings: Settings) -> tuple[str, str | None]:
    """Return (text, summary) from plain text or Cerememory ``MemoryContent``."""
    if isinstance(value, str):
        return clean_text(value, field, max_len=settings.max_content_length), None
    content = as_mapping(value, field)
    for key in content:
        if key not in ("blocks", "summary"):
            raise InvalidRequest(f"{field}.{key}", "is not a known field")
    blocks = content.get("blocks")
    if not isinstance(blocks, list) or not blocks:
        raise InvalidRequest(f"{field}.blocks", "must be a non-empty list of content blocks")
    text: str | None = None
    for i, raw_block in enumerate(blocks):
        block = as_mapping(raw_block, f"{field}.blocks[{i}]")
        modality = block.get("modality")
        if modality != "text":
            raise InvalidRequest(
                f"{field}.blocks[{i}].modality", f"only 'text' is supported by this engine, got {modality!r}"
            )
        if text is None:
            text = _block_text(block.get("data"), f"{field}.blocks[{i}].data")
    assert text is not None
    summary = content.get("summary")
    if summary is not None:
        summary = as_str(summary, f"{field}.summary", max_len=settings.max_content_length)
    return clean_text(text, field, max_len=settings.max_content_length), summary


def _block_text(data: object, field: str) -> str:
    if isinstance(data, str):
        return data
    if not isinstance(data, list) or not all(
        isinstance(b, int) and not isinstance(b, bool) and 0 <= b <= 255 for b in data
    ):
        raise InvalidRequest(field, "must be text or a list of byte values 0-255")
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidRequest(field, "is not valid UTF-8") from None


def _source(value: object, agent_id: str, settings: Settings) -> Source:
    if value is None:
        return Source("Agent", agent_id, "")
    body = as_mapping(value, "source")
    for key in body:
        if key not in ("type", "id", "name"):
            raise InvalidRequest(f"source.{key}", "is not a known field")
    limit = settings.max_key_length
    return Source(
        as_str(body.get("type", "Agent"), "source.type", max_len=limit),
        as_str(body.get("id", agent_id), "source.id", max_len=limit),
        as_str(body.get("name", ""), "source.name", max_len=limit),
    )


def _emotion(value: object) -> EmotionVector:
    if value is None:
        return EmotionVector()
    if isinstance(value, str):
        label = value.strip().lower()
        if label not in _EMOTION_LABELS:
            raise InvalidRequest("emotion", f"unknown emotion label {value!r}")
        axis, valence = _EMOTION_LABELS[label]
        return EmotionVector(**{axis: 1.0, "intensity": 1.0, "valence": valence})
    body = as_mapping(value, "emotion")
    values: dict[str, float] = {}
    for key, item in body.items():
        if key not in _EMOTION_FIELDS:
            raise InvalidRequest(f"emotion.{key}", "is not an emotion axis")
        lo = -1.0 if key == "valence" else 0.0
        values[key] = as_float(item, f"emotion.{key}", lo=lo, hi=1.0)
    return EmotionVector(**values)


def _meta(value: object, trigger: str, now: float, settings: Settings) -> MetaMemory:
    if value is None:
        return MetaMemory(
            capture_status="unavailable",
            rationale="no explicit meta-rationale provided at ingest",
            trigger=trigger,
            captured_at=now,
        )
    body = as_mapping(value, "meta")
    check_json_size(body, "meta", max_len=settings.max_metadata_length)
    allowed = {f.name for f in dataclasses.fields(MetaMemory)} | {"schema_version"}
    for key in body:
        if key not in allowed:
            raise InvalidRequest(f"meta.{key}", "is not a known field")
    status = as_choice(body.get("capture_status", "provided"), "meta.capture_status", _CAPTURE)
    if status == "legacy":
        status = "provided"

    def opt_text(key: str) -> str | None:
        item = body.get(key)
        return None if item is None else as_str(item, f"meta.{key}", max_len=settings.max_metadata_length)

    def text_list(key: str) -> tuple[str, ...]:
        return as_str_list(body.get(key, []), f"meta.{key}", max_items=256, max_len=settings.max_key_length)

    def obj_list(key: str) -> tuple[Mapping[str, Any], ...]:
        items = body.get(key, [])
        if not isinstance(items, list):
            raise InvalidRequest(f"meta.{key}", "must be a list of objects")
        return tuple(as_mapping(x, f"meta.{key}[{i}]") for i, x in enumerate(items))

    confidence = body.get("confidence")
    captured = body.get("captured_at")
    return MetaMemory(
        capture_status=status,
        intent=opt_text("intent"),
        rationale=opt_text("rationale"),
        trigger=opt_text("trigger") or trigger,
        decision=opt_text("decision"),
        goals=text_list("goals"),
        assumptions=text_list("assumptions"),
        tags=text_list("tags"),
        evidence=obj_list("evidence"),
        alternatives=obj_list("alternatives"),
        confidence=None if confidence is None else as_float(confidence, "meta.confidence", lo=0.0, hi=1.0),
        captured_at=now if captured is None else as_time(captured, "meta.captured_at"),
    )


def _associations(value: object, now: float) -> tuple[Association, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise InvalidRequest("associations", "must be a list")
    out: list[Association] = []
    for i, raw in enumerate(value):
        item = as_mapping(raw, f"associations[{i}]")
        target = item.get("target_id")
        if not isinstance(target, str) or not target:
            raise InvalidRequest(f"associations[{i}].target_id", "is required")
        kind = as_choice(
            item.get("association_type", item.get("type")), f"associations[{i}].association_type",
            ASSOCIATION_TYPES,
        )  # fmt: skip
        weight = as_float(item.get("weight", 1.0), f"associations[{i}].weight", lo=0.0, hi=1.0)
        out.append(Association(target, kind, weight, now))  # type: ignore[arg-type]
    return tuple(out)


def _metadata(body: Mapping[str, Any], settings: Settings) -> dict[str, Any]:
    metadata_raw = body.get("metadata")
    context = body.get("context")
    if metadata_raw is None:
        metadata: dict[str, Any] = {}
    elif isinstance(metadata_raw, Mapping):
        metadata = dict(as_mapping(metadata_raw, "metadata"))
    else:
        metadata = {"_metadata": metadata_raw}
    if context is not None:
        metadata["_context"] = as_mapping(context, "context")
    check_json_size(metadata, "metadata", max_len=settings.max_metadata_length)
    return metadata


def memory_draft(body: Mapping[str, Any], settings: Settings, *, prefix: str = "") -> MemoryDraft:
    """Validate one memory write. ``prefix`` names the position in a batch, e.g. ``records[3].``."""
    _unknown(body, _MEMORY_FIELDS, prefix)
    scope = _scope(body, settings, prefix)
    if "content" not in body:
        raise InvalidRequest(f"{prefix}content", "is required")
    content, summary = _text_content(body["content"], f"{prefix}content", settings)
    now = time.time()
    warnings: list[str] = []
    if body.get("timestamp") is None:
        timestamp = now
    else:
        timestamp = as_time(body["timestamp"], f"{prefix}timestamp")
        ahead = timestamp - now
        if ahead > settings.future_timestamp_slack_secs:
            if settings.future_timestamp_mode == "reject":
                raise InvalidRequest(f"{prefix}timestamp", f"is {ahead:.0f} s ahead of the server clock")
            if settings.future_timestamp_mode == "warn":
                warnings.append("timestamp_ahead_of_clock")
    msg_id_raw = body.get("msg_id", body.get("id", ""))
    msg_id = as_str(
        msg_id_raw if msg_id_raw is not None else "", f"{prefix}id", max_len=settings.max_key_length
    )
    store_raw = body.get("store")
    store: StoreKind
    if store_raw is None:
        store = "semantic" if summary else "episodic"
    else:
        store = as_choice(store_raw, f"{prefix}store", STORE_KINDS)
    return MemoryDraft(
        scope=scope,
        source=_source(body.get("source"), scope.agent_id, settings),
        content=content,
        timestamp=timestamp,
        msg_id=msg_id,
        metadata=_metadata(body, settings),
        store=store,
        emotion=_emotion(body.get("emotion")),
        meta=_meta(body.get("meta"), "encode.store", now, settings),
        associations=_associations(body.get("associations"), now),
        locked=as_bool(body.get("lock", False), f"{prefix}lock"),
        warnings=tuple(warnings),
    )


def episode_draft(body: Mapping[str, Any], settings: Settings) -> EpisodeDraft:
    _unknown(body, _EPISODE_FIELDS, "")
    scope = _scope(body, settings, "")
    if "summary" not in body:
        raise InvalidRequest("summary", "is required")
    summary = clean_text(body["summary"], "summary", max_len=settings.max_content_length)
    keywords_raw = body.get("keywords", ())
    if isinstance(keywords_raw, str):
        keywords = tuple(keywords_raw.split())
    else:
        keywords = as_str_list(keywords_raw, "keywords", max_items=256, max_len=settings.max_key_length)
    start = None if body.get("start_time") is None else as_time(body["start_time"], "start_time")
    end = None if body.get("end_time") is None else as_time(body["end_time"], "end_time")
    history = body.get("history")
    if history is not None:
        if not isinstance(history, Sequence) or isinstance(history, str):
            raise InvalidRequest("history", "must be a list of messages")
        times = [
            as_time(as_mapping(m, f"history[{i}]")["timestamp"], f"history[{i}].timestamp")
            for i, m in enumerate(history)
            if isinstance(m, Mapping) and m.get("timestamp") is not None
        ]
        if times:
            start = min(times) if start is None else start
            end = max(times) if end is None else end
    if start is not None and end is not None and end < start:
        raise InvalidRequest("end_time", "is before start_time")
    return EpisodeDraft(
        scope=scope,
        summary=summary,
        keywords=keywords,
        start_time=start,
        end_time=end,
        resolved=as_bool(body.get("resolved", False), "resolved"),
    )


def raw_draft(body: Mapping[str, Any], settings: Settings, *, prefix: str = "") -> RawDraft:
    _unknown(body, _RAW_FIELDS, prefix)
    scope = _scope(body, settings, prefix)
    limit = settings.max_key_length
    for required in ("session_id", "source", "speaker", "visibility", "secrecy_level", "content"):
        if body.get(required) is None:
            raise InvalidRequest(f"{prefix}{required}", "is required")
    content, _ = _text_content(body["content"], f"{prefix}content", settings)
    turn = body.get("turn_id")
    topic = body.get("topic_id")
    return RawDraft(
        scope=scope,
        session_id=as_str(body["session_id"], f"{prefix}session_id", max_len=limit, allow_empty=False),
        source=as_choice(body["source"], f"{prefix}source", RAW_SOURCES),  # type: ignore[arg-type]
        speaker=as_choice(body["speaker"], f"{prefix}speaker", RAW_SPEAKERS),  # type: ignore[arg-type]
        visibility=as_choice(body["visibility"], f"{prefix}visibility", RAW_VISIBILITIES),  # type: ignore[arg-type]
        secrecy_level=as_choice(body["secrecy_level"], f"{prefix}secrecy_level", SECRECY_LEVELS),  # type: ignore[arg-type]
        content=content,
        turn_id=None if turn is None else as_str(turn, f"{prefix}turn_id", max_len=limit),
        topic_id=None if topic is None else as_str(topic, f"{prefix}topic_id", max_len=limit),
        metadata=_metadata(body, settings),
        meta=_meta(body.get("meta"), "encode.store_raw", time.time(), settings),
    )
