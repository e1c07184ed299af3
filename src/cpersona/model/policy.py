"""A recall policy as a value: the schema of one ``stages/*.toml`` file, read by ``cpersona.recall.policy``.

Each table is a frozen pydantic model that checks itself: strict (a TOML value must already be of the
field's type: no string for a number, no float for an integer, no ``true`` for either; an integer stands
for a float), every key required unless said otherwise, an unknown key refused, no infinity or NaN. They
do no I/O, so every layer that needs a policy's numbers (the stages, the gate, the trace) can name their
types without importing the loader, and the loader can check a file's ``chain`` against the stages
without an import cycle.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Generic, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveInt,
    StrictStr,
    with_config,
)
from typing_extensions import TypedDict

__all__ = [
    "AutocutPolicy",
    "BlockPolicy",
    "ByConfidence",
    "CuePolicy",
    "DepthPolicy",
    "ExcludePolicy",
    "FusionPolicy",
    "GatePolicy",
    "LimitPolicy",
    "NO_OVERLAY",
    "Policy",
    "PolicyOverlay",
    "RenderPolicy",
    "ScoringPolicy",
    "SeatPolicy",
    "VectorPolicy",
]

_T = TypeVar("_T")
# What every table checks (the module docstring says what strict means here); a table is frozen besides.
_CHECKS = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False)


class _Table(BaseModel):
    model_config = ConfigDict(**_CHECKS, frozen=True)


# A TypedDict rather than a dict keyed by Confidence, so that pydantic names a missing or an unknown word
# by its key, and the value stays a plain dict for the code that reads it.
@with_config(_CHECKS)
class ByConfidence(TypedDict, Generic[_T]):
    """One value for each confidence word of a time cue (``model.time_cue.CONFIDENCES``), none other."""

    sure: _T
    likely: _T
    vague: _T


def _overlay_only(value: int) -> int:
    # Validation runs on a file's values only (an overlay's copy skips it): a file cannot set the number.
    if value:
        raise ValueError("is set by a recall's overlay, never by a policy file")
    return value


OverlayCount = Annotated[int, Field(default=0, exclude=True), AfterValidator(_overlay_only)]
"""A number of a policy that only a :class:`PolicyOverlay` sets: 0 as every file loads, left out of the
file's values (what a policy dumps is what its file says)."""


class DepthPolicy(_Table):
    floor: int
    max: int
    # Places added to each arm's depth after the floor, within ``max``.
    places: OverlayCount = 0


class LimitPolicy(_Table):
    default: int
    max: int


class VectorPolicy(_Table):
    min_similarity: float
    rrf_threshold_factor: float
    scan_window: int
    reach: int
    far_limit: int
    far_weight: float


class FusionPolicy(_Table):
    rrf_k: int


class GatePolicy(_Table):
    start: float
    span: float
    saturation: int
    deep_factor: float
    lexical_arms: int
    profile_min_pool: int
    unscored_min_pool: int
    calibrate_sample: int
    calibrate_window_minutes: float
    calibrate_candidates: int
    calibrate_floor: float
    precision_beta: dict[str, float]
    # Admit a row a keyword arm ranked first holding every term it searched (fused-gate-v2 on).
    literal_match: bool


class AutocutPolicy(_Table):
    enabled: bool
    min_results: int
    min_gap_ratio: float


class ScoringPolicy(_Table):
    episode_penalty: bool
    episode_decay_rate: float
    episode_decay_floor: float
    prior_age_rate: float
    prior_age_floor: float
    prior_age_anchor: Literal["newest", "now"]


class SeatPolicy(_Table):
    block: int
    # Whether a seat must pass the gate floor of the arm that found its record (single-pass-v1 on).
    floor: bool
    # Held keyword seats (reference §3.10).
    keyword: OverlayCount = 0
    # Block seats beyond ``block``, filled from the rows the block arm fetched for ``block`` alone.
    extra_block: OverlayCount = 0


class BlockPolicy(_Table):
    max_per_record: int
    max_chars: int
    search_hits: int


class ExcludePolicy(_Table):
    prefix_min_chars: int


class RenderPolicy(_Table):
    preview_chars: int


class CuePolicy(_Table):
    """How a time cue is used (seed §2): every table is keyed by exactly the three confidence words."""

    # Widening of the cue's own period on each side, as a share of its length.
    margins: ByConfidence[NonNegativeFloat]
    # L: the most places a row the cue arm ranked may rise.
    lift: ByConfidence[NonNegativeInt]
    # Held seats for cue-arm records the answer does not hold.
    seats: ByConfidence[NonNegativeInt]
    # Whether a record the count cut (after the gate and autocut admitted it) may take a seat.
    seat_cut_rows: bool
    # A cue whose own period starts within this many hours before now is ignored; 0 turns the rule off.
    recent_only_hours: NonNegativeFloat
    search_episodes: bool
    # Rows per half of the cue arm; 0 means the recall's own depth.
    depth: NonNegativeInt
    # The cue arm's lists are merged by the vote 1/(merge_k + rank), rank 0-based; 0 would divide by 0.
    merge_k: PositiveInt
    vector_floor_factor: NonNegativeFloat
    revisions: NonNegativeInt


class Policy(_Table):
    """One recall policy, exactly as its file says (after its ``extends`` chain is merged)."""

    name: str
    scoring: str
    # The stages after the arms, by name, in the order they run (``cpersona.recall.stages.chain``). TOML
    # gives an array, which strict mode would refuse for a tuple; each name is still strictly a string.
    chain: Annotated[tuple[StrictStr, ...], Field(strict=False)]
    depth: DepthPolicy
    limit: LimitPolicy
    vector: VectorPolicy
    fusion: FusionPolicy
    gate: GatePolicy
    autocut: AutocutPolicy
    score_adjust: ScoringPolicy
    seats: SeatPolicy
    blocks: BlockPolicy
    exclude: ExcludePolicy
    render: RenderPolicy
    cue: CuePolicy | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class PolicyOverlay:
    """What one recall changes of the policy it runs under, for an operation that recalls on its own behalf
    (reconstruct holds keyword seats; its pro mode more block seats and a deeper fetch). Applied over the
    policy the recall names (:meth:`over`), so the stages read every number from that one policy."""

    keyword_seats: int = 0
    extra_block_seats: int = 0
    depth_places: int = 0

    def over(self, policy: Policy) -> Policy:
        """``policy`` with this overlay's numbers in place of its own (``policy`` itself when empty)."""
        if self == NO_OVERLAY:
            return policy
        seats = policy.seats.model_copy(
            update={"keyword": self.keyword_seats, "extra_block": self.extra_block_seats}
        )
        depth = policy.depth.model_copy(update={"places": self.depth_places})
        return policy.model_copy(update={"seats": seats, "depth": depth})


NO_OVERLAY = PolicyOverlay()
"""The overlay of a recall a caller asked for: its policy as the file says."""
