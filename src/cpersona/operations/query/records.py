"""A memory as the recall operations answer with it: Cerememory's ``MemoryRecord`` (the one shape of
:mod:`cpersona.model.cmp_record`, as ``introspect.record`` shows it), read at the moment of the answer,
with its content rendered for the recall mode."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cpersona.model.cmp_record import cmp_record, read_now
from cpersona.model.cmp_responses import CmpMemoryRecord
from cpersona.model.cue_query_response import CmpBlock, CmpContent, RecalledMemory
from cpersona.model.fidelity import as_read
from cpersona.operations.query.render import render_text

if TYPE_CHECKING:
    from cpersona.model.cue_query import RecallModeName
    from cpersona.model.fidelity import FidelityCurve
    from cpersona.model.records import MemoryRecord

__all__ = ["content_of", "fidelity_now", "recalled"]


def fidelity_now(record: MemoryRecord, now: float, curve: FidelityCurve) -> float:
    """The stored memory's fidelity at ``now`` (:func:`~cpersona.model.fidelity.as_read`), for the filters."""
    return as_read(record, now, curve=curve).fidelity.score


def content_of(text: str) -> CmpContent:
    return CmpContent(blocks=[CmpBlock(data=list(text.encode("utf-8")))])


def recalled(
    record: MemoryRecord,
    score: float,
    path: tuple[str, ...] | None,
    mode: RecallModeName,
    now: float,
    curve: FidelityCurve,
) -> RecalledMemory:
    """One memory of an answer: the stored record read at ``now`` (once), rendered for ``mode`` from the
    fidelity it has then."""
    shown = read_now(record, now, curve)
    return RecalledMemory(
        record=CmpMemoryRecord.model_validate(cmp_record(shown)),
        relevance_score=score,
        activation_path=None if path is None else list(path),
        rendered_content=content_of(render_text(record.content, record.id, shown.fidelity.score, mode)),
    )
