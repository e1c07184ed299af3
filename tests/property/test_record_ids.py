"""Record ids: UUIDv7 text, written by hand rather than through ``uuid.UUID`` (for speed), so it is held
to what ``uuid`` writes and reads."""

from __future__ import annotations

import time
import uuid

from hypothesis import given
from hypothesis import strategies as st

from cpersona.model.records import new_id, uuid_text


@given(st.integers(min_value=0, max_value=(1 << 128) - 1))
def test_uuid_text_is_what_uuid_writes(value: int) -> None:
    assert uuid_text(value) == str(uuid.UUID(int=value))


def test_a_new_id_is_a_version_7_uuid_of_now() -> None:
    before = time.time_ns() // 1_000_000
    parsed = uuid.UUID(new_id())
    after = time.time_ns() // 1_000_000
    assert parsed.version == 7
    assert parsed.variant == uuid.RFC_4122
    assert before <= parsed.int >> 80 <= after
    assert len({new_id() for _ in range(1000)}) == 1000
