"""The one field type of a point in time in a request: ISO 8601 text or epoch seconds, as epoch seconds.

Every read renders a record's times as RFC 3339 text (:func:`~cpersona.model.records.format_time`),
which ends with the year 9999, so a time is accepted only inside what that text can show.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Annotated

from pydantic import BeforeValidator, PlainSerializer, WithJsonSchema

from cpersona.model.fields import Before, refusal
from cpersona.model.records import format_time
from cpersona.model.time_cue import MAX_TS

__all__ = [
    "EPOCH_TIME_SCHEMA",
    "MAX_TIME_TEXT",
    "TIME_TEXT_PATTERN",
    "EpochTime",
    "KeptTime",
    "ShownTime",
    "renderable",
]

MAX_TIME_TEXT = 64
"""The longest time text read (a full RFC 3339 time with a fraction and an offset is some 32)."""


def _epoch(value: object) -> float:
    """A point in time as epoch seconds, from ISO 8601 text or epoch seconds; no offset means UTC."""
    if isinstance(value, bool):
        raise refusal("time_type", "must be an ISO 8601 time or epoch seconds, got a boolean")
    if isinstance(value, int | float):
        out = float(value)
        if not math.isfinite(out):
            raise refusal("time_range", f"must be a finite number of epoch seconds, got {value}")
        return renderable(out, value)
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        text = value.strip()
        if len(text) > MAX_TIME_TEXT:
            raise refusal("too_long", f"must be at most {MAX_TIME_TEXT} characters")
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            raise refusal("time_parsing", f"is not an ISO 8601 time: {value!r}") from None
    else:
        raise refusal("time_type", "must be an ISO 8601 time or epoch seconds")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    # An offset near year 1 or 9999 can put the UTC time outside the datetime range; the subtraction
    # behind timestamp() still answers, so the range is checked on the number.
    return renderable(moment.timestamp(), value)


def renderable(seconds: float, given: object) -> float:
    """``seconds``, or the refusal of a time outside 1970 to 9999 (``given`` is what the caller wrote).

    Every read renders a record's times as RFC 3339 text, which ends with the year 9999: a later time
    stored would make each read of its agent fail, so it is refused where the caller can fix it. No
    record lies before 1970, so no time a caller names may either (a time cue's bounds too)."""
    if not 0.0 <= seconds <= MAX_TS:
        raise refusal(
            "time_range",
            f"must lie between 1970-01-01T00:00:00Z and 9999-12-31T23:59:59Z (epoch seconds 0 to "
            f"{MAX_TS:.0f}), got {given!r}",
        )
    return seconds


# The text a schema can promise is read: RFC 3339 in the years 1971 to 9998 (a day offset cannot carry
# them out of range) on days every month has. Any ISO 8601 time Python reads is accepted as well.
_YEAR = "(?:197[1-9]|19[89][0-9]|[2-8][0-9]{3}|9[0-8][0-9]{2}|99[0-8][0-9]|999[0-8])"
_DAY = "(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])"
_CLOCK = "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,6})?"
_OFFSET = "(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
TIME_TEXT_PATTERN = f"^{_YEAR}-{_DAY}T{_CLOCK}{_OFFSET}$"
"""The schema's pattern of a time as text."""

EPOCH_TIME_SCHEMA = {
    "description": "RFC 3339 / ISO 8601 text (no offset means UTC) or epoch seconds",
    "oneOf": [
        {"type": "string", "maxLength": MAX_TIME_TEXT, "pattern": TIME_TEXT_PATTERN},
        {"type": "number", "minimum": 0, "maximum": MAX_TS},
    ],
}
"""The JSON schema of an :data:`EpochTime`."""

EpochTime = Annotated[float, Before(_epoch), WithJsonSchema(EPOCH_TIME_SCHEMA)]


def _read_back(value: object) -> object:
    # Text is an answer read back (format_time's own, so no range rule: a record stored before that rule
    # may show a time outside it); a number is what the engine built, kept as it is.
    if isinstance(value, str):
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    return value


ShownTime = Annotated[float, BeforeValidator(_read_back), PlainSerializer(format_time, return_type=str)]
"""A point in time of an answer: epoch seconds in Python, RFC 3339 text on the wire (read back as either)."""

KeptTime = Annotated[
    float, BeforeValidator(_read_back), PlainSerializer(format_time, return_type=str, when_used="json")
]
"""A :data:`ShownTime` of a model that is also a stored document (an API key's): epoch seconds in Python
and in the document redis-om writes from ``model_dump()``, RFC 3339 text only in JSON."""
