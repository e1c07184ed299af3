"""The search indexes as Redis holds them: each one's definition, attributes and stopwords.

BM25's scores depend on every text attribute of an index (the document length it normalises by is taken
over all of them), its stopwords and its analysis flags, and a tag attribute's separator decides which
values a scope filter matches. So the expected values below are what ``FT.INFO`` gave for the indexes
as the engine created them when their ``FT.CREATE`` arguments were spelled by hand, and any change in how
they are declared must leave Redis holding exactly these.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from cpersona.keys import Keys
from cpersona.stores.redis.connection import command
from cpersona.stores.redis.indexes import ensure_indexes

if TYPE_CHECKING:
    from cpersona.stores.redis.connection import RedisClient


def _text(path: str, name: str) -> list[str]:
    return ["identifier", path, "attribute", name, "type", "TEXT", "WEIGHT", "1", "NOSTEM"]


def _tag(path: str, name: str, *flags: str) -> list[str]:
    # A JSON index's tag attribute has no separator unless one is declared: FT.INFO shows it empty.
    return ["identifier", path, "attribute", name, "type", "TAG", "SEPARATOR", "", *flags]


def _sortable_number(path: str, name: str) -> list[str]:
    return ["identifier", path, "attribute", name, "type", "NUMERIC", "SORTABLE", "UNF"]


def _words(text: str) -> list[str]:
    return text.split()


_SCOPE = [_tag("$.tag_agent", "agent"), _tag("$.tag_project", "project"), _tag("$.tag_channel", "channel")]

EXPECTED_ATTRIBUTES: dict[str, list[list[Any]]] = {
    "memory": [
        _text("$.content", "content"),
        _text("$.bigrams[*]", "bigrams"),
        _text("$.grams[*]", "grams"),
        _text("$.stems", "stems"),
        *_SCOPE,
        _tag("$.tag_source", "source"),
        _tag("$.tag_source_prefixes[*]", "source_prefix"),
        _tag("$.tag_short_grams[*]", "short_gram"),
        _tag("$.store", "store"),
        _sortable_number("$.ts", "ts"),
        _sortable_number("$.seq", "seq"),
        [
            "identifier",
            "$.emotion_axes",
            "attribute",
            "emotion",
            "type",
            "VECTOR",
            "algorithm",
            "FLAT",
            "data_type",
            "FLOAT32",
            "dim",
            9,
            "distance_metric",
            "COSINE",
        ],
    ],
    "episode": [
        _text("$.text", "text"),
        _text("$.bigrams[*]", "bigrams"),
        _text("$.grams[*]", "grams"),
        _text("$.stems", "stems"),
        *_SCOPE,
        _sortable_number("$.ts", "ts"),
        _sortable_number("$.seq", "seq"),
    ],
    "raw": [
        _text("$.content", "content"),
        _text("$.grams[*]", "grams"),
        _text("$.stems", "stems"),
        *_SCOPE,
        _tag("$.tag_short_grams[*]", "short_gram"),
        _tag("$.tag_session", "session"),
        _tag("$.visibility", "visibility"),
        _tag("$.secrecy_level", "secrecy"),
        _tag("$.suppressed", "suppressed"),
        _tag("$.pk", "id", "SORTABLE", "UNF"),
        _sortable_number("$.ts", "ts"),
    ],
}

EXPECTED_STOPWORDS = _words(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there these"
    " they this to was will with"
)


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


async def _info(client: RedisClient, name: str) -> dict[str, Any]:
    reply = _plain(await command(client, "FT.INFO", name))
    return dict(zip(reply[::2], reply[1::2], strict=True))


def _index(keys: Keys, kind: str) -> tuple[str, str]:
    return {
        "memory": (keys.memory_index, keys.memory_prefix),
        "episode": (keys.episode_index, keys.episode_prefix),
        "raw": (keys.raw_index, keys.raw_prefix),
    }[kind]


@pytest.mark.parametrize("kind", ["memory", "episode", "raw"])
async def test_each_index_is_created_as_before(redis: RedisClient, key_prefix: str, kind: str) -> None:
    keys = Keys(key_prefix)
    await ensure_indexes(redis, keys)
    name, prefix = _index(keys, kind)
    info = await _info(redis, name)
    assert info["index_definition"] == ["key_type", "JSON", "prefixes", [prefix], "default_score", "1"]
    assert info["index_options"] == []
    assert info["attributes"] == EXPECTED_ATTRIBUTES[kind]
    assert info["stopwords_list"] == EXPECTED_STOPWORDS


async def test_ensuring_the_indexes_again_leaves_them_as_they_are(
    redis: RedisClient, key_prefix: str
) -> None:
    keys = Keys(key_prefix)
    await ensure_indexes(redis, keys)
    await redis.json().set(f"{keys.memory_prefix}m1", "$", {"content": "a lake at sunrise", "tag_agent": "a"})
    await ensure_indexes(redis, keys)
    info = await _info(redis, keys.memory_index)
    assert info["attributes"] == EXPECTED_ATTRIBUTES["memory"]
    assert int(info["num_docs"]) == 1
