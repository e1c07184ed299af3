"""A recall trace as a few readable lines, stage by stage: what ``cpersona trace tail`` prints.

A trace carries references and scores, never stored text and not the question, so the account shows
what each stage did to which refs: the arms' lists, the gate's decisions, what autocut and the count cut
removed, the held seats, the coverage ledger's summary and the timing. A reconstruct's trace (``kind:
"reconstruct"``) is told as its items, clusters, cues, allocation and coverage, then its recall in one line.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["render_trace", "trace_scope"]

# Refs shown per arm list and per dropped set in the readable account; the JSON form has them all.
_TOP = 3


def render_trace(trace: Mapping[str, Any], *, received: float | None = None) -> str:
    """A readable account of one recall or reconstruct trace, a few lines (no stored text)."""
    if trace.get("kind") == "reconstruct":
        return _reconstruct(trace, received)
    lines = [_header(trace, received)]
    request = _map(trace.get("request"))
    policy = _map(trace.get("policy"))
    what = [f"policy {policy.get('process', '?')}"]
    if policy.get("scoring"):
        what[0] += f" (scoring {policy['scoring']})"
    what.append(f"mode {request.get('mode', trace.get('mode', '?'))}")
    what.append(f"limit {request.get('limit', '?')}")
    what.append(f"depth {request.get('depth', '?')}")
    if request.get("deep"):
        what.append("deep")
    lines.append(_line("request", "  ".join(what)))
    lines.extend(_arms(_map(trace.get("arms"))))
    lines.extend(_fusion(trace.get("fusion")))
    lines.append(_line("gate", _gate(_map(trace.get("gate")))))
    lines.append(_line("autocut", _autocut(_map(trace.get("autocut")))))
    lines.append(_line("count", _count(_map(trace.get("order")))))
    cue = _cue(trace)
    if cue:
        lines.append(_line("time cue", cue))
    lines.append(_line("seats", _seats(trace.get("reservation", trace.get("seats")))))
    if "coverage" in trace:
        lines.append(_line("coverage", _coverage(_map(trace.get("coverage")))))
    degraded = trace.get("degraded")
    if isinstance(degraded, Sequence) and not isinstance(degraded, str) and degraded:
        parts = [f"{_map(d).get('arm', '?')} {_map(d).get('status', '?')}" for d in degraded]
        lines.append(_line("degraded", ", ".join(parts)))
    lines.append(_line("timing", _timing(_map(trace.get("timing_ms")))))
    return "\n".join(lines)


def _cue(trace: Mapping[str, Any]) -> str:
    """The cue loop in one line: the stages it searched, what it moved and seated, why it stopped."""
    ignored = _map(trace.get("cue_ignored"))
    if ignored:
        return f"not used ({ignored.get('reason', '?')})"
    cue = _map(trace.get("cue"))
    if not cue:
        return ""
    stages = trace.get("stages")
    searched = []
    if isinstance(stages, Sequence) and not isinstance(stages, str):
        for stage in stages:
            entry = _map(stage)
            if "confidence" in entry:
                searched.append(f"{entry['confidence']} found {entry.get('found', '?')}")
    parts = [" then ".join(searched) or "no stage"]
    lifted = cue.get("lifted")
    seated = cue.get("seated")
    parts.append(
        f"moved {len(lifted) if isinstance(lifted, Sequence) else '?'} (at most {cue.get('bound', '?')})"
    )
    parts.append(f"seated {len(seated) if isinstance(seated, Sequence) else '?'}")
    stop = _map(trace.get("budget")).get("stop")
    if stop:
        parts.append(f"stopped: {str(stop).replace('_', ' ')}")
    return ", ".join(parts)


def _reconstruct(trace: Mapping[str, Any], received: float | None) -> str:
    items = [_map(i) for i in _rows(trace.get("items"))]
    held = sum(1 for i in items if i.get("held"))
    text = f"{len(items)} returned" + (f" ({held} held)" if held else "")
    lines = [_header(trace, received, "reconstruct")]
    lines.append(_line("items", text + (f"  [{_refs([i.get('head_ref') for i in items])}]" if items else "")))
    lines.append(_line("clusters", _clusters(trace.get("clusters"))))
    lines.append(_line("cues", _cues(_map(trace.get("cues")))))
    lines.append(_line("sequence", _allocation(_map(trace.get("sequence")))))
    if "coverage" in trace:
        lines.append(_line("coverage", _coverage(_map(trace.get("coverage")))))
    lines.append(_line("recall", _recall_summary(_map(trace.get("recall")))))
    return "\n".join(lines)


def _clusters(clusters: object) -> str:
    rows = [_map(c) for c in _rows(clusters)]
    joined = collections.Counter(str(c["why"]) for c in rows if c.get("why"))
    text = f"{len(rows)} from {sum(len(_rows(c.get('refs'))) for c in rows)} candidate(s)"
    if joined:
        text += " (" + ", ".join(f"{key} {n}" for key, n in joined.most_common()) + ")"
    past = sum(1 for c in rows if c.get("past_window"))
    return text + (f", {past} past the window" if past else "")


def _cues(cues: Mapping[str, Any]) -> str:
    entities, terms = _rows(cues.get("entities")), _rows(cues.get("terms"))
    if not entities:
        return "no entity named"
    text = ", ".join(map(str, entities)) + " → " + (", ".join(map(str, terms)) or "no new term")
    return text + (f" (+{cues['terms_omitted']} omitted)" if cues.get("terms_omitted") else "")


def _allocation(sequence: Mapping[str, Any]) -> str:
    if not sequence:
        return "-"
    pieces = [_map(p) for p in _rows(sequence.get("pieces"))]
    admitted = sum(1 for p in pieces if p.get("admitted"))
    text = f"{sequence.get('name', '?')}: {admitted} of {len(pieces)} piece(s) admitted"
    text += f", used {sequence.get('used', '?')} of {sequence.get('budget', '?')} chars"
    stopped = sequence.get("stopped_at")
    if isinstance(stopped, int) and 0 <= stopped < len(pieces):
        at = pieces[stopped]
        what = sequence.get("stop") or "budget"
        text += f"; the {what} stopped at {at.get('piece', '?')} of {at.get('ref', '?')}"
    elif sequence.get("stop") == "count":
        text += "; the count left clusters out"
    return text


def _recall_summary(recall: Mapping[str, Any]) -> str:
    """The reconstruct's own recall in one line: its policy, the count cut, the seats and its time."""
    if not recall:
        return "-"
    policy = _map(recall.get("policy")).get("process", "?")
    parts = [
        f"policy {policy}",
        _count(_map(recall.get("order"))),
        f"seats {_seats(recall.get('reservation'))}",
    ]
    cue = _cue(recall)
    if cue:
        parts.append(f"time cue {cue}")
    total = _map(recall.get("timing_ms")).get("total")
    if total is not None:
        parts.append(f"total {_num(total, 1)} ms")
    return "; ".join(parts)


def _header(trace: Mapping[str, Any], received: float | None, what: str = "recall") -> str:
    scope = trace_scope(trace)
    when = "" if received is None else " " + time.strftime("%H:%M:%S", time.localtime(received))
    parts = [f"agent {scope.get('agent_id', '?')!s}"]
    for key, label in (("project_id", "project"), ("channel", "channel"), ("source_id", "source")):
        value = scope.get(key)
        if value:
            parts.append(f"{label} {value}")
    version = trace.get("trace_version")
    tail = f"  (trace v{version})" if version is not None else ""
    return f"── {what}{when}  {'  '.join(parts)}{tail}"


def _line(label: str, text: str) -> str:
    return f"   {label:<9}{text}"


def _arms(arms: Mapping[str, Any]) -> list[str]:
    if not arms:
        return [_line("arms", "none ran")]
    lines = []
    for n, (name, rows) in enumerate(arms.items()):
        listed = _rows(rows)
        top = ", ".join(f"{_map(r).get('ref', '?')} {_num(_map(r).get('raw'))}" for r in listed[:_TOP])
        more = f", +{len(listed) - _TOP}" if len(listed) > _TOP else ""
        shown = f"  [{top}{more}]" if listed else ""
        lines.append(_line("arms" if n == 0 else "", f"{name} {len(listed)}{shown}"))
    return lines


def _fusion(fusion: object) -> list[str]:
    rows = _rows(fusion)
    if not rows:
        return []
    top = ", ".join(f"{_map(r).get('ref', '?')} {_num(_map(r).get('score'))}" for r in rows[:_TOP])
    return [_line("fusion", f"{len(rows)} candidate(s)  [{top}]")]


def _gate(gate: Mapping[str, Any]) -> str:
    if not gate:
        return "-"
    head = [f"origin {gate.get('origin', '?')}"]
    if gate.get("signal") is not None:
        head.append(f"signal {gate['signal']}")
    threshold = gate.get("threshold", gate.get("heuristic_min"))
    if threshold is not None:
        head.append(f"threshold {_num(threshold)}")
    if gate.get("calibrated") is not None:
        head.append(f"calibrated {_num(gate['calibrated'])}")
    head.append(f"pool {gate.get('pool', '?')}")
    decisions = [_map(d) for d in _rows(gate.get("decisions"))]
    passed = sum(1 for d in decisions if d.get("passed"))
    dropped = [d for d in decisions if not d.get("passed")]
    text = ", ".join(head) + f": {passed} passed, {len(dropped)} dropped"
    if dropped:
        why = collections.Counter(str(d.get("reason") or d.get("signal") or "?") for d in dropped)
        text += " (" + ", ".join(f"{reason}: {n}" for reason, n in why.most_common()) + ")"
        text += "  [" + _refs([d.get("ref") for d in dropped]) + "]"
    if gate.get("gate_fallback"):
        text += "  fallback"
    return text


def _autocut(autocut: Mapping[str, Any]) -> str:
    if not autocut:
        return "-"
    dropped = _rows(autocut.get("dropped"))
    if not autocut.get("fired") and not dropped:
        return "did not fire"
    kept = autocut.get("kept")
    text = f"fired: dropped {len(dropped)}" + ("" if kept is None else f", kept {kept}")
    return text + (f"  [{_refs(dropped)}]" if dropped else "")


def _count(order: Mapping[str, Any]) -> str:
    if not order:
        return "-"
    cut = _rows(order.get("cut_by_count"))
    before = _rows(order.get("before_cut"))
    kept = len(before) - len(cut)
    text = f"limit {order.get('limit', '?')}: {len(before)} ranked, cut {len(cut)}, {kept} kept"
    return text + (f"  [{_refs(cut)}]" if cut else "")


def _seats(seats: object) -> str:
    rows = [_map(s) for s in _rows(seats)]
    if not rows:
        return "none"
    return ", ".join(f"{s.get('kind', '?')} {s.get('ref', '?')}" for s in rows)


def _coverage(coverage: Mapping[str, Any]) -> str:
    parts = _rows(coverage.get("parts"))
    uncovered = _rows(coverage.get("uncovered"))
    text = f"{len(parts)} part(s): {len(parts) - len(uncovered)} covered, {len(uncovered)} uncovered"
    if coverage.get("parts_omitted"):
        text += f" (+{coverage['parts_omitted']} omitted)"
    return text


def _timing(timing: Mapping[str, Any]) -> str:
    if not timing:
        return "-"
    total = timing.get("total")
    steps = [f"{name} {_num(ms, 1)}" for name, ms in timing.items() if name != "total"]
    text = ", ".join(steps)
    if total is not None:
        text = f"total {_num(total, 1)} ms" + (f" ({text})" if text else "")
    return text


# ------------------------------------------------------------------------------------------ helpers


def trace_scope(trace: Mapping[str, Any]) -> Mapping[str, Any]:
    """The trace's scope; a reconstruct's is its recall's, which it reads within."""
    return _map(trace.get("scope")) or _map(_map(trace.get("recall")).get("scope"))


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _rows(value: object) -> list[Any]:
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return list(value)
    return []


def _refs(refs: Sequence[object]) -> str:
    shown = [str(_map(r).get("ref", "?")) if isinstance(r, Mapping) else str(r) for r in refs[:_TOP]]
    more = f", +{len(refs) - _TOP}" if len(refs) > _TOP else ""
    return ", ".join(shown) + more


def _num(value: object, places: int = 4) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "-" if value is None else str(value)
    return f"{value:.{places}f}" if isinstance(value, float) else str(value)
