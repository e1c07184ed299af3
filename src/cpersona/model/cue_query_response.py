"""The answers of the multimodal ``recall.query`` and of ``recall.associate``, in the recall-operations
seed's shape (the Cerememory SDK's ``RecallQueryResponse`` and ``RecallAssociateResponse`` parse them).

A record is Cerememory's ``MemoryRecord`` as ``introspect.record`` shows it
(:class:`~cpersona.model.cmp_responses.CmpMemoryRecord`, built by :mod:`cpersona.model.cmp_record`): the
bare UUID as ``id``, its ``ref`` and scope beside, the fidelity read at the moment of the answer; it
shows what was read, before the answer's reconsolidation is written. ``rendered_content`` is its content
as the recall mode shows it, text blocks whose ``data`` is the UTF-8 bytes as integers.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from cpersona.model.cmp_responses import CmpMemoryRecord
from cpersona.model.records import AssociationType, StoreKind
from cpersona.model.result_model import ResultModel, absent
from cpersona.model.trace import CueQueryTrace

__all__ = [
    "ActivationNode",
    "ActivationTrace",
    "AssociateResult",
    "CmpBlock",
    "CmpContent",
    "CueQueryResult",
    "QueryMetadata",
    "RecalledMemory",
]


class _Out(ResultModel):
    pass


class CmpBlock(_Out):
    modality: Literal["text"] = "text"
    format: str = "text/plain"
    data: list[int] = Field(description="The text's UTF-8 bytes")
    embedding: list[float] | None = None


class CmpContent(_Out):
    blocks: list[CmpBlock]
    summary: str | None = None


class RecalledMemory(_Out):
    record: CmpMemoryRecord
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
    trace: CueQueryTrace | None = Field(
        default=None, exclude_if=absent, description="With `trace: true`: refs, ranks, scores"
    )


class AssociateResult(_Out):
    """The memories reached from one memory over its associations, most activated first."""

    model_config = ConfigDict(title="RecallAssociateResult")

    ok: Literal[True] = True
    memories: list[RecalledMemory]
    total_candidates: int = Field(description="Memories reached, before the limit")
