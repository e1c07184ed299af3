"""Preparing vector points checks a batch as one array and skips re-parsing canonical ids; both must
give exactly what the point-by-point checks gave: the same prepared points, or the same error."""

from __future__ import annotations

import uuid

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cpersona.stores.protocols import VectorPoint
from cpersona.stores.vectors.common import (
    _checked_vector,
    hit_from_payload,
    point_id,
    point_payload,
    prepare_points,
)

DIM = 6


def reference(points: list[VectorPoint], dim: int) -> list[tuple[str, list[float], dict[str, object]]]:
    """prepare_points as it was: every point checked alone, in order, a repeated id moved to its last
    place; as (id, vector, payload) rows."""
    prepared: dict[str, tuple[str, list[float], dict[str, object]]] = {}
    for point in points:
        pid, payload = point_payload(point)
        vector = _checked_vector(point.vector, dim, f"vector of point {pid}").tolist()
        prepared.pop(pid, None)
        prepared[pid] = (pid, vector, payload)
    return list(prepared.values())


def batched(points: list[VectorPoint], dim: int) -> list[tuple[str, list[float], dict[str, object]]]:
    prepared = prepare_points(points, dim)
    assert prepared.vectors.dtype == np.float32
    assert prepared.vectors.shape == (len(prepared), dim)
    return prepared.rows()


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
    assert _outcome(batched, points) == _outcome(reference, points)


def _outcome(prepare: object, points: list[VectorPoint]) -> object:
    """What preparing gives: the points, or the text of the error it raised."""
    try:
        return prepare(points, DIM)  # type: ignore[operator]
    except ValueError as exc:
        return f"ValueError: {exc}"


@given(value=st.uuids().map(str) | st.uuids().map(lambda u: str(u).upper()) | st.uuids().map(lambda u: u.hex))
def test_a_point_id_is_the_canonical_uuid_text(value: str) -> None:
    assert point_id(value) == str(uuid.UUID(value))


@given(count=st.integers(0, 9), size=st.integers(1, 4))
def test_chunks_cut_the_batch_in_order_without_losing_a_point(count: int, size: int) -> None:
    points = [
        VectorPoint(
            str(uuid.UUID(int=k + 1)), np.full(DIM, k + 1.0, dtype=np.float32), "memory", "a", "", "", 1.0, k
        )
        for k in range(count)
    ]
    prepared = prepare_points(points, DIM)
    chunks = prepared.chunks(size)
    assert all(0 < len(chunk) <= size for chunk in chunks)
    assert [row for chunk in chunks for row in chunk.rows()] == prepared.rows()


def test_a_payload_holds_what_searches_filter_on_or_read_back() -> None:
    record = VectorPoint(str(uuid.UUID(int=7)), np.ones(DIM, np.float32), "memory", "a", "p", "c", 5.0, 9)
    pid, payload = point_payload(record)
    assert pid == str(uuid.UUID(int=7))
    # The point's own id is not repeated in it (but as its own parent, which readers of earlier releases
    # need), nor a block index of 0 (a hit reads 0 when it is absent).
    assert payload == {
        "kind": "memory",
        "agent_id": "a",
        "project_id": "p",
        "channel": "c",
        "timestamp": 5.0,
        "seq": 9,
        "parent": pid,
    }
    # A point stored without a parent reads as its own (a later release may stop writing it).
    del payload["parent"]
    hit = hit_from_payload(uuid.UUID(int=7), 0.5, payload)
    assert (hit.parent, hit.block_index) == (pid, 0)
    block = VectorPoint(str(uuid.UUID(int=8)), np.ones(DIM, np.float32), "block", "a", "", "", 5.0, 9, pid, 2)
    assert point_payload(block)[1]["block_index"] == 2
    assert point_payload(block)[1]["parent"] == pid
