"""reconstruct's request body (``POST /v1/reconstruct``, ``Engine.reconstruct``) as the caller writes it.

The fields' ranges here are the hard ones: a value outside them is refused, naming the field. Inside
them, ``count`` above ``CPERSONA_RECONSTRUCT_MAX_COUNT`` and ``budget`` above
``CPERSONA_RECONSTRUCT_MAX_BUDGET`` (or below one head quote) are clamped, and the response says so
(``count_policy``, ``budget_policy``): never silently.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, ValidationInfo, field_validator

from cpersona.model.fields import WHOLE, Count, Header, KeyText, RequestModel, refusal
from cpersona.model.time_cue_request import EMPTY_IS_NO_CUE, TimeCueBody

__all__ = ["MAX_BUDGET", "MAX_EVIDENCE", "MAX_HOPS", "MAX_TOP_K", "ReconstructRequest"]

MAX_TOP_K = 10_000
MAX_HOPS = 5
MAX_EVIDENCE = 100
MAX_BUDGET = 20_000
_MAX_QUERY = 4_000


class ReconstructRequest(RequestModel):
    """What to reconstruct, for whom, and within which bounds."""

    model_config = ConfigDict(title="ReconstructRequest")

    agent_id: KeyText = Field(description="The agent whose memory is read (exact)")
    query: Annotated[str, Field(max_length=_MAX_QUERY)] = Field(description="The question")
    count: Count | None = Field(
        default=None, description="Items (default 10; above CPERSONA_RECONSTRUCT_MAX_COUNT clamped, reported)"
    )
    top_k: Annotated[int, Field(ge=1, le=MAX_TOP_K), WHOLE] | None = Field(
        default=None, description="Candidates the one recall returns (default 20)"
    )
    max_hops: Annotated[int, Field(ge=0, le=MAX_HOPS), WHOLE] | None = Field(
        default=None, description="Entity relations the relation walk follows (default 2)"
    )
    max_evidence: Annotated[int, Field(ge=1, le=MAX_EVIDENCE), WHOLE] | None = Field(
        default=None, description="Claims per item at most (default 40)"
    )
    budget: Count | None = Field(
        default=None,
        description="Characters of quoted text (default max(4000, the window's head caps); at most 20000, "
        "at least one head quote; a clamp is reported)",
    )
    deep: bool = Field(default=False, description="Halve the recall gate's thresholds")
    project_id: KeyText | None = Field(default=None, description="Project X sees X and the global pool ''")
    channel: KeyText | None = Field(default=None, description="Channel X sees X and the global pool ''")
    source_id: KeyText = Field(default="", description="Exact source id, or a prefix")
    time_cue: Annotated[TimeCueBody | None, EMPTY_IS_NO_CUE] = Field(
        default=None, description="Passed to the recall it reads from"
    )
    trace: bool = Field(default=False, description="Return the audit and the recall's own trace (no text)")
    mode: Literal["lite", "pro"] | None = Field(
        default=None,
        description="lite: 3000 tokens, 2800 characters; pro: 5000 tokens, 15 items, extra recall seats. "
        "The whole JSON is held to the mode's cl100k token cap (the trace is not)",
    )
    lite: bool = Field(default=False, description="The same as mode: lite; refused beside mode: pro")
    header: Header = None

    @field_validator("lite")
    @classmethod
    def _one_mode(cls, value: bool, info: ValidationInfo) -> bool:
        # `mode` is declared first, so it is read by now; two modes named at once is a caller's mistake.
        if value and info.data.get("mode") == "pro":
            raise refusal("conflict", "names lite beside mode: pro; pass one of them")
        return value
