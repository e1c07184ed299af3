"""The traces, as frozen models: the recall trace (``trace_version`` 1), the reconstruct trace (``kind:
"reconstruct"``, its recall's trace nested) and the cue query's trace.

A trace carries references, ranks, scores, spans and reasons, never stored text. Each model is the one
declaration of its shape: the recall, reconstruct and cue query build their trace as these models, the
responses carry them (so ``/openapi.json`` describes the ``trace`` of each answer), the trace channel
publishes their ``model_dump_json``, and the CLI's account reads their fields.

The JSON keeps the shape traces had before they were typed, key for key. Two kinds of optional field
keep it: a field that was *absent* when unset is excluded when it holds its default (:func:`_absent`,
whatever the caller's ``exclude_none``), and a field that was ``null`` when unset is an ordinary
``X | None``. Numbers the engine hands over as integers or floats stay what they were
(:data:`Number`): a ``float`` field would turn an integer ``1`` into ``1.0``.

What each section means is written where it is built: ``recall.trace.assemble`` (the recall),
``operations.reconstruct.trace`` (reconstruct) and ``operations.query.trace`` (the cue query).
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, WithJsonSchema

from cpersona.embedding_models import UNSCALED
from cpersona.model.agent_requests import Gate
from cpersona.model.time_cue import Confidence, Unit

__all__ = [
    "TRACE_VERSION",
    "AgoTrace",
    "AnyTrace",
    "ArmRowTrace",
    "ArmStage",
    "Autocut",
    "Budget",
    "CandidateRef",
    "ClusterMember",
    "ClusterTrace",
    "CoverageFailure",
    "CoverageLedger",
    "CoveragePart",
    "CueIgnored",
    "CueLift",
    "CueQueryArm",
    "CueQueryTrace",
    "CueStageTrace",
    "CueTrace",
    "CuesTrace",
    "FusedTrace",
    "FusionRow",
    "FusionWeight",
    "GateDecisionTrace",
    "GateTrace",
    "ItemTrace",
    "OrderTrace",
    "PieceTrace",
    "RecallConfig",
    "RecallRequestTrace",
    "RecallTrace",
    "RecallTraceFailure",
    "ReconstructTrace",
    "ReturnedTrace",
    "ScopeTrace",
    "Scoring",
    "SeatTrace",
    "SequenceTrace",
    "SpreadTrace",
    "SuspectedTrace",
    "TimeCueTrace",
    "TracePolicy",
    "TracePrior",
    "TracedRef",
    "any_trace",
]

TRACE_VERSION: Final = 1

Number = Annotated[int | float, WithJsonSchema({"type": "number"})]
"""A score or a time as the engine made it: an integer stays one in the JSON, a float stays a float."""


def _absent(default: Any = None, **kwargs: Any) -> Any:
    """A field left out of the JSON while it holds ``default`` (``None``, ``False``, ``0``, empty)."""
    return Field(default=default, exclude_if=lambda value: value == default, **kwargs)


class _Trace(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, serialize_by_alias=True, validate_by_name=True)


# ------------------------------------------------------------------------------------------ shared parts


class ArmRowTrace(_Trace):
    """One row of an arm's list: ``rank`` 0-based in the arm's order, ``raw`` its native score."""

    ref: str
    rank: int
    raw: Number | None


class CoveragePart(_Trace):
    span: tuple[int, int] = Field(description="Its span in the normalised question")
    kind: Literal["kanji", "katakana", "identifier"]


class CoverageLedger(_Trace):
    """Which parts of the question the returned records' full stored text holds (spans, never text)."""

    normalization: str
    parts: list[CoveragePart]
    covered_by: list[list[str]] = Field(description="Per part, the refs whose text holds it")
    uncovered: list[int] = Field(description="The parts no record holds, by index")
    records: int = Field(description="How many records were read")
    parts_omitted: int = _absent(0, description="Distinct parts past the cap (absent when none)")


class CoverageFailure(_Trace):
    """The ledger could not be built: the exception's type (the answer is unchanged)."""

    error: str


Coverage = CoverageLedger | CoverageFailure


# ------------------------------------------------------------------------------------------ the recall


class TracePolicy(_Trace):
    scoring: str
    process: str


class ScopeTrace(_Trace):
    agent_id: str
    project_id: str | None
    channel: str | None
    source_id: str | None


class TracePrior(_Trace):
    far_weight: Number
    age_rate: Number
    age_floor: Number
    age_anchor: Literal["newest", "now"]


class AgoTrace(_Trace):
    unit: Unit
    value: int


class TimeCueTrace(_Trace):
    """The cue as read: ISO times in UTC."""

    confidence: Confidence
    after: str | None = _absent()
    before: str | None = _absent()
    ago: AgoTrace | Literal["long_ago"] | None = _absent()


class RecallRequestTrace(_Trace):
    """What the recall was asked, as it ran."""

    limit: int
    depth: int
    deep: bool
    mode: str
    confidence_ordering: Literal["none"]
    prior: TracePrior
    episode_penalty: bool
    time_cue: TimeCueTrace | None
    keyword_seats: int = _absent(0)
    lexical_terms: int = _absent(0, description="How many extra lexical terms the arms got")


class RecallConfig(_Trace):
    embedding_mode: str
    embedding_model: str | None
    scan_window: int
    vector_reach: int
    vector_far_limit: int
    fused_gate_enabled: bool
    autocut_enabled: bool


class FusionWeight(_Trace):
    """How far ``informed`` fusion trusted one arm's list for this query."""

    weight: Number = Field(description="The list's weight: informative share times its own weight")
    informative: Number = Field(
        description="(top - bulk) / top of its raw scores, 0 to 1 (a vector list's read through cosine_scale)"
    )
    top: Number | None = Field(description="Its best raw score")
    bulk: Number | None = Field(description="Its median raw score")


class FusionRow(_Trace):
    ref: str
    score: Number | None
    votes: dict[str, Number] = Field(description="Each list's contribution to the fused score")


class Scoring(_Trace):
    episode_penalty: dict[str, Number] = _absent({})
    prior: dict[str, Number] = _absent({})


class GateDecisionTrace(_Trace):
    ref: str
    signal: str
    score: Number | None
    threshold: Number | None
    passed: bool
    reason: str | None = _absent()


class GateTrace(_Trace):
    signal: Literal["rsf", "cosine"]
    threshold: Number
    heuristic_min: Number
    cosine_scale: tuple[Number, Number] = _absent(
        UNSCALED,
        description="The embedder's gate scale (zero, one): a vector-found row's heuristic threshold is the "
        "cosine zero + (one - zero) x heuristic_min; left out for (0, 1)",
    )
    calibrated: Number | None
    origin: Gate
    pool: int
    decisions: list[GateDecisionTrace]
    gate_fallback: bool


class Autocut(_Trace):
    fired: bool
    kept: int = Field(description="Rows it left")
    dropped: list[str]


class TracedRef(_Trace):
    ref: str


class OrderTrace(_Trace):
    before_cut: list[TracedRef]
    limit: int
    cut_by_count: list[str]


class SeatTrace(_Trace):
    ref: str
    kind: Literal["block", "keyword", "cue"]


class ArmStage(_Trace):
    """The one stage of a recall without a cue: every arm searched once."""

    stage: int
    searched: Literal["all arms"]
    next: None


class CueStageTrace(_Trace):
    """One search of the cue loop: the step it searched, its period, how many rows it found, what next."""

    stage: int
    searched: Literal["all arms and the cue arm", "the cue arm"]
    confidence: Confidence
    period: tuple[str, str] | None
    found: int
    next: str | None


class SuspectedTrace(_Trace):
    """A stage whose period held no candidate, and what the loop did about it."""

    stage: int
    code: Literal["CANDIDATE_MISS"]
    reason: str
    action: str


class CueLift(_Trace):
    """A row the bounded move lifted, by 0-based position among the returned rows."""

    row: str
    from_: int = Field(alias="from")
    to: int


class CueTrace(_Trace):
    bound: int = Field(description="The most places a row may rise at the step searched")
    confidence: Confidence
    lifted: list[CueLift]
    seated: list[str]


class CueIgnored(_Trace):
    reason: Literal["recent_only"]
    period: tuple[str, str] | None


class Budget(_Trace):
    cue_time_limit_ms: Number
    stop: str | None


class RecallTrace(_Trace):
    """The recall trace v1: what each stage kept, dropped and reordered, and why."""

    model_config = ConfigDict(title="RecallTrace")

    trace_version: Literal[1]
    policy: TracePolicy
    server_version: str
    scope: ScopeTrace
    request: RecallRequestTrace
    config: RecallConfig
    arms: dict[str, list[ArmRowTrace]]
    fusion: list[FusionRow]
    fusion_weights: dict[str, FusionWeight] = _absent(
        {}, description="Each list's weight under `informed` fusion (absent under the other modes)"
    )
    scoring: Scoring
    gate: GateTrace
    autocut: Autocut
    order: OrderTrace
    reservation: list[SeatTrace]
    stages: list[CueStageTrace | ArmStage]
    suspected: list[SuspectedTrace]
    cue: CueTrace | None = _absent()
    cue_ignored: CueIgnored | None = _absent()
    budget: Budget | None = _absent()
    coverage: CoverageLedger | CoverageFailure
    timing_ms: dict[str, Number]


class RecallTraceFailure(_Trace):
    """The trace of a recall whose trace could not be built: the exception's type (the rows are final)."""

    trace_version: Literal[1]
    error: str


# ------------------------------------------------------------------------------------------ reconstruct


class CandidateRef(_Trace):
    ref: str
    rank: int
    reserved: bool = _absent(False)


class ClusterMember(_Trace):
    ref: str
    why: str | None = _absent(None, description="The key that joined it")


class ClusterTrace(_Trace):
    """A cluster bundling made: ``item`` and ``head`` where it went, or ``past_window``."""

    refs: list[str]
    members: list[ClusterMember]
    why: str | None = _absent(None, description="The key that formed it (absent for a singleton)")
    past_window: bool = _absent(False)
    item: int | None = _absent()
    head: str | None = _absent()
    held: bool = _absent(False)


class CuesTrace(_Trace):
    entities: list[str]
    terms: list[str]
    terms_omitted: int = _absent(0)


class ItemTrace(_Trace):
    head_ref: str
    cites: list[str]
    held: bool = _absent(False)


class PieceTrace(_Trace):
    item: int
    ref: str
    piece: Literal["head", "excerpt"]
    span: tuple[int, int]
    chars: int
    admitted: bool


class SequenceTrace(_Trace):
    name: str
    budget: int
    used: int
    cut: bool
    pieces: list[PieceTrace]
    stopped_at: int | None
    stop: Literal["budget", "cap", "count"] | None


class ReconstructTrace(_Trace):
    """reconstruct's full audit, its recall's own trace nested as ``recall``."""

    model_config = ConfigDict(title="ReconstructTrace")

    kind: Literal["reconstruct"]
    recall: RecallTrace | RecallTraceFailure | None
    candidate_refs: list[CandidateRef]
    clusters: list[ClusterTrace]
    cues: CuesTrace
    items: list[ItemTrace]
    sequence: SequenceTrace
    coverage: CoverageLedger | CoverageFailure


# ------------------------------------------------------------------------------------------ cue query


class CueQueryArm(_Trace):
    status: Literal["ok", "timeout", "error"]
    elapsed_ms: Number
    rows: list[ArmRowTrace]
    detail: str = _absent("")


class FusedTrace(_Trace):
    ref: str
    rank: int
    rrf: Number
    share: Number


class SpreadTrace(_Trace):
    """A memory the activation reached: its level, hops, the last edge's type and the path to it."""

    ref: str
    level: Number
    hop: int
    edge_type: str
    path: list[str]


class ReturnedTrace(_Trace):
    ref: str
    rank: int
    score: Number
    reasons: list[str] = Field(description="`arm#rank` per arm that found it, `activation:<edge>@hop<n>`")


class CueQueryTrace(_Trace):
    """A cue query's trace: each arm's ranked refs, the fused ranking, the activation, the returned."""

    model_config = ConfigDict(title="CueQueryTrace")

    arms: dict[str, CueQueryArm]
    fused: list[FusedTrace]
    activation: list[SpreadTrace]
    returned: list[ReturnedTrace]


AnyTrace = RecallTrace | RecallTraceFailure | ReconstructTrace | CueQueryTrace

_ANY: TypeAdapter[AnyTrace] = TypeAdapter(AnyTrace)


def any_trace(data: object) -> AnyTrace:
    """A trace read back from its JSON (a published message); raises ``pydantic.ValidationError``."""
    if isinstance(data, bytes | str):
        return _ANY.validate_json(data)
    return _ANY.validate_python(data)
