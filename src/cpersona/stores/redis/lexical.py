"""The text analysis and query shapes of the two lexical arms (episode full text, memory keyword).

CPersona matches a question against an SQLite FTS5 *trigram* index: every query term is a quoted phrase,
and a trigram phrase matches any row that contains it as a case-insensitive substring. RediSearch has no
n-gram tokenizer, so this module rebuilds that behaviour from three parts:

* **Query terms** follow CPersona's rules (:func:`fts_terms`) but for Chinese and Japanese runs, which
  become their overlapping 2-grams instead of 3-grams. Most Japanese and Chinese words are two
  characters, and a 3-gram mostly joins one to a particle or to the next word: on JSQuAD (4,442 Japanese
  questions, one scope of 1,145 paragraphs) this arm alone put the answering paragraph first for .879
  of the questions with 3-grams and .903 with 2-grams (``benchmarks/results/quality_jsquad_bigrams.md``).
  Other tokens of three or more characters are kept whole.
* **Document side**: every memory and episode document carries a ``bigrams`` array
  (:func:`doc_bigrams`), indexed as a ``TEXT NOSTEM`` field: one element per CJK run holding its
  overlapping 2-grams, so that each 2-gram query term is one exact token. It also carries a ``grams``
  array (:func:`doc_grams`), the substrings a phrase is matched against: each CJK run of the text becomes
  one array element holding the run's overlapping 3-grams, so a longer CJK substring (an alias, a whole
  query in the fallback, a raw-journal query) is an exact phrase of consecutive grams. Elements of a
  multi-value field sit far apart in token positions (RediSearch's ``MULTI_TEXT_SLOP``), so a phrase
  never joins the end of one run to the start of another. Each ``grams`` element also ends with the
  run's two shorter tail grams, so that every CJK substring of one or two characters is a *prefix* of
  some indexed gram; a ranked search uses that for an alias of one character. The whole-query fallback
  (a question whose only CJK is a lone character, which has no 2-gram, or one whose terms find nothing)
  matches a run of one or two characters exactly instead: every memory also carries each distinct CJK
  substring of one or two characters as a tag (:func:`doc_short_grams`).

Latin and other non-CJK terms are matched against the ordinary ``content`` field (``text`` for episodes).
RediSearch's tokenizer splits on ASCII punctuation, so a term such as ``CVE-2024-3094`` or ``bug-218`` is
matched as the exact phrase of the pieces the tokenizer makes of it (``cve 2024 3094``): decomposing a term
into those pieces, rather than escaping its punctuation, is what makes every query safe to send whatever
its text. The tokenizer does *not* split at CJK characters, newlines, non-ASCII punctuation, non-breaking
or ideographic spaces, so in ``東京でPythonを学んだ`` or ``line one\\nline two`` words are glued into one
index token; :func:`doc_grams` copies such words into the ``grams`` array as well, and non-CJK terms are
searched in both fields.

Scores are RediSearch's ``BM25STD`` (k1 = 1.2, b = 0.5 as the server reports it in ``EXPLAINSCORE``,
idf = ln(1 + (N - n + 0.5) / (n + 0.5)), document length counted over all text fields), positive and
higher-is-better, unlike SQLite's ``bm25()`` which CPersona reports as a negative number. Terms are OR-ed
and a row's score is the sum over the terms it holds.

A single word is matched by its English (Snowball) stem, the nearest an inverted index comes to FTS5
finding a word inside its inflections (``deploy`` also finds ``deployed``). The stems are computed here,
not by the server: every document carries a ``stems`` field (:func:`doc_stems`, ``TEXT NOSTEM``) and a
word becomes the one term ``@stems:<stem>``, searched ``VERBATIM``. The server's own stemming would turn
each word into a union of the word and its stem forms, and RediSearch 2.10 scores such a union nested
under the scope filter with only some of its matching children, depending on internal document ids: the
same row scored 2.56 or 5.12 for the same word. One term per word has no union to get wrong. Phrases
are exact.
"""

from __future__ import annotations

import functools
import math
import re
import threading
import unicodedata
from typing import TYPE_CHECKING

import Stemmer

from cpersona.stores.redis.scope import tag

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "QUESTION_WORDS",
    "SCORER",
    "STOPWORDS",
    "cjk_clause",
    "cjk_runs",
    "clauses",
    "doc_bigrams",
    "doc_grams",
    "doc_short_grams",
    "doc_stems",
    "fts_terms",
    "period_clause",
    "ranked_query",
    "terms_held",
    "unscored",
    "word_stem",
]

SCORER = "BM25STD"
"""The RediSearch scorer of both arms: standard BM25 (search 2.10 also has the older ``BM25`` variant)."""

STOPWORDS: tuple[str, ...] = (
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no",
    "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this",
    "to", "was", "will", "with",
)  # fmt: skip
"""Words the indexes do not index (RediSearch's English default, declared explicitly by
:func:`.indexes.create_index` so that the query side and the index agree). They are left out of phrases,
because the index skips them without leaving a gap: ``state-of-the-art`` is indexed as the adjacent pair
``state art``. Keeping them out of the index keeps an ``OR`` over a question's words from walking the
postings of nearly every document for words whose idf is near zero anyway."""

_STOPWORDS = frozenset(STOPWORDS)

# Hiragana, katakana (with its phonetic extensions and the half-width forms) and the CJK ideographs
# (unified, extension A, compatibility, and the supplementary-plane extensions).
_CJK_CLASS = (
    "\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f"
    "\U00020000-\U0002fa1f"
)
_CJK_RUN = re.compile(f"[{_CJK_CLASS}]+")
_RUNS = re.compile(f"[{_CJK_CLASS}]+|[^{_CJK_CLASS}]+")
# Non-CJK stretches without whitespace: the candidates for words the index tokenizer glues to a neighbour.
_STRETCH = re.compile(rf"[^\s{_CJK_CLASS}]+")

# CPersona strips these from both ends of each whitespace-separated token of a question.
_STRIP = "\"'`.,;:!?()[]{}"

# The ASCII characters RediSearch's tokenizer splits on (besides space and tab), as in its ``toksep.h``.
# It splits on nothing else: not on newlines, not on any non-ASCII character.
_SEPARATORS = ",./(){}[]:;~!@#$%^&*-=+|'`\"<>?"
_INDEX_BREAK = frozenset(_SEPARATORS + " \t")
_INDEX_SPLIT = re.compile(f"[{re.escape(_SEPARATORS)}]+")

# This module cuts text into *pieces* at whitespace, those separators, backslashes (the tokenizer's
# escape character, which must never reach a query), control characters, lone surrogates (which cannot
# be sent at all), and at non-ASCII punctuation, symbols and spaces (so a curly apostrophe, guillemets
# or an emoji glued to a word cut it as ASCII punctuation would). A piece is then made of letters, marks,
# digits, ``_`` and format characters, none of which is special to the query parser. Where the index
# tokenizer would not cut the same way, :func:`doc_grams` gives the ``grams`` field the pieces instead.
_ASCII_BOUNDARY = re.compile(r"[\s" + re.escape(_SEPARATORS) + r"\\\x00-\x1f\x7f-\x9f\ud800-\udfff]+")
_NON_ASCII_BOUNDARY = frozenset("PSZ")
# What inside a stretch makes the tokenizer cut differently from this module: a backslash or control
# character (non-ASCII boundaries are checked by category).
_INDEX_ODD = re.compile(r"[\\\x00-\x1f\x7f-\x9f]")
_WORDISH = re.compile(r"\w")
# In ASCII text, what can glue a stretch to its neighbour or make it odd: a backslash, or a control
# character other than tab (newlines among them). Text without any holds no stretch for ``grams``.
_ASCII_GLUE = re.compile(r"[\\\x00-\x08\x0a-\x1f\x7f]")

# A value no scope tag can take (tags are lowercase hex or ``x``, see ``stores.redis.scope.tag``).
_NO_TAG = "z"
_SCOPE_CLAUSE = re.compile(r"@(\w+):\{([^{}\s]+)\}")

# --------------------------------------------------------------------------------------------- terms


def fts_terms(query: str, extra_terms: Sequence[str] = ()) -> tuple[str, ...]:
    """The lexical terms of ``query``, by CPersona's rules but for CJK 2-grams, each to be matched as a
    substring.

    The query is split on whitespace and ``"'`.,;:!?()[]{}`` is stripped from each token's ends. Each
    token is cut into CJK runs and non-CJK runs: a CJK run of two or more characters gives all its
    overlapping 2-grams (a lone character is dropped), a non-CJK run of three or more characters is kept
    whole with its inner punctuation (``CVE-2024-3094``). ``extra_terms`` (entity aliases) follow as
    whole phrases of three or more characters, trimmed of surrounding whitespace. Order of first
    appearance, no duplicates.
    """
    terms: dict[str, None] = {}
    for token in query.split():
        for run in _RUNS.findall(token.strip(_STRIP)):
            if _CJK_RUN.fullmatch(run):
                for gram in _ngrams(run, 2):
                    terms.setdefault(gram)
            elif len(run) >= 3:
                terms.setdefault(run)
    for extra in extra_terms:
        phrase = extra.strip()
        if len(phrase) >= 3:
            terms.setdefault(phrase)
    return tuple(terms)


def _ngrams(run: str, n: int) -> list[str]:
    """The overlapping ``n``-character grams of ``run``, in order (none for a shorter run)."""
    return [run[i : i + n] for i in range(len(run) - n + 1)]


def cjk_runs(text: str) -> list[str]:
    """The Chinese and Japanese runs of ``text``, in order."""
    return _CJK_RUN.findall(text)


def doc_bigrams(text: str) -> list[str]:
    """The ``bigrams`` array of a document whose searchable text is ``text``: one element per CJK run of
    two or more characters, its overlapping 2-grams in order (``東京タワー``: ``東京 京タ タワ ワー``)."""
    if text.isascii():
        return []
    runs = [run for run in _CJK_RUN.findall(text) if len(run) > 1]
    return [" ".join(_ngrams(run, 2)) for run in runs]


def doc_grams(text: str) -> list[str]:
    """The ``grams`` array of a document whose searchable text is ``text``.

    One element per CJK run: its overlapping 3-grams in order, then its two tail grams of two and one
    characters (``東京タワー`` gives ``東京タ 京タワ タワー ワー ー``). Then, for each stretch of non-CJK
    text that the index tokenizer does not cut as this module cuts queries (glued to a CJK character, a
    newline, a non-breaking or ideographic space or an escaped separator, or holding a backslash, a
    control character or non-ASCII punctuation), one element with its pieces, so that its words can be
    found in this field.
    """
    if text.isascii() and not _ASCII_GLUE.search(text):
        return []  # no CJK, and every stretch sits between spaces or tabs the tokenizer cuts at
    return _grams(text)


def _grams(text: str) -> list[str]:
    """:func:`doc_grams` of any text, by the rules its docstring gives."""
    out = [" ".join([run[i : i + 3] for i in range(len(run))]) for run in _CJK_RUN.findall(text)]
    for m in _STRETCH.finditer(text):
        start, end = m.span()
        stretch = m.group()
        if not _WORDISH.search(stretch):
            continue  # punctuation only (、 。 「 」 ...): nothing to search for
        # A backslash before a separator makes the tokenizer keep the separator inside the token.
        glued = (
            start > 0 and (text[start - 1] not in _INDEX_BREAK or text[start - 2 : start - 1] == "\\")
        ) or (end < len(text) and text[end] not in _INDEX_BREAK)
        if not (glued or _INDEX_ODD.search(stretch) or not stretch.isascii()):
            continue
        pieces = _split(stretch)
        differs = glued or pieces != [p for p in _INDEX_SPLIT.split(stretch) if p]
        if differs and any(p.lower() not in _STOPWORDS for p in pieces):
            out.append(" ".join(pieces))
    return out


def doc_short_grams(text: str) -> list[str]:
    """The tags of every distinct CJK substring of one or two characters of ``text``, in text order.

    A tag match is exact; the prefix query of ``doc_grams``' tail grams is not (the server expands a
    prefix to at most 200 grams counted over the whole index, so another agent's text could hide a row).
    """
    out: dict[str, None] = {}
    for run in _CJK_RUN.findall(text):
        for i in range(len(run)):
            out.setdefault(tag(run[i]))
            if i + 1 < len(run):
                out.setdefault(tag(run[i : i + 2]))
    return list(out)


_STEM_MARK = "_"


class _Stemmers(threading.local):
    """One English Snowball stemmer per thread, built on a thread's first word (not at import).

    PyStemmer runs the Snowball project's own C code of the algorithm the pure-Python
    ``snowballstemmer`` interprets, word for word the same stems (held to it by
    tests/test_stemmer_contract.py) at about a seventeenth of the time (1.5 against 27 µs a word over
    the LoCoMo and TMD vocabularies). Its stemmer object keeps a working buffer between calls, so no
    two threads share one.
    """

    def __init__(self) -> None:
        self.english = Stemmer.Stemmer("english")


_STEMMERS = _Stemmers()


@functools.lru_cache(maxsize=1 << 16)
def word_stem(piece: str) -> str:
    """The term a lone word is indexed and searched as: ``_`` and its lower-cased English stem."""
    stem: str = _STEMMERS.english.stemWord(piece.lower())
    # The marker keeps stems apart from the words of the text fields: the index keeps one posting per
    # term and document for all fields together, so ``zebra`` in both ``content`` and ``stems`` would
    # count twice in BM25 (and a word whose stem differs from it, once). It also keeps a stem from ever
    # being a stopword, which the index would drop.
    return _STEM_MARK + stem


def doc_stems(text: str) -> str:
    """The ``stems`` field of a document whose searchable text is ``text``: the stem of every non-CJK
    piece that a query could search as a lone word (see :func:`_clause`), in text order."""
    if text.isascii():  # one run, no CJK: its pieces are what the boundaries leave (empty ones too)
        return " ".join([stem for p in _ASCII_BOUNDARY.split(text) if (stem := _piece_stem(p)) is not None])
    out: list[str] = []
    for run in _RUNS.findall(text):
        if _CJK_RUN.fullmatch(run):
            continue
        out.extend(stem for p in _split(run) if (stem := _piece_stem(p)) is not None)
    return " ".join(out)


@functools.lru_cache(maxsize=1 << 16)
def _piece_stem(piece: str) -> str | None:
    """The stem :func:`doc_stems` gives a piece, or ``None`` for a stopword or a piece without a letter
    or digit; cached as a whole, as a text repeats its pieces far more often than it brings new ones."""
    if piece.lower() in _STOPWORDS or not any(ch.isalnum() for ch in piece):
        return None
    return word_stem(piece)


def _split(text: str) -> list[str]:
    """Non-CJK ``text`` cut into pieces (see :data:`_ASCII_BOUNDARY`)."""
    pieces: list[str] = []
    for chunk in _ASCII_BOUNDARY.split(text):
        if chunk.isascii():
            if chunk:
                pieces.append(chunk)
            continue
        start = 0
        for i, ch in enumerate(chunk):
            if not ch.isascii() and unicodedata.category(ch)[0] in _NON_ASCII_BOUNDARY:
                if i > start:
                    pieces.append(chunk[start:i])
                start = i + 1
        if start < len(chunk):
            pieces.append(chunk[start:])
    return pieces


def _pieces(text: str) -> list[str]:
    """The pieces of non-CJK ``text`` less the stopwords (the server folds case itself)."""
    return [p for p in _split(text) if p.lower() not in _STOPWORDS]


def cjk_clause(run: str, *, ranked: bool) -> str:
    """The clause matching rows that hold the CJK ``run``: a 2-gram term of a ranked search is one
    ``bigrams`` token; a longer run is the exact phrase of its 3-grams; a shorter one, or a 2-gram outside
    a ranked search (the memory fallback, the raw-journal query), as said below."""
    if len(run) == 2 and ranked:
        return f"@bigrams:{run}"  # the query terms of a CJK run (see ``fts_terms``)
    if len(run) < 3:
        # The fallback listing matches a short run exactly (see ``doc_short_grams``). A ranked search,
        # whose scores are BM25 over text terms, can get a lone character only from an alias; it matches
        # every indexed gram that starts with it (``doc_grams``' tail grams). The server expands a prefix
        # to at most MAXPREFIXEXPANSIONS (200) distinct grams over the whole index, so there a common
        # character may find only some of the rows holding it.
        return f"@grams:{run}*" if ranked else f"@short_gram:{{{tag(run)}}}"
    return f'@grams:"{" ".join(_ngrams(run, 3))}"'


def _clause(term: str, text_field: str, *, ranked: bool) -> str | None:
    """A RediSearch clause matching rows that contain ``term``, or ``None`` if nothing in it is searchable.

    A CJK run of two characters is one ``bigrams`` term in a ranked search; a longer one is the phrase of
    its consecutive 3-grams, a shorter one (or a short one in the fallback) as :func:`cjk_clause` says;
    every other stretch is the phrase of its tokenizer pieces in the text field or in ``grams`` (glued
    words). A lone word is its stem in ``stems``; a phrase is
    exact, and so is a piece without a letter or digit (the parser refuses a bare ``_``).
    A term with several stretches needs all of them (in any order: an inverted index cannot check that
    they touch).
    """
    parts: list[str] = []
    for run in _RUNS.findall(term):
        if _CJK_RUN.fullmatch(run):
            parts.append(cjk_clause(run, ranked=ranked))
            continue
        pieces = _pieces(run)
        if len(pieces) == 1 and any(ch.isalnum() for ch in pieces[0]):
            parts.append(f"@stems:{word_stem(pieces[0])}")
        elif pieces:
            parts.append(f'@{text_field}|grams:"{" ".join(pieces)}"')
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else "(" + " ".join(parts) + ")"


QUESTION_WORDS: frozenset[str] = frozenset(
    ("what", "when", "where", "who", "whom", "whose", "which", "why", "how", "did", "does", "do")
)
"""Words a question is phrased with, left out of a ranked search that has other terms (they stay in the
index and in phrases). They say what kind of answer is wanted, not what it is about, and they are
among the commonest words of a conversation: on 100k memories they were a third of the keyword arm's
time in the search module (13.1 ms of server time per recall with them, 8.5 without)."""


def clauses(terms: Sequence[str], text_field: str, *, ranked: bool = False) -> list[str]:
    """The clauses of ``terms``, searching ``text_field`` besides ``grams`` and ``stems``.

    ``ranked`` for a BM25 search (question words set aside while other terms remain); otherwise the
    memory fallback listing, which matches a short CJK run by the memories' ``short_gram`` tags.
    """
    return list(_searched(terms, text_field, ranked=ranked))


def _searched(terms: Sequence[str], text_field: str, *, ranked: bool) -> dict[str, str]:
    """Each clause :func:`clauses` sends, with the first term that made it."""
    out: dict[str, str] = {}
    asking: dict[str, str] = {}
    for term in terms:
        clause = _clause(term, text_field, ranked=ranked)
        if clause is None:
            continue
        if ranked and term.lower() in QUESTION_WORDS:
            asking.setdefault(clause, term)
        else:
            out.setdefault(clause, term)
    # A query of question words alone ("who did?") still searches for them.
    return out or asking


def terms_held(query: str, text: str) -> tuple[int, int]:
    """How many of the terms a ranked keyword search of ``query`` sends (one per clause, question words
    set aside as :func:`clauses` sets them aside) ``text`` holds, and how many it sends.

    A term is held as the index would match it: a lone word by its stem among the text's stems, a phrase
    by its pieces in a row among the text's pieces, a CJK run as a substring. What RediSearch's tokenizer
    glues differently (``grams``) may be missed, never invented: a miss only withholds the gate's
    literal-match admission."""
    terms = list(_searched(fts_terms(query), "content", ranked=True).values())
    if not terms:
        return 0, 0
    stems = frozenset(doc_stems(text).split())
    pieces = [p.lower() for p in _pieces(text)]
    held = sum(1 for term in terms if _holds(term, text, stems, pieces))
    return held, len(terms)


def _holds(term: str, text: str, stems: frozenset[str], pieces: Sequence[str]) -> bool:
    for run in _RUNS.findall(term):
        if _CJK_RUN.fullmatch(run):
            if run not in text:
                return False
            continue
        wanted = [p.lower() for p in _pieces(run)]
        if len(wanted) == 1 and any(ch.isalnum() for ch in wanted[0]):
            if word_stem(wanted[0]) not in stems:
                return False
        elif wanted and not _in_a_row(wanted, pieces):
            return False
    return True


def _in_a_row(wanted: Sequence[str], pieces: Sequence[str]) -> bool:
    n = len(wanted)
    return any(list(pieces[i : i + n]) == list(wanted) for i in range(len(pieces) - n + 1))


# -------------------------------------------------------------------------------------- query shapes


def unscored(scope_clause: str) -> str:
    """``scope_clause`` (from :func:`~cpersona.stores.redis.scope.scope_query`) rewritten to filter
    without scoring.

    RediSearch scores tag matches like words (BM25STD gives a tag value an idf), which would rank rows by
    how rare their project or channel is. A query attribute ``$weight: 0`` silences a clause, but the
    server applies it only to a union, so each tag clause gets a second value that no tag can take.
    """
    found = _SCOPE_CLAUSE.findall(scope_clause)
    if " ".join(f"@{field}:{{{values}}}" for field, values in found) != scope_clause:
        raise ValueError(f"unexpected scope clause shape: {scope_clause!r}")
    return " ".join(f"(@{field}:{{{values}|{_NO_TAG}}} => {{$weight: 0;}})" for field, values in found)


def _number(value: float) -> str:
    if math.isnan(value):
        raise ValueError("a period bound must not be NaN")
    if math.isinf(value):
        return "+inf" if value > 0 else "-inf"
    return repr(float(value))


def period_clause(period: tuple[float, float] | None) -> str:
    if period is None:
        return ""
    start, end = period
    return f" @ts:[{_number(start)} ({_number(end)}]"


def ranked_query(filters: str, clauses: Sequence[str]) -> str:
    # The scope filter is repeated inside every alternative instead of being intersected once with the
    # union of the terms: RediSearch 2.10 can hand a union nested in an intersection to the scorer with
    # only one of its matching children (when the union overshot on a skip), so a row matching three
    # terms was scored for one. At the top level a union collects every matching child. The same flaw
    # remains one level down, inside a stemmed word (the union of the word and its stem): a row holding
    # both ``deploy`` and ``deployed`` may be credited for one of the two forms. Measured on 10k
    # memories, repeating the filter costs about a third more time than the single intersection.
    return " | ".join(f"({filters} {clause})" for clause in clauses)
