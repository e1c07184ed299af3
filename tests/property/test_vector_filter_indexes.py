"""Every payload field a vector filter can restrict has a payload index: a filtered search is planned from
the indexes, and a field without one would be checked point by point across the whole shard."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cpersona.stores.protocols import VectorFilter
from cpersona.stores.vectors.common import HIT_FIELDS, PAYLOAD_INDEXES, filter_clauses

_values = st.none() | st.lists(st.text(max_size=5), min_size=1, max_size=3).map(tuple)
_kinds = st.none() | st.lists(st.sampled_from(["memory", "episode", "block"]), min_size=1).map(tuple)
_ints = st.none() | st.integers(-(10**9), 10**9)
_floats = st.none() | st.floats(allow_nan=False, allow_infinity=False)


@given(
    st.builds(
        VectorFilter,
        agent_id=st.text(min_size=1, max_size=5),
        project_ids=_values,
        channels=_values,
        kinds=_kinds,
        min_seq=_ints,
        max_seq=_ints,
        min_timestamp=_floats,
        max_timestamp=_floats,
    )
)
def test_every_field_a_filter_restricts_is_indexed(flt: VectorFilter) -> None:
    assert {clause.key for clause in filter_clauses(flt)} <= set(PAYLOAD_INDEXES)


def test_indexes_are_kept_for_fields_filters_restrict_not_for_what_hits_only_read() -> None:
    # Every index costs each upsert and flush; one no filter can use is work for nothing.
    everything = VectorFilter("a", ("",), ("",), ("memory",), 0, 1, 0.0, 1.0)
    filtered = {clause.key for clause in filter_clauses(everything)}
    assert set(PAYLOAD_INDEXES) == filtered
    assert "parent" in HIT_FIELDS
    assert "parent" not in PAYLOAD_INDEXES
