"""The recall operations' answers as an agent reads them: text first.

``recall.query`` and ``recall.associate`` answer in Cerememory's shape
(:mod:`cpersona.model.cue_query_response`): each memory is a whole ``MemoryRecord`` whose text, and again
its rendering, are content blocks of UTF-8 bytes written as integers, one JSON number per byte. That
shape is the protocol's, and the HTTP routes answer it unchanged for Cerememory's clients. A tool's
result goes into an agent's context instead, where a 44-character memory cost some 750 tokens so; here
each memory is what the agent reads: its ref, its text as the recall mode renders it, its score, why it
is there, and its store, time and fidelity.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cpersona.model.cue_query_response import AssociateResult, CmpContent, CueQueryResult, RecalledMemory

__all__ = ["associate_json", "query_json"]

_MEMORY = "mem:"


def query_json(result: CueQueryResult) -> dict[str, Any]:
    """A multimodal query's answer, text first: the memories best first, how many passed the filters,
    the arms that failed, and the trace when asked for."""
    out: dict[str, Any] = {
        "ok": True,
        "memories": [_memory(memory) for memory in result.memories],
        "total_candidates": result.total_candidates,
        "degraded": result.query_metadata.degraded,
    }
    if result.trace is not None:
        out["trace"] = result.trace.model_dump(mode="json")
    return out


def associate_json(result: AssociateResult) -> dict[str, Any]:
    """The memories reached over associations, text first, most activated first."""
    return {
        "ok": True,
        "memories": [_memory(memory) for memory in result.memories],
        "total_candidates": result.total_candidates,
    }


def _memory(memory: RecalledMemory) -> dict[str, Any]:
    record = memory.record
    out: dict[str, Any] = {
        "ref": record.ref,
        "text": _text(memory.rendered_content),
        "score": memory.relevance_score,
        "reason": _reason(record.id, memory.activation_path),
        "store": record.store,
        "timestamp": record.created_at,
        "fidelity": record.fidelity.score,
    }
    if memory.rendered_content.summary is not None:
        out["summary"] = memory.rendered_content.summary
    return out


def _text(content: CmpContent) -> str:
    # Every block is text (the only modality stored); the first is the memory's own.
    return "\n\n".join(bytes(block.data).decode("utf-8", errors="replace") for block in content.blocks)


def _reason(own_id: str, path: list[str] | None) -> dict[str, Any]:
    """Why the memory is in the answer: the cue matched it, or activation spread to it from a memory
    the cue matched, over the path given (refs, the seed first)."""
    if path is None or path == [own_id] or not path:
        return {"signal": "cue"}
    return {"signal": "activation", "path": [_MEMORY + step for step in path]}
