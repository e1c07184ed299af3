"""The associative layer in Redis: entities, aliases, mentions and relations, scoped like records.

Every key of an agent's graph starts with :meth:`~cpersona.keys.Keys.assoc_agent` (so
``delete_agent_data`` finds them all with one SCAN pattern) and names the scope it was declared in
(project and channel). A read lists the agent's declared scopes and keeps those that
:meth:`~cpersona.model.scope.ReadScope.sees`, the one isolation rule records use, so a read never sees
an association declared where it could not see a record. The indexes:

- ``ent`` (per scope): entity key → name, and ``alias`` (per scope): ``[alias key, entity key]`` →
  alias; together every term of a scope, for substring matching;
- ``men`` (per scope and entity): the refs of the records mentioning the entity;
- ``rel`` (per scope and entity): its relations, both directions (``[out|in, predicate, other]``);
- ``rec`` (per record): its mentions and record relations with the scope each was declared in, for
  reading per record and for removing them when the record is deleted.

A declaration is one MULTI/EXEC of HSETNX and SADD, so it is atomic and a repeat changes nothing (the
first declared display form of a name stays). A retraction is one MULTI/EXEC too; removing a whole
entity first reads what hangs from it under WATCH and retries if that changed meanwhile.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import redis.exceptions

from cpersona.model.associations import Declaration, name_key
from cpersona.model.records import Scope, Source
from cpersona.model.scope import ReadScope
from cpersona.stores.association_values import DeclareCounts, EntityLinks, IndexedEntity, Link, RecordLinks
from cpersona.stores.redis import durable
from cpersona.stores.redis.association_archive import RedisAssociationArchive
from cpersona.stores.redis.connection import json_ops
from cpersona.stores.redis.refs import key_of_ref

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from cpersona.keys import Keys

__all__ = ["RedisAssociations", "queue_declaration"]

_COUNTED = ("entities", "aliases", "mentions", "relations")
_DELETE_PAGE = 500
_WATCH_TRIES = 5
_FLIP = {"out": "in", "in": "out"}


def _member(*parts: str) -> str:
    return json.dumps(list(parts), ensure_ascii=False, separators=(",", ":"))


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _parts(value: bytes | str) -> list[str]:
    parsed = json.loads(_text(value))
    return [str(p) for p in parsed] if isinstance(parsed, list) else []


def queue_declaration(
    pipe: Any, keys: Keys, scope: Scope, declared: Declaration, anchor_ref: str | None
) -> list[str]:
    """Queue a declaration's commands on ``pipe``; one label per command says what its reply counts."""
    a, p, c = scope.agent_id, scope.project_id, scope.channel
    labels: list[str] = []

    def run(label: str, command: str, key: str, *args: str) -> None:
        getattr(pipe, command)(key, *args)
        labels.append(label)

    run("", "sadd", keys.assoc_scopes(a), _member(p, c))
    for entity in (*declared.entities, *declared.relation_entities()):
        run("entities", "hsetnx", keys.assoc_entities(a, p, c), entity.key, entity.name)
        for alias_key, alias in entity.alias_keys().items():
            run("aliases", "hsetnx", keys.assoc_aliases(a, p, c), _member(alias_key, entity.key), alias)
    if anchor_ref is not None:
        for entity in declared.entities:
            run("mentions", "sadd", keys.assoc_mentions(a, p, c, entity.key), anchor_ref)
            run("", "sadd", keys.assoc_record(a, anchor_ref), _member("m", p, c, entity.key))
    for rel in declared.relations:
        pred = rel.predicate_key
        if rel.kind == "entity":
            s, o = name_key(rel.subject), name_key(rel.object)
            run("relations", "sadd", keys.assoc_relations(a, p, c, s), _member("out", pred, o))
            run("", "sadd", keys.assoc_relations(a, p, c, o), _member("in", pred, s))
        else:
            run(
                "relations",
                "sadd",
                keys.assoc_record(a, rel.subject),
                _member("r", p, c, "out", pred, rel.object),
            )
            run("", "sadd", keys.assoc_record(a, rel.object), _member("r", p, c, "in", pred, rel.subject))
    return labels


def _counts(labels: Sequence[str], replies: Sequence[Any]) -> DeclareCounts:
    totals = dict.fromkeys(_COUNTED, 0)
    for label, reply in zip(labels, replies, strict=True):
        if label:
            totals[label] += int(reply)
    return DeclareCounts(**totals)


class RedisAssociations(RedisAssociationArchive):
    """The association operations of :class:`~cpersona.stores.redis.store.RedisRecordStore` (a base);
    the archive's reading and writing of a whole graph are its own base's."""

    async def declare_associations(
        self, scope: Scope, declared: Declaration, *, anchor_ref: str | None, retract: bool
    ) -> DeclareCounts:
        if retract:
            return await self._retract(scope, declared, anchor_ref)
        # One transaction, acknowledged once on disk like every other write (stores.redis.durable).
        pipe = durable.transaction(self.client)
        labels = queue_declaration(pipe, self.keys, scope, declared, anchor_ref)
        return _counts(labels, await durable.commit(pipe, self.client))

    async def _retract(self, scope: Scope, declared: Declaration, anchor_ref: str | None) -> DeclareCounts:
        # A bare entity (no anchor, no alias named) is removed whole, with what hangs from it: read that
        # under WATCH so a declaration landing meanwhile makes this try again rather than leave halves.
        whole = [e for e in declared.entities if anchor_ref is None and not e.aliases]
        watched = [k for e in whole for k in self._entity_keys(scope, e.key)]
        for _ in range(_WATCH_TRIES):
            async with self.client.pipeline(transaction=True) as pipe:
                try:
                    if watched:
                        await pipe.watch(*watched)
                    hanging = [await self._hanging(pipe, scope, e.key) for e in whole]
                    pipe.multi()
                    labels = self._queue_retraction(pipe, scope, declared, anchor_ref)
                    for entity, (aliases, mentions, relations) in zip(whole, hanging, strict=True):
                        labels += self._queue_removal(pipe, scope, entity.key, aliases, mentions, relations)
                    return _counts(labels, await pipe.execute())
                except redis.exceptions.WatchError:
                    continue
        raise redis.exceptions.WatchError("the entities kept changing while they were retracted")

    def _entity_keys(self, scope: Scope, key: str) -> list[str]:
        a, p, c = scope.agent_id, scope.project_id, scope.channel
        return [
            self.keys.assoc_aliases(a, p, c),
            self.keys.assoc_mentions(a, p, c, key),
            self.keys.assoc_relations(a, p, c, key),
        ]

    async def _hanging(self, pipe: Any, scope: Scope, key: str) -> tuple[list[str], list[str], list[str]]:
        aliases_key, mentions_key, relations_key = self._entity_keys(scope, key)
        aliases = [_text(f) for f in await pipe.hkeys(aliases_key) if _parts(f)[1:] == [key]]
        mentions = sorted(_text(m) for m in await pipe.smembers(mentions_key))
        relations = sorted(_text(m) for m in await pipe.smembers(relations_key))
        return aliases, mentions, relations

    def _queue_retraction(
        self, pipe: Any, scope: Scope, declared: Declaration, anchor_ref: str | None
    ) -> list[str]:
        a, p, c, k = scope.agent_id, scope.project_id, scope.channel, self.keys
        labels: list[str] = []
        for entity in declared.entities:
            for alias_key in entity.alias_keys():
                pipe.hdel(k.assoc_aliases(a, p, c), _member(alias_key, entity.key))
                labels.append("aliases")
            if anchor_ref is not None:
                pipe.srem(k.assoc_mentions(a, p, c, entity.key), anchor_ref)
                pipe.srem(k.assoc_record(a, anchor_ref), _member("m", p, c, entity.key))
                labels += ["mentions", ""]
        for rel in declared.relations:
            pred = rel.predicate_key
            if rel.kind == "entity":
                s, o = name_key(rel.subject), name_key(rel.object)
                pipe.srem(k.assoc_relations(a, p, c, s), _member("out", pred, o))
                pipe.srem(k.assoc_relations(a, p, c, o), _member("in", pred, s))
            else:
                pipe.srem(k.assoc_record(a, rel.subject), _member("r", p, c, "out", pred, rel.object))
                pipe.srem(k.assoc_record(a, rel.object), _member("r", p, c, "in", pred, rel.subject))
            labels += ["relations", ""]
        return labels

    def _queue_removal(
        self, pipe: Any, scope: Scope, key: str, aliases: list[str], mentions: list[str], relations: list[str]
    ) -> list[str]:
        a, p, c, k = scope.agent_id, scope.project_id, scope.channel, self.keys
        pipe.hdel(k.assoc_entities(a, p, c), key)
        labels = ["entities"]
        for field in aliases:
            pipe.hdel(k.assoc_aliases(a, p, c), field)
            labels.append("aliases")
        for ref in mentions:
            pipe.srem(k.assoc_record(a, ref), _member("m", p, c, key))
            labels.append("mentions")
        for member in relations:
            direction, pred, other = _parts(member)
            pipe.srem(k.assoc_relations(a, p, c, other), _member(_FLIP[direction], pred, key))
            labels.append("relations")
        pipe.delete(k.assoc_mentions(a, p, c, key), k.assoc_relations(a, p, c, key))
        labels.append("")
        return labels

    # ------------------------------------------------------------------ reads

    async def _visible_scopes(self, scope: ReadScope) -> list[tuple[str, str]]:
        # Entities carry no source: the graph is read under the scope's agent, project and channel.
        graph = ReadScope(scope.agent_id, scope.project_id, scope.channel)
        found = await self.client.smembers(self.keys.assoc_scopes(scope.agent_id))
        pairs = sorted((p, c) for p, c in (_parts(m) for m in found))
        return [(p, c) for p, c in pairs if graph.sees(Scope(scope.agent_id, p, c))]

    async def entity_index(self, scope: ReadScope) -> list[IndexedEntity]:
        a = scope.agent_id
        visible = await self._visible_scopes(scope)
        pipe = self.client.pipeline(transaction=False)
        for p, c in visible:
            pipe.hgetall(self.keys.assoc_entities(a, p, c))
            pipe.hgetall(self.keys.assoc_aliases(a, p, c))
        replies = await pipe.execute()
        names: dict[str, str] = {}
        aliases: dict[str, dict[str, str]] = {}
        for found, found_aliases in zip(replies[::2], replies[1::2], strict=True):
            for key, name in found.items():
                names.setdefault(_text(key), _text(name))
            for field, alias in found_aliases.items():
                alias_key, entity = _parts(field)
                aliases.setdefault(entity, {}).setdefault(alias_key, _text(alias))
        return [
            IndexedEntity(key, names[key], tuple(sorted(aliases.get(key, {}).items())))
            for key in sorted(names)
        ]

    async def entity_links(self, scope: ReadScope, entities: Sequence[str]) -> dict[str, EntityLinks]:
        a = scope.agent_id
        visible = await self._visible_scopes(scope)
        pipe = self.client.pipeline(transaction=False)
        for key in entities:
            for p, c in visible:
                pipe.smembers(self.keys.assoc_mentions(a, p, c, key))
                pipe.smembers(self.keys.assoc_relations(a, p, c, key))
        replies = iter(await pipe.execute())
        out: dict[str, EntityLinks] = {}
        for key in entities:
            mentions: set[str] = set()
            links: set[Link] = set()
            for _ in visible:
                mentions.update(_text(m) for m in next(replies))
                links.update(Link(*_parts(m)) for m in next(replies))  # type: ignore[arg-type]
            out[key] = EntityLinks(tuple(sorted(mentions)), tuple(sorted(links)))
        return out

    async def record_links(self, scope: ReadScope, refs: Sequence[str]) -> dict[str, RecordLinks]:
        visible = set(await self._visible_scopes(scope))
        pipe = self.client.pipeline(transaction=False)
        for ref in refs:
            pipe.smembers(self.keys.assoc_record(scope.agent_id, ref))
        replies = await pipe.execute()
        out: dict[str, RecordLinks] = {}
        for ref, members in zip(refs, replies, strict=True):
            entities: set[str] = set()
            links: set[Link] = set()
            for parts in (_parts(m) for m in members):
                if (parts[1], parts[2]) not in visible:
                    continue
                if parts[0] == "m":
                    entities.add(parts[3])
                else:
                    links.add(Link(parts[3], parts[4], parts[5]))  # type: ignore[arg-type]
            out[ref] = RecordLinks(tuple(sorted(entities)), tuple(sorted(links)))
        return out

    async def visible_refs(self, scope: ReadScope, refs: Sequence[str]) -> list[str]:
        pipe = self.client.pipeline(transaction=False)
        for ref in refs:
            json_ops(pipe).get(
                key_of_ref(self.keys, ref), "$.agent_id", "$.project_id", "$.channel", "$.source"
            )
        replies = await pipe.execute()
        return [ref for ref, doc in zip(refs, replies, strict=True) if doc and _sees(scope, ref, doc)]

    # ------------------------------------------------------------------ deletes

    async def forget_record_associations(self, agent_id: str, ref: str) -> None:
        key = self.keys.assoc_record(agent_id, ref)
        for _ in range(_WATCH_TRIES):
            async with self.client.pipeline(transaction=True) as pipe:
                try:
                    await pipe.watch(key)
                    members = [_parts(m) for m in await pipe.smembers(key)]
                    pipe.multi()
                    _queue_forget(pipe, self.keys, agent_id, ref, members)
                    pipe.delete(key)
                    await pipe.execute()
                    return
                except redis.exceptions.WatchError:
                    continue
        raise redis.exceptions.WatchError(f"the associations of {ref} kept changing while it was deleted")

    async def delete_agent_associations(self, agent_id: str) -> int:
        deleted = 0
        batch: list[bytes] = []
        async for key in self.client.scan_iter(match=self.keys.assoc_of_agent(agent_id), count=1000):
            batch.append(key)
            if len(batch) >= _DELETE_PAGE:
                deleted += await self.client.delete(*batch)
                batch = []
        if batch:
            deleted += await self.client.delete(*batch)
        return deleted


def _queue_forget(pipe: Any, keys: Keys, agent_id: str, ref: str, members: Iterable[list[str]]) -> None:
    for parts in members:
        kind, p, c = parts[0], parts[1], parts[2]
        if kind == "m":
            pipe.srem(keys.assoc_mentions(agent_id, p, c, parts[3]), ref)
        else:
            direction, pred, other = parts[3], parts[4], parts[5]
            pipe.srem(keys.assoc_record(agent_id, other), _member("r", p, c, _FLIP[direction], pred, ref))


def _first(doc: dict[str, Any], path: str) -> Any:
    found = doc.get(path) or []
    return found[0] if found else None


def _sees(scope: ReadScope, ref: str, doc: dict[str, Any]) -> bool:
    agent, project, channel = (_first(doc, f"$.{f}") for f in ("agent_id", "project_id", "channel"))
    if not isinstance(agent, str):
        return False
    source = _first(doc, "$.source") if ref.startswith("mem:") else None
    record_source = (
        Source(str(source.get("type", "")), str(source.get("id", "")), str(source.get("name", "")))
        if isinstance(source, dict)
        else None
    )
    return scope.sees(Scope(agent, project or "", channel or ""), record_source)
