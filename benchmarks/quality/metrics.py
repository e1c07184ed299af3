"""Retrieval metrics as pure functions over one ranked list and one gold set, and their averages.

For one question with gold set G and a ranked list of ids (best first):

* ``recall@k``        = |G ∩ top-k| / |G|
* ``any-hit@k``       = 1 if G ∩ top-k is non-empty, else 0
* ``ndcg@k``          binary gains: DCG = Σ_{i ≤ k, id_i ∈ G} 1 / log2(i + 1), divided by the ideal DCG of
                        min(|G|, k) hits at the top
* ``capped recall@k`` = |G ∩ top-k| / min(k, |G|) (LMEB's R_cap: a set larger than k can still score 1)
* ``rows``            = how many ids the system returned (a gate may return fewer than asked)

A ranked list may repeat an id (a system returning the same turn twice); only its first place counts,
so a repeat can neither add a hit nor push the ideal out of reach. Averages are macro: every question
weighs the same, within a category and overall.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Hashable, Iterable, Mapping, Sequence

__all__ = [
    "DEFAULT_KS",
    "QuestionScore",
    "any_hit_at",
    "capped_recall_at",
    "dcg_at",
    "macro_average",
    "ndcg_at",
    "recall_at",
    "recall_curve",
    "score_question",
    "unique",
]

DEFAULT_KS: Final = (1, 5, 10, 20)


def unique(ranked: Iterable[str]) -> list[str]:
    """``ranked`` with repeats removed, keeping each id at its first place."""
    return list(dict.fromkeys(ranked))


def _gold(gold: Iterable[str]) -> frozenset[str]:
    gold_set = frozenset(gold)
    if not gold_set:
        raise ValueError("a question needs at least one gold id")
    return gold_set


def _check_k(k: int) -> None:
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")


def _hits(ranked: Sequence[str], gold: frozenset[str], k: int) -> int:
    return sum(1 for item in unique(ranked)[:k] if item in gold)


def recall_at(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    _check_k(k)
    gold_set = _gold(gold)
    return _hits(ranked, gold_set, k) / len(gold_set)


def any_hit_at(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    _check_k(k)
    return 1.0 if _hits(ranked, _gold(gold), k) > 0 else 0.0


def capped_recall_at(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    _check_k(k)
    gold_set = _gold(gold)
    return _hits(ranked, gold_set, k) / min(k, len(gold_set))


def dcg_at(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    """Discounted cumulative gain with binary gains; position i (1-based) weighs 1 / log2(i + 1)."""
    _check_k(k)
    gold_set = _gold(gold)
    return sum(
        1.0 / math.log2(position + 1)
        for position, item in enumerate(unique(ranked)[:k], start=1)
        if item in gold_set
    )


def ndcg_at(ranked: Sequence[str], gold: Iterable[str], k: int = 10) -> float:
    gold_set = _gold(gold)
    ideal = sum(1.0 / math.log2(position + 1) for position in range(1, min(len(gold_set), k) + 1))
    return dcg_at(ranked, gold_set, k) / ideal


def recall_curve(ranked: Sequence[str], gold: Iterable[str], depth: int) -> list[float]:
    """recall@1 … recall@depth in one pass (for the recall@k chart)."""
    _check_k(depth)
    gold_set = _gold(gold)
    curve = []
    hits = 0
    items = unique(ranked)
    for position in range(depth):
        if position < len(items) and items[position] in gold_set:
            hits += 1
        curve.append(hits / len(gold_set))
    return curve


@dataclasses.dataclass(frozen=True, slots=True)
class QuestionScore:
    """Every metric of one question, with the group (category) it is averaged in."""

    group: Hashable
    values: Mapping[str, float]


def score_question(
    ranked: Sequence[str],
    gold: Iterable[str],
    *,
    group: Hashable,
    ks: Sequence[int] = DEFAULT_KS,
    ndcg_k: int = 10,
    capped: bool = False,
) -> QuestionScore:
    """The standard metric set for one question: ``recall@k`` and ``any_hit@k`` for each k in ``ks``,
    ``ndcg@<ndcg_k>``, ``rows``, and ``capped_recall@k`` when ``capped``."""
    gold_set = _gold(gold)
    values: dict[str, float] = {}
    for k in ks:
        values[f"recall@{k}"] = recall_at(ranked, gold_set, k)
        values[f"any_hit@{k}"] = any_hit_at(ranked, gold_set, k)
        if capped:
            values[f"capped_recall@{k}"] = capped_recall_at(ranked, gold_set, k)
    values[f"ndcg@{ndcg_k}"] = ndcg_at(ranked, gold_set, ndcg_k)
    values["rows"] = float(len(unique(ranked)))
    return QuestionScore(group, values)


def macro_average(
    scores: Iterable[QuestionScore], *, overall: Hashable = "overall"
) -> dict[Hashable, dict[str, float]]:
    """Mean of every metric per group and over all questions (key ``overall``), plus ``count``.

    Every question must carry the same metric names; a group with no questions does not appear.
    """
    sums: dict[Hashable, dict[str, float]] = {}
    counts: dict[Hashable, int] = {}
    names: frozenset[str] | None = None
    for score in scores:
        if names is None:
            names = frozenset(score.values)
        elif frozenset(score.values) != names:
            raise ValueError("questions carry different metric names")
        for key in (score.group, overall):
            bucket = sums.setdefault(key, dict.fromkeys(score.values, 0.0))
            for name, value in score.values.items():
                bucket[name] += value
            counts[key] = counts.get(key, 0) + 1
    return {
        key: {**{name: total / counts[key] for name, total in bucket.items()}, "count": float(counts[key])}
        for key, bucket in sums.items()
    }
