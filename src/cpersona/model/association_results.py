"""What the associative layer's operations return, each its own response schema
(:mod:`cpersona.model.result_model`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from cpersona.model.result_model import ResultModel

__all__ = ["DeclareResult", "Reached", "TraverseResult"]


class DeclareResult(ResultModel):
    """How many entities, aliases, mentions and relations a declaration added (or, with ``retract``,
    removed). Declaring the same thing again counts zero everywhere."""

    ok: Literal[True] = True
    entities: int = 0
    aliases: int = 0
    mentions: int = 0
    relations: int = 0
    retract: bool = False


class Reached(ResultModel):
    """A record a traversal reached: after ``hops`` relations, along ``predicates`` (in path order),
    because it mentions ``entity`` (the entity's name)."""

    ref: str = Field(description="mem:<uuid> or ep:<uuid>")
    hops: int = Field(description="Entity relations between the entity asked for and the one it mentions")
    predicates: tuple[str, ...] = Field(description="The relations' predicates along the path, in order")
    entity: str = Field(description="The entity the record mentions (its name)")


class TraverseResult(ResultModel):
    """The records reached from ``entity`` (``None`` when no entity of that name or alias is visible),
    breadth-first, each once at its fewest hops.

    ``truncated`` says the walk stopped at ``limit`` or at a work bound with mentions or related entities
    left unread.
    """

    ok: Literal[True] = True
    entity: str | None = Field(description="The entity walked from; null when none of that name is visible")
    count: int = 0  # counted from records
    records: tuple[Reached, ...] = ()
    truncated: bool = Field(
        default=False, description="Stopped at limit or at a work bound with more left unread"
    )

    @model_validator(mode="before")
    @classmethod
    def _counted(cls, data: Any) -> Any:
        if isinstance(data, dict) and "count" not in data:
            return {**data, "count": len(data.get("records", ()))}
        return data
