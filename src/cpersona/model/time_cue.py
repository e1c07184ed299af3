"""The time cue's pure core: reading a cue, turning it into a period, the bounded move and the cue seats.

A caller that half-remembers *when* something happened passes ``time_cue`` with a confidence word. This
module holds everything about the cue that needs no I/O, so the cue arm (``recall.arms.cue``) and the recall
(``recall.cue_loop``, ``recall.stages.chain``) share one reading of it:

* :class:`TimeCue` is a cue as read; the request part is read by
  :func:`~cpersona.model.time_cue_request.parse_time_cue`, which names any part it cannot read.
* :func:`own_period` and :func:`cue_period` turn a cue into the half-open :class:`Period` the cue arm
  searches, widened by the policy's margin for a confidence step; :func:`wider` names the next step of
  the one revision, and :func:`recent_only` says whether the cue only points at the last day.
* :func:`bounded_move` reorders the returned rows so that a row the cue arm ranked rises at most ``L``
  places, and :func:`cue_seats` picks the records the held cue seats take.

A cue is a prior, never a filter: nothing here drops a row or touches a score.
"""

from __future__ import annotations

from datetime import UTC, datetime
from fractions import Fraction
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, model_serializer

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping, Sequence

    from cpersona.model.policy import ByConfidence

__all__ = [
    "CONFIDENCES",
    "MAX_TS",
    "MIN_TS",
    "UNIT_DAYS",
    "Ago",
    "Confidence",
    "Move",
    "Period",
    "TimeCue",
    "Unit",
    "bounded_move",
    "cue_period",
    "cue_seats",
    "iso",
    "own_period",
    "recent_only",
    "wider",
]

Confidence = Literal["sure", "likely", "vague"]
CONFIDENCES: tuple[Confidence, ...] = ("sure", "likely", "vague")
Unit = Literal["days", "weeks", "months"]

_DAY = 86_400.0
# A month is 30 days by definition of the cue, not a calendar month.
UNIT_DAYS: dict[str, int] = {"days": 1, "weeks": 7, "months": 30}
# The times a datetime can show: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z. Every period is kept
# inside them so that formatting it for a response or a trace can never overflow.
MIN_TS = -62_135_596_800.0
MAX_TS = 253_402_300_799.0


def _exact(ts: float) -> str:
    return iso(ts, exact=True)


# A cue's ends as the response and the trace show them: ISO times in UTC, a date in ``before`` as its end.
_CueTime = Annotated[float, PlainSerializer(_exact, return_type=str)]


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", serialize_by_alias=True, validate_by_name=True)


class Ago(_Value):
    """A relative cue: the period one ``unit`` long, centred ``value`` units before now."""

    unit: Unit
    value: int


class TimeCue(_Value):
    """A read cue. Absolute ends are epoch seconds (UTC); ``before`` is exclusive.

    A cue is either absolute (``after`` and/or ``before``) or relative (``ago``), never both;
    :class:`~cpersona.model.time_cue_request.TimeCueBody` guarantees it. As JSON it is the cue as read,
    for responses and traces.
    """

    confidence: Confidence
    after: _CueTime | None = Field(default=None, exclude_if=lambda v: v is None)
    before: _CueTime | None = Field(default=None, exclude_if=lambda v: v is None)
    ago: Ago | Literal["long_ago"] | None = Field(default=None, exclude_if=lambda v: v is None)


class Period(_Value):
    """The half-open span ``[start, end)`` of epoch seconds the cue arm searches; as JSON, its two ends
    as ISO times."""

    start: float
    end: float

    @model_serializer(mode="plain", return_type=list[str])
    def _as_ends(self) -> list[str]:
        return [iso(self.start), iso(self.end)]

    def contains(self, ts: float) -> bool:
        return self.start <= ts < self.end


class Move(_Value):
    """A row whose position the bounded move changed (0-based positions among the returned rows); as
    JSON, ``{row, from, to}``."""

    ref: str = Field(serialization_alias="row")
    from_: int = Field(serialization_alias="from")
    to: int


# --------------------------------------------------------------------------------------------- periods


def own_period(cue: TimeCue, span: tuple[float, float] | None, now: float) -> Period | None:
    """The cue's own period, before any confidence margin; ``None`` when the scope gives it no start.

    ``span`` is the (oldest, newest) record time in scope, ``None`` for an empty scope.
    """
    if cue.ago == "long_ago":
        if span is None:
            return None
        oldest, newest = span
        return _closed(oldest, oldest + (newest - oldest) / 3)
    if isinstance(cue.ago, Ago):
        width = UNIT_DAYS[cue.ago.unit] * _DAY
        centre = now - cue.ago.value * width
        return _closed(centre - width / 2, min(centre + width / 2, now))
    start = cue.after if cue.after is not None else (None if span is None else span[0])
    if start is None:
        return None
    return _closed(start, cue.before if cue.before is not None else now)


def cue_period(
    cue: TimeCue,
    confidence: Confidence,
    span: tuple[float, float] | None,
    now: float,
    margins: ByConfidence[float],
) -> Period | None:
    """The period searched at a confidence step: the own period widened by its margin on both sides."""
    own = own_period(cue, span, now)
    if own is None:
        return None
    margin = (own.end - own.start) * margins[confidence]
    return _closed(own.start - margin, own.end + margin)


def recent_only(cue: TimeCue, span: tuple[float, float] | None, now: float, hours: float) -> bool:
    """True when the cue's own period starts no earlier than ``hours`` before now (0 turns the rule off).

    Such a cue points only at today or the future, which is how a caller that fills in the date of the
    question (rather than a time the question names) goes wrong.
    """
    if hours <= 0:
        return False
    own = own_period(cue, span, now)
    return own is not None and own.start >= now - hours * 3600.0


def wider(confidence: Confidence) -> Confidence | None:
    """The next confidence step of the one revision; none after ``vague``."""
    step = CONFIDENCES.index(confidence) + 1
    return CONFIDENCES[step] if step < len(CONFIDENCES) else None


def _closed(start: float, end: float) -> Period:
    """A period clipped to the formattable range and never empty (an end at or before the start: +1 s)."""
    if end <= start:
        end = start + 1.0
    start = min(max(start, MIN_TS), MAX_TS - 1.0)
    end = max(min(end, MAX_TS), start + 1.0)
    return Period(start=start, end=end)


# ----------------------------------------------------------------------------------- the move and seats


def bounded_move(
    refs: Sequence[str], cue_rank: Mapping[str, int], lift: int
) -> tuple[tuple[str, ...], tuple[Move, ...]]:
    """Move rows the cue arm ranked up by at most ``lift`` places; returns the order and every changed row.

    ``key(row) = p - L*61/(61 + c)`` for a row at position ``p`` that the cue arm ranked at ``c``
    (0-based), else ``p``; ascending, a cue-ranked row first on a tie, then by ``p``. The keys are
    :class:`~fractions.Fraction` values: two keys that are equal as fractions can differ in their last
    bit as floats, and then the tie rule would hand the place to whichever rounded down.
    """
    if lift < 0:
        raise ValueError(f"lift must be at least 0, got {lift}")
    if len(set(refs)) != len(refs):
        raise ValueError("refs must not repeat")

    def key(item: tuple[int, str]) -> tuple[Fraction, int, int]:
        p, ref = item
        rank = cue_rank.get(ref)
        if rank is None:
            return (Fraction(p), 1, p)
        if rank < 0:
            raise ValueError(f"cue rank of {ref} must be at least 0, got {rank}")
        return (p - Fraction(61 * lift, 61 + rank), 0, p)

    ordered = sorted(enumerate(refs), key=key)
    order = tuple(ref for _, ref in ordered)
    moves = tuple(Move(ref=ref, from_=p, to=to) for to, (p, ref) in enumerate(ordered) if p != to)
    return order, moves


def cue_seats(
    cue_list: Sequence[str],
    *,
    returned: Collection[str],
    reached: Collection[str],
    cut_by_count: Collection[str],
    seats: int,
    allow_cut: bool,
) -> tuple[str, ...]:
    """The refs that take the held cue seats, in cue-arm order, at most ``seats`` of them.

    A record is eligible when the cue arm found it, the answer does not hold it, and either no ordinary
    arm reached it or (``allow_cut``) the gate and autocut admitted it and only the count cut it. A
    record an ordinary arm reached and the gate or autocut refused never comes back this way.
    """
    if seats < 0:
        raise ValueError(f"seats must be at least 0, got {seats}")
    taken: list[str] = []
    for ref in cue_list:
        if len(taken) >= seats:
            break
        if ref in returned or ref in taken:
            continue
        if ref not in reached or (allow_cut and ref in cut_by_count):
            taken.append(ref)
    return tuple(taken)


# --------------------------------------------------------------------------------------------- helpers


def iso(ts: float, *, exact: bool = False) -> str:
    """UTC with a ``Z``, to the second; ``exact`` keeps a fraction of a second when there is one."""
    moment = datetime.fromtimestamp(ts, UTC)
    # isoformat, not strftime: strftime's %Y does not pad years before 1000 to four digits.
    spec = "microseconds" if exact and moment.microsecond else "seconds"
    return moment.replace(tzinfo=None).isoformat(timespec=spec) + "Z"
