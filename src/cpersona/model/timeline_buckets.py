"""Timeline buckets: where a moment's bucket starts and ends, per granularity, in UTC.

Every edge is a UTC wall-clock boundary, so daylight saving never moves one:

- ``minute``, ``hour``, ``day``: the start of the UTC minute, hour or day the moment falls in;
- ``week``: the ISO week, starting Monday 00:00 UTC (the reference counts weeks from the epoch, so its
  weeks start on Thursdays; a person reading a weekly timeline expects Mondays);
- ``month``: the calendar month, from the 1st 00:00 UTC to the 1st of the next month.

A bucket holds the moments ``start <= t < end``; consecutive buckets of one granularity share an edge
(one's ``end`` is the next one's ``start``), so every moment is in exactly one of them.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Literal

__all__ = ["GRANULARITIES", "Granularity", "bucket_end", "bucket_start"]

Granularity = Literal["minute", "hour", "day", "week", "month"]
GRANULARITIES: tuple[Granularity, ...] = ("minute", "hour", "day", "week", "month")

_SECONDS = {"minute": 60, "hour": 3_600, "day": 86_400}
_DAY = 86_400
# 1970-01-01 was a Thursday: three days after the Monday that starts its ISO week.
_EPOCH_WEEKDAY = 3


def bucket_start(ts: float, granularity: Granularity) -> float:
    """The epoch second at which the bucket holding ``ts`` starts."""
    if granularity in _SECONDS:
        size = _SECONDS[granularity]
        return float(math.floor(ts / size) * size)
    day = math.floor(ts / _DAY)
    if granularity == "week":
        return float((day - (day + _EPOCH_WEEKDAY) % 7) * _DAY)
    moment = datetime.fromtimestamp(day * _DAY, UTC)
    return datetime(moment.year, moment.month, 1, tzinfo=UTC).timestamp()


def bucket_end(start: float, granularity: Granularity) -> float:
    """The epoch second at which the bucket starting at ``start`` ends (the next bucket's start)."""
    if granularity in _SECONDS:
        return start + _SECONDS[granularity]
    if granularity == "week":
        return start + 7 * _DAY
    moment = datetime.fromtimestamp(start, UTC)
    year, month = (moment.year + 1, 1) if moment.month == 12 else (moment.year, moment.month + 1)
    if year > 9999:
        # datetime stops at the year 9999; the epoch second of 10000-01-01 is one day past its last day.
        return datetime(9999, 12, 31, tzinfo=UTC).timestamp() + _DAY
    return datetime(year, month, 1, tzinfo=UTC).timestamp()
