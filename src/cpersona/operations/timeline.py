"""recall.timeline: the memories of a time range, in UTC buckets (:mod:`cpersona.model.timeline_buckets`).

The records come from the memory index's time field, oldest first, within the caller's scope (the
index query carries the scope, and each record read is checked against it again); no record outside the
range is read. The filters (``min_fidelity`` on the fidelity now, ``emotion_filter``) need the record, so
they are applied page by page to each record's emotion and fidelity, read alone, and only the records
that pass are loaded, until ``limit`` records passed. A
request reads the ids of at most ``limit + 1`` records when nothing is filtered, else at most
``20 * limit`` (never more than :data:`MAX_TIMELINE_SCAN`); whatever is left unread makes the answer
``truncated``, never silently short.

The range's ends are widened by :data:`END_ULPS` units in their last place: the JSON store reads some
numbers back one such unit off what was written (``1769385601.6008015`` is kept as ``...6008017``), and a
record stored at exactly a range's end must be in it. At today's dates that is half a microsecond,
below what the API's times show.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from cpersona.model.fidelity import FidelityCurve, current_fidelity
from cpersona.model.records import format_time
from cpersona.model.scope import ReadScope
from cpersona.model.timeline_buckets import bucket_end, bucket_start
from cpersona.model.timeline_records import recalled
from cpersona.model.timeline_request import PLUTCHIK_AXES
from cpersona.model.timeline_response import TimelineBucket, TimelineResult

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cpersona.model.memory_parts import EmotionBody
    from cpersona.model.records import EmotionVector, Fidelity, MemoryRecord
    from cpersona.model.timeline_request import TimelineRequest
    from cpersona.stores.protocols import MemoryReadStore

__all__ = ["EMOTION_SIMILARITY", "END_ULPS", "MAX_TIMELINE_SCAN", "emotion_cosine", "timeline", "widened"]

MAX_TIMELINE_SCAN = 50_000
EMOTION_SIMILARITY = 0.5
"""A record passes ``emotion_filter`` when its cosine with the filter is above this (the reference's)."""
_FILTERED_SCAN_FACTOR = 20
_PAGE = 500
END_ULPS = 2


def emotion_cosine(a: EmotionVector | EmotionBody, b: EmotionVector | EmotionBody) -> float:
    """The cosine of two emotions' eight Plutchik axes; 0 when either has none of them."""
    x = [float(getattr(a, axis)) for axis in PLUTCHIK_AXES]
    y = [float(getattr(b, axis)) for axis in PLUTCHIK_AXES]
    norms = math.hypot(*x) * math.hypot(*y)
    if norms == 0.0:
        return 0.0
    return sum(p * q for p, q in zip(x, y, strict=True)) / norms


def widened(start: float, end: float) -> tuple[float, float]:
    """The range the index is asked for: ``[start, end]`` and :data:`END_ULPS` last-place units more."""
    return start - END_ULPS * math.ulp(start), end + END_ULPS * math.ulp(end)


def _passes(
    emotion: EmotionVector, fidelity: Fidelity, req: TimelineRequest, now: float, curve: FidelityCurve
) -> bool:
    if (
        req.min_fidelity is not None
        and current_fidelity(fidelity, emotion, now, curve=curve) < req.min_fidelity
    ):
        return False
    if req.emotion_filter is not None:
        return emotion_cosine(emotion, req.emotion_filter) > EMOTION_SIMILARITY
    return True


def _filtered(req: TimelineRequest) -> bool:
    return req.min_fidelity is not None or req.emotion_filter is not None


def _scan(req: TimelineRequest) -> int:
    if not _filtered(req):
        return req.limit + 1
    return min(MAX_TIMELINE_SCAN, max(req.limit + 1, _FILTERED_SCAN_FACTOR * req.limit))


async def _passing(
    records: MemoryReadStore, req: TimelineRequest, page: Sequence[str], now: float, curve: FidelityCurve
) -> list[str]:
    """The ids of ``page`` that pass the filters, read from their emotion and fidelity alone."""
    if not _filtered(req):
        return list(page)
    vitals = await records.memory_vitals(page)
    return [i for i, v in zip(page, vitals, strict=True) if v is not None and _passes(*v, req, now, curve)]


async def _matching(
    records: MemoryReadStore, req: TimelineRequest, now: float, curve: FidelityCurve
) -> tuple[list[MemoryRecord], bool, int]:
    """The records that pass, oldest first, at most ``limit``; whether more were left; the range's total."""
    scope = ReadScope(req.agent_id, req.project_id, req.channel, req.source_id)
    low, high = widened(req.range.start, req.range.end)
    found = await records.memory_ids_in_time(scope, low, high, _scan(req))
    kept: list[MemoryRecord] = []
    for at in range(0, len(found.ids), _PAGE):
        passing = await _passing(records, req, found.ids[at : at + _PAGE], now, curve)
        loaded = await records.memories_by_id(scope, passing)
        for record_id in passing:
            record = loaded.get(record_id)  # None: deleted since the index was read
            if record is None:
                continue
            if len(kept) == req.limit:
                return kept, True, found.total
            kept.append(record)
    return kept, len(found.ids) < found.total, found.total


def _buckets(
    kept: Sequence[MemoryRecord], req: TimelineRequest, now: float, curve: FidelityCurve
) -> list[TimelineBucket]:
    grouped: dict[float, list[MemoryRecord]] = {}
    for record in sorted(kept, key=lambda r: (r.timestamp, r.seq)):
        grouped.setdefault(bucket_start(record.timestamp, req.granularity), []).append(record)
    return [
        TimelineBucket(
            start=format_time(start),
            end=format_time(bucket_end(start, req.granularity)),
            memories=[recalled(record, now, curve) for record in members],
            count=len(members),
        )
        for start, members in grouped.items()
    ]


async def timeline(
    records: MemoryReadStore, req: TimelineRequest, now: float, curve: FidelityCurve
) -> TimelineResult:
    """The timeline ``req`` asks for, with every fidelity read at ``now`` on ``curve``."""
    kept, truncated, total = await _matching(records, req, now, curve)
    return TimelineResult(
        granularity=req.granularity,
        buckets=_buckets(kept, req, now, curve),
        count=len(kept),
        truncated=truncated,
        total_in_range=total,
    )
