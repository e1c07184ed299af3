"""Whether two recalls of one question returned the same rows, as far as the embedder promises.

A query embedded alone and the same query embedded among concurrent ones get vectors within the
embedder's tolerance, not bit for bit (:mod:`cpersona.stores.embedding.embedders`), so two rows whose
cosines lie within ``COSINE_TOLERANCE`` of each other may come in either order, and a row at the end of
the list may give way to one of (nearly) its cosine. Lists that differ only so are *tied*, not different.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from cpersona.stores.embedding.embedders import COSINE_TOLERANCE

if TYPE_CHECKING:
    from collections.abc import Callable

    import cpersona

__all__ = ["Ranked", "compare", "ranked"]

Ranked = tuple[tuple[str, float | None], ...]
"""A recall's rows in order: each row's key and the cosine its reason gives (``None`` without one)."""


def ranked(result: cpersona.RecallResult, key: Callable[[cpersona.RecallRow], str]) -> Ranked:
    return tuple((key(row), _cosine(row)) for row in result.rows)


def compare(a: Ranked, b: Ranked) -> Literal["same", "tied", "different"]:
    """``same`` when the keys agree place by place; ``tied`` when, at every place where they do not,
    both rows have cosines within ``COSINE_TOLERANCE`` of each other; ``different`` otherwise."""
    if [k for k, _ in a] == [k for k, _ in b]:
        return "same"
    if len(a) != len(b):
        return "different"
    for (key_a, cos_a), (key_b, cos_b) in zip(a, b, strict=True):
        if key_a != key_b and (cos_a is None or cos_b is None or abs(cos_a - cos_b) > COSINE_TOLERANCE):
            return "different"
    return "tied"


def _cosine(row: cpersona.RecallRow) -> float | None:
    value = dict(row.match_reason).get("cosine")
    return None if value is None else float(value)
