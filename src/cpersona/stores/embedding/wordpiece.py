"""BERT's WordPiece tokenizer in pure Python, as Hugging Face ``tokenizers`` runs ``tokenizer.json``.

The steps, each as the Rust library does it, so the ids are the same for every text:

1. special tokens written in the text (``[CLS]``, ``[SEP]`` …: ``added_tokens`` with ``normalized:
   false``) are cut out first and keep their ids;
2. the ``BertNormalizer``: drop control characters and map whitespace to a space (``clean_text``), put
   spaces around CJK ideographs, strip accents (NFD, then drop non-spacing marks) and lowercase, one
   character at a time (so a final capital sigma becomes U+03C3, never the final form U+03C2);
3. the ``BertPreTokenizer``: split on whitespace, and cut every punctuation character out as its own word
   (all of ASCII's ``!`` … ``~`` symbols, and Unicode's P* categories);
4. ``WordPiece``: per word, the greedy longest match against the vocabulary, ``##`` before every piece
   but the first; a word with a piece not in the vocabulary, or longer than ``max_input_chars_per_word``,
   is one ``[UNK]``;
5. truncation to ``max_tokens`` in all, then ``[CLS]`` … ``[SEP]``.

Character classes come from Python's ``unicodedata`` (Unicode 14.0 on Python 3.11). ``tokenizers`` takes
its categories from older tables, which differ for the handful of characters in :data:`_NEWER_FORMAT`,
:data:`_NEWER_PUNCTUATION`, :data:`_OLD_PUNCTUATION`, :data:`_NEWER_MARKS` and :data:`_OLD_MARKS`; the
contract test walks every code point. What Python 3.11 cannot match are the characters of Unicode 15 and 16
that it does not know (tokenizers lowercases some of them) and U+11938 (which tokenizers leaves composed):
a text with one of those may get other ids than tokenizers gives it.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["WordPieceTokenizer"]


def _code_points(*spans: tuple[int, int]) -> frozenset[str]:
    return frozenset(chr(cp) for first, last in spans for cp in range(first, last + 1))


# Format characters (Cf) in Unicode 14 that tokenizers' tables do not know: it keeps them.
_NEWER_FORMAT: Final = _code_points((0x890, 0x891), (0x8E2, 0x8E2), (0x110CD, 0x110CD), (0x13430, 0x13438))
# Punctuation in Unicode 14 that tokenizers' tables do not know: it leaves them inside words.
_NEWER_PUNCTUATION: Final = _code_points(
    (0x61D, 0x61D), (0x9FD, 0x9FD), (0xA76, 0xA76), (0xC77, 0xC77), (0xC84, 0xC84), (0x1B7D, 0x1B7E),
    (0x2E43, 0x2E4F), (0x2E52, 0x2E5D), (0x10EAD, 0x10EAD), (0x10F55, 0x10F59), (0x10F86, 0x10F89),
    (0x1144B, 0x1144F), (0x1145A, 0x1145B), (0x1145D, 0x1145D), (0x11660, 0x1166C), (0x116B9, 0x116B9),
    (0x1183B, 0x1183B), (0x11944, 0x11946), (0x119E2, 0x119E2), (0x11A3F, 0x11A46), (0x11A9A, 0x11A9C),
    (0x11A9E, 0x11AA2), (0x11C41, 0x11C45), (0x11C70, 0x11C71), (0x11EF7, 0x11EF8), (0x11FFF, 0x11FFF),
    (0x12FF1, 0x12FF2), (0x16E97, 0x16E9A), (0x16FE2, 0x16FE2), (0x1E95E, 0x1E95F),
)  # fmt: skip
# Characters that were punctuation when tokenizers' tables were made and are not in Unicode 14.
_OLD_PUNCTUATION: Final = _code_points((0x166D, 0x166D), (0x111C9, 0x111C9))

# Non-spacing marks (Mn) in Unicode 14 that tokenizers' tables do not know: accent stripping keeps them.
_NEWER_MARKS: Final = _code_points(
    (0x7FD, 0x7FD), (0x898, 0x89F), (0x8CA, 0x8E1), (0x9FE, 0x9FE), (0xAFA, 0xAFF), (0xB55, 0xB55),
    (0xC04, 0xC04), (0xC3C, 0xC3C), (0xD00, 0xD00), (0xD3B, 0xD3C), (0xD81, 0xD81), (0xEBA, 0xEBA),
    (0x180F, 0x180F), (0x1885, 0x1886), (0x1ABF, 0x1ACE), (0x1DF6, 0x1DFB), (0xA82C, 0xA82C),
    (0xA8C5, 0xA8C5), (0xA8FF, 0xA8FF), (0xA9BD, 0xA9BD), (0x10D24, 0x10D27), (0x10EAB, 0x10EAC),
    (0x10F46, 0x10F50), (0x10F82, 0x10F85), (0x11070, 0x11070), (0x11073, 0x11074), (0x110C2, 0x110C2),
    (0x111C9, 0x111C9), (0x111CF, 0x111CF), (0x1123E, 0x1123E), (0x1133B, 0x1133B), (0x11438, 0x1143F),
    (0x11442, 0x11444), (0x11446, 0x11446), (0x1145E, 0x1145E), (0x1182F, 0x11837), (0x11839, 0x1183A),
    (0x1193B, 0x1193C), (0x1193E, 0x1193E), (0x11943, 0x11943), (0x119D4, 0x119D7), (0x119DA, 0x119DB),
    (0x119E0, 0x119E0), (0x11A01, 0x11A0A), (0x11A33, 0x11A38), (0x11A3B, 0x11A3E), (0x11A47, 0x11A47),
    (0x11A51, 0x11A56), (0x11A59, 0x11A5B), (0x11A8A, 0x11A96), (0x11A98, 0x11A99), (0x11C30, 0x11C36),
    (0x11C38, 0x11C3D), (0x11C3F, 0x11C3F), (0x11C92, 0x11CA7), (0x11CAA, 0x11CB0), (0x11CB2, 0x11CB3),
    (0x11CB5, 0x11CB6), (0x11D31, 0x11D36), (0x11D3A, 0x11D3A), (0x11D3C, 0x11D3D), (0x11D3F, 0x11D45),
    (0x11D47, 0x11D47), (0x11D90, 0x11D91), (0x11D95, 0x11D95), (0x11D97, 0x11D97), (0x11EF3, 0x11EF4),
    (0x16F4F, 0x16F4F), (0x16FE4, 0x16FE4), (0x1CF00, 0x1CF2D), (0x1CF30, 0x1CF46), (0x1E000, 0x1E006),
    (0x1E008, 0x1E018), (0x1E01B, 0x1E021), (0x1E023, 0x1E024), (0x1E026, 0x1E02A), (0x1E130, 0x1E136),
    (0x1E2AE, 0x1E2AE), (0x1E2EC, 0x1E2EF), (0x1E944, 0x1E94A),
)  # fmt: skip
# A mark that was non-spacing in tokenizers' tables (Mc in Unicode 14): accent stripping drops it.
_OLD_MARKS: Final = _code_points((0x1734, 0x1734))

# The CJK ideograph blocks tokenizers pads with spaces (``is_chinese_char`` in its BertNormalizer).
_CJK: Final = (
    (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
    (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
)  # fmt: skip
# Rust's char::is_whitespace (the White_Space property) minus what clean_text drops first as control.
_WHITESPACE: Final = frozenset("\t\n\r \xa0\u1680\u2028\u2029\u202f\u205f\u3000") | _code_points(
    (0x2000, 0x200A)
)
_REMOVED_CATEGORIES: Final = frozenset({"Cc", "Cf", "Co"})
# ASCII text takes a regex path: letters and digits make words, every other visible character is punctuation.
_ASCII_WORD: Final = re.compile(r"[A-Za-z0-9]+|[!-/:-@\[-`{-~]")
_ASCII_DROPPED: Final = {cp: None for cp in (*range(0x20), 0x7F) if chr(cp) not in "\t\n\r"}


class WordPieceTokenizer:
    """Token ids for a text, from a BERT ``tokenizer.json`` (lowercasing, accent-stripping variant)."""

    def __init__(self, spec: dict[str, Any], max_tokens: int) -> None:
        """Raises ``ValueError`` for a ``tokenizer.json`` of any other shape than BERT's WordPiece."""
        model, normalizer = spec.get("model") or {}, spec.get("normalizer") or {}
        if (
            model.get("type") != "WordPiece"
            or (spec.get("pre_tokenizer") or {}).get("type") != "BertPreTokenizer"
        ):
            raise ValueError(
                "not a BERT WordPiece tokenizer (model WordPiece, pre-tokenizer BertPreTokenizer)"
            )
        flags = (
            normalizer.get("clean_text"),
            normalizer.get("handle_chinese_chars"),
            normalizer.get("lowercase"),
        )
        if normalizer.get("type") != "BertNormalizer" or flags != (True, True, True):
            raise ValueError(
                "only the lowercasing BertNormalizer with clean_text and CJK splitting is supported"
            )
        if normalizer.get("strip_accents") not in (None, True):
            raise ValueError("only the accent-stripping BertNormalizer is supported")
        if max_tokens < 2:
            raise ValueError("max_tokens must leave room for [CLS] and [SEP]")
        self._vocab: dict[str, int] = model["vocab"]
        self._prefix: str = model.get("continuing_subword_prefix", "##")
        self._max_word_chars: int = model.get("max_input_chars_per_word", 100)
        self._unk = self._vocab[model.get("unk_token", "[UNK]")]
        self._cls, self._sep = self._vocab["[CLS]"], self._vocab["[SEP]"]
        self._max_tokens = max_tokens
        specials = {
            t["content"]: t["id"] for t in spec.get("added_tokens", []) if not t.get("normalized", True)
        }
        self._specials = specials
        # Longest first: the alternation then matches leftmost-longest, as tokenizers' Aho-Corasick does.
        alternatives = "|".join(re.escape(s) for s in sorted(specials, key=len, reverse=True))
        self._special_split = re.compile(f"({alternatives})") if specials else None
        self._word_cache: dict[str, tuple[int, ...]] = {}

    @classmethod
    def from_file(cls, path: Path, max_tokens: int) -> WordPieceTokenizer:
        return cls(json.loads(path.read_text(encoding="utf-8")), max_tokens)

    def encode(self, text: str) -> list[int]:
        """``[CLS]``, the text's ids (at most ``max_tokens - 2`` of them), ``[SEP]``."""
        budget = self._max_tokens - 2
        ids: list[int] = []
        parts = self._special_split.split(text) if self._special_split else [text]
        for index, part in enumerate(parts):
            if index % 2:  # re.split puts the captured special tokens at the odd positions
                ids.append(self._specials[part])
            elif part:
                for word in _words(part):
                    ids.extend(self._word_ids(word))
            if len(ids) >= budget:
                break
        return [self._cls, *ids[:budget], self._sep]

    def _word_ids(self, word: str) -> tuple[int, ...]:
        cached = self._word_cache.get(word)
        if cached is None:
            cached = self._word_pieces(word)
            if len(self._word_cache) < 1 << 16:  # words repeat a lot; the bound keeps memory in check
                self._word_cache[word] = cached
        return cached

    def _word_pieces(self, word: str) -> tuple[int, ...]:
        if len(word) > self._max_word_chars:
            return (self._unk,)
        pieces: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else self._prefix + word[start:end]
                found = self._vocab.get(piece)
                if found is not None:
                    pieces.append(found)
                    break
                end -= 1
            else:
                return (self._unk,)
            start = end
        return tuple(pieces)


def _words(text: str) -> list[str]:
    """The normalized text split by the BertPreTokenizer."""
    if text.isascii():
        return _ASCII_WORD.findall(text.translate(_ASCII_DROPPED).lower())
    words: list[str] = []
    current: list[str] = []
    for char in _normalized(text):
        if char in _WHITESPACE:
            if current:
                words.append("".join(current))
                current = []
        elif _is_punctuation(char):
            if current:
                words.append("".join(current))
                current = []
            words.append(char)
        else:
            current.append(char)
    if current:
        words.append("".join(current))
    return words


def _normalized(text: str) -> str:
    """The BertNormalizer: clean_text, CJK padding, NFD accent stripping, per-character lowercase."""
    kept: list[str] = []
    for char in text:
        if char in _WHITESPACE:
            kept.append(" ")
        elif char in "\x00\ufffd" or (
            unicodedata.category(char) in _REMOVED_CATEGORIES and char not in _NEWER_FORMAT
        ):
            continue
        elif _is_cjk(char):
            kept.append(f" {char} ")
        else:
            kept.append(char)
    decomposed = unicodedata.normalize("NFD", "".join(kept))
    return "".join(c.lower() for c in decomposed if not _is_stripped_mark(c))


def _is_stripped_mark(char: str) -> bool:
    if char in _OLD_MARKS:
        return True
    return unicodedata.category(char) == "Mn" and char not in _NEWER_MARKS


def _is_cjk(char: str) -> bool:
    cp = ord(char)
    return any(first <= cp <= last for first, last in _CJK)


def _is_punctuation(char: str) -> bool:
    if char.isascii():
        return char.isprintable() and not char.isalnum() and char != " "
    if char in _OLD_PUNCTUATION:
        return True
    return unicodedata.category(char)[0] == "P" and char not in _NEWER_PUNCTUATION
