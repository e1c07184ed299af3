"""Two answers of the engine to one question, compared as far as the engine promises they agree.

A cosine is a float32 product whose last bits depend on the BLAS kernel and on how many rows share the
call (the embedder's promise, and the local vector engine scoring a collection that other tests grow), so
two answers that must be "the same" agree exactly in everything but their floats, and in those within
``COSINE_TOLERANCE``.
"""

from __future__ import annotations

import math
from typing import Any

from cpersona.stores.embedding.embedders import COSINE_TOLERANCE


def differences(got: Any, want: Any, where: str = "") -> list[str]:
    """Where ``got`` and ``want`` (JSON values) differ beyond the tolerance; empty when they agree."""
    if isinstance(got, float) or isinstance(want, float):
        if isinstance(got, int | float) and isinstance(want, int | float) and not isinstance(got, bool):
            return [] if math.isclose(got, want, rel_tol=0, abs_tol=COSINE_TOLERANCE) else [where]
        return [where]
    if isinstance(got, dict) and isinstance(want, dict):
        if got.keys() != want.keys():
            return [f"{where} keys {sorted(got.keys() ^ want.keys())}"]
        return [d for key in got for d in differences(got[key], want[key], f"{where}.{key}")]
    if isinstance(got, list | tuple) and isinstance(want, list | tuple):
        if len(got) != len(want):
            return [f"{where} length {len(got)} != {len(want)}"]
        return [
            d
            for i, (g, w) in enumerate(zip(got, want, strict=True))
            for d in differences(g, w, f"{where}[{i}]")
        ]
    return [] if got == want else [where]


def assert_same_answer(got: Any, want: Any) -> None:
    """``got`` is ``want`` up to the last bits of its floats (results and models by their JSON)."""
    wrong = differences(_json(got), _json(want))
    assert not wrong, f"the answers differ at {wrong[:5]}"


def _json(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    return value
