"""The document side's lexical fields take shortcuts (ASCII text without glue has no ``grams``; a
piece's stem is cached whole); each must give what the general rules give, for any text."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cpersona.stores.redis.lexical import (
    _CJK_RUN,
    _RUNS,
    STOPWORDS,
    _grams,
    _pieces,
    doc_grams,
    doc_stems,
    word_stem,
)

# Mostly plain ASCII words and separators, with what glues or cuts differently mixed in: newlines,
# other control characters, backslashes, CJK, non-breaking and ideographic spaces, curly quotes.
_alphabet = st.sampled_from(
    [*"abcXYZ019 -./'\t", "\n", "\r", "\x0b", "\x1f", "\x7f", "\\", "東", "京", "\xa0", "\u3000", "\u2019"]
)
_words = st.sampled_from([*STOPWORDS[:6], "deployed", "deploy", "CVE-2024-3094", "naïve"])
_texts = st.lists(_alphabet | _words, max_size=30).map("".join)


def stems_by_the_rules(text: str) -> str:
    """``doc_stems`` as the rules say it: the stem of every non-CJK piece with a letter or digit."""
    out: list[str] = []
    for run in _RUNS.findall(text):
        if not _CJK_RUN.fullmatch(run):
            out.extend(word_stem(p) for p in _pieces(run) if any(ch.isalnum() for ch in p))
    return " ".join(out)


@given(text=_texts)
@settings(max_examples=500, deadline=None)
def test_grams_of_any_text_are_those_the_general_rules_give(text: str) -> None:
    assert doc_grams(text) == _grams(text)


@given(text=_texts)
@settings(max_examples=500, deadline=None)
def test_stems_of_any_text_are_those_the_rules_give(text: str) -> None:
    assert doc_stems(text) == stems_by_the_rules(text)


def test_plain_ascii_has_no_grams_but_a_newline_glues_its_words() -> None:
    assert doc_grams("Deployed the fix, then slept.\tDone") == []
    assert doc_grams("line one\nline two") != []
