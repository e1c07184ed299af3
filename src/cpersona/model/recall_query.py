"""A recall's request body (``recall.query``, ``POST /v1/recall/query``) as the caller writes it.

The policy, the default limit and the limit's ceiling depend on the recall policies, which the recall
package loads; :func:`cpersona.recall.request.recall_request` resolves them and makes the internal
``RecallRequest``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, field_validator

from cpersona.model.fields import NOT_NULL, WHOLE, Header, KeyText, Limit, RequestModel, refusal
from cpersona.model.time_cue_request import EMPTY_IS_NO_CUE, TimeCueBody
from cpersona.settings import RecallMode

__all__ = ["Order", "RecallQuery"]

Order = Literal["best_first", "best_last"]
_MAX_QUERY = 4_000
_MAX_EXCLUDES = 256


class RecallQuery(RequestModel):
    """What to recall, for whom, and how."""

    model_config = ConfigDict(title="RecallRequest")

    agent_id: KeyText = Field(description="The agent whose memory is searched (exact)")
    query: Annotated[str, Field(max_length=_MAX_QUERY)] = Field(
        description="The question; an empty string lists the newest records"
    )
    # Left out, these three take their defaults; a null is refused, so the schema offers no null either.
    limit: Annotated[Annotated[int, Field(ge=0), WHOLE] | None, NOT_NULL] = Field(
        default=None,
        description="Rows to return (default: the policy's); at most the policy's depth and "
        "CPERSONA_RECALL_MAX_LIMIT (100 over HTTP)",
    )
    deep: bool = Field(default=False, description="Halve the gate's thresholds")
    mode: Annotated[RecallMode | None, NOT_NULL] = Field(
        default=None, description="Fusion mode (default CPERSONA_RECALL_MODE)"
    )
    project_id: KeyText | None = Field(
        default=None, description="Project X sees X and the global pool ''; '' sees only the pool"
    )
    channel: KeyText | None = Field(default=None, description="Channel X sees X and the global pool ''")
    source_id: KeyText = Field(
        default="", description="Exact source id, or a prefix when it ends in a non-alphanumeric"
    )
    exclude_contents: Annotated[
        Sequence[Annotated[str, Limit("max_content_length")]], Field(max_length=_MAX_EXCLUDES)
    ] = ()
    full_content: bool = Field(default=False, description="No preview cut")
    order: Order = "best_first"
    policy: Annotated[KeyText | None, NOT_NULL] = Field(
        default=None,
        description="The recall policy to run (a file in stages/); default CPERSONA_RECALL_POLICY, or "
        "CPERSONA_RECALL_CUE_POLICY when a time_cue is given",
    )
    trace: bool = Field(default=False, description="Return the recall trace (refs, ranks, scores; no text)")
    time_cue: Annotated[TimeCueBody | None, EMPTY_IS_NO_CUE] = None
    header: Header = None

    @field_validator("limit", "mode", "policy", mode="before")
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        # Left out, these take their defaults; a null is a caller's mistake and is said so.
        if value is None:
            raise refusal("not_null", "must not be null (leave it out for the default)")
        return value
