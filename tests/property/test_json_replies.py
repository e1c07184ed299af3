"""RedisJSON replies are parsed by orjson: the same Python values as redis-py's default parser (the
standard ``json`` module) for any document Redis holds, integers beyond 64 bits included, through a
real Redis; and the union read of some fields gives each document's fields or reads it whole."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpersona.stores.redis.connection import json_ops
from cpersona.stores.redis.json_fields import read_fields

if TYPE_CHECKING:
    from cpersona.stores.redis.connection import RedisClient

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def _default(client: RedisClient) -> Any:
    """redis-py's JSON commands with its own parser (what ``json_ops`` replaced)."""
    return cast("Any", client).json()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=st.dictionaries(st.text(max_size=8), _VALUES, max_size=5))
async def test_replies_parse_to_the_default_parsers_values(
    redis: RedisClient, key_prefix: str, doc: dict[str, Any]
) -> None:
    key = f"{key_prefix}:json:doc"
    await json_ops(redis).set(key, "$", doc)
    ours = await json_ops(redis).get(key)
    theirs = await _default(redis).get(key)
    assert ours == theirs
    assert [type(v) for v in ours.values()] == [type(v) for v in theirs.values()]
    assert await json_ops(redis).mget([key, f"{key_prefix}:json:none"], "$") == [[theirs], None]


async def test_some_fields_of_many_documents_or_the_whole_of_one_that_lacks_one(
    redis: RedisClient, key_prefix: str
) -> None:
    full = {"a": 1, "b": {"c": [2.5, None]}, "d": "x", "big": 2**65}
    lacking = {"a": 3, "d": "y"}
    keys = [f"{key_prefix}:json:{n}" for n in range(3)]
    await json_ops(redis).set(keys[0], "$", full)
    await json_ops(redis).set(keys[2], "$", lacking)
    found = await read_fields(redis, keys, ["b", "a", "big"])
    assert found == [{"b": {"c": [2.5, None]}, "a": 1, "big": 2**65}, None, lacking]
    assert await read_fields(redis, [], ["a"]) == []
