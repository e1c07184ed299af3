"""The small per-agent requests: the profile text, the gate's calibration and its choice."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from cpersona.model.fields import CLEAN, AgentId, Header, Limit, RequestModel

__all__ = [
    "CalibrateRequest",
    "MAX_PROFILE",
    "ProfileText",
    "Gate",
    "GateRequest",
    "Precision",
    "ProfileRequest",
]

MAX_PROFILE = 2_000
Precision = Literal["strict", "balanced", "lenient"]
Gate = Literal["calibrated", "heuristic"]


ProfileText = Annotated[str, Field(min_length=1), Limit("", too_large=True, most=MAX_PROFILE), CLEAN]
"""The profile: stored text of at most 2,000 characters (413 beyond)."""


class ProfileRequest(RequestModel):
    """The agent's profile text."""

    profile: ProfileText
    header: Header = None


class CalibrateRequest(RequestModel):
    """Calibrate the agent's gate from its own memories (deterministic) and select it."""

    agent_id: AgentId
    precision: Precision = "balanced"
    header: Header = None


class GateRequest(RequestModel):
    """Select the agent's gate: ``calibrated`` (needs a calibration) or ``heuristic``."""

    agent_id: AgentId
    gate: Gate
    header: Header = None
