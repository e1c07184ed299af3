"""The trace channels' contract, both sides on every adapter: the sink
(:class:`~cpersona.stores.protocols.TraceSink`) publishes on an agent's channel and the subscription
(:class:`~cpersona.stores.trace_subscription.TraceSubscription`) hears what is published there after it
opened.

That nothing else arrived is shown without waiting for a quiet spell: a channel delivers in the order
published, so a marker published last must be the next message heard.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from cpersona.errors import BackendUnavailable
from cpersona.keys import Keys
from cpersona.stores.protocols import TraceSink
from cpersona.stores.trace_subscription import TraceMessage, TraceSubscription

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from contract.adapters import Adapter
    from cpersona.settings import Settings
    from cpersona.stores.redis.connection import RedisClient

    Subscribe = Callable[..., Awaitable[TraceSubscription]]

# next_message gives None after about a second without a message; a message already sent comes first.
_QUIET_READS = 3


async def _heard(subscription: TraceSubscription) -> TraceMessage:
    """The next message, read past the empty waits (a few, so a lost message fails the test)."""
    for _ in range(_QUIET_READS):
        message = await subscription.next_message()
        if message is not None:
            return message
    raise AssertionError("nothing was heard")


async def test_a_trace_is_heard_on_its_agents_channel_as_published(
    trace_sink: TraceSink, subscribe: Subscribe, key_prefix: str
) -> None:
    assert isinstance(trace_sink, TraceSink)
    channel = Keys(key_prefix).trace_channel("ann")
    listening = await subscribe(channel)
    assert isinstance(listening, TraceSubscription)
    await trace_sink.publish("ann", b'{"trace_version": 1}')
    assert await _heard(listening) == TraceMessage(channel, b'{"trace_version": 1}')


async def test_a_channel_hears_its_agent_only_in_the_order_published(
    trace_sink: TraceSink, subscribe: Subscribe, key_prefix: str
) -> None:
    channel = Keys(key_prefix).trace_channel("ann")
    listening = await subscribe(channel)
    await trace_sink.publish("bo", b"not for ann")
    await trace_sink.publish("ann", b"one")
    await trace_sink.publish("ann:x", b"not for ann either")  # an agent id that extends ann's
    await trace_sink.publish("ann", b"two")
    assert [(await _heard(listening)).payload for _ in range(2)] == [b"one", b"two"]


async def test_the_pattern_hears_every_agent_of_its_prefix_and_no_other_prefix(
    adapter: Adapter, trace_sink: TraceSink, subscribe: Subscribe, redis: RedisClient, key_prefix: str
) -> None:
    keys = Keys(key_prefix)
    listening = await subscribe(pattern=keys.trace_pattern)
    elsewhere = adapter.trace_sink(redis, key_prefix + "-other")  # publishes only: it leaves no keys
    await elsewhere.publish("ann", b"another deployment's")
    await trace_sink.publish("bo", b"bo's")
    await trace_sink.publish("ann", b"ann's")
    assert [await _heard(listening) for _ in range(2)] == [
        TraceMessage(keys.trace_channel("bo"), b"bo's"),
        TraceMessage(keys.trace_channel("ann"), b"ann's"),
    ]


async def test_every_subscriber_hears_it_and_nobody_listening_is_no_error(
    trace_sink: TraceSink, subscribe: Subscribe, key_prefix: str
) -> None:
    await trace_sink.publish("ann", b"before anyone listened")  # heard by nobody, and no error
    channel = Keys(key_prefix).trace_channel("ann")
    first, second = await subscribe(channel), await subscribe(channel)
    await trace_sink.publish("ann", b"to both")
    assert await _heard(first) == await _heard(second) == TraceMessage(channel, b"to both")


async def test_a_subscription_closes_twice_without_error(subscribe: Subscribe, key_prefix: str) -> None:
    listening = await subscribe(Keys(key_prefix).trace_channel("ann"))
    assert listening.where
    await listening.aclose()
    await listening.aclose()  # and once more when the fixture ends


async def test_an_unreachable_backend_raises_backend_unavailable(
    adapter: Adapter, gone: RedisClient, settings: Settings, key_prefix: str
) -> None:
    with pytest.raises(BackendUnavailable):
        await adapter.trace_sink(gone, key_prefix).publish("ann", b"lost")
    with pytest.raises(BackendUnavailable):
        await adapter.subscribe_traces(
            settings, "redis://127.0.0.1:1", (Keys(key_prefix).trace_channel("ann"),), None
        )
