"""The two lexical arms of recall on RediSearch BM25: memory keyword and episode full text.

The terms, clauses and query shapes are :mod:`.lexical`'s; this module composes them for a scope and a
period, sends them through :mod:`.search`, and orders the rows. Scores are the server's ``BM25STD``
numbers, unchanged.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Literal

from cpersona.model.candidates import ArmResult
from cpersona.stores.redis import search
from cpersona.stores.redis.lexical import SCORER, clauses, fts_terms, period_clause, ranked_query, unscored
from cpersona.stores.redis.scope import scope_query, tag
from cpersona.stores.redis.sole_agent import AGENT_FIELD, agent_only

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cpersona.keys import Keys
    from cpersona.model.scope import ReadScope
    from cpersona.stores.redis.connection import RedisClient
    from cpersona.stores.redis.replies import Hit
    from cpersona.stores.redis.sole_agent import SoleAgents

__all__ = ["LexicalIndexes", "episode_fts", "memory_keyword"]

RefKind = Literal["mem", "ep"]
Rows = list[tuple[str, float | None]]


@dataclasses.dataclass(frozen=True, slots=True)
class LexicalIndexes:
    """What both lexical arms search: one store's client and keys, and which agents its indexes hold."""

    client: RedisClient
    keys: Keys
    sole: SoleAgents | None = None
    """``None``: every ranked search carries the scope filter (see :mod:`.sole_agent`)."""


async def memory_keyword(
    indexes: LexicalIndexes,
    scope: ReadScope,
    query: str,
    fetch: int,
    *,
    extra_terms: Sequence[str] = (),
    period: tuple[float, float] | None = None,
) -> ArmResult:
    """The memory keyword arm: BM25 over memories in ``scope``, at most ``fetch`` rows, best first.

    A blank ``query`` lists the newest memories (by insertion ``seq``; inside a ``period`` by record
    time, then ``seq``). When the query has no usable term, or its terms match nothing, the whole-query
    fallback lists the newest memories that contain the whole query (or one of ``extra_terms``) as a
    phrase, in the same order as the blank listing. Listed rows have ``raw=None``. ``period`` keeps rows
    with ``start <= ts < end``, in the fallback too.
    """
    began = time.perf_counter()
    rows = await _memory_rows(indexes, scope, query, fetch, extra_terms, period)
    return ArmResult.ranked("memory_keyword", rows, (time.perf_counter() - began) * 1000)


async def episode_fts(
    indexes: LexicalIndexes,
    scope: ReadScope,
    query: str,
    fetch: int,
    *,
    extra_terms: Sequence[str] = (),
    period: tuple[float, float] | None = None,
) -> ArmResult:
    """The episode full-text arm: BM25 over episode summaries and keywords in ``scope``, best first.

    No fallback: a query without a usable term finds nothing. A blank query lists the newest episodes
    (as :func:`memory_keyword` does). Episodes carry no source, so a ``source_id`` filter without a
    ``channel`` excludes them all (CPersona's rule).
    """
    began = time.perf_counter()
    rows: Rows = []
    if not (scope.source_id and not scope.channel):
        rows = await _episode_rows(indexes, scope, query, fetch, extra_terms, period)
    return ArmResult.ranked("episode_fts", rows, (time.perf_counter() - began) * 1000)


async def _memory_rows(
    indexes: LexicalIndexes,
    scope: ReadScope,
    query: str,
    fetch: int,
    extra_terms: Sequence[str],
    period: tuple[float, float] | None,
) -> Rows:
    if fetch <= 0 or _empty(period):
        return []
    client, keys = indexes.client, indexes.keys
    index, prefix = keys.memory_index, keys.memory_prefix
    plain = scope_query(scope, with_source=True) + period_clause(period)
    if not query.strip():
        return await _newest(client, index, prefix, "mem", plain, fetch, by_time=period is not None)
    terms = clauses(fts_terms(query, extra_terms), "content", ranked=True)
    if terms:
        search = _Ranked(client, index, prefix, "mem", fetch)
        rows = await search.in_scope(scope, terms, period, indexes.sole, with_source=True)
        if rows:
            return rows
    # CPersona's LIKE '%query%' fallback, newest first: the whole query as one phrase, or an extra term.
    wanted = clauses([query, *(t for t in extra_terms if len(t.strip()) >= 3)], "content")
    if not wanted:
        return []
    matching = f"{plain} ({' | '.join(wanted)})"
    # Inside a period the listing goes by record time, as the blank listing there does: a cue is about
    # when things happened, and a record filed late under an old time belongs with its period.
    return await _newest(client, index, prefix, "mem", matching, fetch, by_time=period is not None)


async def _episode_rows(
    indexes: LexicalIndexes,
    scope: ReadScope,
    query: str,
    fetch: int,
    extra_terms: Sequence[str],
    period: tuple[float, float] | None,
) -> Rows:
    if fetch <= 0 or _empty(period):
        return []
    client, keys = indexes.client, indexes.keys
    index, prefix = keys.episode_index, keys.episode_prefix
    if not query.strip():
        plain = scope_query(scope, with_source=False) + period_clause(period)
        return await _newest(client, index, prefix, "ep", plain, fetch, by_time=period is not None)
    terms = clauses(fts_terms(query, extra_terms), "text", ranked=True)
    if not terms:
        return []
    search = _Ranked(client, index, prefix, "ep", fetch)
    return await search.in_scope(scope, terms, period, indexes.sole, with_source=False)


def _empty(period: tuple[float, float] | None) -> bool:
    return period is not None and not period[0] < period[1]


@dataclasses.dataclass(frozen=True, slots=True)
class _Ranked:
    """One arm's BM25 search of one index: at most ``fetch`` rows of ``kind``, best first."""

    client: RedisClient
    index: str
    prefix: str
    kind: RefKind
    fetch: int

    async def in_scope(
        self,
        scope: ReadScope,
        terms: Sequence[str],
        period: tuple[float, float] | None,
        sole: SoleAgents | None,
        *,
        with_source: bool,
    ) -> Rows:
        """The rows of ``terms`` in ``scope`` (and ``period``): without the scope filter when the index
        holds the scope's agent alone and every hit proves to be its own, else with it."""
        if sole is not None and period is None and agent_only(scope, with_source=with_source):
            mine = tag(scope.agent_id)
            if await sole.of(self.index) == mine:
                hits = await self._hits(" | ".join(terms), (AGENT_FIELD, "seq"))
                if all(hit.fields.get(AGENT_FIELD) == mine for hit in hits):
                    return self._rows(hits)
        filters = unscored(scope_query(scope, with_source=with_source)) + period_clause(period)
        return self._rows(await self._hits(ranked_query(filters, terms), ("seq",)))

    async def _hits(self, query: str, fields: Sequence[str]) -> list[Hit]:
        return await search.ranked(self.client, self.index, query, self.fetch, SCORER, fields=fields)

    def _rows(self, hits: Sequence[Hit]) -> Rows:
        kind, prefix = self.kind, self.prefix
        scored = [(hit.score or 0.0, hit.integer("seq") or 0, _ref(hit.key, prefix, kind)) for hit in hits]
        # The server ranks by score; rows that tie are put newest first (higher insertion seq) so the
        # order does not depend on the index's internal document ids. Which tied rows make the LIMIT cut
        # is still the server's choice.
        scored.sort(key=lambda hit: (-hit[0], -hit[1]))
        return [(ref, score) for score, _, ref in scored]


async def _newest(
    client: RedisClient, index: str, prefix: str, kind: RefKind, query: str, fetch: int, *, by_time: bool
) -> Rows:
    if by_time:
        found = await search.newest_by_time(client, index, query, fetch)
    else:
        found = await search.newest_keys(client, index, query, fetch)
    return [(_ref(key, prefix, kind), None) for key in found]


def _ref(key: str, prefix: str, kind: RefKind) -> str:
    return f"{kind}:{key.removeprefix(prefix)}"
