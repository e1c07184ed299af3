"""The one reading of search replies: redis-py's parsed results become typed values here, once.

redis-py parses an ``FT.SEARCH`` reply into a :class:`~redis.commands.search.result.Result` (documents
whose fields are attributes, values decoded to text) and an ``FT.AGGREGATE`` reply into rows of flat
name/value lists. Nothing past this module reads either shape: every search call of the adapter returns
a :class:`Page` of :class:`Hit` values, or plain keys.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import orjson
from redis.commands.search.result import Result

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from redis.commands.search.aggregation import AggregateResult

__all__ = ["Hit", "Page", "aggregate_keys", "page", "raw_page"]

# redis-py's Document keeps these beside the returned fields; they are not fields of the document.
_NOT_FIELDS = frozenset(("id", "payload", "score"))


@dataclasses.dataclass(frozen=True, slots=True)
class Hit:
    """One search hit: the document's key, its score (``None`` unless scores were asked for) and the
    returned fields as text (a JSON index returns the whole document under ``json``)."""

    key: str
    score: float | None = None
    fields: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def integer(self, name: str) -> int | None:
        """A numeric field as an integer (the engine prints sortable numbers as decimals)."""
        value = self.fields.get(name)
        return None if value is None else int(float(value))

    def document(self) -> dict[str, Any] | None:
        """The whole JSON document, when the search returned it."""
        raw = self.fields.get("json")
        return None if raw is None else dict(orjson.loads(raw))

    def json_values(self, path: str) -> list[Any]:
        """Every value a ``DIALECT 3`` search returned for a JSON path (it answers with a JSON array)."""
        raw = self.fields.get(path)
        return [] if raw is None else list(orjson.loads(raw))


@dataclasses.dataclass(frozen=True, slots=True)
class Page:
    """The total number of matches and the hits of the requested page, in the server's order."""

    total: int
    hits: tuple[Hit, ...] = ()

    @property
    def keys(self) -> list[str]:
        return [hit.key for hit in self.hits]


def page(result: Result) -> Page:
    """A :class:`Page` from redis-py's parsed ``FT.SEARCH`` result."""
    hits = tuple(
        Hit(
            doc.id,
            None if getattr(doc, "score", None) is None else float(doc.score),
            {name: value for name, value in vars(doc).items() if name not in _NOT_FIELDS},
        )
        for doc in result.docs
    )
    return Page(int(result.total), hits)


def raw_page(reply: Sequence[Any], *, content: bool, scores: bool = False) -> Page:
    """A :class:`Page` from an unparsed ``FT.SEARCH`` reply, as a transaction returns it.

    redis-py 8.1 cannot queue a search on an asyncio pipeline (its reply hook tests for the synchronous
    pipeline class and then fails on the reply), so a search inside ``MULTI`` is queued as a plain
    command and its reply handed to redis-py's own parser here.
    """
    return page(Result(reply, content, with_scores=scores))


def aggregate_keys(result: AggregateResult) -> list[str]:
    """The ``__key`` of each row of an ``FT.AGGREGATE`` that loads it."""
    keys: list[str] = []
    for row in result.rows:
        fields = dict(zip(row[::2], row[1::2], strict=True))
        key = fields.get(b"__key", fields.get("__key"))
        if key is not None:
            keys.append(key.decode() if isinstance(key, bytes) else str(key))
    return keys
