"""What text a request field may hold, said twice: as the check that refuses it and as the JSON schema
pattern the OpenAPI document shows (ECMA 262 as OpenAPI reads it; Python's ``re`` reads it the same)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pydantic_core import PydanticCustomError

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "CLEAN_TEXT_PATTERN",
    "NOT_BLANK_ID_PATTERN",
    "NO_CONTROL_PATTERN",
    "OWN",
    "WHITESPACE_CLASS",
    "clean_text",
    "no_control",
    "not_blank",
    "refusal",
]

OWN = "cpersona."
"""The prefix of our own error types, whose messages are said as written."""


def refusal(kind: str, message: str, context: Mapping[str, object] | None = None) -> PydanticCustomError:
    """A validation error of ours: its message is said as written (pydantic's own are reworded)."""
    return PydanticCustomError(OWN + kind, message, dict(context) if context else None)


# Python's str.isspace() characters (what str.strip() removes), spelled so a JSON schema pattern can say
# "not blank" exactly as the validators mean it; those that are control characters come first.
_CONTROL_SPACE = "\\u0009-\\u000d\\u001c-\\u001f\\u0085"
_SPACE = "\\u0020\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000"
WHITESPACE_CLASS = _CONTROL_SPACE + _SPACE
"""The characters of ``str.isspace()``, as the inside of a regular expression's character class."""
_CONTROL = "\\u0000-\\u001f\\u007f-\\u009f"
_CONTROL_BUT_TAB_NEWLINES = "\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f\\u007f-\\u009f"
NO_CONTROL_PATTERN = f"^[^{_CONTROL}]*$"
"""The JSON schema's pattern of text without control characters (ECMA 262, as OpenAPI reads it)."""
NOT_BLANK_ID_PATTERN = f"^[^{_CONTROL}]*[^{_CONTROL}{_SPACE}][^{_CONTROL}]*$"
"""Text without control characters and not only whitespace: an agent id."""
CLEAN_TEXT_PATTERN = f"^[^{_CONTROL_BUT_TAB_NEWLINES}]*[^{_CONTROL}{_SPACE}][^{_CONTROL_BUT_TAB_NEWLINES}]*$"
"""Stored text: no control characters but tab and newlines, and not only whitespace."""


def clean_text(value: str) -> str:
    # Content is text for people and models: NUL and the other C0 controls (tab and newlines aside) are
    # refused rather than stored where they would break a log line or a terminal.
    if not value.strip():
        raise refusal("blank", "must not be empty or only whitespace")
    _refuse_first(_CONTROL_BUT_TAB_NEWLINES_RE, value)
    return value


def no_control(value: str) -> str:
    _refuse_first(_CONTROL_RE, value)
    return value


# Unicode's control characters (category Cc) are exactly U+0000-U+001F and U+007F-U+009F, and stay so:
# a class the regex engine scans in C (0.8 µs for a text of 100 characters, where asking unicodedata
# of each character took 8).
_CONTROL_RE = re.compile(f"[{_CONTROL}]")
_CONTROL_BUT_TAB_NEWLINES_RE = re.compile(f"[{_CONTROL_BUT_TAB_NEWLINES}]")


def _refuse_first(control: re.Pattern[str], value: str) -> None:
    if found := control.search(value):
        raise refusal("control_character", f"contains the control character U+{ord(found[0]):04X}")


def not_blank(value: str) -> str:
    if not value.strip():
        raise refusal("blank", "must not be empty")
    return value
