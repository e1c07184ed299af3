"""An agent's whole associative layer, scope by scope, as the archive carries it, and its restoration.

:meth:`RedisAssociationArchive.association_graphs` reads what :func:`~.associations.queue_declaration`
wrote, in every scope the agent declared in: the entities (key → first declared name), the aliases, the
entity relations (each once, from its subject), and, from each record's ``rec`` set, its mentions and its
record relations (each once, from its subject). Everything is in its stored, folded form, and sorted, so
the same graph always reads the same. :meth:`RedisAssociationArchive.restore_association_graphs` writes
such graphs back under another (or the same) agent with the same commands a declaration queues, in one
durable transaction; writing a graph twice changes nothing (SADD, HSETNX), as declaring twice does not.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from cpersona.stores.association_values import AssociationGraph
from cpersona.stores.redis import durable
from cpersona.stores.redis.record_space import RecordRole

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence


__all__ = ["RedisAssociationArchive"]


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _parts(value: bytes | str) -> list[str]:
    parsed = json.loads(_text(value))
    return [str(p) for p in parsed] if isinstance(parsed, list) else []


def _member(*parts: str) -> str:
    # The spelling of associations._member: a restored member is the same string as a declared one.
    return json.dumps(list(parts), ensure_ascii=False, separators=(",", ":"))


class RedisAssociationArchive(RecordRole):
    """A whole graph read and written for an archive (a base of :class:`.associations.RedisAssociations`)."""

    async def _record_sets(self, agent_id: str) -> dict[str, list[list[str]]]:
        """Each record's ``rec`` set (its mentions and record relations), by the record's ref."""
        head = self.keys.assoc_record(agent_id, "")
        refs = [
            _text(key).removeprefix(head)
            async for key in self.client.scan_iter(match=self.keys.assoc_of_agent(agent_id), count=1000)
            if _text(key).startswith(head)
        ]
        pipe = self.client.pipeline(transaction=False)
        for ref in refs:
            pipe.smembers(self.keys.assoc_record(agent_id, ref))
        replies = await pipe.execute() if refs else []
        return {ref: [_parts(m) for m in members] for ref, members in zip(refs, replies, strict=True)}

    async def association_graphs(self, agent_id: str) -> list[AssociationGraph]:
        """Every scope's declarations of ``agent_id`` (scopes in order, each part sorted)."""
        a, k = agent_id, self.keys
        scopes = sorted(tuple(_parts(m)) for m in await self.client.smembers(k.assoc_scopes(a)))
        records = await self._record_sets(a)
        graphs = []
        for p, c in scopes:
            found = await self.client.hgetall(k.assoc_entities(a, p, c))
            entities = {_text(key): _text(name) for key, name in found.items()}
            aliases = await self.client.hgetall(k.assoc_aliases(a, p, c))
            pipe = self.client.pipeline(transaction=False)
            for key in sorted(entities):
                pipe.smembers(k.assoc_relations(a, p, c, key))
            replies = await pipe.execute() if entities else []
            relations = [
                (key, pred, other)
                for key, members in zip(sorted(entities), replies, strict=True)
                for direction, pred, other in (_parts(m) for m in members)
                if direction == "out"
            ]
            graphs.append(_graph(p, c, entities, aliases, relations, records))
        return graphs

    async def restore_association_graphs(self, agent_id: str, graphs: Sequence[AssociationGraph]) -> None:
        """Write ``graphs`` under ``agent_id`` as a declaration writes them, in one durable transaction."""
        if not graphs:
            return
        a, k = agent_id, self.keys
        pipe = durable.transaction(self.client)
        for g in graphs:
            p, c = g.project_id, g.channel
            pipe.sadd(k.assoc_scopes(a), _member(p, c))
            for key, name in g.entities:
                pipe.hsetnx(k.assoc_entities(a, p, c), key, name)
            for alias_key, entity, alias in g.aliases:
                pipe.hsetnx(k.assoc_aliases(a, p, c), _member(alias_key, entity), alias)
            for subject, pred, obj in g.relations:
                pipe.sadd(k.assoc_relations(a, p, c, subject), _member("out", pred, obj))
                pipe.sadd(k.assoc_relations(a, p, c, obj), _member("in", pred, subject))
            for entity, ref in g.mentions:
                pipe.sadd(k.assoc_mentions(a, p, c, entity), ref)
                pipe.sadd(k.assoc_record(a, ref), _member("m", p, c, entity))
            for subject, pred, obj in g.record_relations:
                pipe.sadd(k.assoc_record(a, subject), _member("r", p, c, "out", pred, obj))
                pipe.sadd(k.assoc_record(a, obj), _member("r", p, c, "in", pred, subject))
        await durable.commit(pipe, self.client)


def _alias(field: bytes, alias: bytes) -> tuple[str, str, str]:
    alias_key, entity = _parts(field)
    return alias_key, entity, _text(alias)


def _graph(
    p: str,
    c: str,
    entities: dict[str, str],
    aliases: Mapping[bytes, bytes],
    relations: list[tuple[str, str, str]],
    records: dict[str, list[list[str]]],
) -> AssociationGraph:
    mentions = [(m[3], ref) for ref, members in records.items() for m in members if m[:3] == ["m", p, c]]
    record_relations = [
        (ref, m[4], m[5]) for ref, members in records.items() for m in members if m[:4] == ["r", p, c, "out"]
    ]
    return AssociationGraph(
        project_id=p,
        channel=c,
        entities=tuple(sorted(entities.items())),
        aliases=tuple(sorted(_alias(field, alias) for field, alias in aliases.items())),
        relations=tuple(sorted(relations)),
        mentions=tuple(sorted(mentions)),
        record_relations=tuple(sorted(record_relations)),
    )
