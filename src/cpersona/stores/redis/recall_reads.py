"""The Redis reads a recall makes outside its arms: hydrating the rows the arms found, the agent's profile
and calibrated gate, and the two newest-record times scoring may need.

Each reply is parsed here, once, into the typed values the recall works with, so nothing above this module
reads a Redis reply by position or a stored document by key.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson

from cpersona.model.records import Source
from cpersona.model.scope import ReadScope
from cpersona.stores.redis.connection import command, json_ops, redis_errors
from cpersona.stores.redis.scope import scope_query

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from cpersona.keys import Keys
    from cpersona.stores.redis.connection import RedisClient

__all__ = [
    "HydratedRecord",
    "StoredProfile",
    "calibrated_gate",
    "hydrate",
    "newest_episode_time",
    "newest_memory_time",
    "profile",
]

_HYDRATED: dict[str, tuple[str, ...]] = {
    "mem:": ("content", "source", "msg_id", "ts", "created_at", "embedded"),
    "ep:": ("summary", "ts", "created_at", "embedded"),
}
"""The record fields a recall reads, by ref prefix: text, source and message id for the row, times for
scoring, ``embedded`` for the single-arm rule."""


class HydratedRecord(NamedTuple):
    """The fields of one memory or episode that a recall reads.

    ``text`` is the memory's content or the episode's summary (``None`` when the stored record has no such
    field); the ``source_*`` fields are a memory's source (an episode has none); ``ts`` is ``None`` when
    the record has no time. A named tuple: a recall hydrates every row its arms found, and a frozen
    dataclass per row measurably slowed it.
    """

    ref: str
    text: str | None
    source_type: str
    source_id: str
    source_name: str
    msg_id: str
    ts: float | None
    created_at: float
    embedded: bool

    @property
    def is_memory(self) -> bool:
        return self.ref.startswith("mem:")

    @property
    def source(self) -> Source | None:
        """A memory's source; ``None`` for an episode."""
        return Source(self.source_type, self.source_id, self.source_name) if self.is_memory else None

    def full_text(self) -> str:
        """The stored text, which a returned row must have."""
        if self.text is None:
            raise KeyError("content" if self.is_memory else "summary")
        return self.text


@dataclasses.dataclass(frozen=True, slots=True)
class StoredProfile:
    """The agent's profile, as a recall renders it."""

    content: str


async def hydrate(redis: RedisClient, keys: Keys, refs: Iterable[str]) -> dict[str, HydratedRecord]:
    """The records behind ``refs`` (deleted ones left out), reading only the fields :data:`_HYDRATED`
    names: a stored record carries far more (emotion, fidelity, meta, stems...), and reading whole records
    cost most of the hydration at 100k memories."""
    unique = list(dict.fromkeys(refs))
    docs: dict[str, HydratedRecord] = {}
    for prefix, key_of in (("mem:", keys.memory), ("ep:", keys.episode)):
        wanted = [ref for ref in unique if ref.startswith(prefix)]
        if wanted:
            found = await _read_fields(redis, wanted, [key_of(r[len(prefix) :]) for r in wanted], prefix)
            docs.update((ref, _record(ref, doc)) for ref, doc in found.items())
    return docs


async def _read_fields(
    redis: RedisClient, refs: Sequence[str], keys: Sequence[str], prefix: str
) -> dict[str, Mapping[str, Any]]:
    fields = _HYDRATED[prefix]
    async with redis_errors():
        replies = await json_ops(redis).mget(keys, _union_path(fields))
    docs: dict[str, Mapping[str, Any]] = {}
    partial: list[int] = []
    for i, (ref, values) in enumerate(zip(refs, replies, strict=True)):
        if values is None:
            continue  # deleted since the arm found it
        # A union path returns the fields it found, in the asked order, and skips absent ones: a record
        # missing one (written by an older engine) is read whole instead.
        if len(values) == len(fields):
            docs[ref] = dict(zip(fields, values, strict=True))
        else:
            partial.append(i)
    if partial:
        async with redis_errors():
            whole = await json_ops(redis).mget([keys[i] for i in partial], "$")
        docs.update((refs[i], doc[0]) for i, doc in zip(partial, whole, strict=True) if doc)
    return docs


def _union_path(fields: Sequence[str]) -> str:
    return "$[" + ",".join(f"'{name}'" for name in fields) + "]"


def _record(ref: str, doc: Mapping[str, Any]) -> HydratedRecord:
    memory = ref.startswith("mem:")
    field = "content" if memory else "summary"
    src = (doc.get("source") or {}) if memory else {}
    return HydratedRecord(
        ref,
        str(doc[field]) if field in doc else None,
        src.get("type", "Agent"),
        src.get("id", ""),
        src.get("name", ""),
        str(doc.get("msg_id", "")),
        float(doc["ts"]) if "ts" in doc else None,
        float(doc.get("created_at", 0.0)),
        bool(doc.get("embedded", False)),
    )


async def profile(redis: RedisClient, keys: Keys, agent_id: str) -> StoredProfile | None:
    """The agent's profile, or ``None`` when it has none."""
    async with redis_errors():
        doc = await json_ops(redis).get(keys.profile(agent_id))
    return StoredProfile(str(doc["content"])) if doc else None


async def calibrated_gate(redis: RedisClient, keys: Keys, agent_id: str) -> float | None:
    """The agent's calibrated gate threshold, when a calibration selected one."""
    async with redis_errors():
        doc = await json_ops(redis).get(keys.calibration(agent_id))
    if not doc or not doc.get("selected"):
        return None
    value = doc.get("threshold")
    return float(value) if isinstance(value, int | float) else None


def _unsourced(scope: ReadScope) -> str:
    return scope_query(ReadScope(scope.agent_id, scope.project_id, scope.channel), with_source=False)


async def newest_episode_time(redis: RedisClient, keys: Keys, scope: ReadScope) -> float | None:
    """When the newest episode of the scope (source ignored) was created, if it has one."""
    async with redis_errors():
        reply = await command(
            redis, "FT.SEARCH", keys.episode_index, _unsourced(scope), "SORTBY", "seq", "DESC",
            "LIMIT", 0, 1, "DIALECT", 2,
        )  # fmt: skip
    if int(reply[0]) == 0 or len(reply) < 3:
        return None
    pairs = _field_pairs(reply[2])
    raw = pairs.get(b"$", pairs.get("$"))
    return None if raw is None else float(dict(orjson.loads(raw)).get("created_at", 0.0))


async def newest_memory_time(redis: RedisClient, keys: Keys, scope: ReadScope) -> float | None:
    """The record time of the newest memory of the scope (source ignored), if it has one."""
    async with redis_errors():
        reply = await command(
            redis, "FT.SEARCH", keys.memory_index, _unsourced(scope), "SORTBY", "ts", "DESC",
            "LIMIT", 0, 1, "RETURN", 1, "ts", "DIALECT", 2,
        )  # fmt: skip
    if int(reply[0]) == 0 or len(reply) < 3:
        return None
    value = _field_pairs(reply[2]).get(b"ts")
    return None if value is None else float(value)


def _field_pairs(fields: Sequence[Any]) -> dict[Any, Any]:
    return dict(zip(fields[::2], fields[1::2], strict=True))
