"""What a graph node shows of a memory besides its meta-memory (:func:`~cpersona.model.cmp_record.meta_json`):
its summary, and its declared meta edges."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cpersona.model.graph_response import GraphMetaEdgeBody
from cpersona.model.records import format_time
from cpersona.model.timeline_records import bare_id

if TYPE_CHECKING:
    from cpersona.model.records import MemoryRecord

__all__ = ["SUMMARY_BYTES", "meta_edges", "node_summary"]

SUMMARY_BYTES = 80
_CUT = "..."


def node_summary(text: str) -> str:
    """The first :data:`SUMMARY_BYTES` bytes of ``text`` in UTF-8, never cutting a character, with
    ``...`` appended when cut (the reference's rule)."""
    data = text.encode("utf-8")
    if len(data) <= SUMMARY_BYTES:
        return text
    return data[:SUMMARY_BYTES].decode("utf-8", errors="ignore") + _CUT


def meta_edges(record: MemoryRecord) -> list[GraphMetaEdgeBody]:
    """The record's declared context edges, a missing source being the record itself."""
    out = []
    for edge in record.meta.context_edges:
        source = edge.source_id or record.ref
        out.append(
            GraphMetaEdgeBody(
                source_id=bare_id(source) or source,
                target_id=bare_id(edge.target_id) or edge.target_id,
                source_ref=source,
                target_ref=edge.target_id,
                relation=edge.relation,
                rationale=edge.rationale,
                evidence=[dict(e) for e in edge.evidence],
                confidence=edge.confidence,
                created_at=None if edge.created_at is None else format_time(edge.created_at),
            )
        )
    return out
