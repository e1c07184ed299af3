"""The vector arms' bar: a calibrated cosine is the store's own; the policy's minimum is carried into the
embedder's cosines after its factor, so a model with another scale keeps the floor's meaning."""

from __future__ import annotations

from cpersona.embedding_models import EMBEDDING_MODELS
from cpersona.recall.plan import VectorBar


def test_the_policy_minimum_is_lowered_then_carried() -> None:
    bar = VectorBar(None, 0.3, (0.7, 0.9))
    assert bar.floor() == 0.7 + (0.9 - 0.7) * 0.3
    # half the bar is .15 in MiniLM's cosines, carried: not half the carried .76
    assert bar.floor(0.5) == 0.7 + (0.9 - 0.7) * 0.15
    assert bar.floor(0.5) > bar.floor() / 2


def test_a_calibrated_bar_is_not_carried() -> None:
    bar = VectorBar(0.82, 0.3, (0.7, 0.9))
    assert (bar.floor(), bar.floor(0.5)) == (0.82, 0.41)


def test_minilm_floors_are_exactly_the_policy_numbers() -> None:
    scale = EMBEDDING_MODELS["all-MiniLM-L6-v2"].gate_scale
    assert scale == (0.0, 1.0)
    for minimum in (0.3, 0.25, 0.1 + 0.2):
        for factor in (1.0, 0.5, 0.3):
            assert VectorBar(None, minimum, scale).floor(factor) == minimum * factor


def test_every_registered_scale_is_an_increasing_line() -> None:
    for model in EMBEDDING_MODELS.values():
        zero, one = model.gate_scale
        assert -1.0 <= zero < one <= 1.0, model.name
