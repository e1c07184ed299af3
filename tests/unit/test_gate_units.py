"""The gate scale's derivation (``benchmarks/gate_units.py``): the line through a model's unrelated-pair
cosines at the shares where the reference model's cross the heuristic's floor and ceiling."""

from __future__ import annotations

import numpy as np
from benchmarks.gate_units import CEILING, FLOOR, Cosines, scale_for

from cpersona.embedding_models import in_cosines


def _cosines(other: np.ndarray) -> Cosines:
    return Cosines(gold=np.asarray([0.9]), other=other)


def test_the_reference_against_itself_is_the_identity() -> None:
    other = np.random.default_rng(1).uniform(-0.1, 0.7, 20_000)
    zero, one = scale_for(_cosines(other), _cosines(other))
    assert abs(zero) < 0.002
    assert abs(one - 1.0) < 0.002


def test_a_model_whose_cosines_are_an_affine_image_gets_that_line() -> None:
    reference = np.random.default_rng(2).uniform(-0.1, 0.7, 20_000)
    model = 0.7 + 0.25 * reference  # unrelated texts high and close together, as e5's are
    zero, one = scale_for(_cosines(reference), _cosines(model))
    assert abs(zero - 0.7) < 0.002
    assert abs(one - 0.95) < 0.002
    # the carried floor and ceiling refuse the same share of the model's unrelated pairs
    for t in (FLOOR, CEILING):
        carried = in_cosines(t, (zero, one))
        assert abs(np.mean(model < carried) - np.mean(reference < t)) < 0.01
