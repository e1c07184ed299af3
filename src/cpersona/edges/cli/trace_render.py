"""A trace as a few readable lines, stage by stage: what ``cpersona trace tail`` prints.

A trace carries references and scores, never stored text and not the question, so the account shows
what each stage did to which refs: the arms' lists, the gate's decisions, what autocut and the count cut
removed, the held seats, the coverage ledger's summary and the timing. A reconstruct's trace is told as
its items, clusters, cues, allocation and coverage, then its recall in one line; a cue query's as its
arms, the fused ranking, the activation and what it returned. Every line reads the typed fields of
:mod:`cpersona.model.trace`, so nothing is guessed.
"""

from __future__ import annotations

import collections
import time
from typing import TYPE_CHECKING

from pydantic import ValidationError

from cpersona.model.trace import (
    CoverageFailure,
    CueQueryTrace,
    CueStageTrace,
    RecallTrace,
    RecallTraceFailure,
    ReconstructTrace,
    any_trace,
)

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from cpersona.model.trace import (
        AnyTrace,
        ArmRowTrace,
        Autocut,
        CoverageLedger,
        CuesTrace,
        FusionRow,
        GateTrace,
        OrderTrace,
        ScopeTrace,
        SeatTrace,
        SequenceTrace,
    )

__all__ = ["read_trace", "render_trace", "trace_project", "trace_scope"]

# Refs shown per arm list and per dropped set in the readable account; the JSON form has them all.
_TOP = 3


def render_trace(trace: AnyTrace, *, received: float | None = None) -> str:
    """A readable account of one recall, reconstruct or cue query trace, a few lines (no stored text)."""
    if isinstance(trace, ReconstructTrace):
        return _reconstruct(trace, received)
    if isinstance(trace, CueQueryTrace):
        return _cue_query(trace, received)
    lines = [_header(trace_scope(trace), received, version=trace.trace_version)]
    if isinstance(trace, RecallTraceFailure):
        lines.append(_line("error", f"the trace could not be built ({trace.error})"))
        return "\n".join(lines)
    request, policy = trace.request, trace.policy
    what = [f"policy {policy.process} (scoring {policy.scoring})"]
    what.extend((f"mode {request.mode}", f"limit {request.limit}", f"depth {request.depth}"))
    if request.deep:
        what.append("deep")
    lines.append(_line("request", "  ".join(what)))
    lines.extend(_arms(trace.arms))
    lines.extend(_fusion(trace.fusion))
    lines.append(_line("gate", _gate(trace.gate)))
    lines.append(_line("autocut", _autocut(trace.autocut)))
    lines.append(_line("count", _count(trace.order)))
    cue = _cue(trace)
    if cue:
        lines.append(_line("time cue", cue))
    lines.append(_line("seats", _seats(trace.reservation)))
    lines.append(_line("coverage", _coverage(trace.coverage)))
    lines.append(_line("timing", _timing(trace.timing_ms)))
    return "\n".join(lines)


def _cue(trace: RecallTrace) -> str:
    """The cue loop in one line: the stages it searched, what it moved and seated, why it stopped."""
    if trace.cue_ignored is not None:
        return f"not used ({trace.cue_ignored.reason})"
    cue = trace.cue
    if cue is None:
        return ""
    searched = [f"{s.confidence} found {s.found}" for s in trace.stages if isinstance(s, CueStageTrace)]
    parts = [
        " then ".join(searched) or "no stage",
        f"moved {len(cue.lifted)} (at most {cue.bound})",
        f"seated {len(cue.seated)}",
    ]
    if cue.lifted:
        parts[-2] += f" [{_refs([lift.row for lift in cue.lifted])}]"
    stop = None if trace.budget is None else trace.budget.stop
    if stop:
        parts.append(f"stopped: {stop.replace('_', ' ')}")
    return ", ".join(parts)


def _reconstruct(trace: ReconstructTrace, received: float | None) -> str:
    items = trace.items
    held = sum(1 for i in items if i.held)
    text = f"{len(items)} returned" + (f" ({held} held)" if held else "")
    if items:
        text += f"  [{_refs([i.head_ref for i in items])}]"
    lines = [_header(trace_scope(trace), received, "reconstruct")]
    lines.append(_line("items", text))
    lines.append(_line("clusters", _clusters(trace)))
    lines.append(_line("cues", _cues(trace.cues)))
    lines.append(_line("sequence", _allocation(trace.sequence)))
    lines.append(_line("coverage", _coverage(trace.coverage)))
    lines.append(_line("recall", _recall_summary(trace.recall)))
    return "\n".join(lines)


def _clusters(trace: ReconstructTrace) -> str:
    clusters = trace.clusters
    joined = collections.Counter(c.why for c in clusters if c.why)
    text = f"{len(clusters)} from {sum(len(c.refs) for c in clusters)} candidate(s)"
    if joined:
        text += " (" + ", ".join(f"{key} {n}" for key, n in joined.most_common()) + ")"
    past = sum(1 for c in clusters if c.past_window)
    return text + (f", {past} past the window" if past else "")


def _cues(cues: CuesTrace) -> str:
    if not cues.entities:
        return "no entity named"
    text = ", ".join(cues.entities) + " → " + (", ".join(cues.terms) or "no new term")
    return text + (f" (+{cues.terms_omitted} omitted)" if cues.terms_omitted else "")


def _allocation(sequence: SequenceTrace) -> str:
    pieces = sequence.pieces
    admitted = sum(1 for p in pieces if p.admitted)
    text = f"{sequence.name}: {admitted} of {len(pieces)} piece(s) admitted"
    text += f", used {sequence.used} of {sequence.budget} chars"
    stopped = sequence.stopped_at
    if stopped is not None and 0 <= stopped < len(pieces):
        at = pieces[stopped]
        text += f"; the {sequence.stop or 'budget'} stopped at {at.piece} of {at.ref}"
    elif sequence.stop == "count":
        text += "; the count left clusters out"
    return text


def _recall_summary(recall: RecallTrace | RecallTraceFailure | None) -> str:
    """The reconstruct's own recall in one line: its policy, the count cut, the seats and its time."""
    if recall is None:
        return "-"
    if isinstance(recall, RecallTraceFailure):
        return f"its trace could not be built ({recall.error})"
    parts = [f"policy {recall.policy.process}", _count(recall.order), f"seats {_seats(recall.reservation)}"]
    cue = _cue(recall)
    if cue:
        parts.append(f"time cue {cue}")
    total = recall.timing_ms.get("total")
    if total is not None:
        parts.append(f"total {_num(total, 1)} ms")
    return "; ".join(parts)


def _cue_query(trace: CueQueryTrace, received: float | None) -> str:
    lines = [_header(None, received, "cue query")]
    if not trace.arms:
        lines.append(_line("arms", "none ran"))
    for n, (name, arm) in enumerate(trace.arms.items()):
        state = "" if arm.status == "ok" else f" {arm.status}" + (f" ({arm.detail})" if arm.detail else "")
        lines.append(_line("arms" if n == 0 else "", f"{name}{state} {_listed(arm.rows)}"))
    fused = ", ".join(f"{f.ref} {_num(f.rrf)}" for f in trace.fused[:_TOP])
    lines.append(_line("fusion", f"{len(trace.fused)} candidate(s)" + (f"  [{fused}]" if fused else "")))
    reached = trace.activation
    spread = ", ".join(f"{a.ref} {a.edge_type}@hop{a.hop}" for a in reached[:_TOP])
    lines.append(_line("spread", f"{len(reached)} reached" + (f"  [{spread}]" if spread else "")))
    returned = ", ".join(f"{r.ref} {'+'.join(r.reasons) or '-'}" for r in trace.returned[:_TOP])
    more = f", +{len(trace.returned) - _TOP}" if len(trace.returned) > _TOP else ""
    lines.append(_line("returned", f"{len(trace.returned)}" + (f"  [{returned}{more}]" if returned else "")))
    return "\n".join(lines)


def _header(
    scope: ScopeTrace | None, received: float | None, what: str = "recall", *, version: int | None = None
) -> str:
    when = "" if received is None else " " + time.strftime("%H:%M:%S", time.localtime(received))
    parts = []
    if scope is not None:
        parts.append(f"agent {scope.agent_id}")
        for value, label in (
            (scope.project_id, "project"),
            (scope.channel, "channel"),
            (scope.source_id, "source"),
        ):
            if value:
                parts.append(f"{label} {value}")
    if version is not None:
        parts.append(f"(trace v{version})")
    return "  ".join([f"── {what}{when}", *parts])


def _line(label: str, text: str) -> str:
    return f"   {label:<9}{text}"


def _arms(arms: Mapping[str, Sequence[ArmRowTrace]]) -> list[str]:
    if not arms:
        return [_line("arms", "none ran")]
    return [
        _line("arms" if n == 0 else "", f"{name} {_listed(rows)}")
        for n, (name, rows) in enumerate(arms.items())
    ]


def _listed(rows: Sequence[ArmRowTrace]) -> str:
    """How many rows an arm found and its first few, with their raw scores."""
    top = ", ".join(f"{r.ref} {_num(r.raw)}" for r in rows[:_TOP])
    more = f", +{len(rows) - _TOP}" if len(rows) > _TOP else ""
    return f"{len(rows)}" + (f"  [{top}{more}]" if rows else "")


def _fusion(fusion: Sequence[FusionRow]) -> list[str]:
    if not fusion:
        return []
    top = ", ".join(f"{r.ref} {_num(r.score)}" for r in fusion[:_TOP])
    return [_line("fusion", f"{len(fusion)} candidate(s)  [{top}]")]


def _gate(gate: GateTrace) -> str:
    head = [f"origin {gate.origin}", f"signal {gate.signal}", f"threshold {_num(gate.threshold)}"]
    if gate.calibrated is not None:
        head.append(f"calibrated {_num(gate.calibrated)}")
    head.append(f"pool {gate.pool}")
    passed = sum(1 for d in gate.decisions if d.passed)
    dropped = [d for d in gate.decisions if not d.passed]
    text = ", ".join(head) + f": {passed} passed, {len(dropped)} dropped"
    if dropped:
        why = collections.Counter(d.reason or d.signal for d in dropped)
        text += " (" + ", ".join(f"{reason}: {n}" for reason, n in why.most_common()) + ")"
        text += "  [" + _refs([d.ref for d in dropped]) + "]"
    if gate.gate_fallback:
        text += "  fallback"
    return text


def _autocut(autocut: Autocut) -> str:
    dropped = autocut.dropped
    if not autocut.fired and not dropped:
        return "did not fire"
    text = f"fired: dropped {len(dropped)}, kept {autocut.kept}"
    return text + (f"  [{_refs(dropped)}]" if dropped else "")


def _count(order: OrderTrace) -> str:
    cut = order.cut_by_count
    before = order.before_cut
    text = f"limit {order.limit}: {len(before)} ranked, cut {len(cut)}, {len(before) - len(cut)} kept"
    return text + (f"  [{_refs(cut)}]" if cut else "")


def _seats(seats: Sequence[SeatTrace]) -> str:
    if not seats:
        return "none"
    return ", ".join(f"{s.kind} {s.ref}" for s in seats)


def _coverage(coverage: CoverageLedger | CoverageFailure) -> str:
    if isinstance(coverage, CoverageFailure):
        return f"not built ({coverage.error})"
    parts, uncovered = coverage.parts, coverage.uncovered
    text = f"{len(parts)} part(s): {len(parts) - len(uncovered)} covered, {len(uncovered)} uncovered"
    if coverage.parts_omitted:
        text += f" (+{coverage.parts_omitted} omitted)"
    return text


def _timing(timing: Mapping[str, float]) -> str:
    if not timing:
        return "-"
    total = timing.get("total")
    steps = [f"{name} {_num(ms, 1)}" for name, ms in timing.items() if name != "total"]
    text = ", ".join(steps)
    if total is not None:
        text = f"total {_num(total, 1)} ms" + (f" ({text})" if text else "")
    return text


# ------------------------------------------------------------------------------------------ helpers


def trace_scope(trace: AnyTrace) -> ScopeTrace | None:
    """The trace's scope; a reconstruct's is its recall's, which it reads within (a cue query's trace,
    and a failed one, carry none)."""
    if isinstance(trace, ReconstructTrace):
        return None if trace.recall is None else trace_scope(trace.recall)
    return trace.scope if isinstance(trace, RecallTrace) else None


def read_trace(payload: bytes | str) -> AnyTrace | None:
    """A published trace read back, or ``None`` when the payload is not JSON of a trace this version
    knows (a message from elsewhere, or from a server of another version)."""
    try:
        return any_trace(payload)
    except ValidationError:
        return None


def trace_project(trace: AnyTrace) -> str | None:
    """The project the traced call read, for the ``project_id`` filters of the tail and the stream."""
    scope = trace_scope(trace)
    return None if scope is None else scope.project_id


def _refs(refs: Sequence[str]) -> str:
    more = f", +{len(refs) - _TOP}" if len(refs) > _TOP else ""
    return ", ".join(refs[:_TOP]) + more


def _num(value: float | None, places: int = 4) -> str:
    if value is None:
        return "-"
    return f"{value:.{places}f}" if isinstance(value, float) else str(value)
