"""What a graph node shows of a memory: its summary, its meta-memory, and its declared meta edges."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cpersona.model.graph_response import GraphMetaEdgeBody
from cpersona.model.records import format_time
from cpersona.model.timeline_records import bare_id

if TYPE_CHECKING:
    from cpersona.model.records import MemoryRecord, MetaEdge, MetaMemory

__all__ = ["SUMMARY_BYTES", "meta_edges", "meta_json", "node_summary"]

SUMMARY_BYTES = 80
_CUT = "..."


def node_summary(text: str) -> str:
    """The first :data:`SUMMARY_BYTES` bytes of ``text`` in UTF-8, never cutting a character, with
    ``...`` appended when cut (the reference's rule)."""
    data = text.encode("utf-8")
    if len(data) <= SUMMARY_BYTES:
        return text
    return data[:SUMMARY_BYTES].decode("utf-8", errors="ignore") + _CUT


def _plain(value: object) -> object:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


def meta_json(meta: MetaMemory) -> dict[str, Any]:
    """A memory's MetaMemory as JSON; its times as RFC 3339 text in UTC."""
    out: dict[str, Any] = {f.name: _plain(getattr(meta, f.name)) for f in dataclasses.fields(meta)}
    out["captured_at"] = None if meta.captured_at is None else format_time(meta.captured_at)
    out["context_edges"] = [_edge_json(edge) for edge in meta.context_edges]
    return out


def _edge_json(edge: MetaEdge) -> dict[str, Any]:
    out: dict[str, Any] = {f.name: _plain(getattr(edge, f.name)) for f in dataclasses.fields(edge)}
    out["created_at"] = None if edge.created_at is None else format_time(edge.created_at)
    return out


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
