"""The ``recall.associate`` request (``POST /v1/recall/associate/{record_id}``): the memories reached
from one memory over its typed, weighted associations."""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field, field_validator

from cpersona.model.cue_query import MAX_ACTIVATION_DEPTH
from cpersona.model.fields import Header, KeyText, RequestModel, Unit01, refusal
from cpersona.model.records import AssociationType

__all__ = ["ASSOCIATE_MAX_LIMIT", "AssociateRequest"]

ASSOCIATE_MAX_LIMIT = 256


class AssociateRequest(RequestModel):
    """Where to start (the path's record), over which edges, how far and how many."""

    model_config = ConfigDict(title="RecallAssociateRequest")

    agent_id: KeyText = Field(description="The agent whose memory is walked (exact)")
    project_id: KeyText | None = Field(default=None, description="As in recall: X sees X and the pool ''")
    channel: KeyText | None = Field(default=None, description="As in recall: X sees X and the pool ''")
    record_id: KeyText | None = Field(
        default=None,
        description="The Cerememory SDK repeats the path's record here; when given it must be the same",
    )
    association_types: Annotated[list[AssociationType], Field(min_length=1, max_length=8)] | None = Field(
        default=None,
        description="Walk only edges of these types, at every hop (default: all)",
        json_schema_extra={"uniqueItems": True},
    )
    depth: Annotated[int, Field(ge=1, le=MAX_ACTIVATION_DEPTH)] = Field(default=2, description="Most hops")
    min_weight: Unit01 = Field(default=0.1, description="Edges lighter than this are not walked")
    limit: Annotated[int, Field(ge=1, le=ASSOCIATE_MAX_LIMIT)] = 10
    header: Header = None

    @field_validator("association_types")
    @classmethod
    def _distinct(cls, value: list[AssociationType] | None) -> list[AssociationType] | None:
        if value is not None and len(set(value)) != len(value):
            raise refusal("duplicate_type", "names a type twice")
        return value
