"""A recall policy as a value: the schema of one ``stages/*.toml`` file, read by ``cpersona.recall.policy``.

These are plain frozen records with no I/O, so every layer that needs a policy's numbers (the stages, the
gate, the trace) can name their types without importing the loader, and the loader can check a file's
``chain`` against the stages without an import cycle.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

__all__ = [
    "AutocutPolicy",
    "BlockPolicy",
    "CuePolicy",
    "DepthPolicy",
    "ExcludePolicy",
    "FusionPolicy",
    "GatePolicy",
    "LimitPolicy",
    "Policy",
    "RenderPolicy",
    "ScoringPolicy",
    "SeatPolicy",
    "VectorPolicy",
]


@dataclasses.dataclass(frozen=True, slots=True)
class DepthPolicy:
    floor: int
    max: int


@dataclasses.dataclass(frozen=True, slots=True)
class LimitPolicy:
    default: int
    max: int


@dataclasses.dataclass(frozen=True, slots=True)
class VectorPolicy:
    min_similarity: float
    rrf_threshold_factor: float
    scan_window: int
    reach: int
    far_limit: int
    far_weight: float


@dataclasses.dataclass(frozen=True, slots=True)
class FusionPolicy:
    rrf_k: int


@dataclasses.dataclass(frozen=True, slots=True)
class GatePolicy:
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


@dataclasses.dataclass(frozen=True, slots=True)
class AutocutPolicy:
    enabled: bool
    min_results: int
    min_gap_ratio: float


@dataclasses.dataclass(frozen=True, slots=True)
class ScoringPolicy:
    episode_penalty: bool
    episode_decay_rate: float
    episode_decay_floor: float
    prior_age_rate: float
    prior_age_floor: float
    prior_age_anchor: Literal["newest", "now"]


@dataclasses.dataclass(frozen=True, slots=True)
class SeatPolicy:
    block: int
    # Whether a seat must pass the gate floor of the arm that found its record (single-pass-v1 on).
    floor: bool


@dataclasses.dataclass(frozen=True, slots=True)
class BlockPolicy:
    max_per_record: int
    max_chars: int
    search_hits: int


@dataclasses.dataclass(frozen=True, slots=True)
class ExcludePolicy:
    prefix_min_chars: int


@dataclasses.dataclass(frozen=True, slots=True)
class RenderPolicy:
    preview_chars: int


@dataclasses.dataclass(frozen=True, slots=True)
class CuePolicy:
    """How a time cue is used (seed §2): every table is keyed by exactly the three confidence words."""

    # Widening of the cue's own period on each side, as a share of its length.
    margins: dict[str, float]
    # L: the most places a row the cue arm ranked may rise.
    lift: dict[str, int]
    # Held seats for cue-arm records the answer does not hold.
    seats: dict[str, int]
    # Whether a record the count cut (after the gate and autocut admitted it) may take a seat.
    seat_cut_rows: bool
    # A cue whose own period starts within this many hours before now is ignored; 0 turns the rule off.
    recent_only_hours: float
    search_episodes: bool
    # Rows per half of the cue arm; 0 means the recall's own depth.
    depth: int
    # The cue arm's lists are merged by the vote 1/(merge_k + rank), rank 0-based.
    merge_k: int
    vector_floor_factor: float
    revisions: int


@dataclasses.dataclass(frozen=True, slots=True)
class Policy:
    """One recall policy, exactly as its file says (after its ``extends`` chain is merged)."""

    name: str
    scoring: str
    # The stages after the arms, by name, in the order they run (``cpersona.recall.stages.chain``).
    chain: tuple[str, ...]
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
