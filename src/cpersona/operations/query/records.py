"""A memory as the recall operations answer with it: Cerememory's ``MemoryRecord`` shape, its fidelity
read at the moment of the answer, and its content rendered for the recall mode."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from cpersona.model.cue_query_response import (
    CmpAssociation,
    CmpBlock,
    CmpContent,
    CmpEmotion,
    CmpFidelity,
    CmpRecord,
    RecalledMemory,
)
from cpersona.model.fidelity import current_fidelity, current_noise
from cpersona.model.records import format_time
from cpersona.operations.activation import edge_target
from cpersona.operations.query.render import render_text

if TYPE_CHECKING:
    from cpersona.model.cue_query import RecallModeName
    from cpersona.model.records import MemoryRecord

__all__ = ["cmp_record", "content_of", "fidelity_now", "recalled"]


def fidelity_now(record: MemoryRecord, now: float) -> float:
    """The memory's fidelity at ``now`` (the one rule of :mod:`cpersona.model.fidelity`)."""
    # TODO(issue 15): use fidelity.as_read once the lifecycle item adds it; until then, the same rule.
    return current_fidelity(record.fidelity, record.emotion, now)


def content_of(text: str) -> CmpContent:
    return CmpContent(blocks=[CmpBlock(data=list(text.encode("utf-8")))])


def cmp_record(record: MemoryRecord, now: float) -> CmpRecord:
    f = record.fidelity
    fidelity = CmpFidelity(
        score=fidelity_now(record, now),
        noise_level=current_noise(f, record.emotion, now),
        decay_rate=f.decay_rate,
        emotional_anchor=f.emotional_anchor,
        reinforcement_count=int(f.reinforcement_count),
        stability=f.stability,
        last_decay_tick=format_time(f.last_decay_tick or f.last_accessed_at or record.created_at),
    )
    edges = [
        CmpAssociation(
            target_id=edge_target(a.target_id) or a.target_id,
            association_type=a.type,
            weight=a.weight,
            created_at=format_time(a.created_at),
            last_co_activation=format_time(a.created_at),
        )
        for a in record.associations
    ]
    return CmpRecord(
        id=record.id,
        ref=record.ref,
        store=record.store,
        agent_id=record.scope.agent_id,
        project_id=record.scope.project_id,
        channel=record.scope.channel,
        timestamp=format_time(record.timestamp),
        created_at=format_time(record.created_at),
        updated_at=format_time(record.updated_at),
        last_accessed_at=format_time(f.last_accessed_at or record.created_at),
        access_count=int(f.access_count),
        content=content_of(record.content),
        fidelity=fidelity,
        emotion=CmpEmotion(**dataclasses.asdict(record.emotion)),
        associations=edges,
        metadata=dict(record.metadata),
        version=record.version,
    )


def recalled(
    record: MemoryRecord,
    score: float,
    path: tuple[str, ...] | None,
    mode: RecallModeName,
    now: float,
) -> RecalledMemory:
    """One memory of an answer, rendered for ``mode`` from its fidelity now."""
    shown = cmp_record(record, now)
    text = render_text(record.content, record.id, shown.fidelity.score, mode)
    return RecalledMemory(
        record=shown,
        relevance_score=score,
        activation_path=None if path is None else list(path),
        rendered_content=content_of(text),
    )
