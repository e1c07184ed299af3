"""recall.timeline and recall.graph as methods of :class:`~cpersona.Engine` (a base class of it, so the
facade stays one screenful per concept): typed keywords become one request body, validated by
:class:`~cpersona.TimelineRequest` or :class:`~cpersona.GraphRequest`, and run by
:mod:`cpersona.operations.timeline` or :mod:`cpersona.operations.graph`. Both only read."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from cpersona.model.fields import given, validate
from cpersona.model.graph_request import GraphRequest
from cpersona.model.timeline_request import TimelineRequest
from cpersona.operations.graph import graph
from cpersona.operations.timeline import timeline

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from cpersona.engine.lifecycle import Lifecycle
    from cpersona.model.graph_response import GraphResult
    from cpersona.model.memory_parts import EmotionBody
    from cpersona.model.records import AssociationType
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
            agent_id=agent_id,
            range=range,
            granularity=granularity,
            min_fidelity=min_fidelity,
            emotion_filter=emotion_filter,
            limit=limit,
            project_id=project_id,
            channel=channel,
            source_id=source_id,
        )
        life = self._life
        req = validate(TimelineRequest, body, life.settings)
        return await timeline(life.backends.records, req, time.time())

    async def graph(
        self,
        agent_id: str,
        *,
        center_id: str | None = None,
        depth: int | None = None,
        edge_types: Sequence[AssociationType] | None = None,
        include_meta: bool = False,
        limit_nodes: int | None = None,
        project_id: str | None = None,
        channel: str | None = None,
        source_id: str | None = None,
    ) -> GraphResult:
        """The memories reached from ``center_id`` (``mem:<uuid>`` or the bare UUID; default: the scope's
        newest memories) over outbound associations and declared record relations, breadth-first:
        ``depth`` edges (default 2, at most 8), ``limit_nodes`` nodes (default 10, at most 1000), only
        ``edge_types`` if given. ``include_meta`` adds each node's meta-memory and its meta edges. An
        unknown ``center_id`` raises :class:`~cpersona.RecordNotFound`."""
        body = given(
            agent_id=agent_id,
            center_id=center_id,
            depth=depth,
            edge_types=edge_types,
            include_meta=include_meta,
            limit_nodes=limit_nodes,
            project_id=project_id,
            channel=channel,
            source_id=source_id,
        )
        life = self._life
        req = validate(GraphRequest, body, life.settings)
        return await graph(life.backends.records, req, time.time())
