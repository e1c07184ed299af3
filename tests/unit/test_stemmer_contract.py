"""The C stemmer the lexical fields use (PyStemmer) gives the stems of the pure-Python Snowball English
stemmer, which earlier stores were written with: the same ``stems`` field for any text, so documents
written before and after the swap are searched alike."""

from __future__ import annotations

import threading

import Stemmer
from hypothesis import given, settings
from hypothesis import strategies as st
from snowballstemmer.english_stemmer import EnglishStemmer

from cpersona.stores.redis.lexical import word_stem

# Words the English algorithm treats specially (exceptions, its step suffixes, the 'y' rules), and
# apostrophes, accents and digits, which reach it inside a query's or a document's pieces.
_WORDS = [
    "generously", "generate", "dying", "lying", "skies", "news", "sky", "howe", "atlas", "cosmos",
    "communism", "gener", "arsenal", "proceed", "exceeding", "succeeded", "inning", "outing", "canning",
    "herring", "earring", "cried", "ties", "gas", "kiwis", "bus", "caresses", "ponies", "hopping",
    "hoped", "relational", "conditional", "rational", "valency", "digitizer", "operator", "feudalism",
    "decisiveness", "hopefulness", "formality", "sensibility", "sensitivity", "triplicate", "formative",
    "electriciti", "electrical", "adjustable", "defensible", "irritant", "replacement", "adoption",
    "homologou", "effective", "bowdlerize", "it's", "dogs'", "'quoted'", "naïve", "café", "über",
    "deployed", "deploying", "cve", "2024", "x86_64", "\uff21\uff22\uff23", "straße", "",
]  # fmt: skip

_letters = st.sampled_from([*"abcdeilnorstuy'", "é", "ß", "\u0131", "\u0130", "1", "_"])
_any_words = st.lists(_letters, min_size=1, max_size=20).map("".join) | st.text(max_size=20)


def _reference(word: str) -> str:
    return str(EnglishStemmer().stemWord(word))


def test_the_listed_words_stem_alike() -> None:
    c = Stemmer.Stemmer("english")
    assert [c.stemWord(w) for w in _WORDS] == [_reference(w) for w in _WORDS]


@given(word=_any_words)
@settings(max_examples=1_000, deadline=None)
def test_any_word_stems_alike(word: str) -> None:
    assert Stemmer.Stemmer("english").stemWord(word) == _reference(word)
    assert word_stem(word) == "_" + _reference(word.lower())


def test_threads_stemming_at_once_get_each_word_s_own_stem() -> None:
    # Each thread has its own stemmer (the C one keeps a buffer between calls); uncached words only.
    words = [f"{w}{n}ing" for n in range(300) for w in ("hop", "relat", "generous")]
    expected = {w: "_" + _reference(w) for w in words}
    got: dict[int, list[str]] = {}
    start = threading.Barrier(4)

    def stem_all(n: int) -> None:
        start.wait()
        got[n] = [word_stem.__wrapped__(w) for w in words]

    threads = [threading.Thread(target=stem_all, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(stems == [expected[w] for w in words] for stems in got.values())
