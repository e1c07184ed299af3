"""The search indexes of the record documents, declared by hand, and the migration of older stores.

The indexes are created with an explicit ``FT.CREATE`` rather than from redis-om's generated schema
(``Migrator``), because recall needs control over them that the generated one does not give: BM25 over
the text fields only (redis-om would index every string field, and each indexed field enters the
document length BM25 normalises by), tags that can match the empty string (the global pool), the
engine's own stopword list (:data:`~.lexical.STOPWORDS`, so the query side and the index agree), and
fields the models hold only for the index (``grams`` as a multi-value ``TEXT NOSTEM`` field, ``stems``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import redis.exceptions

from cpersona.stores.redis.connection import command
from cpersona.stores.redis.lexical import STOPWORDS, doc_stems

if TYPE_CHECKING:
    from cpersona.keys import Keys
    from cpersona.stores.redis.connection import RedisClient

__all__ = ["ensure_indexes"]


_SCOPE_FIELDS = (
    "$.tag_agent", "AS", "agent", "TAG",
    "$.tag_project", "AS", "project", "TAG",
    "$.tag_channel", "AS", "channel", "TAG",
)  # fmt: skip

_INDEXES: dict[str, tuple[str, ...]] = {
    "memory": (
        "$.content", "AS", "content", "TEXT", "NOSTEM",
        "$.grams[*]", "AS", "grams", "TEXT", "NOSTEM",
        "$.stems", "AS", "stems", "TEXT", "NOSTEM",
        *_SCOPE_FIELDS,
        "$.tag_source", "AS", "source", "TAG",
        "$.tag_msg", "AS", "msg", "TAG",
        "$.store", "AS", "store", "TAG",
        "$.ts", "AS", "ts", "NUMERIC", "SORTABLE",
        "$.seq", "AS", "seq", "NUMERIC", "SORTABLE",
        "$.vector_pending", "AS", "pending", "NUMERIC",
    ),
    "episode": (
        "$.text", "AS", "text", "TEXT", "NOSTEM",
        "$.grams[*]", "AS", "grams", "TEXT", "NOSTEM",
        "$.stems", "AS", "stems", "TEXT", "NOSTEM",
        *_SCOPE_FIELDS,
        "$.ts", "AS", "ts", "NUMERIC", "SORTABLE",
        "$.seq", "AS", "seq", "NUMERIC", "SORTABLE",
        "$.vector_pending", "AS", "pending", "NUMERIC",
    ),
    "raw": (
        "$.content", "AS", "content", "TEXT",
        *_SCOPE_FIELDS,
        "$.tag_session", "AS", "session", "TAG",
        "$.visibility", "AS", "visibility", "TAG",
        "$.secrecy_level", "AS", "secrecy", "TAG",
        "$.ts", "AS", "ts", "NUMERIC", "SORTABLE",
    ),
}  # fmt: skip

# The lexical arms drop these words from phrases, so the indexes they search declare the same list.
_LEXICAL_OPTIONS = ("STOPWORDS", str(len(STOPWORDS)), *STOPWORDS)
_OPTIONS: dict[str, tuple[str, ...]] = {"memory": _LEXICAL_OPTIONS, "episode": _LEXICAL_OPTIONS, "raw": ()}


async def ensure_indexes(client: RedisClient, keys: Keys) -> None:
    """Create the search indexes if they do not exist yet (idempotent, safe to race), and bring a store
    written before the ``stems`` field existed up to date (:func:`_add_stems`)."""
    targets = {
        "memory": (keys.memory_index, keys.memory_prefix),
        "episode": (keys.episode_index, keys.episode_prefix),
        "raw": (keys.raw_index, keys.raw_prefix),
    }
    for kind, (name, prefix) in targets.items():
        if kind in _TEXT_FIELD and await _lacks_stems(client, name):
            await _add_stems(client, name, prefix, _TEXT_FIELD[kind])
        try:
            await command(
                client, "FT.CREATE", name, "ON", "JSON", "PREFIX", "1", prefix, *_OPTIONS[kind],
                "SCHEMA", *_INDEXES[kind],
            )  # fmt: skip
        except redis.exceptions.ResponseError as exc:
            if "already exists" not in str(exc).lower():
                raise


# The searchable text of each kind with a ``stems`` field.
_TEXT_FIELD = {"memory": "content", "episode": "text"}
_MIGRATE_BATCH = 500


async def _lacks_stems(client: RedisClient, name: str) -> bool:
    try:
        info = await command(client, "FT.INFO", name)
    except redis.exceptions.ResponseError:
        return False  # no index yet: it is created with the field
    fields = dict(zip(info[::2], info[1::2], strict=False)).get(b"attributes", [])
    return not any(b"stems" in attribute for attribute in fields)


async def _add_stems(client: RedisClient, name: str, prefix: str, field: str) -> None:
    """Give every document under ``prefix`` its ``stems``, then drop the index (keeping the documents)
    so that :func:`ensure_indexes` creates it with the current schema.

    The documents are written before the new index exists, so that it indexes each one once (an index
    that saw both versions would count the superseded one in BM25 until its collector ran).
    """
    batch: list[bytes] = []

    async def flush() -> None:
        texts = await client.json().mget(batch, f"$.{field}")  # type: ignore[no-untyped-call]
        pipe = client.pipeline(transaction=False)
        for key, found in zip(batch, texts, strict=True):
            if found:
                pipe.json().set(key, "$.stems", doc_stems(str(found[0])))
        await pipe.execute()
        batch.clear()

    async for key in client.scan_iter(match=f"{prefix}*", count=1000):
        batch.append(key)
        if len(batch) >= _MIGRATE_BATCH:
            await flush()
    if batch:
        await flush()
    await command(client, "FT.DROPINDEX", name)
