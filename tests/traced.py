"""A result's trace as its JSON: what the response and the trace channel carry, to read by key."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import orjson

from cpersona.model.trace import RecallTrace

if TYPE_CHECKING:
    from pydantic import BaseModel


class _Traced(Protocol):
    @property
    def trace(self) -> BaseModel | None: ...


def trace_json(traced: _Traced) -> dict[str, Any]:
    """The JSON of ``traced``'s trace (a recall's, a reconstruct's or a cue query's); fails without one."""
    assert traced.trace is not None, "no trace"
    out = orjson.loads(traced.trace.model_dump_json())
    assert isinstance(out, dict)
    return out


def recall_trace(**sections: Any) -> RecallTrace:
    """A recall trace that found nothing, its sections replaced by ``sections`` (JSON), validated."""
    base: dict[str, Any] = {
        "trace_version": 1,
        "policy": {"scoring": "fused-gate-v1", "process": "single-pass-v1"},
        "server_version": "0",
        "scope": {"agent_id": "a", "project_id": None, "channel": None, "source_id": None},
        "request": {
            "limit": 5,
            "depth": 5,
            "deep": False,
            "mode": "rrf",
            "confidence_ordering": "none",
            "prior": {"far_weight": 0.5, "age_rate": 0.0, "age_floor": 0.0, "age_anchor": "newest"},
            "episode_penalty": False,
            "time_cue": None,
        },
        "config": {
            "embedding_mode": "onnx",
            "embedding_model": None,
            "scan_window": 100,
            "vector_reach": 0,
            "vector_far_limit": 0,
            "fused_gate_enabled": False,
            "autocut_enabled": True,
        },
        "arms": {},
        "fusion": [],
        "scoring": {},
        "gate": {
            "signal": "cosine",
            "threshold": 0.3,
            "heuristic_min": 0.3,
            "calibrated": None,
            "origin": "heuristic",
            "pool": 0,
            "decisions": [],
            "gate_fallback": False,
        },
        "autocut": {"fired": False, "kept": 0, "dropped": []},
        "order": {"before_cut": [], "limit": 5, "cut_by_count": []},
        "reservation": [],
        "stages": [{"stage": 0, "searched": "all arms", "next": None}],
        "suspected": [],
        "coverage": {
            "normalization": "nfkc-lower",
            "parts": [],
            "covered_by": [],
            "uncovered": [],
            "records": 0,
        },
        "timing_ms": {"total": 1.0},
    }
    return RecallTrace.model_validate({**base, **sections})
