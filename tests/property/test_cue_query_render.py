"""Human rendering of recalled memories: deterministic from the record and its fidelity, a lower
fidelity masks a superset, perfect mode and high fidelity are exact (properties, with hypothesis)."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from cpersona.operations.query.render import CLEAR_FIDELITY, MASK, MAX_MASKED, masked_share, render_text

_text = st.text(st.sampled_from("ab c\nd\te  fg"), max_size=60)
_ids = st.uuids().map(str)
_fidelity = st.floats(0.0, 1.0)


def _masked(original: str, rendered: str) -> set[int]:
    words, shown = original.split(), rendered.split()
    assert len(words) == len(shown)
    return {i for i, (w, s) in enumerate(zip(words, shown, strict=True)) if s == MASK and w != MASK}


@given(_text, _ids, _fidelity)
def test_the_same_record_and_fidelity_always_render_the_same(text: str, rid: str, fidelity: float) -> None:
    assert render_text(text, rid, fidelity, "human") == render_text(text, rid, fidelity, "human")


@given(_text, _ids, _fidelity, _fidelity)
def test_a_lower_fidelity_masks_a_superset(text: str, rid: str, a: float, b: float) -> None:
    low, high = sorted((a, b))
    assert _masked(text, render_text(text, rid, high, "human")) <= _masked(
        text, render_text(text, rid, low, "human")
    )


@given(_text, _ids, _fidelity)
def test_whitespace_and_word_count_are_kept(text: str, rid: str, fidelity: float) -> None:
    rendered = render_text(text, rid, fidelity, "human")
    assert re.findall(r"\s+", rendered) == re.findall(r"\s+", text)


@given(_text, _ids, _fidelity)
def test_perfect_mode_is_exact(text: str, rid: str, fidelity: float) -> None:
    assert render_text(text, rid, fidelity, "perfect") == text


@given(_text, _ids, st.floats(CLEAR_FIDELITY, 1.0))
def test_a_clear_memory_is_shown_as_stored(text: str, rid: str, fidelity: float) -> None:
    assert render_text(text, rid, fidelity, "human") == text


def test_the_share_of_masked_words() -> None:
    assert masked_share(0.95) == 0.0
    assert masked_share(0.7) == 0.30000000000000004
    assert masked_share(0.1) == MAX_MASKED
    # about 1 - fidelity of many words go
    text = " ".join(f"w{i}" for i in range(4000))
    lost = render_text(text, "r", 0.6, "human").split().count(MASK) / 4000
    assert 0.37 < lost < 0.43
