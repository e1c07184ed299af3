"""What the commands share in turning their flags into a request body."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

__all__ = ["number_or_text", "with_given"]


def number_or_text(value: str) -> float | str:
    """A time flag for the request: epoch seconds arrive as text on the command line and go as a number,
    as the HTTP API takes them; anything else (ISO 8601) goes as the text it is."""
    try:
        return float(value)
    except ValueError:
        return value


def with_given(body: Mapping[str, Any], fields: Iterable[tuple[str, object]]) -> dict[str, Any]:
    """A copy of ``body`` with each ``(name, value)`` of ``fields`` whose flag was given (not ``None``)."""
    return {**body, **{name: value for name, value in fields if value is not None}}
