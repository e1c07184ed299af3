"""Stage 8, quoting: a record's passages (its blocks, split as the block builder splits them) ranked by
fusing, with RRF at K = 60, their trigram overlap with the query and the recall's vector judgement (the
block the recall's block arm found nearest the query vector, first; no second embedding). A quote is
ONE contiguous span of the stored text: the best passage, widened by its better-ranked neighbour while
it fits the cap (a passage longer than the cap is cut to it), so every quote is a substring of its
record. A record no longer than the cap is quoted whole."""

from __future__ import annotations

import unicodedata
from typing import TYPE_CHECKING

from cpersona.model.blocks import MAX_BLOCK_CHARS, split_blocks

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["RRF_K", "passage_spans", "quote_span", "rank_passages"]

RRF_K = 60


def _grams(text: str) -> set[str]:
    norm = " ".join(unicodedata.normalize("NFKC", text).casefold().split())
    return {norm[i : i + 3] for i in range(len(norm) - 2)}


def rank_passages(
    text: str, spans: Sequence[tuple[int, int]], query: str, best_block: int | None
) -> list[int]:
    """Passage indices, best first."""
    wanted = _grams(query)
    overlap = [len(wanted & _grams(text[s:e])) for s, e in spans]
    lexical = sorted(range(len(spans)), key=lambda i: (-overlap[i], i))
    score = [0.0] * len(spans)
    for rank, i in enumerate(lexical):
        score[i] += 1.0 / (RRF_K + rank)
    if best_block is not None and 0 <= best_block < len(spans):
        score[best_block] += 1.0 / RRF_K
    return sorted(range(len(spans)), key=lambda i: (-score[i], i))


def quote_span(
    text: str, query: str, cap: int, *, best_block: int | None = None, max_chars: int = MAX_BLOCK_CHARS
) -> tuple[int, int]:
    """The span to quote from ``text``, at most ``cap`` characters."""
    if len(text) <= cap:
        return 0, len(text)
    spans = split_blocks(text, max_chars=max_chars) or [(0, len(text))]
    ranked = rank_passages(text, spans, query, best_block)
    place = {i: n for n, i in enumerate(ranked)}
    lo = hi = ranked[0]
    start, end = spans[lo]
    if end - start >= cap:
        return start, start + cap
    while True:
        options = [i for i in (lo - 1, hi + 1) if 0 <= i < len(spans)]
        options = [i for i in options if max(end, spans[i][1]) - min(start, spans[i][0]) <= cap]
        if not options:
            return start, end
        pick = min(options, key=lambda i: place[i])
        lo, hi = min(lo, pick), max(hi, pick)
        start, end = min(start, spans[pick][0]), max(end, spans[pick][1])


def passage_spans(
    text: str, query: str, cap: int, *, best_block: int | None = None, max_chars: int = MAX_BLOCK_CHARS
) -> list[tuple[int, int]]:
    """The record's passages, best first, each cut to ``cap`` (the whole record when it fits the cap)."""
    if len(text) <= cap:
        return [(0, len(text))]
    spans = split_blocks(text, max_chars=max_chars) or [(0, len(text))]
    return [
        (spans[i][0], min(spans[i][1], spans[i][0] + cap))
        for i in rank_passages(text, spans, query, best_block)
    ]
