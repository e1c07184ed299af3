"""Whether one agent owns every document of a search index, so that a BM25 search may leave out its scope
filter.

The lexical arms repeat the scope filter inside every term's alternative (see
:func:`~.lexical.ranked_query` for why), and the server pays for it at every posting of every term: at
100k memories of one agent the memory keyword search took 2.5 times as long with the filter as without
(13.3 against 5.2 ms, mean of 200 LoCoMo questions), for the same keys and the same scores. When the
store holds one agent, the filter admits every document, so it is left out.

Which agents an index holds is read with ``FT.TAGVALS`` and kept for a couple of seconds; that can be
stale, and a document of another agent may be written between the read and the search. So an unfiltered
search returns each hit's agent tag, and unless every hit is the caller's, its answer is thrown away and
the filtered search runs: isolation never rests on the cached read. If every hit of the unfiltered top
``n`` is in scope, they are the scope's top ``n`` too, since a scoped document that outranked one of
them would be among them. The scores are the same either way: the filter is weighted zero.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, cast

from cpersona.stores.redis.scope import scope_query, tag

if TYPE_CHECKING:
    from collections.abc import Callable

    from cpersona.model.scope import ReadScope
    from cpersona.stores.redis.connection import RedisClient

__all__ = ["SOLE_AGENT_TTL_SECS", "AGENT_FIELD", "SoleAgents", "agent_only"]

SOLE_AGENT_TTL_SECS = 2.0
"""How long an index's agents, once read, are trusted as a hint (never as a filter)."""

AGENT_FIELD = "agent"
"""The index attribute holding a document's agent tag (``$.tag_agent``), returned with each hit."""


def agent_only(scope: ReadScope, *, with_source: bool) -> bool:
    """Whether the scope's filter is its agent alone (no project, channel or source restriction)."""
    return scope_query(scope, with_source=with_source) == f"@{AGENT_FIELD}:{{{tag(scope.agent_id)}}}"


class SoleAgents:
    """The agent tag that owns every document of an index, per index, as last read (see the module)."""

    def __init__(
        self,
        client: RedisClient,
        *,
        ttl: float = SOLE_AGENT_TTL_SECS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._ttl = ttl
        self._clock = clock
        self._read: dict[str, tuple[float, str | None]] = {}

    async def of(self, index: str) -> str | None:
        """The one agent tag of ``index``, or ``None`` when it holds none or several."""
        now = self._clock()
        cached = self._read.get(index)
        if cached is not None and now < cached[0]:
            return cached[1]
        values = await cast("Any", self._client).execute_command("FT.TAGVALS", index, AGENT_FIELD)
        tags = [v.decode() if isinstance(v, bytes) else str(v) for v in values]
        sole = tags[0] if len(tags) == 1 else None
        self._read[index] = (now + self._ttl, sole)
        return sole
