"""The ``time_cue`` part of a recall request, as a pydantic model, and :func:`parse_time_cue`.

A cue is written by people and models, so it is read strictly: a date (``YYYY-MM-DD``) or an ISO 8601
time as text (a bare number — seconds? milliseconds? a year? — is refused), a confidence word, and
either ``after``/``before`` or ``ago``. Every problem names its part (``time_cue.ago.unit``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from cpersona.model.epoch_time import MAX_TIME_TEXT, TIME_TEXT_PATTERN, renderable
from cpersona.model.fields import TAG, WHOLE, Before, RequestModel, describe, invalid, refusal
from cpersona.model.time_cue import MAX_TS, UNIT_DAYS, Ago, Confidence, TimeCue, Unit, iso
from cpersona.model.wording import pattern_in_words

if TYPE_CHECKING:
    from pydantic import GetJsonSchemaHandler
    from pydantic.json_schema import JsonSchemaValue
    from pydantic_core import core_schema

__all__ = ["EMPTY_IS_NO_CUE", "AgoBody", "TimeCueBody", "parse_time_cue"]

_DAY = 86_400.0
# How far back an ``ago`` may reach. Anything further lies before year 1 anyway, and a bound keeps
# ``value * width`` an ordinary float instead of an overflow.
_MAX_AGO_DAYS = 3_652_425
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}.*", re.DOTALL)


def _reach_by_unit(schema: dict[str, Any]) -> None:
    # How far an ago may reach depends on its unit; the schema says it per unit.
    schema["oneOf"] = [
        {"properties": {"unit": {"const": unit}, "value": {"maximum": _MAX_AGO_DAYS // days}}}
        for unit, days in UNIT_DAYS.items()
    ]


class AgoBody(RequestModel):
    """The period one ``unit`` long, centred ``value`` units before now."""

    model_config = ConfigDict(json_schema_extra=_reach_by_unit)

    unit: Unit
    # The widest reach (in days) bounds every unit; the validator holds each unit to its own.
    value: Annotated[int, Field(ge=0, le=_MAX_AGO_DAYS), WHOLE]

    @field_validator("value")
    @classmethod
    def _within_reach(cls, value: int, info: ValidationInfo) -> int:
        unit = info.data.get("unit")
        if unit is None:
            return value
        most = _MAX_AGO_DAYS // UNIT_DAYS[unit]
        if value > most:
            raise refusal("too_far", f"must be at most {most} {unit} (10,000 years), got {value}")
        return value


def _ago_branch(value: Any) -> str:
    return f"{TAG}period" if isinstance(value, Mapping | AgoBody) else f"{TAG}word"


_AgoPart = Annotated[
    Annotated[AgoBody, Tag(f"{TAG}period")] | Annotated[Literal["long_ago"], Tag(f"{TAG}word")],
    Discriminator(_ago_branch),
]
# The text a schema can promise is read: a date on a day every month has, or an RFC 3339 time, in the
# years 1971 to 9998 (as an EpochTime); other dates and ISO 8601 times Python reads are accepted too.
_DATE_PATTERN = "(?:197[1-9]|19[89][0-9]|[2-8][0-9]{3}|9[0-8][0-9]{2}|99[0-8][0-9]|999[0-8])-" + (
    "(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])"
)
_CueTime = Annotated[
    str,
    Field(
        description="A date (YYYY-MM-DD) or an ISO 8601 time (UTC without an offset); a date in before "
        "includes that day",
        max_length=MAX_TIME_TEXT,
        pattern=pattern_in_words(
            f"^(?:{_DATE_PATTERN}|{TIME_TEXT_PATTERN.removeprefix('^').removesuffix('$')})$",
            "a date (YYYY-MM-DD) or an ISO 8601 time",
        ),
    ),
]


def _one_kind_schema(schema: dict[str, Any]) -> None:
    # after and/or before, or ago: never both kinds, never neither (the model's _one_kind).
    absolute = {"ago": {"type": "null"}}
    schema["anyOf"] = [
        {"required": ["ago"], "properties": {"ago": {"not": {"type": "null"}}, "after": {"type": "null"},
                                             "before": {"type": "null"}}},
        {"required": ["after"], "properties": {"after": {"type": "string"}, **absolute}},
        {"required": ["before"], "properties": {"before": {"type": "string"}, **absolute}},
    ]  # fmt: skip


class TimeCueBody(RequestModel):
    """When the answer was stored: ``{after?, before?}`` or ``{ago}``, with how sure the caller is.

    The engine also searches that period and moves rows it found there up by at most 3/2/1 places
    (sure/likely/vague), adding as many seats; it never removes a row. ``{}`` or null means no cue.
    """

    model_config = ConfigDict(json_schema_extra=_one_kind_schema)

    confidence: Confidence
    after: _CueTime | None = None
    before: _CueTime | None = None
    ago: _AgoPart | None = None

    @model_validator(mode="before")
    @classmethod
    def _an_object(cls, raw: Any) -> Any:
        if not isinstance(raw, Mapping) or not all(isinstance(key, str) for key in raw):
            raise refusal(
                "cue_type", f"must be an object with confidence and after/before or ago, got {describe(raw)}"
            )
        if "confidence" not in raw:
            # Said here, with the choices, rather than as a bare "is required".
            return {**raw, "confidence": _Missing}
        return raw

    @field_validator("confidence", mode="before")
    @classmethod
    def _confidence_given(cls, value: Any) -> Any:
        if value is _Missing:
            raise refusal("cue_confidence", "is required: one of sure, likely, vague")
        return value

    @field_validator("after", "before", mode="wrap")
    @classmethod
    def _a_moment(cls, value: Any, handler: Any, info: ValidationInfo) -> Any:
        # Python callers may pass a date or a datetime; both are read as the text would be.
        if value is None:
            return None
        moment = _parse_time(value, end_of_day=info.field_name == "before")
        if info.field_name == "before" and info.data.get("after") is not None:
            after = _parse_time(info.data["after"], end_of_day=False)
            if moment <= after:
                raise refusal("cue_order", f"must be later than after ({iso(moment, exact=True)} is not)")
        return value if isinstance(value, str) else handler(iso(moment, exact=True))

    @model_validator(mode="after")
    def _one_kind(self) -> TimeCueBody:
        absolute = self.after is not None or self.before is not None
        if absolute and self.ago is not None:
            raise refusal("cue_parts", "give after and/or before, or ago, not both")
        if not absolute and self.ago is None:
            raise refusal("cue_parts", "needs after and/or before, or ago")
        return self

    def cue(self) -> TimeCue:
        if self.ago is not None:
            ago = self.ago if isinstance(self.ago, str) else Ago(unit=self.ago.unit, value=self.ago.value)
            return TimeCue(confidence=self.confidence, ago=ago)
        after = None if self.after is None else _parse_time(self.after, end_of_day=False)
        before = None if self.before is None else _parse_time(self.before, end_of_day=True)
        return TimeCue(confidence=self.confidence, after=after, before=before)


def _none_if_empty(value: object) -> object:
    return None if isinstance(value, Mapping) and not value else value


@dataclasses.dataclass(frozen=True, slots=True)
class _EmptyIsNoCue(Before):
    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        out = handler(schema)
        return {"anyOf": [*out.get("anyOf", [out]), {"type": "object", "maxProperties": 0}]}


EMPTY_IS_NO_CUE = _EmptyIsNoCue(_none_if_empty)
"""On a request's ``time_cue``: ``{}`` reads as no cue, and the schema says it is allowed."""


class _MissingType:
    """The stand-in for an absent confidence, so its error can say what the choices are."""


_Missing = _MissingType()


def parse_time_cue(raw: object, field: str = "time_cue") -> TimeCue | None:
    """Read a request's ``time_cue``; ``None`` or ``{}`` is no cue. Every problem names its part."""
    if raw is None or (isinstance(raw, Mapping) and not raw):
        return None
    try:
        return TimeCueBody.model_validate(raw).cue()
    except ValidationError as exc:
        raise invalid(exc, field) from None


# ------------------------------------------------------------------------------------------ moments


def _parse_time(raw: object, *, end_of_day: bool) -> float:
    """A date or ISO 8601 time as epoch seconds; a date in ``before`` stands for the end of that day."""
    if isinstance(raw, datetime):
        return _in_range(raw if raw.tzinfo is not None else raw.replace(tzinfo=UTC), raw)
    if isinstance(raw, date):
        return _day(raw, raw, end_of_day=end_of_day)
    if not isinstance(raw, str):
        raise refusal(
            "cue_time_type",
            f"must be a date (YYYY-MM-DD) or an ISO 8601 time as a string, got {describe(raw)}",
        )
    if len(raw) > MAX_TIME_TEXT:
        raise refusal("too_long", f"must be at most {MAX_TIME_TEXT} characters")
    # Read first, then held to the range: a refusal of the range is a ValueError too, and must not read
    # as text that is no time.
    day: date | None = None
    moment: datetime | None = None
    try:
        if _DATE.fullmatch(raw):
            day = date.fromisoformat(raw)
        elif _TIMESTAMP.fullmatch(raw):
            moment = datetime.fromisoformat(raw)
    except ValueError:
        pass
    if day is not None:
        return _day(day, raw, end_of_day=end_of_day)
    if moment is not None:
        return _in_range(moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC), raw)
    raise refusal(
        "cue_time_parsing",
        f"is not a date (YYYY-MM-DD) or an ISO 8601 time (YYYY-MM-DDTHH:MM[:SS][offset]): {raw!r}",
    )


def _day(day: date, given: object, *, end_of_day: bool) -> float:
    # The whole day must lie in the range: its start (a day before 1970) and its end (9999-12-31 ends
    # past the last time a response can show).
    midnight = renderable(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp(), given)
    if not end_of_day:
        return midnight
    if midnight + _DAY > MAX_TS:
        raise refusal("cue_time_range", "ends after the last representable time (9999-12-31T23:59:59Z)")
    return midnight + _DAY


def _in_range(moment: datetime, given: object) -> float:
    # Converting an offset time near year 1 or 9999 to UTC can leave the datetime range; the timedelta
    # arithmetic behind timestamp() still answers, so the check is made on the number. The range is an
    # epoch time's (1970 to 9999), as everywhere else a caller names a time.
    return renderable((moment - datetime(1970, 1, 1, tzinfo=UTC)) / timedelta(seconds=1), given)
