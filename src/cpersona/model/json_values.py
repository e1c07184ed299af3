"""What a free JSON value a caller sent (metadata, evidence) may hold, and which values are plain.

Such values are checked by encoding them with orjson, which writes NaN and the infinities as ``null``;
JSON itself has no spelling for them, and the document store refuses the one pydantic writes. So they
are refused at the request, naming the field, rather than stored changed or failing the write.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import orjson

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["NOT_FINITE", "json_length", "non_finite", "plain"]

NOT_FINITE = "holds NaN or an infinity, which JSON cannot carry"


def json_length(value: object) -> int:
    """The length in characters of ``value`` as JSON text. Raises ``TypeError`` (orjson's) when it is
    not serialisable, and ``ValueError`` (:data:`NOT_FINITE`) when it holds NaN or an infinity."""
    text = orjson.dumps(value)
    if b"null" in text and non_finite(value):  # orjson writes NaN and the infinities as null
        raise ValueError(NOT_FINITE)
    return len(text.decode())


def non_finite(value: object) -> bool:
    """Whether ``value`` holds NaN or an infinity anywhere (in lists, tuples and mapping values)."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(non_finite(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(non_finite(v) for v in value)
    return False


_SCALARS = frozenset((str, int, bool, type(None)))


def plain(value: object) -> bool:
    """Whether ``value`` is made only of the exact JSON types (str, int, bool, None, finite float, list,
    tuple, and dict with str keys), which every JSON encoder writes alike. Subclasses, dates, dataclasses
    and the like are not: encoders differ in how, or whether, they write them."""
    kind = type(value)
    if kind in _SCALARS:
        return True
    if kind is float:
        return math.isfinite(value)  # type: ignore[arg-type]
    if kind is dict:
        items: dict[object, object] = value  # type: ignore[assignment]
        if not all(type(key) is str for key in items):
            return False
        members: Iterable[object] = items.values()
    elif kind is list or kind is tuple:
        members = value  # type: ignore[assignment]
    else:
        return False
    # Scalars are the common members: they are told apart here, without a call each.
    return all(type(v) in _SCALARS or plain(v) for v in members)
