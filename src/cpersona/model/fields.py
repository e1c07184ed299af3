"""What every request model shares: its base, the field types whose limits come from settings, and the
one reading of a pydantic error into :class:`~cpersona.InvalidRequest`.

A request is validated with ``validate(Model, body, settings)``: the settings travel in pydantic's
validation context, so a limit such as ``CPERSONA_MAX_KEY_LENGTH`` is read when the request is checked,
never written into the model. The OpenAPI document shows the same limits: ``schema_limits(settings)``
makes the JSON schema read them from those settings.

A field's place is written as the HTTP edge has always named it: dotted names and bracketed positions
(``records[3].content``, ``time_cue.ago.unit``).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Final, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
)
from pydantic_core import core_schema

from cpersona.errors import ContentTooLarge, InvalidRequest, ModalityUnsupported
from cpersona.model.json_values import json_length
from cpersona.model.text_rules import (
    CLEAN_TEXT_PATTERN,
    NO_CONTROL_PATTERN,
    NOT_BLANK_ID_PATTERN,
    OWN,
    clean_text,
    no_control,
    not_blank,
    refusal,
)
from cpersona.model.wording import describe, problem
from cpersona.settings import Settings

if TYPE_CHECKING:
    from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
    from pydantic.json_schema import JsonSchemaValue

__all__ = [
    "CLEAN",
    "AgentId",
    "ContentSchema",
    "ContentText",
    "Before",
    "Count",
    "Header",
    "KeyText",
    "Limit",
    "MAX_COUNT",
    "NO_CONTROL_PATTERN",
    "NOT_NULL",
    "OWN",
    "QUERY_DIGITS",
    "QueryModel",
    "WHOLE",
    "RequestModel",
    "Unit01",
    "check",
    "describe",
    "invalid",
    "json_size",
    "path",
    "refusal",
    "schema_limits",
    "settings_of",
    "validate",
]

_M = TypeVar("_M", bound=BaseModel)
_DEFAULTS = Settings()
_SCHEMA_SETTINGS: contextvars.ContextVar[Settings] = contextvars.ContextVar("schema_settings")
# A union member's tag starts with this mark, so that a field's path leaves it out (``content``, not
# ``content.text``): callers name fields, never the branch pydantic tried.
TAG = "~"


class RequestModel(BaseModel):
    """A request body: unknown fields refused, no coercion (``"3"`` is no integer), frozen."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    unnamed_agent_is_every_agent: ClassVar[bool] = True
    """Whether leaving out an optional ``agent_id`` reaches every agent (the stats of all), which a key
    bound to some agents may not ask for; a model whose omission reaches only the agents the caller may
    see (the trace stream follows the key's agents) says False."""


class QueryModel(RequestModel):
    """Query parameters: text on the wire, so a number is read from its digits (``limit=10``)."""

    model_config = ConfigDict(strict=False)


def settings_of(info: ValidationInfo) -> Settings:
    context = info.context
    found = context.get("settings") if isinstance(context, Mapping) else None
    return found if isinstance(found, Settings) else _DEFAULTS


@contextlib.contextmanager
def schema_limits(settings: Settings) -> Iterator[None]:
    """Within this block, a JSON schema shows the limits of ``settings``."""
    token = _SCHEMA_SETTINGS.set(settings)
    try:
        yield
    finally:
        _SCHEMA_SETTINGS.reset(token)


@dataclasses.dataclass(frozen=True, slots=True)
class Limit:
    """At most ``settings.<setting>`` characters (or items, with ``items``); ``too_large`` makes it a 413.

    ``most`` stands for a limit that is no setting (the profile's 2,000 characters).
    """

    setting: str
    items: bool = False
    too_large: bool = False
    most: int | None = None

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.with_info_after_validator_function(self._check, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        out = handler(schema)
        out["maxItems" if self.items else "maxLength"] = self.limit(_SCHEMA_SETTINGS.get(_DEFAULTS))
        return out

    def limit(self, settings: Settings) -> int:
        return self.most if self.most is not None else int(getattr(settings, self.setting))

    def _check(self, value: Any, info: ValidationInfo) -> Any:
        most = self.limit(settings_of(info))
        if len(value) > most:
            if self.too_large:
                raise refusal(
                    "too_large",
                    "is {size} characters; the limit is {most}",
                    {"size": len(value), "most": most},
                )
            what = "items" if self.items else "characters"
            raise refusal("too_long", f"must be at most {most} {what}, got {len(value)}", {"most": most})
        return value


@dataclasses.dataclass(frozen=True, slots=True)
class ContentSchema:
    """The schema of :data:`ContentText` on text checked elsewhere, where the error can name the field a
    caller knows (a block's text is refused as ``content``, not ``content.blocks[0].data``)."""

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        most = Limit("max_content_length").limit(_SCHEMA_SETTINGS.get(_DEFAULTS))
        return {**handler(schema), "minLength": 1, "maxLength": most, "pattern": CLEAN_TEXT_PATTERN}


@dataclasses.dataclass(frozen=True, slots=True)
class _Checked:
    """Run ``check`` on the text once pydantic has validated its type; the schema shows ``pattern``, the
    same rule as a regular expression (a schema has one pattern, so the strictest one wins)."""

    check: Any
    pattern: str

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self.check, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        out = handler(schema)
        out["pattern"] = self.pattern
        return out


def _ascii_digits(value: object) -> object:
    # int() reads " 5", "+5", "5_0" and the digits of every script (U+0665); a query string is ASCII.
    if isinstance(value, str):
        if not (value.isascii() and value.isdigit()):
            raise refusal("int_digits", f"must be a whole number in the digits 0-9, got {value!r}")
        return int(value)
    return value


@dataclasses.dataclass(frozen=True, slots=True)
class _After:
    """Run ``check`` on the value once pydantic has validated its type."""

    check: Any

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self.check, handler(source))


@dataclasses.dataclass(frozen=True, slots=True)
class Before:
    """Turn the raw value into the field's type with ``convert`` (which refuses what it cannot read)."""

    convert: Any

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_before_validator_function(self.convert, handler(source))


# No control character at all (C0, DEL, C1): ids end up in keys, tags, log lines and terminals.
KeyText = Annotated[str, Limit("max_key_length"), _Checked(no_control, NO_CONTROL_PATTERN)]
"""A scope key, id or name: at most ``CPERSONA_MAX_KEY_LENGTH`` characters, none of them a control."""
AgentId = Annotated[
    str,
    Field(min_length=1),
    Limit("max_key_length"),
    _After(not_blank),
    _Checked(no_control, NOT_BLANK_ID_PATTERN),
]
"""The agent a write belongs to: a non-blank ``KeyText``."""


MAX_COUNT: Final = 2**53 - 1
"""The largest integer a request holds where nothing narrower applies: the last one every JSON reader
(a JavaScript client, a 64-bit float) holds exactly, and far inside what a response can write back."""


def _integral(value: object) -> object:
    # JSON has numbers, not integers and floats: 5.0 is the integer 5 (a JSON schema says so too).
    if isinstance(value, float) and value.is_integer():
        # Past 2**53 a float is no longer the number the caller wrote (1e23 would read as
        # 99999999999999991611392), so it is refused before anything could echo that rounding.
        if abs(value) > MAX_COUNT:
            raise refusal("int_too_large", f"is beyond {MAX_COUNT}, the largest whole number read exactly")
        return int(value)
    return value


WHOLE = Before(_integral)
"""On an ``int`` of a body: a number with no fraction (``5.0``) is that integer; ``5.5`` is refused."""

Count = Annotated[int, Field(ge=0, le=MAX_COUNT), WHOLE]
"""A whole number of a body with no limit of its own (one a setting clamps, a threshold): 0 to
:data:`MAX_COUNT`, so that what a response echoes always fits its JSON."""

QUERY_DIGITS = Before(_ascii_digits)
"""Put after an integer's bounds (``Annotated[int, Field(ge=0), QUERY_DIGITS]``): read from a query
string, only the ASCII digits 0-9 make a number. After the bounds, so that they stay on the integer and
the schema shows them as ``minimum``/``maximum``."""


CLEAN = _Checked(clean_text, CLEAN_TEXT_PATTERN)
"""Text for people and models: not blank, no control characters but tab and newlines."""
ContentText = Annotated[str, Field(min_length=1), Limit("max_content_length", too_large=True), CLEAN]
"""Stored text: not blank, no control characters, at most ``CPERSONA_MAX_CONTENT_LENGTH`` (else 413)."""
Unit01 = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
Header = Annotated[
    dict[str, Any] | None, Field(description="Cerememory protocol header (an object): accepted and ignored")
]


@dataclasses.dataclass(frozen=True, slots=True)
class _NullNotOffered:
    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        out = handler(schema)
        branches = out.get("anyOf")
        if not isinstance(branches, list):
            return out
        kept = [branch for branch in branches if branch != {"type": "null"}]
        rest = {key: value for key, value in out.items() if key != "anyOf"}
        return {**rest, **kept[0]} if len(kept) == 1 else {**rest, "anyOf": kept}


NOT_NULL = _NullNotOffered()
"""On ``X | None`` whose null a validator refuses (left out, the field takes its default): the schema
offers ``X`` only, so it does not promise a null that is then refused."""


def json_size(value: object, field: str, *, most: int) -> None:
    """Refuse a value that is not JSON (400: not serialisable, or holding NaN or an infinity), or whose
    serialised form is longer than ``most`` characters (413)."""
    try:
        size = json_length(value)
    except TypeError as exc:
        raise InvalidRequest(field, f"must be JSON-serialisable ({exc})") from None
    except ValueError as exc:
        raise InvalidRequest(field, str(exc)) from None
    if size > most:
        raise ContentTooLarge(field, f"serialises to {size} characters; the limit is {most}")


# ------------------------------------------------------------------------------------------- reading


def validate(
    model: type[_M], body: object, settings: Settings, *, prefix: str = "", strict: bool | None = None
) -> _M:
    """``body`` as a ``model``, or :class:`InvalidRequest` naming the first wrong field.

    ``strict`` overrides the model's own strictness (a Python caller's query gets no text-to-number).
    """
    try:
        return model.model_validate(body, context={"settings": settings}, strict=strict)
    except ValidationError as exc:
        raise invalid(exc, prefix) from None


_ADAPTERS: dict[object, TypeAdapter[Any]] = {}


def check(kind: Any, value: object, field: str, settings: Settings) -> Any:
    """One value checked as the field type ``kind`` (``KeyText``, ``AgentId``…), errors naming ``field``."""
    adapter = _ADAPTERS.get(kind)
    if adapter is None:
        adapter = _ADAPTERS.setdefault(kind, TypeAdapter(kind, config=ConfigDict(strict=True)))
    try:
        return adapter.validate_python(value, context={"settings": settings})
    except ValidationError as exc:
        raise invalid(exc, field) from None


def path(loc: tuple[int | str, ...], prefix: str = "", *, unknown: bool = False) -> str:
    """``loc`` as the caller names it: ``records[3].content``, without the union tags pydantic tried.

    ``unknown`` says the last part is a key the caller sent (an unknown field), never a tag.
    """
    out = prefix
    for i, part in enumerate(loc):
        if isinstance(part, int):
            out += f"[{part}]"
        elif not part.startswith(TAG) or (unknown and i == len(loc) - 1):
            out += f".{part}" if out else part
    return out


def invalid(exc: ValidationError, prefix: str = "") -> InvalidRequest:
    """The first error of ``exc`` as the engine's own error, with the field's path and what was wrong."""
    error = exc.errors(include_url=False)[0]
    field = path(error["loc"], prefix, unknown=error["type"] == "extra_forbidden") or prefix or "body"
    said = problem(error["type"], error.get("ctx") or {}, error["input"], error["msg"])
    if error["type"] == OWN + "too_large":
        return ContentTooLarge(field, said)
    if error["type"] == OWN + "modality_unsupported":
        return ModalityUnsupported(field, said)
    return InvalidRequest(field, said)
