"""Blocks: clause-sized spans of a record, and the ids of their vectors. Pure functions, no I/O.

A long memory embeds into one vector that averages everything it says, so a question about one of its
paragraphs may miss it. Blocks give every sentence-or-so of a record a vector of its own, in a second
vector collection. :func:`split_blocks` cuts a text into spans, deterministically, at structural
boundaries only; the block builder (``engine.workers.blocks``) embeds them and the block arm
(``recall.arms.block``) searches them.

Block point ids are UUIDv5 of ``"<parent id>/<block index>"`` under a namespace per parent kind (one
for memories, one for episodes). A search hit carries the parent id and block index in its payload, so
recomputing the id under each namespace tells whether the parent is a memory or an episode without a
payload field the record collection has no use for, and without a Redis round trip on the recall path.
A hit whose id matches neither namespace was not written here and is ignored.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = ["MAX_BLOCK_CHARS", "ParentKind", "block_id", "block_ids", "parent_kind", "split_blocks"]

ParentKind = Literal["memory", "episode"]

MAX_BLOCK_CHARS = 739
"""The reference's block length cap; policies carry their own (``[blocks] max_chars``)."""

# ------------------------------------------------------------------------------------------ splitting

# 。 and the full-width period, exclamation mark and question mark end a sentence wherever they stand.
_WIDE_ENDS = frozenset("\u3002\uff0e\uff01\uff1f")
_ASCII_ENDS = frozenset(".!?")  # end a sentence only before whitespace or the end of the text
_PAIRS: Mapping[str, str] = {
    "(": ")", "[": "]", "{": "}", "「": "」", "『": "』",
    "\uff08": "\uff09",  # full-width parentheses
}  # fmt: skip
_CLOSERS: Mapping[str, str] = {close: open_ for open_, close in _PAIRS.items()}
_NEWLINES = frozenset("\n\r")
_COMMAS = frozenset(",、\uff0c")  # the last is the full-width comma
_FENCE = "```"

# Forced-cut preferences, strongest first: a blank line, a newline, a sentence end, a comma, a space.
_BLANK, _NEWLINE, _SENTENCE, _COMMA, _SPACE = range(5)


def split_blocks(text: str, *, max_chars: int = MAX_BLOCK_CHARS) -> list[tuple[int, int]]:
    """Cut ``text`` into ``(start, end)`` character spans that cover it in order, each ``<= max_chars``.

    Every structural boundary outside fenced code, brackets and quotes is a cut: a blank line, a
    newline, and a sentence end (``。`` and the full-width ``.!?`` anywhere; ``.!?`` before whitespace
    or the end; also a closing bracket or quote right after such a mark). Whitespace after a boundary
    stays with the span before it. A span still longer than ``max_chars`` has no allowed boundary, so
    it is forced apart near the limit at the strongest mark inside it (a blank line, a newline, a
    sentence end — these may sit inside code or quotes — then a comma, then a space), or hard at the
    limit; a fenced code block that fits in ``max_chars`` is never cut. A whitespace-only span folds
    into the span after it (or, at the end, before it) when the result fits.

    Brackets (``()[]{}「」『』`` and full-width parentheses) and ``"`` count only when matched, so a
    stray ``(`` or ``:)`` does not silence the rest of the text, and nothing is matched across a blank
    line: outside code, a paragraph break is always a cut. An unclosed fence runs to the end.
    """
    if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1:
        raise ValueError(f"max_chars must be a positive integer, got {max_chars!r}")
    n = len(text)
    if n == 0:
        return []
    fences = _fences(text)
    pairs = _matched_pairs(text, fences)
    cut_blocked, short_blocked = _blocked(n, pairs, fences, max_chars)
    cuts = _natural_cuts(text, cut_blocked, {close_at for _, close_at in pairs})
    spans: list[tuple[int, int]] = []
    start = 0
    for end in [*cuts, n]:
        pos = start
        while end - pos > max_chars:
            cut = _forced_cut(text, pos, max_chars, short_blocked, fences)
            spans.append((pos, cut))
            pos = cut
        spans.append((pos, end))
        start = end
    return _fold_blank(text, spans, max_chars)


def _blocked(
    n: int, pairs: Sequence[tuple[int, int]], fences: Sequence[tuple[int, int]], max_chars: int
) -> tuple[list[bool], list[bool]]:
    """For each cut position ``c`` (between ``text[c-1]`` and ``text[c]``): whether cutting there would
    split a matched pair or a fence, and whether it would split a fence that fits in ``max_chars``
    (which even a forced cut respects)."""
    depth = [0] * (n + 2)
    for open_at, close_at in pairs:
        depth[open_at + 1] += 1
        depth[close_at + 1] -= 1
    short = [0] * (n + 2)
    for start, end in fences:
        depth[start + 1] += 1
        depth[end] -= 1
        if end - start <= max_chars:
            short[start + 1] += 1
            short[end] -= 1
    running = running_short = 0
    cut_blocked = [False] * (n + 1)
    short_blocked = [False] * (n + 1)
    for c in range(n + 1):
        running += depth[c]
        running_short += short[c]
        cut_blocked[c] = running > 0
        short_blocked[c] = running_short > 0
    return cut_blocked, short_blocked


def _natural_cuts(text: str, cut_blocked: Sequence[bool], closers: set[int]) -> list[int]:
    """The cuts at structural boundaries, each moved past the whitespace that follows it."""
    n = len(text)
    cuts: list[int] = []
    for i, ch in enumerate(text):
        if cut_blocked[i + 1] or not _natural_boundary(text, i, ch, closers):
            continue
        c = i + 1
        while c < n and text[c].isspace():
            c += 1
        if 0 < c < n and (not cuts or cuts[-1] != c):
            cuts.append(c)
    return cuts


def _fences(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each fenced code block: from an opening ```` ``` ```` to the end of the next."""
    fences = []
    pos = 0
    while (start := text.find(_FENCE, pos)) != -1:
        close = text.find(_FENCE, start + len(_FENCE))
        end = len(text) if close == -1 else close + len(_FENCE)
        fences.append((start, end))
        pos = end
    return fences


def _matched_pairs(text: str, fences: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Index pairs of matched brackets and quotes outside fences, never spanning a blank line."""
    pairs: list[tuple[int, int]] = []
    stack: list[tuple[str, int]] = []
    fence_at = {start: end for start, end in fences}
    i, n = 0, len(text)
    while i < n:
        if i in fence_at:
            i = fence_at[i]
            continue
        ch = text[i]
        if ch == "\n":
            j = i + 1
            while j < n and text[j] in " \t\r\f\v":
                j += 1
            if j < n and text[j] == "\n":
                stack.clear()  # a paragraph break ends whatever was left open
        elif ch == '"':
            if stack and stack[-1][0] == '"':
                pairs.append((stack.pop()[1], i))
            else:
                stack.append((ch, i))
        elif ch in _PAIRS:
            stack.append((ch, i))
        elif ch in _CLOSERS:
            opener = _CLOSERS[ch]
            for depth in range(len(stack) - 1, -1, -1):
                if stack[depth][0] == opener:
                    pairs.append((stack[depth][1], i))
                    del stack[depth:]  # openers left inside the pair were never closed
                    break
        i += 1
    return pairs


def _before_space_or_end(text: str, i: int) -> bool:
    return i + 1 >= len(text) or text[i + 1].isspace()


def _natural_boundary(text: str, i: int, ch: str, closers: set[int]) -> bool:
    if ch in _NEWLINES or ch in _WIDE_ENDS:
        return True
    if ch in _ASCII_ENDS:
        return _before_space_or_end(text, i)
    if i in closers and i > 0:
        before = text[i - 1]
        # '"Stop." Then' ends a sentence after the quote. A Japanese closing quote after 。 is often
        # followed by と ("…」と言った"), so a closer counts only before whitespace or the end.
        return (before in _WIDE_ENDS or before in _ASCII_ENDS) and _before_space_or_end(text, i)
    return False


def _forced_class(text: str, i: int) -> int | None:
    """How strong a cut right after ``text[i]`` would be, for a forced split (None: not a mark)."""
    ch = text[i]
    if ch == "\n":
        j = i - 1
        while j >= 0 and text[j] in " \t\r\f\v":
            j -= 1
        return _BLANK if j >= 0 and text[j] == "\n" else _NEWLINE
    if ch in _NEWLINES:
        return _NEWLINE
    if ch in _WIDE_ENDS or (ch in _ASCII_ENDS and _before_space_or_end(text, i)):
        return _SENTENCE
    if ch in _COMMAS:
        return _COMMA
    if ch.isspace():
        return _SPACE
    return None


def _forced_cut(
    text: str, pos: int, max_chars: int, short_blocked: Sequence[bool], fences: Sequence[tuple[int, int]]
) -> int:
    """Where to force a span starting at ``pos`` apart: the strongest mark in the second half of the
    window, else the last mark anywhere in it, else hard at the limit (before a short fence there)."""
    limit = pos + max_chars
    last: list[int | None] = [None] * 5
    for c in range(limit, pos, -1):
        if short_blocked[c]:
            continue
        kind = _forced_class(text, c - 1)
        if kind is not None and last[kind] is None:
            last[kind] = c
    half = pos + max_chars // 2
    for mark in last:
        if mark is not None and mark >= half:
            return mark
    found = [c for c in last if c is not None]
    if found:
        return max(found)
    if short_blocked[limit]:
        # The limit falls inside a fence that fits whole: cut before it (it starts after pos, since a
        # fence starting at pos would end within the limit).
        return max(start for start, end in fences if start < limit < end)
    return limit


def _fold_blank(text: str, spans: list[tuple[int, int]], max_chars: int) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    pending: tuple[int, int] | None = None
    for start, end in spans:
        if pending is not None:
            if end - pending[0] <= max_chars:
                start = pending[0]
            else:
                out.append(pending)
            pending = None
        if not text[start:end].strip():
            pending = (start, end)
            continue
        out.append((start, end))
    if pending is not None:
        if out and pending[1] - out[-1][0] <= max_chars:
            out[-1] = (out[-1][0], pending[1])
        else:
            out.append(pending)
    return out


# ------------------------------------------------------------------------------------------- point ids

_NAMESPACES: Mapping[ParentKind, uuid.UUID] = {
    "memory": uuid.UUID("da5a8d0d-fdf7-413d-b3d4-67ab8089e2bd"),
    "episode": uuid.UUID("9561d59e-8860-439f-b55a-ea6b1eeca48d"),
}


_NAMESPACE_BYTES: Mapping[ParentKind, bytes] = {kind: ns.bytes for kind, ns in _NAMESPACES.items()}
_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def block_id(kind: ParentKind, parent: str, index: int) -> str:
    """The point id of block ``index`` of the ``kind`` record ``parent`` (canonical UUID text)."""
    return str(uuid.uuid5(_NAMESPACES[kind], f"{uuid.UUID(parent)}/{index}"))


def block_ids(kind: ParentKind, parent: str, count: int) -> list[str]:
    """The ids of blocks ``0 .. count-1`` of one record (what a delete must remove)."""
    return [block_id(kind, parent, i) for i in range(count)]


def _uuid5_text(namespace: bytes, name: str) -> str:
    """``str(uuid.uuid5(namespace, name))``, computed on bytes.

    The block arm checks every hit it reads (hundreds per recall); building and formatting ``UUID``
    objects for that cost several milliseconds of a recall, hashing directly a fraction of it.
    """
    head = bytearray(hashlib.sha1(namespace + name.encode(), usedforsecurity=False).digest()[:16])
    head[6] = (head[6] & 0x0F) | 0x50  # version 5
    head[8] = (head[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = head.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def parent_kind(point_id: str, parent: str, block_index: int) -> ParentKind | None:
    """Whether a block point belongs to a memory or an episode (None: not a block written here).

    The same test as comparing ``block_id(kind, parent, block_index)`` with ``point_id``.
    """
    canonical = parent if _CANONICAL_UUID.fullmatch(parent) else str(uuid.UUID(parent))
    name = f"{canonical}/{block_index}"
    for kind in ("memory", "episode"):
        if _uuid5_text(_NAMESPACE_BYTES[kind], name) == point_id:
            return kind
    return None
