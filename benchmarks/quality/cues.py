"""A fixed, deterministic reading of the time a question names, as the ``time_cue`` a caller would pass.

The benchmark protocol (``shared/reference/benchmark-protocol.md``, "Time cues") asks for cues derived
from the question's text and the data's "now" only, never from the answer or the evidence, by a parser
that does not change between runs. This module is that parser. It knows English date phrases, not the
data: :func:`read_cue` sees a question string and a moment, nothing else.

What it reads, in this order (the first rule that matches decides; a question that refers to a session
by number, "in our sixth session", "3 sessions ago", "in session 2", gets no cue at all, because the
session is its time anchor and it names no date):

=============================================  =============================  ==========  ===========
words                                          period (UTC)                   confidence  kind
=============================================  =============================  ==========  ===========
"between May 8th and June 9th", "X through Y"  first day to last day          sure        date_span
"the week/Sunday/weekend before <date>",       the n weeks before (after)     likely      anchored
"two weeks before <date>", "... after <date>"  the date, the date included
"by <date>"                                    open start to the date         likely      anchored
"May 3, 2023", "3 June 2023", "Aug 15th",      that day                       sure        date
"2023/09/11", "on July 3rd", "10/01/2024",
"10.01.2024"
"between August and November 2023"            first month to last month      likely      month_span
"July 2023", "in October", "mid-August"        that calendar month            likely      month
"summer 2022", "the summer of 2021"            Jun-Aug (Mar-May, Sep-Nov,     likely      season
                                               Dec-Feb for the other seasons)
"in 2023", "during 2010"                       that calendar year             vague       year
"today", "earlier this morning", "yesterday",  that day; the n days up to     likely      rel_day
"last Sunday", "over the last 3 days"          and including today
"last week", "over this last week", "this      the 7 days up to today;        likely      rel_week
week", "last weekend"                          Monday to today; Sat-Sun
"this month", "last month"                     the calendar month (this one   likely      rel_month
                                               up to today)
"108 days ago", "2 weeks ago", "3 months ago"  the engine's ``ago``: see       likely      rel_day,
                                               below                                      rel_week,
                                                                                          rel_month
"last summer", "during the summer"             the latest such season that    likely      rel_season
                                               began before now
"last year", "this year", "4 years ago",       the calendar year; Jan 1 to    vague       rel_year
"in the past year"                             today; the 365 days to today
"recently", "lately"                           the 30 days up to today        vague       recent
=============================================  =============================  ==========  ===========

**Numeric dates.** Year first ("2023/09/11", "2023-09-11", "2023.09.11") is always year, month, day. With
the year last, a part above 12 is the day whatever its place ("13/01/2024", "01/13/2024"); otherwise
slashes and dashes are read **month first** ("10/01/2024" is 1 October 2024) and dots **day first**
("10.01.2024" is 10 January 2024). Month first is the sets' own order: every one of the 12,563 dates the
TMD question wordings write with a month name puts the month first ("July 6th", "February 21, 2023").
LoCoMo's questions mix both orders (93 day first, 48 month first) and, like TMD's, write no date in
numbers with the year last, so they cannot contradict it; the dotted form is the day-first countries'
own. Only a four-digit year makes a numeric date: "3/4" and "1.2.3" are no dates.

A date or month written without a year is the latest one that is not after now ("May 8th" asked in
October 2023 is 8 May 2023). "Last <weekday>" is the latest such day strictly before today. Calendar
words give calendar periods of whole days. "<n> days/weeks/months ago" is what a caller would pass as
``{"ago": {"unit", "value"}}``, so it is turned into the period the engine itself makes of that cue
(seed §2.7, relative to the data's "now" instead of the engine's clock): one unit long, centred n units
before now, ending no later than now, a month being 30 days. These are the only periods that do not
start and end at midnight.

Left without a cue on purpose: "a few years ago" and "long ago" (no count and no date; the engine's
``long_ago`` depends on the store, which this parser must not look at), bare weekdays ("on Sunday"),
"next ..." phrases except seasons, seasons without an anchor ("cold winter days"), comparisons ("more
recently"), misspelt month names.

:class:`Cue` keeps the period as ``[start, end)``; :meth:`Cue.time_cue` turns it into the request's
``{"after", "before", "confidence"}``: whole days as dates, where a date in ``before`` names the whole
day (the engine's reading, seed §2.7), other bounds as ISO times. :meth:`Cue.widened` moves the end
later, for data whose timestamps say when a thing was *said*, not when it happened (LoCoMo:
:data:`SAID_AFTER_DAYS`). :meth:`Cue.recent_only` applies the engine's own rule (seed §2.8) against the
data's "now", which the engine cannot do itself here because its clock is the machine's.
"""

from __future__ import annotations

import calendar
import dataclasses
import datetime
import itertools
import re
from typing import TYPE_CHECKING, Final, Literal

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = [
    "NAMED_KINDS",
    "SAID_AFTER_DAYS",
    "Confidence",
    "Cue",
    "CueKind",
    "parse_cue",
    "read_cue",
]

Confidence = Literal["sure", "likely", "vague"]
CueKind = Literal[
    "date_span",
    "anchored",
    "date",
    "month_span",
    "month",
    "season",
    "year",
    "rel_day",
    "rel_week",
    "rel_month",
    "rel_season",
    "rel_year",
    "recent",
]
NAMED_KINDS: Final[frozenset[str]] = frozenset(
    {"date_span", "anchored", "date", "month_span", "month", "season", "year"}
)
"""Kinds read from a calendar date, month or year written in the question (LoCoMo's cue set)."""

SAID_AFTER_DAYS: Final = 30
"""How many days later a session-stamped period ends: things are said up to about a month after."""

_DAY_SECONDS: Final = 86_400.0
_ONE_DAY: Final = datetime.timedelta(days=1)


@dataclasses.dataclass(frozen=True, slots=True)
class Cue:
    """A period read from a question: ``[start, end)`` as aware UTC times.

    ``start`` is ``None`` for an open start ("by July 10"): the engine closes it with the scope's oldest
    record. Most periods are whole days; :meth:`time_cue` then writes them as dates. ``phrase`` is the
    text the rule matched, for the report.
    """

    start: datetime.datetime | None
    end: datetime.datetime
    confidence: Confidence
    kind: CueKind
    phrase: str

    @property
    def named(self) -> bool:
        """Whether the question writes out a date, month or year (rather than only "last week")."""
        return self.kind in NAMED_KINDS

    def time_cue(self) -> dict[str, str]:
        """The request's ``time_cue``: whole days as ISO dates (a date in ``before`` stands for the whole
        of that day, so ``before`` is the period's last day), other bounds as ISO times in UTC."""
        if _whole_days(self.start, self.end):
            before = (self.end - _ONE_DAY).date().isoformat()
            after = None if self.start is None else self.start.date().isoformat()
        else:
            before = self.end.isoformat()
            after = None if self.start is None else self.start.isoformat()
        out = {"before": before, "confidence": self.confidence}
        return out if after is None else {"after": after, **out}

    def widened(self, days: int) -> Cue:
        """The same cue ending ``days`` later (start and confidence unchanged)."""
        return dataclasses.replace(self, end=self.end + datetime.timedelta(days=days))

    def bounds(self) -> tuple[float, float]:
        """The period as epoch seconds ``[start, end)``; an open start is minus infinity."""
        start = float("-inf") if self.start is None else self.start.timestamp()
        return start, self.end.timestamp()

    def holds(self, timestamp: float) -> bool:
        start, end = self.bounds()
        return start <= timestamp < end

    def recent_only(self, now: datetime.datetime) -> bool:
        """The engine's rule (seed §2.8) at ``now``: the cue's own period starts within the last 24 hours."""
        start, _ = self.bounds()
        return start >= now.timestamp() - _DAY_SECONDS


def read_cue(question: str, now: datetime.datetime) -> Cue | None:
    """The cue that ``question``'s words name, read at ``now`` (an aware time), or ``None``."""
    if now.tzinfo is None:
        raise ValueError("now must be an aware datetime (UTC)")
    text = _normalise(question)
    if _SESSION.search(text):
        return None
    now = now.astimezone(datetime.UTC)
    for rule in _RULES:
        cue = rule(text, now)
        if cue is not None:
            return cue
    return None


def parse_cue(question: str, now: datetime.datetime, *, said_after_days: int = 0) -> dict[str, str] | None:
    """The absolute ``time_cue`` mapping for ``question`` at ``now``, or ``None`` when it names no time.

    ``said_after_days`` widens the period forward for session-stamped data (:data:`SAID_AFTER_DAYS`).
    """
    cue = read_cue(question, now)
    if cue is None:
        return None
    return (cue.widened(said_after_days) if said_after_days else cue).time_cue()


# ------------------------------------------------------------------------------------------- vocabulary

_MONTHS: Final[Mapping[str, int]] = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
# Abbreviations count only before a day number ("Aug 15th"): "Jan" and "Mar" are also words and names.
_ABBREVIATIONS: Final[Mapping[str, int]] = {
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7,
    "aug": 8, "sep": 9, "sept": 9, "oct": 10, "nov": 11, "dec": 12,
}  # fmt: skip
_WEEKDAYS: Final[Mapping[str, int]] = {name.lower(): i for i, name in enumerate(calendar.day_name)}
_SMALL: Final[Mapping[str, int]] = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "couple of": 2,
}  # fmt: skip
_UNITS_ORDINAL: Final = (
    "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth",
    "eleventh", "twelfth", "thirteenth", "fourteenth", "fifteenth", "sixteenth", "seventeenth",
    "eighteenth", "nineteenth",
)  # fmt: skip
_ORDINALS: Final[Mapping[str, int]] = {
    **{word: i + 1 for i, word in enumerate(_UNITS_ORDINAL)},
    "twentieth": 20,
    **{f"twenty-{word}": 20 + i + 1 for i, word in enumerate(_UNITS_ORDINAL[:9])},
    "thirtieth": 30,
    "thirty-first": 31,
}
_SEASONS: Final[Mapping[str, int]] = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}
"""A season's first month (northern hemisphere); every season is three months long."""

_MONTH = "(?:" + "|".join(name.capitalize() for name in _MONTHS) + ")"
_ABBR = "(?:" + "|".join(a.capitalize() for a in sorted(_ABBREVIATIONS, key=len, reverse=True)) + r")\.?"
_ORDINAL_WORD = "(?:" + "|".join(sorted(_ORDINALS, key=len, reverse=True)) + ")"
_DAY = rf"(?:(?<!\d)\d{{1,2}}(?:st|nd|rd|th)?(?!\d)|{_ORDINAL_WORD})"
_YEAR = r"(?<!\d)(?:19|20)\d\d(?!\d)"
_NUMBER = r"(?:\d+|a couple of|couple of|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_WEEKDAY = "(?:" + "|".join(_WEEKDAYS) + ")"
_SEASON = "(?:" + "|".join(_SEASONS) + ")"

# "Aug 15th, 2023", "May eighth", "Thursday July 27th"; "3 June, 2023", "8th of December 2023";
# "2023/09/11", "2023-09-11", "2023.09.11"; "10/01/2024", "10.01.2024" (the order: the module's docstring,
# "Numeric dates"). The year may be missing in the first two forms only.
_DATE_MD = re.compile(rf"\b(?P<m>{_MONTH}|{_ABBR})\s+(?P<d>{_DAY})\b(?:\s*,?\s*(?P<y>{_YEAR}))?")
_DATE_DM = re.compile(rf"\b(?P<d>{_DAY})(?:\s+of)?\s+(?P<m>{_MONTH}|{_ABBR})\b(?:\s*,?\s*(?P<y>{_YEAR}))?")
_DATE_ISO = re.compile(rf"(?P<y>{_YEAR})(?P<sep>[-/.])(?P<m>\d{{1,2}})(?P=sep)(?P<d>\d{{1,2}})(?!\d|\.\d)")
_DATE_NUMERIC = re.compile(
    rf"(?<![\d.])(?P<a>\d{{1,2}})(?P<sep>[-/.])(?P<b>\d{{1,2}})(?P=sep)(?P<y>{_YEAR})(?!\.\d)"
)
_SPAN_JOIN = re.compile(r"^\s*(?:and|to|through|thru|until|till|-)\s*$", re.IGNORECASE)
_ANCHOR = re.compile(
    rf"(?:\b(?P<n>{_NUMBER})\s+weeks?|\bweek(?:end)?|\b(?P<wd>{_WEEKDAY}))\s+(?P<dir>before|after)\s*$",
    re.IGNORECASE,
)
_BY = re.compile(r"\b(?:by|until|till)\s*$", re.IGNORECASE)
_MONTH_YEAR = re.compile(rf"\b(?P<m>{_MONTH})\s*,?\s+(?P<y>{_YEAR})")
# A month name alone is a month only after a word that makes it one ("in May", "mid-August"): "May"
# is also a verb, "June" a name.
_MONTH_ALONE = re.compile(
    r"\b(?:in|during|of|since|throughout|through|to|and|between|from|early|late|mid|on|around|"
    r"last|this)[\s-]+(?:the\s+)?(?:(?:early|late|mid|beginning|end|start|middle)[\s-]+(?:of\s+)?)?"
    rf"(?P<m>{_MONTH})\b"
)
_MONTH_SPAN = re.compile(
    rf"\b(?:between|from)\s+(?P<m1>{_MONTH})\s+(?:and|to|through|until)\s+(?P<m2>{_MONTH})"
    rf"(?:\s*,?\s*(?P<y>{_YEAR}))?"
)
_SEASON_YEAR = re.compile(rf"\b(?P<s>{_SEASON})(?:\s+of)?\s+(?P<y>{_YEAR})", re.IGNORECASE)
_YEAR_ALONE = re.compile(
    rf"\b(?:in|during|since|throughout|for|of)\s+(?:(?:early|late|mid)[\s-]+)?(?P<y>{_YEAR})", re.IGNORECASE
)
_SESSION = re.compile(
    r"\b(?:sessions?|discussions?)\s+(?:\d+|one|two|three)\b"
    rf"|\b(?:\d+(?:st|nd|rd|th)|{_ORDINAL_WORD}|last|previous)\s+(?:sessions?|discussions?)\b"
    r"|\b(?:\d+|an?|one|two|three|four|five|six|seven|eight|nine|ten)\s+(?:sessions?|discussions?)\s+ago\b"
    r"|\bsession before\b|\bresponse number\b",
    re.IGNORECASE,
)


def _normalise(text: str) -> str:
    return " ".join(text.replace("\u2013", "-").replace("\u2014", "-").split())


def _midnight(day: datetime.date) -> datetime.datetime:
    return datetime.datetime(day.year, day.month, day.day, tzinfo=datetime.UTC)


def _whole_days(start: datetime.datetime | None, end: datetime.datetime) -> bool:
    return all(t is None or t == _midnight(t.date()) for t in (start, end))


def _days(
    first: datetime.date | None, last: datetime.date, confidence: Confidence, kind: CueKind, phrase: str
) -> Cue:
    """A cue of whole days, ``first`` to ``last`` included."""
    start = None if first is None else _midnight(first)
    return Cue(start, _midnight(last) + _ONE_DAY, confidence, kind, phrase)


def _number(word: str) -> int:
    word = word.lower()
    return int(word) if word.isdigit() else _SMALL[word]


def _month_number(word: str) -> int:
    word = word.lower().rstrip(".")
    return _MONTHS.get(word) or _ABBREVIATIONS[word]


def _day_number(word: str) -> int:
    word = word.lower()
    digits = re.match(r"\d+", word)
    return int(digits.group()) if digits else _ORDINALS[word]


def _month_end(year: int, month: int) -> datetime.date:
    return datetime.date(year, month, calendar.monthrange(year, month)[1])


def _add_months(year: int, month: int, delta: int) -> tuple[int, int]:
    index = year * 12 + (month - 1) + delta
    return index // 12, index % 12 + 1


def _latest_date(month: int, day: int, today: datetime.date) -> datetime.date | None:
    """The latest ``month``/``day`` that is not after ``today`` (``None`` if no year has that day)."""
    for year in range(today.year, today.year - 8, -1):
        try:
            candidate = datetime.date(year, month, day)
        except ValueError:
            continue
        if candidate <= today:
            return candidate
    return None


def _latest_month(month: int, today: datetime.date) -> int:
    """The year of the latest ``month`` whose first day is not after ``today``."""
    return today.year if month <= today.month else today.year - 1


# ------------------------------------------------------------------------------------------------ rules


@dataclasses.dataclass(frozen=True, slots=True)
class _Date:
    day: datetime.date | None
    year_given: bool
    start: int
    end: int
    parts: tuple[int, int, int | None]
    """(month, day, year or None) as written."""


def _numeric_order(first: int, second: int, separator: str) -> tuple[int, int]:
    """(month, day) of a numeric date written ``first``, ``second``, year: a part above 12 is the day;
    otherwise dots are day first, slashes and dashes month first (the module's docstring)."""
    if first > 12 or (separator == "." and second <= 12):
        return second, first
    return first, second


def _month_and_day(pattern: re.Pattern[str], match: re.Match[str]) -> tuple[int, int]:
    if pattern is _DATE_NUMERIC:
        return _numeric_order(int(match.group("a")), int(match.group("b")), match.group("sep"))
    if pattern is _DATE_ISO:
        return int(match.group("m")), int(match.group("d"))
    return _month_number(match.group("m")), _day_number(match.group("d"))


def _dates(text: str, today: datetime.date) -> list[_Date]:
    """Every explicit date in ``text`` in order of position; overlapping matches keep the first."""
    found: list[_Date] = []
    for pattern in (_DATE_ISO, _DATE_NUMERIC, _DATE_MD, _DATE_DM):
        for match in pattern.finditer(text):
            if any(match.start() < other.end and other.start < match.end() for other in found):
                continue
            year_text = match.group("y")
            month, day_number = _month_and_day(pattern, match)
            year = int(year_text) if year_text else None
            try:
                day: datetime.date | None = (
                    datetime.date(year, month, day_number)
                    if year is not None
                    else _latest_date(month, day_number, today)
                )
            except ValueError:
                continue
            found.append(_Date(day, year is not None, match.start(), match.end(), (month, day_number, year)))
    return sorted(found, key=lambda d: d.start)


def _date_rules(text: str, now: datetime.datetime) -> Cue | None:
    today = now.date()
    dates = [d for d in _dates(text, today) if d.day is not None]
    if not dates:
        return None
    for left, right in itertools.pairwise(dates):
        if _SPAN_JOIN.match(text[left.end : right.start]):
            first, last = left.day, right.day
            assert first is not None
            assert last is not None
            if not left.year_given:
                # A year written once serves both ends ("between August 11 and August 15 2023"), and a
                # span without years ends at the latest end date: its start is the latest one before that.
                month, day, _ = left.parts
                first = _latest_date(month, day, last) or first
            if first > last:
                first, last = last, first
            return _days(first, last, "sure", "date_span", text[left.start : right.end])
    date = dates[0]
    assert date.day is not None
    before = text[: date.start]
    anchor = _ANCHOR.search(before)
    if anchor is not None:
        weeks = _number(anchor.group("n")) if anchor.group("n") else 1
        reach = datetime.timedelta(days=7 * weeks)
        phrase = text[anchor.start() : date.end]
        if anchor.group("dir").lower() == "before":
            return _days(date.day - reach, date.day, "likely", "anchored", phrase)
        return _days(date.day, date.day + reach, "likely", "anchored", phrase)
    by = _BY.search(before)
    if by is not None:
        return _days(None, date.day, "likely", "anchored", text[by.start() : date.end])
    return _days(date.day, date.day, "sure", "date", text[date.start : date.end])


def _month_rules(text: str, now: datetime.datetime) -> Cue | None:
    today = now.date()
    span = _MONTH_SPAN.search(text)
    if span is not None:
        m1, m2 = _month_number(span.group("m1")), _month_number(span.group("m2"))
        if span.group("y"):
            y2 = int(span.group("y"))
            y1 = y2 if m1 <= m2 else y2 - 1
        else:
            y2 = _latest_month(m2, today)
            y1 = y2 if m1 <= m2 else y2 - 1
        return _days(datetime.date(y1, m1, 1), _month_end(y2, m2), "likely", "month_span", span.group())
    match = _MONTH_YEAR.search(text)
    if match is not None:
        year, month = int(match.group("y")), _month_number(match.group("m"))
        return _days(datetime.date(year, month, 1), _month_end(year, month), "likely", "month", match.group())
    match = _MONTH_ALONE.search(text)
    if match is not None:
        month = _month_number(match.group("m"))
        year = _latest_month(month, today)
        return _days(datetime.date(year, month, 1), _month_end(year, month), "likely", "month", match.group())
    return None


def _season_span(season: str, year: int) -> tuple[datetime.date, datetime.date]:
    first_month = _SEASONS[season.lower()]
    end_year, end_month = _add_months(year, first_month, 2)
    return datetime.date(year, first_month, 1), _month_end(end_year, end_month)


def _season_rules(text: str, now: datetime.datetime) -> Cue | None:
    today = now.date()
    match = _SEASON_YEAR.search(text)
    if match is not None:
        first, last = _season_span(match.group("s"), int(match.group("y")))
        return _days(first, last, "likely", "season", match.group())
    match = re.search(
        rf"\b(?P<w>last|this|next)\s+(?P<s>{_SEASON})\b|\b(?:in|during|over)\s+the\s+(?:(?:early|late)\s+)?"
        rf"(?P<s2>{_SEASON})\b",
        text,
        re.IGNORECASE,
    )
    if match is None:
        return None
    season = match.group("s") or match.group("s2")
    which = (match.group("w") or "").lower()
    # The latest season of that name that has begun by today.
    year = today.year
    while _season_span(season, year)[0] > today:
        year -= 1
    if which == "last" and _season_span(season, year)[1] >= today:
        year -= 1  # still in it: "last summer" is the one before
    elif which == "next":
        year += 1
    first, last = _season_span(season, year)
    return _days(first, last, "likely", "rel_season", match.group())


def _year_rules(text: str, now: datetime.datetime) -> Cue | None:
    match = _YEAR_ALONE.search(text)
    if match is None:
        return None
    year = int(match.group("y"))
    return _days(datetime.date(year, 1, 1), datetime.date(year, 12, 31), "vague", "year", match.group())


def _relative_rules(text: str, now: datetime.datetime) -> Cue | None:
    today = now.date()
    day = datetime.timedelta(days=1)
    patterns: list[tuple[str, Callable[[re.Match[str]], Cue | None]]] = [
        (
            r"\b(?:earlier\s+)?today\b|\b(?:earlier\s+)?this\s+(?:morning|afternoon|evening)\b"
            r"|\bearlier\s+in\s+the\s+(?:morning|day)\b|\btonight\b",
            lambda m: _days(today, today, "likely", "rel_day", m.group()),
        ),
        (
            r"\bthe\s+day\s+before\s+yesterday\b",
            lambda m: _days(today - 2 * day, today - 2 * day, "likely", "rel_day", m.group()),
        ),
        (r"\byesterday\b", lambda m: _days(today - day, today - day, "likely", "rel_day", m.group())),
        (
            rf"\b(?P<n>{_NUMBER})\s+days?\s+ago\b",
            lambda m: _ago(now, 1, _number(m["n"]), "rel_day", m.group()),
        ),
        (
            rf"\blast\s+(?P<wd>{_WEEKDAY})\b",
            lambda m: _last_weekday(today, _WEEKDAYS[m["wd"].lower()], m.group()),
        ),
        (
            rf"\b(?:the|these)\s+(?:last|past|previous)\s+(?P<n>{_NUMBER})\s+days\b",
            lambda m: _days(today - _number(m["n"]) * day, today, "likely", "rel_day", m.group()),
        ),
        (
            rf"\b(?:the|these)\s+(?:last|past|previous)\s+(?P<n>{_NUMBER})\s+weeks\b",
            lambda m: _days(today - 7 * _number(m["n"]) * day, today, "likely", "rel_week", m.group()),
        ),
        (
            rf"\b(?P<n>{_NUMBER})\s+weeks?\s+ago\b",
            lambda m: _ago(now, 7, _number(m["n"]), "rel_week", m.group()),
        ),
        (r"\blast\s+weekend\b", lambda m: _last_weekend(today, m.group())),
        (
            r"\b(?:(?:this|the)\s+)?(?:last|past|previous)\s+week\b",
            lambda m: _days(today - 7 * day, today, "likely", "rel_week", m.group()),
        ),
        (
            r"\bthis\s+week\b",
            lambda m: _days(today - today.weekday() * day, today, "likely", "rel_week", m.group()),
        ),
        (
            r"\bthis\s+month\b",
            lambda m: _days(today.replace(day=1), today, "likely", "rel_month", m.group()),
        ),
        (r"\blast\s+month\b", lambda m: _months_ago(today, 1, m.group())),
        (
            rf"\b(?P<n>{_NUMBER})\s+months?\s+ago\b",
            lambda m: _ago(now, 30, _number(m["n"]), "rel_month", m.group()),
        ),
        (
            rf"\b(?:the|these)\s+(?:last|past|previous)\s+(?P<n>{_NUMBER})\s+months\b",
            lambda m: _days(today - 30 * _number(m["n"]) * day, today, "likely", "rel_month", m.group()),
        ),
        (
            r"\b(?:in|over|during)\s+the\s+(?:last|past)\s+year\b",
            lambda m: _days(today - 365 * day, today, "vague", "rel_year", m.group()),
        ),
        (
            r"\b(?:earlier\s+)?this\s+year\b",
            lambda m: _days(today.replace(month=1, day=1), today, "vague", "rel_year", m.group()),
        ),
        (r"\blast\s+year\b", lambda m: _years_ago(today, 1, m.group())),
        (rf"\b(?P<n>{_NUMBER})\s+years?\s+ago\b", lambda m: _years_ago(today, _number(m["n"]), m.group())),
        (
            r"(?<!\bmore )\brecently\b|\blately\b",
            lambda m: _days(today - 30 * day, today, "vague", "recent", m.group()),
        ),
    ]
    for pattern, build in patterns:
        match = re.search(pattern, text, re.IGNORECASE)
        if match is not None:
            return build(match)
    return None


def _last_weekday(today: datetime.date, weekday: int, phrase: str) -> Cue:
    back = (today.weekday() - weekday) % 7 or 7
    day = today - datetime.timedelta(days=back)
    return _days(day, day, "likely", "rel_day", phrase)


def _last_weekend(today: datetime.date, phrase: str) -> Cue:
    sunday = today - datetime.timedelta(days=(today.weekday() - 6) % 7 or 7)
    return _days(sunday - datetime.timedelta(days=1), sunday, "likely", "rel_week", phrase)


def _ago(now: datetime.datetime, width_days: int, count: int, kind: CueKind, phrase: str) -> Cue:
    """What the engine makes of ``{"ago": {"unit", "value": count}}`` at ``now`` (seed §2.7): one unit
    long, centred ``count`` units back, ending no later than now; a month is 30 days."""
    width = datetime.timedelta(days=width_days)
    centre = now - count * width
    return Cue(centre - width / 2, min(centre + width / 2, now), "likely", kind, phrase)


def _months_ago(today: datetime.date, months: int, phrase: str) -> Cue:
    year, month = _add_months(today.year, today.month, -months)
    return _days(datetime.date(year, month, 1), _month_end(year, month), "likely", "rel_month", phrase)


def _years_ago(today: datetime.date, years: int, phrase: str) -> Cue:
    year = today.year - years
    return _days(datetime.date(year, 1, 1), datetime.date(year, 12, 31), "vague", "rel_year", phrase)


_RULES: Final = (_date_rules, _month_rules, _season_rules, _year_rules, _relative_rules)
