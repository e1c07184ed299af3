"""The plan of a consolidation (Cerememory §6), pure: which episodic memories are near-duplicates of
each other, which one of a group survives, and the id of an episodic memory's semantic copy.

Two episodic memories are near-duplicates when their texts are the same once case and spacing are set
aside, or — when vectors are given — when their cosine similarity exceeds 0.92 (the reference's figure);
groups are closed under the relation (a union-find), so the plan does not depend on the order read.

The semantic copy's id is derived from the original's (a UUIDv5), so a second consolidation finds the copy
it made the first time and makes none: consolidation is idempotent, which the reference's is not.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["DUPLICATE_COSINE", "Candidate", "copy_id", "duplicate_groups", "survivor", "text_key"]

DUPLICATE_COSINE = 0.92
_COPY_NAMESPACE = uuid.UUID("6f1d3c2e-51a4-4c0e-9a57-2f3b8d7e4c19")


def copy_id(record_id: str) -> str:
    """The id of the semantic copy of the episodic memory ``record_id`` (the same on every call)."""
    return str(uuid.uuid5(_COPY_NAMESPACE, record_id))


def text_key(text: str) -> str:
    return " ".join(text.casefold().split())


@dataclasses.dataclass(frozen=True, slots=True)
class Candidate:
    """What the plan reads of one episodic memory."""

    id: str
    text: str
    fidelity: float
    seq: int


def _root(parent: list[int], i: int) -> int:
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


def _join(parent: list[int], a: int, b: int) -> None:
    ra, rb = _root(parent, a), _root(parent, b)
    if ra != rb:
        parent[max(ra, rb)] = min(ra, rb)


_BLOCK = 512


def _close_pairs(matrix: Any) -> list[tuple[int, int]]:
    """The pairs ``i < j`` whose cosine similarity exceeds :data:`DUPLICATE_COSINE`, a block of rows
    against all at a time (one matrix product per block, not one per row)."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    unit = matrix / np.where(norms == 0, 1.0, norms)
    pairs: list[tuple[int, int]] = []
    for start in range(0, len(unit), _BLOCK):
        rows, cols = np.nonzero(unit[start : start + _BLOCK] @ unit.T > DUPLICATE_COSINE)
        pairs.extend((start + int(r), int(c)) for r, c in zip(rows, cols, strict=True) if start + r < c)
    return pairs


def duplicate_groups(items: Sequence[Candidate], vectors: Sequence[Any] | None = None) -> list[list[int]]:
    """The groups (positions into ``items``, ascending) of two or more near-duplicates, ordered by
    their first position."""
    parent = list(range(len(items)))
    seen: dict[str, int] = {}
    for i, item in enumerate(items):
        first = seen.setdefault(text_key(item.text), i)
        if first != i:
            _join(parent, first, i)
    if vectors is not None and len(items) > 1:
        for i, j in _close_pairs(np.asarray(vectors, dtype=np.float32)):
            _join(parent, i, j)
    groups: dict[int, list[int]] = {}
    for i in range(len(items)):
        groups.setdefault(_root(parent, i), []).append(i)
    return [g for g in groups.values() if len(g) > 1]


def survivor(items: Sequence[Candidate], group: Sequence[int]) -> int:
    """The member of ``group`` that is kept: the best kept (highest current fidelity), then the oldest."""
    return min(group, key=lambda i: (-items[i].fidelity, items[i].seq, items[i].id))
