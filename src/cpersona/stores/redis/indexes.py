"""The search indexes of the record documents, declared with redis-py's field classes, and the migration
of older stores.

The indexes are declared here rather than generated from redis-om's models (``Migrator``), because recall
needs control over them that the generated schema does not give: BM25 over the text fields only
(redis-om would index every string field, and each indexed field enters the document length BM25
normalises by), tags that can match the empty string (the global pool), the engine's own stopword list
(:data:`~.lexical.STOPWORDS`, so the query side and the index agree), and fields the models hold only for
the index (``bigrams`` and ``grams`` as multi-value ``TEXT NOSTEM`` fields, ``stems``, the source
prefixes and the short CJK substrings as multi-value ``TAG`` fields).

Tag fields do not enter the document length BM25 normalises by, so a tag field added to an index leaves
the scores of the text fields as they were. A field no query reads is not indexed (the message id and
the vector-pending mark stay in the documents, for reads): each one costs every write, a few µs a
document in a million-record store. An index created with them before keeps them, unused.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, cast

import anyio
import redis.exceptions
from redis.commands.search.field import Field, NumericField, TextField, VectorField
from redis.commands.search.index_definition import IndexDefinition, IndexType

from cpersona.model.cue_query import EMOTION_INDEX_DIM, stored_emotion_axes
from cpersona.stores.redis.connection import command
from cpersona.stores.redis.lexical import STOPWORDS, doc_bigrams, doc_grams, doc_short_grams, doc_stems
from cpersona.stores.redis.scope import source_prefix_tags

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from cpersona.keys import Keys
    from cpersona.stores.redis.connection import RedisClient

__all__ = ["SCHEMAS", "create_index", "ensure_indexes"]


def _text(path: str, name: str) -> TextField:
    return TextField(path, no_stem=True, as_name=name)


def _tag(path: str, name: str, *, sortable: bool = False) -> Field:
    # Not redis-py's TagField: it always sends a SEPARATOR (a comma unless told otherwise) and Redis
    # refuses an empty one, while a tag of a JSON index has no separator unless one is declared. The
    # stored values are whole tags (an agent, project or source id may hold a comma), so the tag
    # attributes are declared with the base Field, which sends ``TAG`` alone.
    return Field(path, args=[Field.TAG], sortable=sortable, as_name=name)


def _sortable_number(path: str, name: str) -> NumericField:
    return NumericField(path, sortable=True, as_name=name)


_SCOPE_FIELDS = (
    _tag("$.tag_agent", "agent"),
    _tag("$.tag_project", "project"),
    _tag("$.tag_channel", "channel"),
)

SCHEMAS: Mapping[str, tuple[Field, ...]] = {
    "memory": (
        _text("$.content", "content"),
        _text("$.bigrams[*]", "bigrams"),
        _text("$.grams[*]", "grams"),
        _text("$.stems", "stems"),
        *_SCOPE_FIELDS,
        _tag("$.tag_source", "source"),
        _tag("$.tag_source_prefixes[*]", "source_prefix"),
        _tag("$.tag_short_grams[*]", "short_gram"),
        _tag("$.store", "store"),
        _sortable_number("$.ts", "ts"),
        _sortable_number("$.seq", "seq"),
        # The emotion arm's index (recall.query's `cue.emotion`): exact cosine over the eight axes (and
        # the ninth of EMOTION_INDEX_DIM, so that no stored vector is all zeros).
        VectorField(
            "$.emotion_axes",
            "FLAT",
            {"TYPE": "FLOAT32", "DIM": EMOTION_INDEX_DIM, "DISTANCE_METRIC": "COSINE"},
            as_name="emotion",
        ),
    ),
    "episode": (
        _text("$.text", "text"),
        _text("$.bigrams[*]", "bigrams"),
        _text("$.grams[*]", "grams"),
        _text("$.stems", "stems"),
        *_SCOPE_FIELDS,
        _sortable_number("$.ts", "ts"),
        _sortable_number("$.seq", "seq"),
    ),
    # The raw journal's text is analysed as the memories' is (see :mod:`.raw_docs`); a sealed entry has
    # none here. ``id`` orders entries of the same instant (a batch shares one) for the raw query.
    "raw": (
        _text("$.content", "content"),
        _text("$.grams[*]", "grams"),
        _text("$.stems", "stems"),
        *_SCOPE_FIELDS,
        _tag("$.tag_short_grams[*]", "short_gram"),
        _tag("$.tag_session", "session"),
        _tag("$.visibility", "visibility"),
        _tag("$.secrecy_level", "secrecy"),
        _tag("$.suppressed", "suppressed"),
        _tag("$.pk", "id", sortable=True),
        _sortable_number("$.ts", "ts"),
    ),
}
"""The attributes of each index, by the kind of record it holds."""


async def create_index(client: RedisClient, name: str, prefix: str, fields: Sequence[Field]) -> None:
    """Create index ``name`` over the JSON documents under ``prefix`` with ``fields``.

    Every index is searched by a lexical arm, which drops :data:`~.lexical.STOPWORDS` from phrases, so
    each declares the same list. Raises redis-py's ``ResponseError`` if the index exists.
    """
    # types-redis (which redis-om installs) leaves IndexDefinition and the search commands unannotated.
    definition = IndexDefinition(prefix=[prefix], index_type=IndexType.JSON)  # type: ignore[no-untyped-call]
    search = cast("Any", client).ft(name)
    await search.create_index(list(fields), definition=definition, stopwords=list(STOPWORDS))


async def ensure_indexes(client: RedisClient, keys: Keys) -> None:
    """Create the search indexes if they do not exist yet (idempotent, safe to race), and bring a store
    written before one of the derived fields existed up to date (:func:`_backfill`). Returns once every
    index holds all its documents."""
    targets = {
        "memory": (keys.memory_index, keys.memory_prefix),
        "episode": (keys.episode_index, keys.episode_prefix),
        "raw": (keys.raw_index, keys.raw_prefix),
    }
    for kind, (name, prefix) in targets.items():
        missing = await _missing(client, name, _BACKFILLS.get(kind, ()))
        if missing:
            await _backfill(client, name, prefix, missing)
        try:
            await create_index(client, name, prefix, SCHEMAS[kind])
        except redis.exceptions.ResponseError as exc:
            if "already exists" not in str(exc).lower():
                raise
        await _indexed(client, name)


async def _indexed(client: RedisClient, name: str) -> None:
    """Return once index ``name`` holds every document under its prefix.

    An index created over existing documents (after :func:`_backfill`, or by a racing engine) takes them
    in the background, and a read before that ends would silently miss records.
    """
    while True:
        info = await command(client, "FT.INFO", name)
        if not int(dict(zip(info[::2], info[1::2], strict=False)).get(b"indexing", 0)):
            return
        await anyio.sleep(_INDEXING_POLL_SECS)


@dataclasses.dataclass(frozen=True, slots=True)
class _Derived:
    """A document field computed from another one, which stores of older versions lack."""

    attribute: bytes  # the index attribute that searches it: an index without it predates the field
    source: str  # the JSON path it is computed from
    target: str  # the JSON path it is written to
    compute: Callable[[Any], Any]


_BACKFILLS: dict[str, tuple[_Derived, ...]] = {
    "memory": (
        _Derived(b"stems", "$.content", "$.stems", lambda text: doc_stems(str(text))),
        _Derived(
            b"source_prefix", "$.source.id", "$.tag_source_prefixes", lambda sid: source_prefix_tags(str(sid))
        ),
        _Derived(b"short_gram", "$.content", "$.tag_short_grams", lambda text: doc_short_grams(str(text))),
        _Derived(b"emotion", "$.emotion", "$.emotion_axes", lambda found: stored_emotion_axes(found or {})),
        _Derived(b"bigrams", "$.content", "$.bigrams", lambda text: doc_bigrams(str(text))),
    ),
    "episode": (
        _Derived(b"stems", "$.text", "$.stems", lambda text: doc_stems(str(text))),
        _Derived(b"bigrams", "$.text", "$.bigrams", lambda text: doc_bigrams(str(text))),
    ),
    # A raw index of before the raw query: its entries get the analysed text (``stems`` stands for all
    # three; sealed entries had none to analyse once sealed, see :mod:`.raw_search`).
    "raw": (
        _Derived(b"stems", "$.content", "$.stems", lambda text: doc_stems(str(text))),
        _Derived(b"stems", "$.content", "$.grams", lambda text: doc_grams(str(text))),
        _Derived(b"stems", "$.content", "$.tag_short_grams", lambda text: doc_short_grams(str(text))),
    ),
}
_MIGRATE_BATCH = 500
_INDEXING_POLL_SECS = 0.02


async def _missing(client: RedisClient, name: str, derived: Sequence[_Derived]) -> list[_Derived]:
    """The derived fields the existing index ``name`` does not search (none if there is no index yet:
    it is created with them)."""
    if not derived:
        return []
    try:
        info = await command(client, "FT.INFO", name)
    except redis.exceptions.ResponseError:
        return []
    attributes = dict(zip(info[::2], info[1::2], strict=False)).get(b"attributes", [])
    return [d for d in derived if not any(d.attribute in attribute for attribute in attributes)]


async def _backfill(client: RedisClient, name: str, prefix: str, derived: Sequence[_Derived]) -> None:
    """Give every document under ``prefix`` the ``derived`` fields, then drop the index (keeping the
    documents) so that :func:`ensure_indexes` creates it with the current schema.

    The documents are written before the new index exists, so that it indexes each one once (an index
    that saw both versions would count the superseded one in BM25 until its collector ran).
    """
    batch: list[bytes] = []

    async def flush() -> None:
        pipe = client.pipeline(transaction=False)
        for field in derived:
            values = await client.json().mget(batch, field.source)  # type: ignore[no-untyped-call]
            for key, found in zip(batch, values, strict=True):
                if found:
                    pipe.json().set(key, field.target, field.compute(found[0]))
        await pipe.execute()
        batch.clear()

    async for key in client.scan_iter(match=f"{prefix}*", count=1000):
        batch.append(key)
        if len(batch) >= _MIGRATE_BATCH:
            await flush()
    if batch:
        await flush()
    await command(client, "FT.DROPINDEX", name)
