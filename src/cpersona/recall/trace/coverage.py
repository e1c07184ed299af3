"""The coverage ledger of a traced recall: which parts of the question the returned records hold.

It is recorded only. It runs after the answer is final and nothing in the recall reads it; it is the
instrument a later stage of the loop would use to fetch what an answer does not yet cover (seed §1.5).

The question is normalised (NFKC, then lower case) and cut by script, with no tokenizer dependency, into
*parts*:

* ``kanji``: a run of two or more CJK unified ideographs (or the iteration mark 々);
* ``katakana``: a run of two or more katakana (the prolonged sound mark ー included, the middle dot ・
  not, since it separates the words of a name);
* ``identifier``: an ASCII word of two or more characters, which may carry inner ``. _ / # -``
  (``2.5.5a1``, ``bug-218``, ``src/app/main.py``, ``snake_case``), or an issue number ``#354``.

Hiragana runs are particles and endings and are not parts; nor is anything else. A part repeated in the
question counts once, at its first appearance, and at most :data:`MAX_PARTS` are kept.

A part is recorded as its span in the normalised question and its kind, never as text, so the ledger can
leave the machine with the trace; a caller holding the question recovers a part as
``normalize(question)[start:end]``. Coverage is a substring match of the part in each record's full
stored text (not the preview a response carries), normalised the same way.
"""

from __future__ import annotations

import re
import unicodedata
from typing import TYPE_CHECKING, Literal

from cpersona.model.trace import CoverageFailure, CoverageLedger, CoveragePart

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["MAX_PARTS", "NORMALIZATION", "Part", "coverage", "extract_parts", "normalize"]

MAX_PARTS = 32
NORMALIZATION = "nfkc-lower"

PartKind = Literal["kanji", "katakana", "identifier"]
Part = tuple[int, int, PartKind]

# One alternation, so parts come out in order of appearance whatever their kind. The identifier must start
# and end on a word character, so sentence punctuation around it (``2.5.5a1.``, ``(bug-218)``) stays
# outside; ``#`` may lead only an issue number. A match of one character is dropped after matching.
_PARTS = re.compile(
    r"(?P<kanji>[\u4e00-\u9fff\u3005]{2,})"
    r"|(?P<katakana>[\u30a1-\u30fa\u30fc-\u30ff\u31f0-\u31ff]{2,})"
    r"|(?P<identifier>\#[0-9]+|[a-z0-9_](?:[a-z0-9_./\#-]*[a-z0-9_])?)"
)
_WORD = re.compile(r"[a-z0-9]")


def normalize(text: str) -> str:
    """NFKC, then lower case: full-width Latin and digits fold to ASCII, half-width katakana widens."""
    return unicodedata.normalize("NFKC", text).lower()


def extract_parts(normalized: str) -> tuple[list[Part], int]:
    """The distinct parts of an already normalised question, in order of first appearance, and how
    many distinct parts were left out past :data:`MAX_PARTS`."""
    seen: set[str] = set()
    parts: list[Part] = []
    omitted = 0
    for match in _PARTS.finditer(normalized):
        kind = match.lastgroup
        text = match.group()
        if kind is None or len(text) < 2 or text in seen:
            continue
        # An identifier made only of underscores is punctuation, not a name.
        if kind == "identifier" and not _WORD.search(text):
            continue
        seen.add(text)
        if len(parts) >= MAX_PARTS:
            omitted += 1
            continue
        start, end = match.span()
        parts.append((start, end, _kind(kind)))
    return parts, omitted


def _kind(name: str) -> PartKind:
    if name == "kanji":
        return "kanji"
    if name == "katakana":
        return "katakana"
    return "identifier"


def coverage(question: str, records: Iterable[tuple[str, str]]) -> CoverageLedger | CoverageFailure:
    """The ledger for ``question`` over ``records``: ``(ref, full stored text)`` pairs in the order the
    response lists them.

    Never raises: when the ledger cannot be built it is ``{"error": <exception type>}``, so a traced
    recall answers exactly as an untraced one would.
    """
    try:
        return _ledger(question, records)
    except Exception as exc:
        return CoverageFailure(error=type(exc).__name__)


def parts_covered(question: str, records: Iterable[tuple[str, str]]) -> dict[str, int]:
    """How many of the question's parts each record's full stored text holds (the keyword seats'
    order, computed on the recall path: unlike the ledger, it shapes an answer)."""
    normalized = normalize(question)
    needles = [normalized[start:end] for start, end, _ in extract_parts(normalized)[0]]
    return {ref: sum(1 for n in needles if n in normalize(text)) for ref, text in records}


def _ledger(question: str, records: Iterable[tuple[str, str]]) -> CoverageLedger:
    normalized = normalize(question)
    parts, omitted = extract_parts(normalized)
    needles = [normalized[start:end] for start, end, _ in parts]
    covered_by: list[list[str]] = [[] for _ in parts]
    read = 0
    for ref, text in records:
        haystack = normalize(text)
        read += 1
        for index, needle in enumerate(needles):
            if needle in haystack:
                covered_by[index].append(ref)
    return CoverageLedger(
        normalization=NORMALIZATION,
        parts=[CoveragePart(span=(start, end), kind=kind) for start, end, kind in parts],
        covered_by=covered_by,
        uncovered=[i for i, refs in enumerate(covered_by) if not refs],
        records=read,
        parts_omitted=omitted,
    )
