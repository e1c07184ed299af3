"""The answers of the multimodal ``recall.query`` and of ``recall.associate``, in the recall-operations
seed's shape (the Cerememory SDK's ``RecallQueryResponse`` and ``RecallAssociateResponse`` parse them).

A record is Cerememory's ``MemoryRecord``: ``id`` is the bare UUID, content is text blocks whose ``data``
is the UTF-8 bytes as integers; our ``ref`` and scope ride beside it. Its ``fidelity.score`` is the
fidelity at the moment of the read (computed from the stored baseline by
:func:`cpersona.model.fidelity.current_fidelity`), not the stored anchor; a record in an answer shows
what was read, before the answer's reconsolidation is written.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from cpersona.model.records import AssociationType, StoreKind

__all__ = [
    "ActivationNode",
    "ActivationTrace",
    "AssociateResult",
    "CmpAssociation",
    "CmpBlock",
    "CmpContent",
    "CmpEmotion",
    "CmpFidelity",
    "CmpRecord",
    "CueQueryResult",
    "QueryMetadata",
    "RecalledMemory",
]


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CmpBlock(_Out):
    modality: Literal["text"] = "text"
    format: str = "text/plain"
    data: list[int] = Field(description="The text's UTF-8 bytes")
    embedding: list[float] | None = None


class CmpContent(_Out):
    blocks: list[CmpBlock]
    summary: str | None = None


class CmpFidelity(_Out):
    score: float = Field(description="The fidelity now (decayed from the stored baseline)")
    noise_level: float
    decay_rate: float
    emotional_anchor: float
    reinforcement_count: int
    stability: float
    last_decay_tick: str


class CmpEmotion(_Out):
    joy: float
    trust: float
    fear: float
    surprise: float
    sadness: float
    disgust: float
    anger: float
    anticipation: float
    intensity: float
    valence: float


class CmpAssociation(_Out):
    target_id: str
    association_type: AssociationType
    weight: float
    created_at: str
    last_co_activation: str


class CmpRecord(_Out):
    id: str = Field(description="The memory's UUID (bare)")
    ref: str = Field(description="The memory's ref, mem:<id>")
    store: StoreKind
    agent_id: str
    project_id: str
    channel: str
    timestamp: str = Field(description="The memory's own time, which temporal cues filter on")
    created_at: str
    updated_at: str
    last_accessed_at: str
    access_count: int
    content: CmpContent
    fidelity: CmpFidelity
    emotion: CmpEmotion
    associations: list[CmpAssociation]
    metadata: dict[str, Any]
    version: int


class RecalledMemory(_Out):
    record: CmpRecord
    relevance_score: float
    activation_path: list[str] | None = Field(
        description="Memory ids from the seed that activated this one to it (just its own id for a "
        "memory the arms found; null when no activation ran)"
    )
    rendered_content: CmpContent


class ActivationNode(_Out):
    record_id: str
    activation_level: float
    hop: int
    edge_type: AssociationType
    source_id: str = Field(description="The seed this activation spread from")


class ActivationTrace(_Out):
    source_id: str = Field(description="The first seed (the best fused memory)")
    activations: list[ActivationNode]


class QueryMetadata(_Out):
    total_records_scanned: int = Field(description="Distinct memories the arms and activation read")
    stores_searched: list[StoreKind]
    fidelity_filtered: int = Field(description="Memories left out by min_fidelity or as decayed")
    degraded: list[str] = Field(
        default_factory=list, description="Arms that failed or missed their deadline (arm: why)"
    )


class CueQueryResult(_Out):
    """The memories a cue recalled, best first."""

    model_config = ConfigDict(title="RecallCueResult")

    ok: Literal[True] = True
    memories: list[RecalledMemory]
    activation_trace: ActivationTrace | None
    total_candidates: int = Field(description="Memories that passed every filter, before the limit")
    query_metadata: QueryMetadata
    trace: dict[str, Any] | None = Field(default=None, description="With `trace: true`: refs, ranks, scores")

    def to_json(self) -> dict[str, Any]:
        out = self.model_dump(mode="json")
        if out["trace"] is None:
            del out["trace"]
        return out


class AssociateResult(_Out):
    """The memories reached from one memory over its associations, most activated first."""

    model_config = ConfigDict(title="RecallAssociateResult")

    ok: Literal[True] = True
    memories: list[RecalledMemory]
    total_candidates: int = Field(description="Memories reached, before the limit")

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")
