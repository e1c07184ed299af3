"""Content and ids refuse control characters by a character class; the class must refuse exactly what
Unicode calls a control character (category Cc), and name the first one, for any text."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_core import PydanticCustomError

from cpersona.model.text_rules import clean_text, no_control

_text = st.text(
    st.characters(max_codepoint=0x3000) | st.sampled_from(["\x00", "\t", "\n", "\r", "\x7f", "\x85", "\x9f"])
)


def _first_control(text: str, allowed: str) -> str | None:
    return next((ch for ch in text if unicodedata.category(ch) == "Cc" and ch not in allowed), None)


def _refused(check: object, text: str) -> str | None:
    try:
        check(text)  # type: ignore[operator]
    except PydanticCustomError as exc:
        return exc.message()
    return None


@given(text=_text)
@settings(max_examples=1_000, deadline=None)
def test_ids_refuse_exactly_the_control_characters(text: str) -> None:
    first = _first_control(text, "")
    expected = None if first is None else f"contains the control character U+{ord(first):04X}"
    assert _refused(no_control, text) == expected


@given(text=_text)
@settings(max_examples=1_000, deadline=None)
def test_content_refuses_the_control_characters_but_tab_and_newlines(text: str) -> None:
    first = _first_control(text, "\t\n\r")
    if not text.strip():
        expected: str | None = "must not be empty or only whitespace"
    else:
        expected = None if first is None else f"contains the control character U+{ord(first):04X}"
    assert _refused(clean_text, text) == expected


@pytest.mark.parametrize("code", [*range(0x20), *range(0x7F, 0xA0)])
def test_every_control_character_is_refused_in_an_id(code: int) -> None:
    assert _refused(no_control, f"agent{chr(code)}x") == f"contains the control character U+{code:04X}"
