"""The base of every operation's result: one frozen model that the engine returns and the edges send.

A result is its own response schema. The edges answer with ``result.model_dump(mode="json")`` (HTTP, MCP
and the CLI alike), and the OpenAPI document is generated from the same class, so what is described is
what is sent. A key the answer leaves out when it holds nothing says so on its field (``exclude_if``, see
:data:`absent` and :data:`empty`); every other key is sent always, and the document marks it required.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

__all__ = ["ResultModel", "absent", "empty"]


def absent(value: object) -> bool:
    """Left out of the answer when ``None``."""
    return value is None


def empty(value: object) -> bool:
    """Left out of the answer when falsy: ``None``, ``False``, ``0``, ``""`` or an empty collection."""
    return not value


def _sent_always(schema: dict[str, Any], model: type[BaseModel]) -> None:
    # With defaults counted as required (the config below), only the keys a field may leave out are not.
    optional = {
        field.serialization_alias or field.alias or name
        for name, field in model.model_fields.items()
        if field.exclude_if is not None or name in getattr(model, "sometimes_sent", ())
    }
    required = [key for key in schema.get("required", ()) if key not in optional]
    if required:
        schema["required"] = required
    else:
        schema.pop("required", None)
    # A key sent always has no default on the wire; the class's default only spares its builders.
    properties = schema.get("properties", {})
    for key in required:
        properties.get(key, {}).pop("default", None)


class ResultModel(BaseModel):
    """Frozen, closed to unknown keys (an answer read back validates against its own class), and sent by
    its aliases, which are the names Cerememory's clients read.

    A key whose presence depends on another field is left out by the model's own serializer; the model
    names it in ``sometimes_sent`` so the document does not call it required.
    """

    sometimes_sent: ClassVar[frozenset[str]] = frozenset()

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        validate_by_name=True,
        serialize_by_alias=True,
        json_schema_serialization_defaults_required=True,
        json_schema_extra=_sent_always,
    )
