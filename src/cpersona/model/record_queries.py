"""The query parameters of the read and delete routes, as models like every request body."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from cpersona.model.fields import QUERY_DIGITS, Before, KeyText, QueryModel
from cpersona.model.text_rules import refusal
from cpersona.model.wording import pattern_in_words

__all__ = [
    "Confirmation",
    "ForgetQuery",
    "ListQuery",
    "MemoryRef",
    "RecordKind",
    "RecordQuery",
    "RecordRef",
    "StatsQuery",
    "UUID_PATTERN",
]

RecordKind = Literal["memory", "episode", "raw"]
LIST_MAX = 1_000
UUID_PATTERN = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
"""A UUID in its canonical 8-4-4-4-12 spelling, hex digits of either case."""

# The path parameters that name a record, as the engine reads them (``parse_ref``).
RecordRef = Annotated[
    str,
    Field(
        pattern=pattern_in_words(
            f"^(mem|ep|raw):{UUID_PATTERN}$", "a record ref: mem:, ep: or raw: and a UUID"
        ),
        description="A record ref: mem:<uuid>, ep:<uuid> or raw:<uuid>",
    ),
]
MemoryRef = Annotated[
    str,
    Field(
        pattern=pattern_in_words(f"^(mem:)?{UUID_PATTERN}$", "a memory id: a UUID, or mem:<uuid>"),
        description="mem:<uuid>, or the bare <uuid> as Cerememory sends it (only memories are updated)",
    ),
]


def _confirmed(value: object) -> object:
    # A query string says confirm=true, in any case, as it always has; a JSON argument says true. Nothing
    # else confirms (false, "yes", 1).
    if isinstance(value, str) and value.lower() == "true":
        return True
    if value is not True:
        raise refusal("confirm", "must be true")
    return value


# The schema says the one value that confirms (const true), so a document-driven client never sends false
# expecting it to be a valid request.
Confirmation = Annotated[Literal[True], Before(_confirmed)]
"""The ``confirm`` of a delete of all of an agent's data: a boolean that must be true (over HTTP, the
query string's ``true`` in any case)."""


class RecordQuery(QueryModel):
    """Addresses one record of the agent."""

    agent_id: KeyText = Field(description="The owning agent")


class ListQuery(QueryModel):
    """The newest records of one kind in a scope."""

    agent_id: KeyText = Field(description="The owning agent")
    kind: RecordKind = "memory"
    project_id: KeyText | None = Field(default=None, description="Project (also sees the global pool)")
    channel: KeyText | None = Field(default=None, description="Channel (also sees the global pool)")
    source_id: KeyText = Field(default="", description="Source id, exact or prefix")
    limit: Annotated[int, Field(ge=0, le=LIST_MAX), QUERY_DIGITS] = Field(
        default=100, description="How many (newest first)"
    )


class StatsQuery(QueryModel):
    """Counts of one agent's records, or of all."""

    agent_id: KeyText | None = Field(default=None, description="Count only this agent's records")


class ForgetQuery(QueryModel):
    """Deleting all of an agent's data needs ``confirm=true``."""

    # Required, so the document says a delete without it is refused; the route answers that refusal with
    # FORGET_UNCONFIRMED rather than as any other bad field.
    confirm: Confirmation = Field(description="Must be true; otherwise 400 FORGET_UNCONFIRMED")
