"""The response bodies of the associative layer's routes, as models (the OpenAPI document is generated
from them; the HTTP tests validate each answer against them)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["DeclareResponse", "ReachedBody", "TraverseResponse"]


class _Response(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DeclareResponse(_Response):
    """How many of each a declaration added (with ``retract``: removed); a repeat counts zero."""

    model_config = ConfigDict(title="DeclareResult")

    ok: Literal[True]
    entities: int
    aliases: int
    mentions: int
    relations: int
    retract: bool


class ReachedBody(_Response):
    model_config = ConfigDict(title="Reached")

    ref: str = Field(description="mem:<uuid> or ep:<uuid>")
    hops: int = Field(description="Entity relations between the entity asked for and the one it mentions")
    predicates: list[str] = Field(description="The relations' predicates along the path, in order")
    entity: str = Field(description="The entity the record mentions (its name)")


class TraverseResponse(_Response):
    """The records reached, breadth-first, each once at its fewest hops."""

    model_config = ConfigDict(title="TraverseResult")

    ok: Literal[True]
    entity: str | None = Field(description="The entity walked from; null when none of that name is visible")
    count: int
    records: list[ReachedBody]
    truncated: bool = Field(description="Stopped at limit or at a work bound with more left unread")
