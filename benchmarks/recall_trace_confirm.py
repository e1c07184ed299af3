"""Confirm why a recall missed its gold, from the recall trace alone (reference §5).

``confirm`` reads one trace (``trace_version`` 1) and the refs of the records that should have been
returned, plus optional reader evidence, and names the first failure whose condition holds:
``CANDIDATE_MISS`` (no arm reached the gold), ``FILTER_DROP`` (the gate or autocut removed it),
``RANKING_MISS`` (it fell below the count cut or the seats), ``RECONSTRUCTION_LOSS`` (it was returned
but the reader's quotes are not in what was shown), ``AGENT_MISUSE`` (shown and quoted, answered
wrong) or ``UNATTRIBUTED``; ``None`` means no failure.

As a command it reads a JSON-lines file, one ``{"trace", "gold", "shown_text"?, "quotes"?,
"correct"?}`` per line, and prints how many lines got each code (``None`` counted as ``OK``)::

    python -m benchmarks recall_trace_confirm TRACES.jsonl [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

__all__ = [
    "AGENT_MISUSE",
    "CANDIDATE_MISS",
    "CODES",
    "FILTER_DROP",
    "RANKING_MISS",
    "RECONSTRUCTION_LOSS",
    "UNATTRIBUTED",
    "confirm",
    "count_codes",
    "main",
]

CANDIDATE_MISS = "CANDIDATE_MISS"
FILTER_DROP = "FILTER_DROP"
RANKING_MISS = "RANKING_MISS"
RECONSTRUCTION_LOSS = "RECONSTRUCTION_LOSS"
AGENT_MISUSE = "AGENT_MISUSE"
UNATTRIBUTED = "UNATTRIBUTED"
CODES = (CANDIDATE_MISS, FILTER_DROP, RANKING_MISS, RECONSTRUCTION_LOSS, AGENT_MISUSE, UNATTRIBUTED)
OK = "OK"

# Arms whose rows reach the response only through seats, never through fusion and the count cut.
_SEAT_ONLY_ARMS = ("block", "cue")
_SEAT_ONLY_PREFIX = "cue_stage_"


def _normalise(text: str) -> str:
    """Whitespace collapsed to single spaces, ends trimmed."""
    return " ".join(text.split())


def _seat_only(arm: str) -> bool:
    return arm in _SEAT_ONLY_ARMS or arm.startswith(_SEAT_ONLY_PREFIX)


def confirm(
    trace: Mapping[str, Any],
    gold_refs: Iterable[str],
    *,
    shown_text: str | None = None,
    quotes: Sequence[str] | None = None,
    correct: bool | None = None,
) -> str | None:
    """The failure code for one recall, or ``None`` when nothing failed.

    ``gold_refs`` are record refs (``mem:<id>``, ``ep:<id>``, or ``"profile"`` for the profile row).
    ``shown_text`` and ``quotes`` together are the reader evidence: what the reader was shown and the
    passages it quoted; ``correct`` is whether its answer was right (``None``: not judged).
    """
    gold = set(gold_refs)
    if not gold:
        return UNATTRIBUTED

    arms: Mapping[str, Sequence[Mapping[str, Any]]] = trace.get("arms") or {}
    reached_by = {name: {row["ref"] for row in rows} & gold for name, rows in arms.items()}
    if not any(reached_by.values()):
        return CANDIDATE_MISS

    order = trace.get("order") or {}
    limit = int(order.get("limit", 0))
    kept = {entry["ref"] for entry in (order.get("before_cut") or [])[:limit]}
    reserved = {seat["ref"] for seat in trace.get("reservation") or []}
    if not gold & (kept | reserved):
        return _why_not_returned(trace, gold, order, reached_by)

    if shown_text is not None and quotes is not None:
        shown = _normalise(shown_text)
        if not any(_normalise(quote) in shown for quote in quotes):
            return RECONSTRUCTION_LOSS
        return AGENT_MISUSE if correct is False else None
    return UNATTRIBUTED if correct is False else None


def _why_not_returned(
    trace: Mapping[str, Any],
    gold: set[str],
    order: Mapping[str, Any],
    reached_by: Mapping[str, set[str]],
) -> str:
    decisions = (trace.get("gate") or {}).get("decisions") or []
    gold_decisions = [d for d in decisions if d["ref"] in gold]
    passed = {d["ref"] for d in gold_decisions if d["passed"]}
    if gold_decisions and not passed:
        return FILTER_DROP
    dropped = set((trace.get("autocut") or {}).get("dropped") or [])
    if passed and passed <= dropped:
        return FILTER_DROP
    if gold & set(order.get("cut_by_count") or []):
        return RANKING_MISS
    if any(refs for name, refs in reached_by.items() if _seat_only(name)):
        return RANKING_MISS
    return UNATTRIBUTED


def count_codes(lines: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """How many lines got each code, ``None`` counted as ``OK``; every code is listed, zeros included."""
    counts: Counter[str] = Counter()
    for line in lines:
        code = confirm(
            line["trace"],
            line.get("gold") or [],
            shown_text=line.get("shown_text"),
            quotes=line.get("quotes"),
            correct=line.get("correct"),
        )
        counts[OK if code is None else code] += 1
    return {code: counts.get(code, 0) for code in (*CODES, OK)}


def _read_jsonl(path: str) -> Iterable[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        for number, raw in enumerate(handle, 1):
            if not raw.strip():
                continue
            try:
                yield json.loads(raw)
            except json.JSONDecodeError as exc:
                raise SystemExit(f"{path}:{number}: not JSON: {exc}") from exc


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Count failure codes over recall traces (reference §5).")
    parser.add_argument("traces", help='JSON lines: {"trace", "gold", "shown_text"?, "quotes"?, "correct"?}')
    parser.add_argument("--json", action="store_true", help="print the counts as one JSON object")
    args = parser.parse_args(argv)
    counts = count_codes(_read_jsonl(args.traces))
    if args.json:
        sys.stdout.write(json.dumps(counts) + "\n")
    else:
        width = max(len(code) for code in counts)
        for code, n in counts.items():
            sys.stdout.write(f"{code:<{width}}  {n}\n")
        sys.stdout.write(f"{'total':<{width}}  {sum(counts.values())}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
