"""Finding declared entities in a text: the associative cue that reconstruct feeds its lexical arms.

The text is put in the names' key form (:func:`~cpersona.model.associations.name_key`), then every
name and alias is looked for as a substring, **longest first** (ties by the term's text), each match
claiming its span so no two matches overlap; at most :data:`MAX_MATCHES` matches are kept (§4.2 stage 1).

One decision beyond the reference's plain substring rule: an edge of a term that is a letter or digit
of a script written with spaces must not sit inside a word of the text (``al`` does not match inside
``also``), while wide characters (CJK, kana, hangul), whose words run together, match anywhere.
"""

from __future__ import annotations

import dataclasses
import unicodedata
from typing import TYPE_CHECKING

from cpersona.model.associations import name_key

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

__all__ = ["MAX_MATCHES", "EntityMatch", "match_terms"]

MAX_MATCHES = 64


@dataclasses.dataclass(frozen=True, slots=True)
class EntityMatch:
    """One entity found in the text: its key, the term that matched and where (in the key form); the
    engine adds the entity's name and aliases as declared (what reconstruct feeds its lexical arms)."""

    entity: str
    term: str
    start: int
    end: int
    name: str = ""
    aliases: tuple[str, ...] = ()


def _wordlike(ch: str) -> bool:
    return ch.isalnum() and unicodedata.east_asian_width(ch) not in ("W", "F")


def _bounded(text: str, start: int, end: int) -> bool:
    if _wordlike(text[start]) and start > 0 and _wordlike(text[start - 1]):
        return False
    return not (_wordlike(text[end - 1]) and end < len(text) and _wordlike(text[end]))


def _occurrences(text: str, term: str) -> Iterable[int]:
    at = text.find(term)
    while at >= 0:
        yield at
        at = text.find(term, at + 1)


def match_terms(
    text: str, terms: Mapping[str, Iterable[str]], *, most: int = MAX_MATCHES
) -> list[EntityMatch]:
    """The matches of ``terms`` (term key → the entity keys it names) in ``text``, in text order."""
    haystack = name_key(text)
    claimed = [False] * len(haystack)
    found: list[EntityMatch] = []
    for term in sorted((t for t in terms if t), key=lambda t: (-len(t), t)):
        for start in _occurrences(haystack, term):
            end = start + len(term)
            if any(claimed[start:end]) or not _bounded(haystack, start, end):
                continue
            claimed[start:end] = [True] * len(term)
            found.extend(EntityMatch(entity, term, start, end) for entity in sorted(set(terms[term])))
            if len(found) >= most:
                return sorted(found[:most], key=lambda m: (m.start, m.entity))
    return sorted(found, key=lambda m: (m.start, m.entity))
