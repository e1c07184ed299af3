"""Reading caller input into typed values, with errors that name the field.

Every entry point (Python, HTTP, CLI) goes through these helpers, so a wrong value is refused the same
way everywhere: :class:`~cpersona.InvalidRequest` with the dotted field name and what was wrong. Nothing
is clamped or dropped quietly.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import orjson

from cpersona.errors import ContentTooLarge, InvalidRequest

__all__ = [
    "as_bool",
    "as_choice",
    "as_float",
    "as_int",
    "as_mapping",
    "as_str",
    "as_str_list",
    "as_time",
    "check_json_size",
    "clean_text",
]

_S = TypeVar("_S", bound=str)


def as_str(value: object, field: str, *, max_len: int, allow_empty: bool = True) -> str:
    if not isinstance(value, str):
        raise InvalidRequest(field, f"must be a string, got {_kind(value)}")
    if len(value) > max_len:
        raise InvalidRequest(field, f"must be at most {max_len} characters, got {len(value)}")
    if not allow_empty and not value.strip():
        raise InvalidRequest(field, "must not be empty")
    return value


def clean_text(value: object, field: str, *, max_len: int) -> str:
    """Text content: a non-blank string within the limit, with NUL and other C0 controls refused."""
    if not isinstance(value, str):
        raise InvalidRequest(field, f"must be a string, got {_kind(value)}")
    if not value.strip():
        raise InvalidRequest(field, "must not be empty or only whitespace")
    if len(value) > max_len:
        raise ContentTooLarge(field, f"is {len(value)} characters; the limit is {max_len}")
    for ch in value:
        if unicodedata.category(ch) == "Cc" and ch not in "\t\n\r":
            raise InvalidRequest(field, f"contains the control character U+{ord(ch):04X}")
    return value


def as_choice(value: object, field: str, choices: Sequence[_S]) -> _S:
    for choice in choices:
        if value == choice:
            return choice
    raise InvalidRequest(field, f"must be one of {', '.join(choices)}; got {value!r}")


def as_bool(value: object, field: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidRequest(field, f"must be true or false, got {_kind(value)}")
    return value


def as_int(value: object, field: str, *, lo: int | None = None, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRequest(field, f"must be an integer, got {_kind(value)}")
    if lo is not None and value < lo:
        raise InvalidRequest(field, f"must be at least {lo}, got {value}")
    if hi is not None and value > hi:
        raise InvalidRequest(field, f"must be at most {hi}, got {value}")
    return value


def as_float(value: object, field: str, *, lo: float | None = None, hi: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidRequest(field, f"must be a number, got {_kind(value)}")
    out = float(value)
    if not math.isfinite(out):
        raise InvalidRequest(field, "must be a finite number")
    if lo is not None and out < lo:
        raise InvalidRequest(field, f"must be at least {lo}, got {out}")
    if hi is not None and out > hi:
        raise InvalidRequest(field, f"must be at most {hi}, got {out}")
    return out


def as_mapping(value: object, field: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidRequest(field, f"must be an object, got {_kind(value)}")
    for key in value:
        if not isinstance(key, str):
            raise InvalidRequest(field, "keys must be strings")
    return value


def as_str_list(value: object, field: str, *, max_items: int, max_len: int) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise InvalidRequest(field, f"must be a list of strings, got {_kind(value)}")
    if len(value) > max_items:
        raise InvalidRequest(field, f"must have at most {max_items} items, got {len(value)}")
    return tuple(as_str(item, f"{field}[{i}]", max_len=max_len) for i, item in enumerate(value))


def check_json_size(value: object, field: str, *, max_len: int) -> None:
    """Refuse a JSON value whose serialised form is longer than ``max_len`` characters."""
    try:
        size = len(orjson.dumps(value).decode())
    except TypeError as exc:
        raise InvalidRequest(field, f"must be JSON-serialisable ({exc})") from None
    if size > max_len:
        raise ContentTooLarge(field, f"serialises to {size} characters; the limit is {max_len}")


def as_time(value: object, field: str) -> float:
    """A point in time as epoch seconds, from ISO 8601 text or a number of epoch seconds.

    A date alone is UTC midnight; a time without an offset is UTC.
    """
    if isinstance(value, bool):
        raise InvalidRequest(field, "must be an ISO 8601 time or epoch seconds, got a boolean")
    if isinstance(value, int | float):
        return as_float(value, field, lo=0.0)
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        text = value.strip()
        if len(text) > 64:
            raise InvalidRequest(field, "must be at most 64 characters")
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            raise InvalidRequest(field, f"is not an ISO 8601 time: {value!r}") from None
    else:
        raise InvalidRequest(field, f"must be an ISO 8601 time or epoch seconds, got {_kind(value)}")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _kind(value: object) -> str:
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "an object",
    }.get(type(value), type(value).__name__)
