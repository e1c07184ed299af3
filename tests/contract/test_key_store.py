"""The keys-and-limits contract (:class:`~cpersona.stores.key_store.KeyStore` and
:class:`~cpersona.stores.key_store.RateLimits`), on every adapter.

A limit counts on the backend's own clock (Redis's ``TIME``), which no fake clock reaches: the tests use
intervals of 100 s and more, so that no request's worth of time passes while they run on any machine,
and the one test that waits for a refusal to pass waits just the wait the refusal named.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpersona.errors import BackendUnavailable
from cpersona.model.api_keys import parse_token

if TYPE_CHECKING:
    from collections.abc import Callable

    from contract.adapters import Adapter
    from cpersona.model.api_keys import ApiKey
    from cpersona.stores.key_store import KeyStore, RateLimits
    from cpersona.stores.redis.connection import RedisClient

    OpenLimits = Callable[..., RateLimits]

# A limit of one request a 100 s: a refused request is still refused when the test reads its wait.
SLOW = 0.01
# A margin past a named wait, for the two clocks (the backend's and this process's) to agree.
_CLOCK_MARGIN_SECS = 0.01


def _read(found: ApiKey | None) -> tuple[object, float]:
    """A key read back, to compare with :func:`_made`."""
    assert found is not None
    return found.model_dump(exclude={"created_at"}), found.created_at


def _made(made: ApiKey) -> tuple[object, object]:
    """A key as made: its ``created_at`` within a unit in the last place (RedisJSON's number parser may land
    one off, as it does for every document)."""
    return made.model_dump(exclude={"created_at"}), pytest.approx(made.created_at, rel=1e-15)


def _forged(token: str) -> str:
    """The same key id with another secret."""
    return token[:-4] + ("BBBB" if token.endswith("AAAA") else "AAAA")


async def test_a_key_is_made_verified_listed_and_revoked(key_store: KeyStore) -> None:
    token, made = await key_store.create(["ann", "bo"], admin=False, name="ci")
    assert parse_token(token) == made.key_id
    assert (made.agents, made.admin, made.name) == (("ann", "bo"), False, "ci")
    assert _read(await key_store.verify(token)) == _made(made)
    assert [_read(k) for k in await key_store.list()] == [_made(made)]
    assert await key_store.revoke(made.key_id)
    assert await key_store.verify(token) is None
    assert await key_store.list() == []
    assert not await key_store.revoke(made.key_id)  # a second time: there is none


async def test_only_the_whole_token_of_a_live_key_verifies(key_store: KeyStore) -> None:
    token, made = await key_store.create(["ann"], admin=True, name=None)
    assert await key_store.verify(_forged(token)) is None
    assert await key_store.verify(f"cpk_{'0' * 12}_{'A' * 43}") is None  # no key of that id
    assert await key_store.verify("not a token") is None
    assert await key_store.verify("") is None
    assert _read(await key_store.verify(token)) == _made(made)
    assert not await key_store.revoke("0" * 12)


async def test_keys_are_listed_oldest_first_and_each_token_is_its_own(key_store: KeyStore) -> None:
    made = [await key_store.create([f"agent{i}"], admin=i == 0, name=f"k{i}") for i in range(3)]
    assert len({token for token, _ in made}) == len({key.key_id for _, key in made}) == 3
    assert [_read(k) for k in await key_store.list()] == [_made(key) for _, key in made]
    for token, key in made:
        assert _read(await key_store.verify(token)) == _made(key)
    assert await key_store.revoke(made[1][1].key_id)
    assert [_read(k) for k in await key_store.list()] == [_made(made[0][1]), _made(made[2][1])]


async def test_each_store_reads_its_own_prefix_only(
    adapter: Adapter, key_store: KeyStore, redis: RedisClient, key_prefix: str
) -> None:
    other = adapter.key_store(redis, key_prefix + "-other")  # reads only: it leaves nothing to clean
    token, _ = await key_store.create(["ann"], admin=False, name=None)
    assert await other.verify(token) is None
    assert await other.list() == []
    assert await key_store.verify(token) is not None


async def test_a_burst_then_a_wait(open_rate_limits: OpenLimits) -> None:
    limits = open_rate_limits(rate=SLOW, burst=3)
    assert [await limits.acquire("k") for _ in range(3)] == [0.0, 0.0, 0.0]
    wait = await limits.acquire("k")
    assert 0.0 < wait <= 1 / SLOW
    # Another key has a limit of its own.
    assert await limits.acquire("other") == 0.0


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(burst=st.integers(min_value=1, max_value=20), rate=st.floats(min_value=1e-4, max_value=1e-2))
async def test_exactly_the_burst_goes_at_once(open_rate_limits: OpenLimits, burst: int, rate: float) -> None:
    # At these rates (intervals of 100 s and more) less than one request's worth of time passes during
    # the test on any machine, so exactly ``burst`` requests go and the next is told to wait at most one
    # interval. A key of its own per example, since hypothesis may run an example twice.
    limits = open_rate_limits(rate=rate, burst=burst)
    subject = uuid.uuid4().hex
    waits = [await limits.acquire(subject) for _ in range(burst + 1)]
    assert waits[:burst] == [0.0] * burst
    assert 0.0 < waits[burst] <= 1.0 / rate


async def test_a_limit_holds_across_clients(open_rate_limits: OpenLimits, other_redis: RedisClient) -> None:
    # Two workers are two clients of one backend; their limits count into the same state.
    first = open_rate_limits(rate=SLOW, burst=4)
    second = open_rate_limits(rate=SLOW, burst=4, client=other_redis)
    waits = [await (first if i % 2 else second).acquire("shared") for i in range(5)]
    assert waits[:4] == [0.0] * 4
    assert waits[4] > 0


async def test_the_wait_passes(open_rate_limits: OpenLimits) -> None:
    limits = open_rate_limits(rate=20.0, burst=1)
    assert await limits.acquire("k") == 0.0
    wait = await limits.acquire("k")
    # What is left of the 50 ms interval (none, on a machine slow enough to take it all).
    assert 0.0 <= wait <= 0.05
    # The count runs on the backend's clock (Redis's TIME), not this process's: wait what it named.
    await anyio.sleep(wait + _CLOCK_MARGIN_SECS)
    assert await limits.acquire("k") == 0.0


async def test_admit_verifies_and_counts_in_one_and_a_wrong_secret_spends_no_ones_limit(
    key_store: KeyStore, open_rate_limits: OpenLimits
) -> None:
    token, made = await key_store.create(["ann"], admin=False, name=None)
    limits = open_rate_limits(rate=SLOW, burst=1)
    for _ in range(3):
        assert await limits.admit(_forged(token)) == (None, 0.0)
    assert await limits.admit("not a token") == (None, 0.0)
    known, wait = await limits.admit(token)
    assert (_read(known), wait) == (_made(made), 0.0)
    known, wait = await limits.admit(token)
    assert _read(known) == _made(made)
    assert wait > 0
    # admit and acquire count against the same limit.
    assert await limits.acquire(made.key_id) > 0


async def test_revoking_a_key_drops_its_count_and_admits_it_no_more(
    key_store: KeyStore, open_rate_limits: OpenLimits
) -> None:
    token, made = await key_store.create(["ann"], admin=False, name=None)
    limits = open_rate_limits(rate=SLOW, burst=1)
    assert await limits.acquire(made.key_id) == 0.0
    assert await limits.acquire(made.key_id) > 0
    assert await key_store.revoke(made.key_id)
    assert await limits.admit(token) == (None, 0.0)
    assert await limits.acquire(made.key_id) == 0.0  # its count went with it


async def test_an_unreachable_backend_raises_backend_unavailable(
    adapter: Adapter, gone: RedisClient, key_prefix: str
) -> None:
    keys = adapter.key_store(gone, key_prefix)
    limits = adapter.rate_limits(gone, key_prefix, rate=SLOW, burst=1)
    with pytest.raises(BackendUnavailable):
        await keys.create(["ann"], admin=False, name=None)
    with pytest.raises(BackendUnavailable):
        await keys.verify(f"cpk_{'0' * 12}_{'A' * 43}")
    with pytest.raises(BackendUnavailable):
        await keys.list()
    with pytest.raises(BackendUnavailable):
        await limits.acquire("k")
    with pytest.raises(BackendUnavailable):
        await limits.admit(f"cpk_{'0' * 12}_{'A' * 43}")
