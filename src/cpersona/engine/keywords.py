"""How the engine's keyword methods turn the arguments a Python call gave into the body of their request
model, validated once: a keyword left at its default is left out, so the model's own default applies."""

from __future__ import annotations

import enum
from typing import Final, Literal

__all__ = ["UNSET", "Unset", "given", "given_set"]


def given(**values: object) -> dict[str, object]:
    """The keyword arguments a call was given: a ``None`` stands for one left out."""
    return {name: value for name, value in values.items() if value is not None}


class _Unset(enum.Enum):
    UNSET = "UNSET"


UNSET: Final = _Unset.UNSET
"""The default of a keyword whose ``None`` means something (an update's null resets its field)."""

Unset = Literal[_Unset.UNSET]


def given_set(**values: object) -> dict[str, object]:
    """The keyword arguments a call was given, where ``None`` is a value and :data:`UNSET` is one left
    out."""
    return {name: value for name, value in values.items() if value is not UNSET}
