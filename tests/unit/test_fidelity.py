"""Fidelity is a function of the time since the baseline, with the reference's formula and figures."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cpersona.model.fidelity import current_fidelity, current_noise, reconsolidated
from cpersona.model.records import EmotionVector, Fidelity

NEUTRAL = EmotionVector()


@pytest.mark.parametrize(
    ("seconds", "intensity", "expected"),
    [(3600, 0.0, 0.0857), (7 * 86400, 0.0, 0.0184), (3600, 1.0, 0.1286), (0, 0.0, 1.0)],
)
def test_the_reference_figures(seconds: int, intensity: float, expected: float) -> None:
    fresh = Fidelity(last_accessed_at=1_000.0)
    got = current_fidelity(fresh, EmotionVector(intensity=intensity), 1_000.0 + seconds)
    assert got == pytest.approx(expected, abs=5e-5)


def test_noise_saturates_after_an_hour_untouched() -> None:
    assert current_noise(Fidelity(), NEUTRAL, 3600.0) == 1.0
    assert current_noise(Fidelity(), NEUTRAL, 0.0) == 0.0


def test_successive_recalls_raise_stability_as_the_reference_lists() -> None:
    f = Fidelity()
    seen = []
    for n in range(5):
        f = reconsolidated(f, NEUTRAL, float(n))
        seen.append(f.stability)
    assert seen == pytest.approx([2.5, 5.62, 11.59, 22.25, 40.19], abs=0.01)
    assert (f.reinforcement_count, f.access_count, f.last_accessed_at) == (5, 5, 4.0)


@given(st.floats(0, 1e8), st.floats(0, 1e8))
def test_reading_never_depends_on_reads_before_it(first: float, second: float) -> None:
    f = Fidelity(last_accessed_at=0.0)
    # Reading is pure: a read at `first` leaves the value at `second` as it was.
    current_fidelity(f, NEUTRAL, first)
    assert current_fidelity(f, NEUTRAL, second) == current_fidelity(dataclasses.replace(f), NEUTRAL, second)
    lo, hi = sorted((first, second))
    assert current_fidelity(f, NEUTRAL, hi) <= current_fidelity(f, NEUTRAL, lo)
