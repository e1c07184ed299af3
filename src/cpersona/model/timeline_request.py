"""recall.timeline's request body (``POST /v1/recall/timeline``, ``Engine.timeline``).

A record's time is the memory's own ``timestamp`` (what the caller stored, or the moment of the write),
not when it was written. The range is **closed at both ends**, for every store: ``start <= timestamp
<= end`` (the reference is end-exclusive for episodic records and end-inclusive for the others; the
seed's own example ends a range at ``23:59:59``, meaning through that second). ``start`` after ``end`` is
refused, naming ``range``.

``emotion_filter`` keeps a record whose emotion is like the filter's: the cosine of their eight Plutchik
axes (intensity and valence take no part) above 0.5. A record without any of the eight has no direction
and is not like any filter; a filter without any of them would match nothing, so it is refused rather
than answering an empty timeline that looks like an empty memory.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import ConfigDict, Field, field_validator, model_validator

from cpersona.model.epoch_time import EpochTime
from cpersona.model.fields import WHOLE, Header, KeyText, RequestModel, Unit01, refusal
from cpersona.model.memory_parts import EmotionBody
from cpersona.model.timeline_buckets import Granularity

__all__ = [
    "DEFAULT_TIMELINE_LIMIT",
    "MAX_TIMELINE_LIMIT",
    "PLUTCHIK_AXES",
    "TemporalRange",
    "TimelineRequest",
]

DEFAULT_TIMELINE_LIMIT = 1_000
MAX_TIMELINE_LIMIT = 10_000
PLUTCHIK_AXES = ("joy", "trust", "fear", "surprise", "sadness", "disgust", "anger", "anticipation")


class TemporalRange(RequestModel):
    """A closed interval of time: ``start <= t <= end`` (ISO 8601 text or epoch seconds)."""

    model_config = ConfigDict(title="TimelineRange")

    start: EpochTime
    end: EpochTime

    @model_validator(mode="after")
    def _ordered(self) -> TemporalRange:
        if self.start > self.end:
            raise refusal("range_order", "start must not be after end")
        return self


class TimelineRequest(RequestModel):
    """Which records to lay out in time buckets, for whom."""

    model_config = ConfigDict(title="RecallTimelineRequest")

    agent_id: KeyText = Field(description="The agent whose memory is read (exact)")
    range: TemporalRange = Field(description="The records' own timestamps, start and end included")
    granularity: Granularity = Field(
        default="hour", description="Bucket size; edges in UTC, weeks from Monday, months calendar months"
    )
    min_fidelity: Unit01 | None = Field(default=None, description="Only records at least this faithful now")
    emotion_filter: EmotionBody | None = Field(
        default=None,
        description="Only records whose eight Plutchik axes have a cosine above 0.5 with the filter's "
        "(intensity and valence ignored); a filter with all eight at zero is refused",
    )
    limit: Annotated[int, Field(ge=1, le=MAX_TIMELINE_LIMIT), WHOLE] = Field(
        default=DEFAULT_TIMELINE_LIMIT,
        description="Records at most, oldest first; `truncated` says when more were in range",
    )
    project_id: KeyText | None = Field(
        default=None, description="Project X sees X and the global pool ''; '' sees only the pool"
    )
    channel: KeyText | None = Field(default=None, description="Channel X sees X and the global pool ''")
    source_id: KeyText = Field(
        default="", description="Exact source id, or a prefix when it ends in a non-alphanumeric"
    )
    header: Header = None

    @field_validator("emotion_filter")
    @classmethod
    def _has_direction(cls, value: Any) -> Any:
        if value is not None and not any(getattr(value, axis) for axis in PLUTCHIK_AXES):
            raise refusal(
                "no_direction", "needs at least one of the eight Plutchik axes above 0 (a cosine needs one)"
            )
        return value
