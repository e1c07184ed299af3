"""Preparing vector points checks a batch as one array and skips re-parsing canonical ids; both must
give exactly what the point-by-point checks gave: the same prepared points, or the same error."""

from __future__ import annotations

import uuid

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cpersona.stores.protocols import VectorPoint
from cpersona.stores.vectors.common import (
    PreparedPoint,
    _checked_vector,
    point_id,
    point_payload,
    prepare_points,
)

DIM = 6


def reference(points: list[VectorPoint], dim: int) -> list[PreparedPoint]:
    """prepare_points as it was: every point checked alone, in order."""
    prepared: dict[str, PreparedPoint] = {}
    for point in points:
        payload = point_payload(point)
        pid = str(payload["id"])
        vector = _checked_vector(point.vector, dim, f"vector of point {pid}")
        prepared.pop(pid, None)
        prepared[pid] = PreparedPoint(pid, vector, payload)
    return list(prepared.values())


_ids = st.sampled_from([str(uuid.UUID(int=n)) for n in range(4)]) | st.uuids().map(str)
_good = st.lists(st.floats(-2, 2, width=32), min_size=DIM, max_size=DIM).filter(any)
_bad = st.one_of(
    st.just([0.0] * DIM),
    st.just([float("nan")] * DIM),
    st.just([1.0] * (DIM + 1)),
    st.just([1.0, float("inf")] + [0.0] * (DIM - 2)),
)


@given(vectors=st.lists(_good | _bad, max_size=6), ids=st.lists(_ids, min_size=6, max_size=6))
@settings(max_examples=200, deadline=None)
def test_a_batch_is_prepared_as_point_by_point(vectors: list[list[float]], ids: list[str]) -> None:
    points = [
        VectorPoint(
            id=ids[k],
            vector=np.asarray(v, dtype=np.float32) if k % 2 else v,  # type: ignore[arg-type]
            kind="memory",
            agent_id="a",
            project_id="",
            channel="",
            timestamp=1.0,
            seq=k,
        )
        for k, v in enumerate(vectors)
    ]
    assert _outcome(prepare_points, points) == _outcome(reference, points)


def _outcome(prepare: object, points: list[VectorPoint]) -> object:
    """What preparing gives: the points, or the text of the error it raised."""
    try:
        return prepare(points, DIM)  # type: ignore[operator]
    except ValueError as exc:
        return f"ValueError: {exc}"


@given(value=st.uuids().map(str) | st.uuids().map(lambda u: str(u).upper()) | st.uuids().map(lambda u: u.hex))
def test_a_point_id_is_the_canonical_uuid_text(value: str) -> None:
    assert point_id(value) == str(uuid.UUID(value))
