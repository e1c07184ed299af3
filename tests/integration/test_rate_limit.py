"""Rate limits per key over HTTP and on Redis: 429 with ``Retry-After``; nothing limited with keys off; a
limit needs a rate and a burst; counting costs no append-only write. What the limits promise on every
backend (a burst, then a wait the refusal names, shared by every worker) is the contract suite's
(tests/contract/test_key_store.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest
from cerememory import errors as cmp_errors

from cpersona.edges.http.app import create_app
from cpersona.keys import Keys
from cpersona.stores.redis.api_keys import ApiKeyStore
from cpersona.stores.redis.rate_limit import RateLimiter

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractAsyncContextManager

    import httpx
    from starlette.applications import Starlette

    from cpersona.settings import Settings
    from cpersona.stores.redis.connection import RedisClient

    Serve = Callable[[Starlette], AbstractAsyncContextManager[httpx.AsyncClient]]


async def _redis_seconds(redis: RedisClient) -> float:
    seconds, micros = await redis.time()
    return float(seconds) + float(micros) / 1e6


async def test_the_wait_is_what_is_left_of_the_interval_on_redis_clock(
    redis: RedisClient, key_prefix: str
) -> None:
    limiter = RateLimiter(redis, Keys(key_prefix), rate=20.0, burst=1)
    began = await _redis_seconds(redis)
    assert await limiter.acquire("k") == 0.0
    wait = await limiter.acquire("k")
    took = await _redis_seconds(redis) - began
    # Between the 50 ms interval less the time the two took (both bracketed by Redis's clock) and the
    # interval, and not zero while the second came inside the interval. No bound on how fast the machine
    # is. (That the named wait then passes is the contract suite's.)
    assert max(0.0, 0.05 - took) - 1e-6 <= wait <= 0.05
    if took < 0.05:
        assert wait > 0.0


def test_a_limit_needs_a_rate_and_a_burst(redis: RedisClient) -> None:
    with pytest.raises(ValueError, match="rate"):
        RateLimiter(redis, Keys("x"), rate=0, burst=1)


def _limited_app(settings: Settings, *, rate: float, burst: int) -> Starlette:
    """A lexical-only app with keys on and the rate limit under test."""
    changed = settings.with_(
        qdrant_url=":memory:",
        embedding_mode="none",
        keys="on",
        rate_limit_per_sec=rate,
        rate_limit_burst=burst,
    )
    return create_app(changed, background=False)


async def _ann_token(settings: Settings, redis: RedisClient) -> str:
    token, _ = await ApiKeyStore(redis, Keys(settings.key_prefix)).create(["ann"], admin=False, name=None)
    return token


async def test_over_the_limit_is_a_429_with_retry_after(
    settings: Settings, redis: RedisClient, serve_asgi: Serve
) -> None:
    app = _limited_app(settings, rate=0.2, burst=2)
    token = await _ann_token(settings, redis)
    auth = {"authorization": f"Bearer {token}"}
    async with serve_asgi(app) as client:
        codes = [(await client.get("/v1/records", headers=auth)).status_code for _ in range(2)]
        assert codes == [200, 200]
        refused = await client.get("/v1/records", headers=auth)
        # A bad key is not counted against (nor told about) anyone's limit.
        bad = await client.get("/v1/records", headers={"authorization": "Bearer cpk_x"})
        probe = await client.get("/health")
    assert refused.status_code == 429, refused.text
    body = refused.json()
    assert body["code"] == body["error"]["code"] == "RATE_LIMITED"
    assert 1 <= body["retry_after"] <= 5
    assert refused.headers["retry-after"] == str(body["retry_after"])
    assert bad.status_code == 401
    assert probe.status_code == 200


async def test_the_cerememory_sdk_reads_the_429(
    settings: Settings, redis: RedisClient, serve_asgi: Serve
) -> None:
    app = _limited_app(settings, rate=0.1, burst=1)
    token = await _ann_token(settings, redis)
    async with serve_asgi(app) as client:
        await client.get("/v1/records", headers={"authorization": f"Bearer {token}"})
        refused = (await client.get("/v1/records", headers={"authorization": f"Bearer {token}"})).json()
    error = cmp_errors.error_from_code(
        refused["code"], refused["message"], retry_after=refused["retry_after"]
    )
    assert isinstance(error, cmp_errors.RateLimitedError)
    assert error.retry_after == refused["retry_after"]


async def test_no_limit_without_keys(settings: Settings, redis: RedisClient, serve_asgi: Serve) -> None:
    app = create_app(
        settings.with_(
            qdrant_url=":memory:", embedding_mode="none", rate_limit_per_sec=0.01, rate_limit_burst=1
        ),
        background=False,
    )
    async with serve_asgi(app) as client:
        codes = {(await client.get("/v1/records", params={"agent_id": "a"})).status_code for _ in range(5)}
    assert codes == {200}


async def test_counting_writes_nothing_to_the_append_only_file(redis: RedisClient, key_prefix: str) -> None:
    # Each write to the AOF costs an fsync (appendfsync always); the counts are not worth one.
    limiter = RateLimiter(redis, Keys(key_prefix), rate=1000.0, burst=1000)
    await limiter.acquire("warm")
    before = (await redis.info("persistence"))["aof_current_size"]
    for i in range(20):
        await limiter.acquire(f"s{i % 3}")
        await anyio.sleep(0.002)
    assert (await redis.info("persistence"))["aof_current_size"] == before
