"""A batch's caller vectors are checked and scaled as one array; that must give exactly what checking
each alone gives: the same unit vectors bit for bit, or the error of the first bad vector in order."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpersona.errors import InvalidRequest
from cpersona.model.memory_request import _frozen_array
from cpersona.stores.vector_values import caller_vector, caller_vectors

DIM = 5

_component = st.floats(-1e6, 1e6, width=64) | st.sampled_from([0.0, 1e-46, 1e-30, 1e20, 3e38, 1e39, -1e39])
_good = st.lists(_component, min_size=DIM, max_size=DIM)
_odd = st.one_of(
    st.just([0.0] * DIM),
    st.just([float("nan")] + [1.0] * (DIM - 1)),
    st.just([float("inf")] + [1.0] * (DIM - 1)),
    st.lists(_component, min_size=DIM + 1, max_size=DIM + 1),
    st.lists(_component, min_size=1, max_size=DIM - 1),
)
_vectors = st.lists(st.none() | _good | _odd, max_size=7)


def _alone(given: list[list[float] | None], dim: int | None) -> object:
    try:
        return [
            None if v is None else caller_vector(v, dim, f"records[{k}].embedding")
            for k, v in enumerate(given)
        ]
    except InvalidRequest as exc:
        return (exc.field, str(exc))


def _together(given: list[list[float] | None], dim: int | None) -> object:
    try:
        return caller_vectors(given, dim, [f"records[{k}].embedding" for k in range(len(given))])
    except InvalidRequest as exc:
        return (exc.field, str(exc))


def _same(a: object, b: object) -> bool:
    if isinstance(a, tuple) or isinstance(b, tuple):
        return a == b
    assert isinstance(a, list)
    assert isinstance(b, list)
    return len(a) == len(b) and all(
        (x is None and y is None)
        or (x is not None and y is not None and x.dtype == y.dtype and x.tobytes() == y.tobytes())
        for x, y in zip(a, b, strict=True)
    )


@given(vectors=_vectors)
@settings(max_examples=300, deadline=None)
def test_a_batch_is_checked_as_each_vector_alone(vectors: list[list[float] | None]) -> None:
    assert _same(_together(vectors, DIM), _alone(vectors, DIM))


@given(vectors=_vectors)
@settings(max_examples=200, deadline=None)
def test_arrays_as_drafts_hold_them_give_what_the_lists_give(vectors: list[list[float] | None]) -> None:
    arrays = [None if v is None else np.asarray(v, dtype=np.float64) for v in vectors]
    assert _same(_together(arrays, DIM), _alone(vectors, DIM))  # type: ignore[arg-type]


@given(vectors=_vectors)
@settings(max_examples=30, deadline=None)
def test_without_an_index_any_vector_is_refused_and_none_is_not(vectors: list[list[float] | None]) -> None:
    assert _same(_together(vectors, None), _alone(vectors, None))


def test_a_bad_vector_is_named_by_its_own_field_after_good_ones() -> None:
    good = [1.0, 2.0, 0.0, 0.0, 0.0]
    with pytest.raises(InvalidRequest) as refused:
        caller_vectors([good, None, good, [0.0] * DIM], DIM, ["a", "b", "c", "d"])
    assert refused.value.field == "d"
    assert "all zeros" in str(refused.value)
    units = caller_vectors([good, None], DIM, ["a", "b"])
    assert units[1] is None
    assert units[0] is not None
    assert abs(float(np.linalg.norm(units[0])) - 1.0) < 1e-6


@given(values=st.lists(st.floats(width=64, allow_nan=False) | st.integers(-(2**53), 2**53), max_size=40))
@settings(max_examples=300, deadline=None)
def test_a_draft_holds_the_numbers_sent_bit_for_bit_read_only(values: list[float]) -> None:
    held = _frozen_array(values)
    assert held.dtype == np.float64
    assert held.tobytes() == np.asarray(values, dtype=np.float64).tobytes()
    assert not held.flags.writeable
