"""The decay sweep, the forecast and records as read: fidelity comes from the time elapsed, ticks age
additively, nothing below the threshold is deleted unless pruning is on."""

from __future__ import annotations

import dataclasses
import math
import time
from typing import TYPE_CHECKING

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cpersona
from cpersona.engine.upkeep import threshold_time
from cpersona.model.fidelity import (
    PRUNE_THRESHOLD,
    FidelityCurve,
    aged,
    as_read,
    current_fidelity,
    is_decayed,
)
from cpersona.model.records import EmotionVector, Fidelity, MemoryRecord, Scope, Source

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

    from cpersona.settings import Settings

NEUTRAL = EmotionVector()
DEFAULT = FidelityCurve()
# The reference engine's time scale (one unit of stability is a second): a memory left alone is below the
# threshold within weeks, so the tests of what happens then need not age one by millennia.
REFERENCE_HOURS = 1 / 3600


def _memory(fidelity: Fidelity, emotion: EmotionVector = NEUTRAL) -> MemoryRecord:
    return MemoryRecord("0", Scope("a"), Source(), "text", 0.0, 1, emotion=emotion, fidelity=fidelity)


def _split_and_whole(
    parts: Sequence[float], baseline: float, intensity: float
) -> tuple[float, float, Fidelity, Fidelity]:
    start = Fidelity(last_accessed_at=baseline)
    emotion = EmotionVector(intensity=intensity)
    many = start
    for seconds in parts:
        many = aged(many, seconds)
    once = aged(start, sum(parts))
    now = baseline + 5.0
    return (
        current_fidelity(many, emotion, now, curve=DEFAULT),
        current_fidelity(once, emotion, now, curve=DEFAULT),
        many,
        once,
    )


@given(st.lists(st.integers(0, 10**7), min_size=1, max_size=20), st.floats(1e9, 4e9), st.floats(0, 1))
def test_n_ticks_age_exactly_as_much_as_one_tick_over_the_same_span(
    parts: list[int], baseline: float, intensity: float
) -> None:
    # Whole seconds off an epoch-sized baseline, never past it: every step is exact, so the results are
    # equal, not close.
    split, whole, many, once = _split_and_whole(parts, baseline, intensity)
    assert split == whole
    assert many.last_accessed_at == once.last_accessed_at


@given(st.lists(st.floats(0, 1e8), min_size=1, max_size=20), st.floats(0, 1e10), st.floats(0, 1))
def test_any_split_of_a_span_ages_as_the_whole_span_up_to_rounding(
    parts: list[float], baseline: float, intensity: float
) -> None:
    # Fractions of a second: each step of either way may round (the sum of the parts too), by at most a
    # unit in the last place of the largest value.
    _, _, many, once = _split_and_whole(parts, baseline, intensity)
    ulp = math.ulp(max(abs(baseline), abs(once.last_accessed_at)))
    assert abs(many.last_accessed_at - once.last_accessed_at) <= 2 * (len(parts) + 1) * ulp


@given(st.floats(0, 1e8), st.floats(0, 1))
def test_a_record_as_read_shows_the_value_at_that_moment_and_keeps_its_anchor(
    elapsed: float, intensity: float
) -> None:
    stored = _memory(Fidelity(last_accessed_at=100.0), EmotionVector(intensity=intensity))
    shown = as_read(stored, 100.0 + elapsed, curve=DEFAULT)
    assert shown.fidelity.score == current_fidelity(
        stored.fidelity, stored.emotion, 100.0 + elapsed, curve=DEFAULT
    )
    assert shown.fidelity.last_accessed_at == stored.fidelity.last_accessed_at
    assert stored.fidelity.score == 1.0  # the value handed out is a copy
    assert is_decayed(stored, 100.0 + elapsed, curve=DEFAULT) == (shown.fidelity.score < PRUNE_THRESHOLD)


async def test_get_and_list_show_current_fidelity_and_the_store_keeps_the_anchor(
    engine: cpersona.Engine,
) -> None:
    ref = (await engine.store("the blue door", agent_id="a")).ref
    await engine.decay_tick("a", tick_duration_seconds=86400)
    got = await engine.get(ref, agent_id="a")
    assert isinstance(got, MemoryRecord)
    # A day at the default scale (a unit of stability is a day): 2^-0.3; noise 0.1·√1·(1 - that).
    assert got.fidelity.score == pytest.approx(2**-0.3, abs=5e-4)
    assert got.fidelity.noise_level == pytest.approx(0.1 * (1 - 2**-0.3), abs=5e-4)
    (listed,) = await engine.list(agent_id="a")
    assert isinstance(listed, MemoryRecord)
    assert listed.fidelity.score == pytest.approx(got.fidelity.score, abs=1e-4)
    stored = await engine.backends.records.get("memory", ref.removeprefix("mem:"))
    assert isinstance(stored, MemoryRecord)
    assert stored.fidelity.score == 1.0  # the anchor, never rewritten by a read


async def test_a_tick_of_nothing_writes_nothing_and_counts(engine: cpersona.Engine) -> None:
    await engine.store("one", agent_id="a")
    await engine.store("two", agent_id="a")
    await engine.store("elsewhere", agent_id="b")
    result = await engine.decay_tick("a")
    assert (result.records_updated, result.records_below_threshold, result.records_pruned) == (2, 0, 0)
    assert result.aged_seconds == 0
    assert result.pruning is False


async def test_ticks_over_a_span_equal_one_tick_over_it(engine: cpersona.Engine) -> None:
    first = (await engine.store("split into ticks", agent_id="many")).ref
    second = (await engine.store("one tick", agent_id="one")).ref
    for _ in range(6):
        await engine.decay_tick("many", tick_duration_seconds=600)
    await engine.decay_tick("one", tick_duration_seconds=3600)
    a = await engine.backends.records.get("memory", first.removeprefix("mem:"))
    b = await engine.backends.records.get("memory", second.removeprefix("mem:"))
    assert isinstance(a, MemoryRecord)
    assert isinstance(b, MemoryRecord)
    lag_a = a.created_at - a.fidelity.last_accessed_at
    lag_b = b.created_at - b.fidelity.last_accessed_at
    assert lag_a == lag_b == 3600


@pytest.fixture
async def fast(settings: Settings, redis: object) -> AsyncIterator[cpersona.Engine]:
    fast = settings.with_(embedding_mode="none", fidelity_stability_hours=REFERENCE_HOURS)
    async with cpersona.open(fast, background=False) as m:
        yield m


async def test_ten_years_leave_a_memory_kept_at_the_default_scale(engine: cpersona.Engine) -> None:
    ref = (await engine.store("lasts", agent_id="a")).ref
    result = await engine.decay_tick("a", tick_duration_seconds=10 * 365 * 86400)
    assert (result.records_below_threshold, result.records_pruned) == (0, 0)
    got = await engine.get(ref, agent_id="a")
    assert isinstance(got, MemoryRecord)
    assert got.fidelity.score == pytest.approx(3651**-0.3, abs=1e-4)


async def test_below_the_threshold_is_decayed_not_deleted(fast: cpersona.Engine) -> None:
    ref = (await fast.store("fades", agent_id="a")).ref
    result = await fast.decay_tick("a", tick_duration_seconds=10 * 365 * 86400)
    assert (result.records_below_threshold, result.records_pruned) == (1, 0)
    assert (await fast.get(ref, agent_id="a")).fidelity.score < PRUNE_THRESHOLD  # type: ignore[union-attr]


@pytest.fixture
async def pruning(settings: Settings, redis: object) -> AsyncIterator[cpersona.Engine]:
    pruning = settings.with_(
        embedding_mode="none", decay_prune=True, fidelity_stability_hours=REFERENCE_HOURS
    )
    async with cpersona.open(pruning, background=False) as m:
        yield m


async def test_pruning_is_opt_in_and_reported(pruning: cpersona.Engine) -> None:
    await pruning.store("kept", agent_id="a")
    gone = (await pruning.store("fades", agent_id="a")).ref
    await pruning.decay_tick("a", tick_duration_seconds=1)  # ages both a second: both still well kept
    # Age only one: forget's sibling paths must not be needed to make one record old.
    record = await pruning.backends.records.get("memory", gone.removeprefix("mem:"))
    assert isinstance(record, MemoryRecord)
    old = dataclasses.replace(record, fidelity=aged(record.fidelity, 10 * 365 * 86400))
    await pruning.backends.records.replace_memory(old, drop_claims=(), add_claims=(), queue_blocks=False)
    result = await pruning.decay_tick("a")
    assert (result.records_updated, result.records_below_threshold, result.records_pruned) == (2, 1, 1)
    assert result.pruning is True
    with pytest.raises(cpersona.RecordNotFound):
        await pruning.get(gone, agent_id="a")


async def test_forecast_gives_the_closed_form_threshold_date(fast: cpersona.Engine) -> None:
    stored = await fast.store("a fact", agent_id="a")
    later = time.time() + 7 * 86400
    result = await fast.decay_forecast("a", [stored.id], later)
    (f,) = result.forecasts
    assert f.record_id == stored.id
    assert f.current_fidelity == pytest.approx(1.0, abs=0.2)
    assert f.forecasted_fidelity == pytest.approx(0.0184, abs=1e-3)  # a week, the reference's figure
    record = await fast.backends.records.get("memory", stored.id)
    assert isinstance(record, MemoryRecord)
    assert f.estimated_threshold_date is not None
    at = f.estimated_threshold_date
    curve = FidelityCurve(REFERENCE_HOURS)
    assert current_fidelity(record.fidelity, record.emotion, at - 1, curve=curve) > PRUNE_THRESHOLD
    assert current_fidelity(record.fidelity, record.emotion, at + 1, curve=curve) < PRUNE_THRESHOLD


async def test_forecast_at_the_default_scale_names_no_date_a_record_can_show(engine: cpersona.Engine) -> None:
    stored = await engine.store("a fact", agent_id="a")
    result = await engine.decay_forecast("a", [stored.id], time.time() + 7 * 86400)
    (f,) = result.forecasts
    assert f.forecasted_fidelity == pytest.approx(8**-0.3, abs=1e-3)  # a week of days: (1 + 7)^-0.3
    assert f.estimated_threshold_date is None  # some 12,700 years on


async def test_forecast_of_an_unknown_or_foreign_id_is_a_404(engine: cpersona.Engine) -> None:
    mine = (await engine.store("mine", agent_id="a")).id
    theirs = (await engine.store("theirs", agent_id="b")).id
    with pytest.raises(cpersona.RecordNotFound):
        await engine.decay_forecast("a", [mine, theirs], time.time())


@settings(max_examples=200)
@given(
    st.floats(0, 1),
    st.floats(0.05, 1.0),
    st.floats(0.5, 50.0),
    st.floats(0.01, 1.0),
    st.sampled_from([REFERENCE_HOURS, 1.0, 24.0]),
)
def test_the_closed_form_crossing_is_where_the_fidelity_crosses(
    intensity: float, rate: float, stability: float, score: float, hours: float
) -> None:
    curve = FidelityCurve(hours)
    f = Fidelity(score=score, decay_rate=rate, stability=stability, last_accessed_at=0.0)
    record = _memory(f, EmotionVector(intensity=intensity))
    at = threshold_time(record, curve)
    if at is None:
        return
    assert current_fidelity(f, record.emotion, at * 0.999, curve=curve) >= PRUNE_THRESHOLD * 0.999
    assert current_fidelity(f, record.emotion, at * 1.001 + 1e-6, curve=curve) <= PRUNE_THRESHOLD * 1.001


async def test_ageing_writes_the_fidelity_alone_and_never_brings_a_memory_back(
    engine: cpersona.Engine,
) -> None:
    kept = await engine.store("before the update", agent_id="a")
    gone = await engine.store("deleted meanwhile", agent_id="a")
    read = await engine.backends.records.get("memory", kept.id)
    assert isinstance(read, MemoryRecord)
    # What the tick read is older than what the store now holds: an update, and a delete.
    await engine.update(kept.ref, agent_id="a", content="after the update")
    await engine.delete(gone.ref, agent_id="a")
    written = await engine.backends.records.set_fidelities(
        [(kept.id, aged(read.fidelity, 60)), (gone.id, aged(read.fidelity, 60))]
    )
    assert written == 1
    assert await engine.backends.records.get("memory", gone.id) is None
    now = await engine.backends.records.get("memory", kept.id)
    assert isinstance(now, MemoryRecord)
    assert now.content == "after the update"
    assert now.fidelity.last_accessed_at == read.fidelity.last_accessed_at - 60
