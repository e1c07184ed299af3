"""Fidelity is a function of the time since the baseline, with the reference's formula on a time scale
that is a setting (``CPERSONA_FIDELITY_STABILITY_HOURS``, a day by default; the reference's is a second)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cpersona.engine.upkeep import threshold_time
from cpersona.model.fidelity import (
    FidelityCurve,
    current_fidelity,
    current_noise,
    is_decayed,
    reconsolidated,
)
from cpersona.model.records import EmotionVector, Fidelity, MemoryRecord, Scope, Source
from cpersona.settings import Settings

NEUTRAL = EmotionVector()
HOUR, DAY, YEAR = 3_600.0, 86_400.0, 365.25 * 86_400.0
DEFAULT = FidelityCurve()
# The reference engine's scale: one unit of stability is one second.
REFERENCE = FidelityCurve(stability_hours=1 / 3600)
T0 = 1_750_000_000.0


def _memory(fidelity: Fidelity, emotion: EmotionVector = NEUTRAL) -> MemoryRecord:
    return MemoryRecord("0", Scope("a"), Source(), "text", 0.0, 1, emotion=emotion, fidelity=fidelity)


def test_the_default_is_a_day_and_the_setting_reaches_the_curve() -> None:
    assert Settings().fidelity_stability_hours == DEFAULT.stability_hours == 24.0
    assert DEFAULT.unit_secs == DAY
    assert FidelityCurve.of(Settings(fidelity_stability_hours=6)) == FidelityCurve(6.0)


@pytest.mark.parametrize(
    ("elapsed", "expected"),
    [(0, 1.0), (HOUR, 0.9878), (DAY, 0.8123), (7 * DAY, 0.5359), (30 * DAY, 0.3569), (YEAR, 0.1702)],
)
def test_a_memory_never_recalled_at_the_defaults(elapsed: float, expected: float) -> None:
    # (1 + t/1 day)^-0.3: about .8 a day on, half after nine days, a sixth after a year.
    got = current_fidelity(Fidelity(last_accessed_at=T0), NEUTRAL, T0 + elapsed, curve=DEFAULT)
    assert got == pytest.approx(expected, abs=5e-5)


def test_at_the_defaults_a_memory_is_not_hidden_within_a_year_nor_a_thousand() -> None:
    record = _memory(Fidelity(last_accessed_at=T0))
    assert not is_decayed(record, T0 + YEAR, curve=DEFAULT)
    assert not is_decayed(record, T0 + 1000 * YEAR, curve=DEFAULT)
    # (1 + t/S)^-0.3 = 0.01 at t = 100^(1/0.3) - 1 units: some 12,700 years of days, past any time a
    # record can show, so the forecast names no date.
    assert is_decayed(record, T0 + 12_710 * YEAR, curve=DEFAULT)
    assert not is_decayed(record, T0 + 12_700 * YEAR, curve=DEFAULT)
    assert threshold_time(record, DEFAULT) is None


@pytest.mark.parametrize(
    ("seconds", "intensity", "expected"),
    [(3600, 0.0, 0.0857), (7 * 86400, 0.0, 0.0184), (3600, 1.0, 0.1286), (0, 0.0, 1.0)],
)
def test_the_reference_scale_gives_the_reference_figures(
    seconds: int, intensity: float, expected: float
) -> None:
    fresh = Fidelity(last_accessed_at=1_000.0)
    got = current_fidelity(fresh, EmotionVector(intensity=intensity), 1_000.0 + seconds, curve=REFERENCE)
    assert got == pytest.approx(expected, abs=5e-5)


def test_a_shorter_scale_can_hide_a_memory_within_a_year() -> None:
    # Under 6.8 seconds a unit, an untouched memory falls below the threshold before a year is out.
    fast = FidelityCurve(stability_hours=6.0 / 3600)
    record = _memory(Fidelity(last_accessed_at=T0))
    hidden_at = threshold_time(record, fast)
    assert hidden_at is not None
    assert hidden_at - T0 < YEAR
    assert is_decayed(record, T0 + YEAR, curve=fast)
    assert not is_decayed(record, T0 + 300 * DAY, curve=fast)


@given(st.floats(1e-3, 1e4), st.floats(0, 1e6), st.floats(0.1, 500), st.floats(0, 1))
def test_the_scale_only_stretches_time(
    hours: float, units: float, stability: float, intensity: float
) -> None:
    # A memory on a scale of h hours reads at t·h hours what it reads at t hours on a scale of one hour.
    f = Fidelity(last_accessed_at=T0, stability=stability)
    emotion = EmotionVector(intensity=intensity)
    stretched = current_fidelity(f, emotion, T0 + units * hours * HOUR, curve=FidelityCurve(hours))
    assert stretched == pytest.approx(
        current_fidelity(f, emotion, T0 + units * HOUR, curve=FidelityCurve(1.0))
    )


def test_noise_grows_with_time_in_units_of_the_scale() -> None:
    assert current_noise(Fidelity(), NEUTRAL, 3600.0, curve=REFERENCE) == 1.0
    assert current_noise(Fidelity(), NEUTRAL, 0.0, curve=REFERENCE) == 0.0
    # A day on at the defaults: 0.1·√1·(1 - 2^-0.3).
    assert current_noise(Fidelity(), NEUTRAL, DAY, curve=DEFAULT) == pytest.approx(0.1 * (1 - 2**-0.3))


def test_successive_recalls_raise_stability_as_the_reference_lists() -> None:
    f = Fidelity()
    seen = []
    for n in range(5):
        f = reconsolidated(f, NEUTRAL, float(n), curve=DEFAULT)
        seen.append(f.stability)
    assert seen == pytest.approx([2.5, 5.62, 11.59, 22.25, 40.19], abs=0.01)
    assert (f.reinforcement_count, f.access_count, f.last_accessed_at) == (5, 5, 4.0)


def test_a_recall_slows_the_fading_after_it() -> None:
    stored = Fidelity(last_accessed_at=T0)
    recalled = reconsolidated(stored, NEUTRAL, T0 + 30 * DAY, curve=DEFAULT)
    # Read as fresh from the recall, with stability 2.5: 30 days later it reads (1 + 30/2.5)^-0.3, more
    # than with the stability it had before, and more than had it not been recalled.
    assert current_fidelity(recalled, NEUTRAL, T0 + 30 * DAY, curve=DEFAULT) == 1.0
    later = current_fidelity(recalled, NEUTRAL, T0 + 60 * DAY, curve=DEFAULT)
    assert later == pytest.approx(13**-0.3, rel=1e-9)
    assert later > current_fidelity(stored, NEUTRAL, T0 + 60 * DAY, curve=DEFAULT)
    assert later > current_fidelity(
        dataclasses.replace(recalled, stability=1.0), NEUTRAL, T0 + 60 * DAY, curve=DEFAULT
    )


@given(st.floats(0, 1e10), st.floats(0, 1e10), st.floats(1e-3, 1e5))
def test_reading_never_depends_on_reads_before_it(first: float, second: float, hours: float) -> None:
    curve = FidelityCurve(hours)
    f = Fidelity(last_accessed_at=0.0)
    # Reading is pure: a read at `first` leaves the value at `second` as it was.
    current_fidelity(f, NEUTRAL, first, curve=curve)
    assert current_fidelity(f, NEUTRAL, second, curve=curve) == current_fidelity(
        dataclasses.replace(f), NEUTRAL, second, curve=curve
    )
    lo, hi = sorted((first, second))
    assert current_fidelity(f, NEUTRAL, hi, curve=curve) <= current_fidelity(f, NEUTRAL, lo, curve=curve)


@given(st.lists(st.floats(0, 3 * YEAR), max_size=12), st.floats(0, 3 * YEAR), st.floats(0, 1))
def test_a_recall_never_leaves_a_memory_fainter_than_no_recall(
    recalls: list[float], end: float, intensity: float
) -> None:
    # Recalls at any times before `end`: the memory reads at `end` at least what it would had nobody
    # recalled it (re-anchoring at the faded value made each recall a fresh decay from there, so a
    # memory recalled every few months faded far below one left alone).
    emotion = EmotionVector(intensity=intensity)
    alone = Fidelity(last_accessed_at=T0)
    f = alone
    for at in sorted(r for r in recalls if r <= end):
        f = reconsolidated(f, emotion, T0 + at, curve=DEFAULT)
    assert current_fidelity(f, emotion, T0 + end, curve=DEFAULT) >= current_fidelity(
        alone, emotion, T0 + end, curve=DEFAULT
    )
