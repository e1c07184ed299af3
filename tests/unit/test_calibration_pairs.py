"""Calibration measures the cosines the gate compares: a query vector against stored ones."""

from __future__ import annotations

import numpy as np

from cpersona.engine.calibration import _similarities


def _unit(rows: list[list[float]]) -> list[np.ndarray]:
    return [np.asarray(r, dtype=np.float32) / np.linalg.norm(r) for r in rows]


def test_a_pair_is_one_memory_asked_against_another_stored() -> None:
    stored = _unit([[1, 0, 0], [0, 1, 0], [1, 1, 0]])
    asked = _unit([[0, 1, 0], [1, 0, 0], [0, 0, 1]])
    sims = _similarities(stored, asked)
    for i in range(3):
        for j in range(3):
            expected = float(np.dot(asked[i].astype(np.float64), stored[j].astype(np.float64)))
            assert abs(sims[i, j] - expected) < 1e-6
    assert not np.allclose(sims, sims.T)  # asked and stored differ, so the pairs are not symmetric


def test_a_model_without_prefixes_keeps_the_stored_texts_own_cosines() -> None:
    rng = np.random.default_rng(3)
    stored = list(rng.standard_normal((12, 8)).astype(np.float32))
    sims = _similarities(stored, stored)
    vectors = np.stack(stored).astype(np.float64)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    assert np.array_equal(sims, vectors @ vectors.T)
