"""How a refused value is said: pydantic's error kinds in the words of the error envelope."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cpersona.model.text_rules import OWN

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["describe", "pattern_in_words", "problem"]

_KINDS = {
    "string_type": "a string",
    "int_type": "an integer",
    "bool_type": "true or false",
    "float_type": "a number",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "list_type": "a list",
    "tuple_type": "a list",
    "sequence_str": "a list of strings",
}

# What each pattern of the request models asks for, said in words: a refusal never shows the regex.
_PATTERN_WORDS: dict[str, str] = {}


def pattern_in_words(pattern: str, words: str) -> str:
    """``pattern``, remembered as what a refusal of it says (``"a record id: mem:<uuid> or <uuid>"``)."""
    _PATTERN_WORDS[pattern] = words
    return pattern


def problem(kind: str, ctx: Mapping[str, Any], given: object, message: str) -> str:
    """What was wrong with a value, as the error message says it after the field's name."""
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        return "is not a known field"
    if kind in _KINDS:
        return f"must be {_KINDS[kind]}, got {describe(given)}"
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected', '')}; got {given!r}"
    bounds = {
        "greater_than_equal": "at least",
        "less_than_equal": "at most",
        "greater_than": "more than",
        "less_than": "less than",
    }
    if kind in bounds:
        limit = next(iter(ctx.values()), "")
        return f"must be {bounds[kind]} {limit}, got {given!r}"
    if kind == "string_pattern_mismatch":
        words = _PATTERN_WORDS.get(str(ctx.get("pattern", "")), "in the form the API schema gives")
        return f"must be {words}"
    if kind == "string_too_short":
        return "must not be empty"
    if kind.startswith(OWN):
        return message
    return message[:1].lower() + message[1:]


def describe(value: object) -> str:
    """A JSON value's kind as an error message names it (``null``, ``a list``…)."""
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        tuple: "a list",
        dict: "an object",
    }.get(type(value), type(value).__name__)
