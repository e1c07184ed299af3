"""recall.timeline and recall.graph as methods of :class:`~cpersona.Engine` (a base class of it, so the
facade stays one screenful per concept): typed keywords become one request body, validated by
:class:`~cpersona.TimelineRequest` or :class:`~cpersona.GraphRequest`, and run by
:mod:`cpersona.operations.timeline` or :mod:`cpersona.operations.graph`. Both only read."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from cpersona.model.fields import given, validate
from cpersona.model.timeline_request import TimelineRequest
from cpersona.operations.timeline import timeline

if TYPE_CHECKING:
    from collections.abc import Mapping

    from cpersona.engine.lifecycle import Lifecycle
    from cpersona.model.memory_parts import EmotionBody
    from cpersona.model.timeline_buckets import Granularity
    from cpersona.model.timeline_request import TemporalRange
    from cpersona.model.timeline_response import TimelineResult

__all__ = ["TimelineMethods"]


class TimelineMethods:
    """The memories of a time range in UTC buckets, and the subgraph around a memory."""

    _life: Lifecycle

    async def timeline(
        self,
        agent_id: str,
        *,
        range: Mapping[str, Any] | TemporalRange,
        granularity: Granularity | None = None,
        min_fidelity: float | None = None,
        emotion_filter: Mapping[str, float] | EmotionBody | None = None,
        limit: int | None = None,
        project_id: str | None = None,
        channel: str | None = None,
        source_id: str | None = None,
    ) -> TimelineResult:
        """The memories whose own ``timestamp`` lies in ``range`` (``{"start", "end"}``, both included),
        oldest first, in buckets of ``granularity`` (``"hour"`` by default; UTC edges, ISO weeks from
        Monday, calendar months). At most ``limit`` records (default 1000, at most 10000);
        ``truncated`` says when more matched."""
        body = given(
            agent_id=agent_id, range=range, granularity=granularity, min_fidelity=min_fidelity,
            emotion_filter=emotion_filter, limit=limit, project_id=project_id, channel=channel,
            source_id=source_id,
        )  # fmt: skip
        life = self._life
        req = validate(TimelineRequest, body, life.settings)
        return await timeline(life.backends.records, req, time.time())
