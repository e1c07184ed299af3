"""The Cerememory SDK's flow across a simulated year (issue 32, item 4): store, wait, recall through the
cue query, over HTTP as the SDK does it. The wait is the recall service's clock
(``cpersona.engine.recalls``' ``time``) moved forward by the test; nothing sleeps.

At the default time scale (a unit of stability is a day) a memory nobody recalled is still returned a
year on, reading (1 + 365)^-0.3; on the reference's scale (a second) it is hidden within weeks.
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING

import httpx
import pytest
from benchmarks.in_process import running
from cerememory import types as cmp
from cerememory._async_client import AsyncCerememoryClient

from cpersona.edges.http.app import create_app
from cpersona.engine import recalls

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    import cpersona
    from cpersona.settings import Settings

DAY = 86_400.0
MONTH = 365.25 / 12 * DAY


class Clock:
    """The wall clock moved ``offset`` seconds ahead: what the recall service reads as now."""

    def __init__(self) -> None:
        self.offset = 0.0

    def time(self) -> float:
        return time.time() + self.offset


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    moved = Clock()
    monkeypatch.setattr(recalls, "time", moved)
    return moved


@contextlib.asynccontextmanager
async def _sdk(settings: Settings) -> AsyncIterator[tuple[AsyncCerememoryClient, cpersona.Engine]]:
    """The SDK's client on an app over ``settings``, and the app's engine (to apply reconsolidations: no
    background task runs here)."""
    # One agent, the server's default: the SDK's protocol has no scopes.
    served = settings.with_(qdrant_url=":memory:", embedding_mode="none", default_agent="a-year-on")
    app = create_app(served, background=False)
    async with running(app) as (asgi, state):
        transport = httpx.ASGITransport(app=asgi)
        async with httpx.AsyncClient(transport=transport, base_url="http://cpersona.test") as http:
            yield (
                AsyncCerememoryClient("http://cpersona.test", http_client=http),
                state["engine"],
            )


async def _store(sdk: AsyncCerememoryClient, text: str) -> str:
    block = cmp.ContentBlock(modality=cmp.Modality.TEXT, format="text/plain", data=text.encode())
    stored = await sdk.encode_store(cmp.EncodeStoreRequest(content=cmp.MemoryContent(blocks=[block])))
    return str(stored.record_id)


async def _recall(
    sdk: AsyncCerememoryClient, text: str, *, reconsolidate: bool = True, include_decayed: bool = False
) -> cmp.RecallQueryResponse:
    request = cmp.RecallQueryRequest(
        cue=cmp.RecallCue(text=text), reconsolidate=reconsolidate, include_decayed=include_decayed
    )
    return await sdk.recall_query(request)


async def test_a_memory_left_alone_for_a_year_is_recalled(
    settings: Settings, redis: object, clock: Clock
) -> None:
    async with _sdk(settings) as (sdk, engine):
        record_id = await _store(sdk, "the spare key is under the blue flowerpot")
        # Looked at every month without strengthening it, so each read sees the curve of a memory left
        # alone: returned every time, at (1 + days)^-0.3.
        for month in range(1, 13):
            clock.offset = month * MONTH
            seen = await _recall(sdk, "spare key flowerpot", reconsolidate=False)
            assert [str(m.record.id) for m in seen.memories] == [record_id], month
            assert seen.query_metadata is not None
            assert seen.query_metadata.fidelity_filtered == 0
            days = clock.offset / DAY
            assert seen.memories[0].record.fidelity.score == pytest.approx((1 + days) ** -0.3, abs=1e-4)
        # A year on, the SDK's own defaults (reconsolidate, human mode): returned, and strengthened.
        assert await engine.drain_reconsolidations() == 0
        clock.offset = 365 * DAY
        answer = await _recall(sdk, "spare key flowerpot")
        assert [str(m.record.id) for m in answer.memories] == [record_id]
        assert answer.memories[0].record.fidelity.score == pytest.approx(366**-0.3, abs=1e-4)  # about .17
        assert await engine.drain_reconsolidations() == 1
        stored = await engine.backends.stores.cues.stored_fidelity(record_id)
        assert stored is not None
        assert stored["reinforcement_count"] == 1
        assert stored["score"] == 1.0  # read as fresh from the recall on
        assert stored["stability"] == pytest.approx(2.5)
        assert stored["last_accessed_at"] == pytest.approx(time.time() + clock.offset, abs=60)


async def test_on_the_reference_scale_the_memory_is_hidden_within_weeks(
    settings: Settings, redis: object, clock: Clock
) -> None:
    # CPERSONA_FIDELITY_STABILITY_HOURS at the reference engine's second: what every memory did before.
    async with _sdk(settings.with_(fidelity_stability_hours=1 / 3600)) as (sdk, _):
        record_id = await _store(sdk, "the spare key is under the blue flowerpot")
        clock.offset = 60 * DAY
        hidden = await _recall(sdk, "spare key flowerpot", reconsolidate=False)
        assert hidden.memories == []
        assert hidden.query_metadata is not None
        assert hidden.query_metadata.fidelity_filtered == 1
        shown = await _recall(sdk, "spare key flowerpot", reconsolidate=False, include_decayed=True)
        assert [str(m.record.id) for m in shown.memories] == [record_id]
        assert shown.memories[0].record.fidelity.score < 0.01


async def test_a_memory_recalled_every_few_months_keeps_better_than_one_left_alone(
    settings: Settings, redis: object, clock: Clock
) -> None:
    async with _sdk(settings) as (sdk, engine):
        recalled = await _store(sdk, "the boiler is serviced by Hanna from Lindqvist")
        alone = await _store(sdk, "the boiler manual is in the cellar drawer")
        # Every 112 days for two years, the SDK's recall (which strengthens what it returns) of one.
        for at in range(112, 730, 112):
            clock.offset = at * DAY
            answer = await _recall(sdk, "Hanna Lindqvist")
            assert [str(m.record.id) for m in answer.memories] == [recalled], at
            assert await engine.drain_reconsolidations() == 1
        clock.offset = 730 * DAY
        both = await _recall(sdk, "boiler", reconsolidate=False)
        scores = {str(m.record.id): m.record.fidelity.score for m in both.memories}
        # Left alone: (1 + 730)^-0.3, about .14. Recalled: 58 days since the sixth recall, at stability
        # 69.0 (1 -> 2.5 -> 5.6 -> 11.6 -> 22.3 -> 40.2 -> 69.0): (1 + 58/69.0)^-0.3, about .83.
        assert scores[alone] == pytest.approx(731**-0.3, abs=1e-4)
        assert scores[recalled] == pytest.approx((1 + 58 / 69.0) ** -0.3, abs=1e-3)
