"""The Redis adapter of :class:`~cpersona.stores.recall_reads.RecallReads`: the keyword arms over the
search indexes (:mod:`.keyword`), the statistics and newest times of a scope (:mod:`.search`), and the
fields a recall shows of each record (:mod:`.hydrate`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cpersona.model.scope import ReadScope
from cpersona.stores.record_values import SeqAt, StoredProfile
from cpersona.stores.redis import keyword, search
from cpersona.stores.redis.connection import json_ops
from cpersona.stores.redis.hydrate import hydrate
from cpersona.stores.redis.lexical import terms_held
from cpersona.stores.redis.record_space import RecordRole
from cpersona.stores.redis.scope import scope_query
from cpersona.stores.redis.sole_agent import SoleAgents

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from cpersona.model.candidates import ArmResult
    from cpersona.stores.record_values import HydratedRecord, SearchedKind
    from cpersona.stores.redis.record_space import RecordSpace

__all__ = ["RedisRecallReads", "unsourced"]


class RedisRecallReads(RecordRole):
    """The recall arms' searches and reads, on one record space."""

    def __init__(self, space: RecordSpace) -> None:
        super().__init__(space)
        self._lexical = keyword.LexicalIndexes(space.client, space.keys, SoleAgents(space.client))

    async def memory_keyword(
        self,
        scope: ReadScope,
        query: str,
        fetch: int,
        *,
        extra_terms: Sequence[str] = (),
        period: tuple[float, float] | None = None,
    ) -> ArmResult:
        return await keyword.memory_keyword(
            self._lexical, scope, query, fetch, extra_terms=extra_terms, period=period
        )

    async def episode_fts(
        self,
        scope: ReadScope,
        query: str,
        fetch: int,
        *,
        extra_terms: Sequence[str] = (),
        period: tuple[float, float] | None = None,
    ) -> ArmResult:
        return await keyword.episode_fts(
            self._lexical, scope, query, fetch, extra_terms=extra_terms, period=period
        )

    def terms_held(self, query: str, text: str) -> tuple[int, int]:
        return terms_held(query, text)

    async def seq_at(self, kind: SearchedKind, scope: ReadScope, rank: int) -> SeqAt:
        index = self.keys.memory_index if kind == "memory" else self.keys.episode_index
        total, seq = await search.seq_at(self.client, index, unsourced(scope), rank)
        return SeqAt(total, seq)

    async def time_span(self, scope: ReadScope) -> tuple[float, float] | None:
        return await search.time_span(
            self.client, self.keys.memory_index, scope_query(scope, with_source=True)
        )

    async def memory_sources(self, ids: Sequence[str]) -> list[str | None]:
        names = [self.keys.memory(record_id) for record_id in ids]
        found = await json_ops(self.client).mget(names, "$.source.id")
        return [values[0] if values and isinstance(values[0], str) else None for values in found]

    async def hydrate(self, refs: Iterable[str]) -> dict[str, HydratedRecord]:
        return await hydrate(self.client, self.keys, refs)

    async def recall_profile(self, agent_id: str) -> StoredProfile | None:
        # Read as plain JSON, not through the model: a recall renders the content and nothing else.
        doc = await json_ops(self.client).get(self.keys.profile(agent_id))
        # A profile document without text (written by hand) is no profile, rather than a failed recall.
        content = doc.get("content") if isinstance(doc, dict) else None
        return StoredProfile(content) if isinstance(content, str) else None

    async def calibrated_gate(self, agent_id: str) -> float | None:
        doc = await json_ops(self.client).get(self.keys.calibration(agent_id))
        if not doc or not doc.get("selected"):
            return None
        value = doc.get("threshold")
        return float(value) if isinstance(value, int | float) else None

    async def newest_episode_time(self, scope: ReadScope) -> float | None:
        docs = await search.documents(self.client, self.keys.episode_index, unsourced(scope), "seq", 1)
        return float(docs[0].get("created_at", 0.0)) if docs else None

    async def newest_memory_time(self, scope: ReadScope) -> float | None:
        # The sortable field as the search engine prints it (12 significant digits), as the recall has
        # always read it: the anchor of the age prior, where a centisecond moves nothing.
        value = await search.newest_field(self.client, self.keys.memory_index, unsourced(scope), "ts", "ts")
        return None if value is None else float(value)


def unsourced(scope: ReadScope) -> str:
    """The query of ``scope`` with its source filter left out (a count or a newest time of the scope)."""
    return scope_query(ReadScope(scope.agent_id, scope.project_id, scope.channel), with_source=False)
