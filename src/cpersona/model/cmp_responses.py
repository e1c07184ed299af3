"""The answers of the routes that exist for Cerememory's clients: readiness and ``introspect.record``."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from cpersona.model.records import StoreKind

__all__ = ["CmpFidelity", "CmpMemoryRecord", "ReadinessResponse"]


class ReadinessResponse(BaseModel):
    """Ready: the engine is open and no component is down (else a 503 envelope with ``status: not_ready``,
    the ``reason`` and the ``components``)."""

    model_config = ConfigDict(title="Readiness", extra="forbid")

    ok: Literal[True]
    status: Literal["ready"]
    components: dict[str, Literal["up", "down", "off"]] = Field(
        description="Each component's state: redis, vectors.records, vectors.blocks, embedder"
    )
    mode: Literal["read-write", "read-only"] = Field(
        description="read-only while every write is refused with 507 for want of disk; reads go on"
    )


class CmpFidelity(BaseModel):
    model_config = ConfigDict(title="CmpFidelity", extra="forbid")

    score: float = Field(description="The fidelity now (decayed since the baseline), 0..1")
    noise_level: float = Field(description="The interference now, 0..1")
    decay_rate: float
    emotional_anchor: float
    reinforcement_count: int
    stability: float
    last_decay_tick: str


class CmpMemoryRecord(BaseModel):
    """A memory as Cerememory's ``MemoryRecord`` (see :mod:`cpersona.model.cmp_record`)."""

    model_config = ConfigDict(title="CmpMemoryRecord", extra="forbid")

    id: str = Field(description="The bare UUID (the ref without `mem:`)")
    ref: str = Field(description="mem:<uuid>")
    agent_id: str
    project_id: str
    channel: str
    store: StoreKind
    created_at: str = Field(description="The memory's own time (its `timestamp`), RFC 3339 UTC")
    stored_at: str = Field(description="When it was written")
    updated_at: str
    last_accessed_at: str
    access_count: int
    content: dict[str, Any] = Field(
        description="{blocks: [{modality: text, format, data: [bytes]}], summary}"
    )
    fidelity: CmpFidelity
    emotion: dict[str, float]
    associations: list[dict[str, Any]] = Field(
        description="{target_id, association_type, weight, created_at, last_co_activation}"
    )
    other_associations: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Associations whose target is no memory (an episode, a raw entry, other text), the "
        "target as written",
    )
    metadata: dict[str, Any]
    version: int
    meta: dict[str, Any]
