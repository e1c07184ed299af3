"""The query parameters of the read and delete routes, as models like every request body."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from cpersona.model.fields import KeyText, QueryInt, QueryModel

__all__ = ["ForgetQuery", "ListQuery", "RecordKind", "RecordQuery", "StatsQuery"]

RecordKind = Literal["memory", "episode", "raw"]
LIST_MAX = 1_000


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
    limit: Annotated[QueryInt, Field(ge=0, le=LIST_MAX)] = Field(
        default=100, description="How many (newest first)"
    )


class StatsQuery(QueryModel):
    """Counts of one agent's records, or of all."""

    agent_id: KeyText | None = Field(default=None, description="Count only this agent's records")


class ForgetQuery(QueryModel):
    """Deleting all of an agent's data needs ``confirm=true``."""

    confirm: str | None = Field(default=None, description="Must be 'true'; otherwise 400 FORGET_UNCONFIRMED")
