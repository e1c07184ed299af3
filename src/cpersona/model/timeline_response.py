"""recall.timeline's answer, one model for the Python API and ``POST /v1/recall/timeline``.

Only buckets holding a record are listed, oldest first; within a bucket the records are oldest first
(ties by insertion order). ``truncated`` is true when the range held more matching records than
``limit`` let through (or than one request reads, :data:`MAX_TIMELINE_SCAN`): the buckets then end at the
last record returned, and a caller asks again from there.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from cpersona.model.timeline_buckets import Granularity
from cpersona.model.timeline_records import RecalledMemoryBody

__all__ = ["TimelineBucket", "TimelineResult"]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TimelineBucket(_Body):
    model_config = ConfigDict(title="TimelineBucket")

    start: str = Field(description="The bucket's first moment (RFC 3339, UTC), included")
    end: str = Field(description="The next bucket's start (RFC 3339, UTC), not included")
    memories: list[RecalledMemoryBody]
    count: int = Field(description="Records in the bucket")


class TimelineResult(_Body):
    """The records of a time range, bucketed."""

    model_config = ConfigDict(title="RecallTimelineResponse")

    ok: Literal[True] = True
    granularity: Granularity
    buckets: list[TimelineBucket]
    count: int = Field(description="Records in all buckets")
    truncated: bool = Field(description="More records matched than were returned (see `limit`)")
    total_in_range: int = Field(description="Records of the scope in the range, before the filters")

    def to_json(self) -> dict[str, Any]:
        # By hand rather than model_dump: the records are JSON already, and a timeline may hold 10,000.
        return {
            "ok": True,
            "granularity": self.granularity,
            "buckets": [
                {
                    "start": b.start,
                    "end": b.end,
                    "memories": [m.to_json() for m in b.memories],
                    "count": b.count,
                }
                for b in self.buckets
            ],
            "count": self.count,
            "truncated": self.truncated,
            "total_in_range": self.total_in_range,
        }
