"""The forensic raw query as a method of :class:`~cpersona.Engine` (a base class of it, so the facade
stays one screenful per concept): its typed keywords become one request body, validated by
:class:`~cpersona.RawQueryRequest` and run by :mod:`cpersona.operations.raw_query`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cpersona.model.fields import given
from cpersona.operations.raw_query import raw_query

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from cpersona.engine.lifecycle import Lifecycle
    from cpersona.model.raw_query import RawQueryResult, RawTemporalRange
    from cpersona.model.records import SecrecyLevel

__all__ = ["RawQueryMethods"]


class RawQueryMethods:
    """Raw journal entries read back verbatim (``POST /v1/recall/raw``)."""

    _life: Lifecycle

    async def raw_query(
        self,
        query: str | None = None,
        *,
        agent_id: str,
        session_id: str | None = None,
        temporal: Mapping[str, Any] | RawTemporalRange | None = None,
        limit: int | None = None,
        include_private_scratch: bool = False,
        include_sealed: bool = False,
        secrecy_levels: Sequence[SecrecyLevel] | None = None,
        project_id: str | None = None,
        channel: str | None = None,
    ) -> RawQueryResult:
        """The agent's raw journal entries holding every word of ``query`` (all entries without one),
        oldest first: ``limit`` of them (default 10, at most 1000) and ``total_candidates``. ``temporal``
        is ``{"start": ..., "end": ...}``, both included. ``private_scratch`` and ``sealed`` entries only
        when asked; ``secrecy_levels`` defaults to public and sensitive."""
        body = given(
            query=query,
            agent_id=agent_id,
            session_id=session_id,
            temporal=temporal,
            limit=limit,
            include_private_scratch=include_private_scratch,
            include_sealed=include_sealed,
            secrecy_levels=None if secrecy_levels is None else list(secrecy_levels),
            project_id=project_id,
            channel=channel,
        )
        life = self._life
        return await raw_query(life.backends.records, life.settings, body)
