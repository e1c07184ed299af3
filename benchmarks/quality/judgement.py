"""The loop's own judgement (seed §1.3): what the cue loop suspected, beside what the trace confirms.

Run from the repository root::

    .venv/bin/python -m benchmarks quality judgement [--sets tmd,locomo] [--quick]

For every cued question of the time-cue benchmark (:mod:`.cue_bench` selects them, the same TMD and LoCoMo
questions with the same cues), cpersona answers once, at ``limit`` 10 with the cue and ``trace: true``.
From the trace alone it reads what the loop **suspected** (``suspected``: ``CANDIDATE_MISS`` when the
cue's period held no candidate, or nothing) and what it **did** (widened the period, found rows after
widening, stopped at a limit: ``stages`` and ``budget.stop``). The trace and the question's gold refs
then go to :func:`benchmarks.recall_trace_confirm.confirm` for the **confirmed** code.

The server only ever suspects ``CANDIDATE_MISS`` (reference §5), so the headline compares the two on that
code: the loop's judgement *matches* when it suspected ``CANDIDATE_MISS`` and the confirmation is
``CANDIDATE_MISS``, or it suspected nothing and the confirmation is anything else. A question whose cue
the harness leaves out (the recent-only rule at the data's now, as :mod:`.cue_bench` does) runs no loop:
it is counted and kept out of the headline.

The report is ``benchmarks/results/loop_judgement.md`` (``--quick``: ``loop_judgement_quick.md``); every
question's trace and gold refs go to ``benchmarks/.cache/loop_judgement[_quick]_traces.jsonl``, the
input format of ``python -m benchmarks recall_trace_confirm``, so the confirmed counts can be recounted.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio
from tqdm import tqdm

from benchmarks import harness
from benchmarks.harness import git_commit
from benchmarks.quality import cue_bench
from benchmarks.quality.embed_cache import DEFAULT_CACHE_DIR
from benchmarks.quality.locomo import DEFAULT_DATA
from benchmarks.quality.tmd import DEFAULT_TMD
from benchmarks.recall_trace_confirm import CANDIDATE_MISS, CODES, OK, confirm

if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterable, Mapping, Sequence

__all__ = [
    "NONE",
    "NOT_RUN",
    "Agreement",
    "Judged",
    "add_arguments",
    "agreement",
    "judge",
    "loop_reading",
    "render_tables",
    "run_command",
    "tabulate",
]

NONE: Final = "none"
"""The loop suspected nothing: the cue's period held candidates."""
NOT_RUN: Final = "no loop"
"""No cue reached the loop (left out by the recent-only rule, or ignored by the engine)."""
LEFT_OUT: Final = "cue left out (recent-only at the data's now)"
CONFIRMED_COLUMNS: Final = (OK, *CODES)
STEM: Final = "loop_judgement"
WATCHED: Final = ("src", "benchmarks/quality", "benchmarks/recall_trace_confirm.py")


@dataclasses.dataclass(frozen=True, slots=True)
class Judged:
    """One question: what the loop suspected and did, and the code the confirmation tool gives."""

    dataset: str
    qid: str
    suspected: str
    """``CANDIDATE_MISS``, :data:`NONE` or :data:`NOT_RUN`."""
    action: str
    """What the loop did, in words (widened, then found; stopped: no wider step; ...)."""
    confirmed: str
    """A code of :data:`~benchmarks.recall_trace_confirm.CODES`, or ``OK``."""


def loop_reading(trace: Mapping[str, Any]) -> tuple[str, str]:
    """What the loop suspected and what it did, read from one recall trace (``trace_version`` 1)."""
    if trace.get("cue_ignored"):
        return NOT_RUN, "cue ignored: " + str(trace["cue_ignored"].get("reason", "?"))
    stages: Sequence[Mapping[str, Any]] = trace.get("stages") or []
    if not any("confidence" in stage for stage in stages):
        return NOT_RUN, "no cue"
    stop = (trace.get("budget") or {}).get("stop")
    suspected: Sequence[Mapping[str, Any]] = trace.get("suspected") or []
    if not suspected:
        return NONE, "stopped: " + str(stop).replace("_", " ") if stop else "the period held candidates"
    codes = {str(entry.get("code")) for entry in suspected}
    code = CANDIDATE_MISS if codes == {CANDIDATE_MISS} else "+".join(sorted(codes))
    widened = any(str(entry.get("action", "")).startswith("widen") for entry in suspected)
    if stop:
        tail = "stopped: " + str(stop).replace("_", " ")
    elif int(stages[-1].get("found") or 0) > 0:
        tail = f"found candidates in the {stages[-1].get('confidence')} period"
    else:
        tail = "ended empty"
    return code, ("widened, then " if widened else "") + tail


def judge(
    dataset: str,
    qid: str,
    trace: Mapping[str, Any] | None,
    gold_refs: Iterable[str],
    *,
    left_out: bool = False,
) -> Judged:
    """One question's row of the table (a missing trace is an unattributed recall the loop never ran).

    ``left_out``: the harness asked without the cue (the recent-only rule at the data's now).
    """
    if trace is None:
        return Judged(dataset, qid, NOT_RUN, "no trace", "UNATTRIBUTED")
    suspected, action = loop_reading(trace)
    if left_out:
        suspected, action = NOT_RUN, LEFT_OUT
    code = confirm(trace, gold_refs)
    return Judged(dataset, qid, suspected, action, OK if code is None else code)


# ------------------------------------------------------------------------------------------- tabulation


@dataclasses.dataclass(frozen=True, slots=True)
class Agreement:
    """The loop's judgement against the confirmed code, on ``CANDIDATE_MISS`` (questions with a loop)."""

    n: int
    both: int
    """Suspected and confirmed."""
    false_alarm: int
    """Suspected, not confirmed: the period was empty, yet some arm reached the gold."""
    unseen: int
    """Confirmed, not suspected: the period held candidates, and no arm reached the gold."""
    neither: int
    strict: int
    """Suspected and confirmed ``CANDIDATE_MISS``, or nothing suspected and nothing failed (``OK``)."""

    @property
    def matched(self) -> int:
        return self.both + self.neither


def agreement(judged: Iterable[Judged]) -> Agreement:
    tally: Counter[str] = Counter()
    for j in judged:
        if j.suspected == NOT_RUN:
            continue
        said, found = j.suspected != NONE, j.confirmed == CANDIDATE_MISS
        tally["n"] += 1
        tally[("both" if found else "false_alarm") if said else ("unseen" if found else "neither")] += 1
        tally["strict"] += int(found if said else j.confirmed == OK)
    return Agreement(
        tally["n"], tally["both"], tally["false_alarm"], tally["unseen"], tally["neither"], tally["strict"]
    )


def tabulate(judged: Iterable[Judged]) -> dict[tuple[str, str], Counter[str]]:
    """(suspected, action) -> confirmed code -> questions; rows in a fixed order (see :func:`_row_key`)."""
    table: dict[tuple[str, str], Counter[str]] = {}
    for j in judged:
        table.setdefault((j.suspected, j.action), Counter())[j.confirmed] += 1
    return dict(sorted(table.items(), key=lambda item: _row_key(item[0])))


def _row_key(row: tuple[str, str]) -> tuple[int, str, str]:
    suspected, action = row
    return ({NONE: 0, CANDIDATE_MISS: 1}.get(suspected, 3 if suspected == NOT_RUN else 2), suspected, action)


def _share(part: int, whole: int) -> str:
    return f"{part} ({part / whole:.0%})" if whole else str(part)


def render_tables(name: str, judged: Sequence[Judged]) -> list[str]:
    """One data set's (or the total's) table and agreement lines, as Markdown."""
    table = tabulate(judged)
    total = len(judged)
    columns = [c for c in CONFIRMED_COLUMNS if any(row[c] for row in table.values())] or [OK]
    lines = [
        f"### {name} ({total} cued questions)",
        "",
        "| suspected | what the loop did | " + " | ".join(columns) + " | all |",
        "|---|---|" + "---:|" * (len(columns) + 1),
    ]
    for (suspected, action), counts in table.items():
        cells = " | ".join(_share(counts[c], total) for c in columns)
        lines.append(f"| {suspected} | {action} | {cells} | {_share(sum(counts.values()), total)} |")
    sums = " | ".join(_share(sum(row[c] for row in table.values()), total) for c in columns)
    lines.append(f"| **all** | | {sums} | {total} |")
    a = agreement(judged)
    lines += ["", *_agreement_lines(a, total), ""]
    return lines


def _agreement_lines(a: Agreement, total: int) -> list[str]:
    if not a.n:
        return ["No question ran the loop."]
    said, found = a.both + a.false_alarm, a.both + a.unseen
    return [
        f"- **what the loop suspected matched what was confirmed: {_share(a.matched, a.n)}** of the "
        f"{a.n} questions that ran the loop ({total - a.n} ran none): suspected and confirmed "
        f"`CANDIDATE_MISS` {a.both}; neither {a.neither}; suspected only (false alarm) {a.false_alarm}; "
        f"confirmed only (unseen) {a.unseen}",
        f"- a loop that never suspected anything would match on {_share(a.n - found, a.n)}: the headline "
        "is mostly the questions where neither side says `CANDIDATE_MISS`",
        f"- of its {said} suspicions, confirmed: {_share(a.both, said)}; of the {found} confirmed "
        f"`CANDIDATE_MISS`, suspected: {_share(a.both, found)}",
        f"- strict reading (nothing suspected must mean nothing failed, `OK`): {_share(a.strict, a.n)}",
    ]


# ---------------------------------------------------------------------------------------------- running


async def _judge_selection(
    selection: cue_bench.Selection, args: argparse.Namespace
) -> tuple[list[Judged], list[dict[str, Any]], Mapping[str, Any] | None]:
    from benchmarks.quality.systems import Cpersona

    system = Cpersona(
        embedding_threads=args.threads,
        name=f"cpersona-{selection.dataset}",
        store_cache=None if args.no_store_cache else args.store_cache,
    )
    judged: list[Judged] = []
    lines: list[dict[str, Any]] = []
    try:
        await system.preload(selection.corpora)
        memory = await system.engine()
        bar = tqdm(selection.questions, desc=f"judgement {selection.dataset}", disable=args.no_progress)
        for q in bar:
            # The cue is left out where the cue benchmark leaves it out, so the two runs ask alike.
            fields = {} if q.recent_only else {"time_cue": q.cue.time_cue()}
            result = await memory.recall(
                q.question, agent_id=q.agent, limit=cue_bench.LIMIT, trace=True, **fields
            )
            gold = system.refs_of(q.agent, q.gold)
            # The judge reads the trace's JSON, as a tailer of the trace channel would.
            trace = None if result.trace is None else result.trace.model_dump(mode="json")
            judged.append(judge(selection.dataset, q.qid, trace, gold, left_out=q.recent_only))
            lines.append({"qid": q.qid, "dataset": selection.dataset, "gold": gold, "trace": trace})
    finally:
        await system.aclose()
    return judged, lines, system.cache_info


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sets", default="tmd,locomo", help="comma-separated: tmd, locomo")
    parser.add_argument("--quick", action="store_true", help="TMD log 26 and LoCoMo conv-26 only")
    parser.add_argument("--tmd", type=Path, default=DEFAULT_TMD, help="path to the TMD folder")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="path to locomo10.json")
    parser.add_argument("--out", type=Path, default=cue_bench.RESULTS_DIR, help="folder for the report")
    parser.add_argument(
        "--store-cache",
        type=Path,
        default=cue_bench.DEFAULT_STORE_CACHE,
        help="folder of cached engine stores",
    )
    parser.add_argument("--no-store-cache", action="store_true", help="build the stores afresh, keep nothing")
    parser.add_argument("--threads", type=int, default=None, help="embedding threads (default: setting)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def run_command(args: argparse.Namespace, argv: Sequence[str]) -> Path:
    """Run ``python -m benchmarks quality judgement``; returns the report's path."""
    command = harness.command("quality", argv)
    load_start = harness.load()
    # Read before the run: the code that answers is the code loaded now, whatever changes meanwhile.
    commit = git_commit(*WATCHED)
    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    began = time.perf_counter()
    selections, skipped = cue_bench.select(args, cue_bench.sets_arg(args.sets))
    if not selections:
        raise SystemExit("no data found for any set: " + "; ".join(skipped.values()))
    judged: list[Judged] = []
    traces: list[dict[str, Any]] = []
    caches: dict[str, Any] = {}
    for selection in selections:
        done, lines, cache = anyio.run(_judge_selection, selection, args)
        judged += done
        traces += lines
        caches[selection.dataset] = cache
    header = [
        f"- command: `{command}`",
        f"- date: {started}; {time.perf_counter() - began:.0f} s",
        f"- git commit: {commit}",
        f"- machine: {harness.machine(('numpy',))}",
        f"- 1-minute load average: {load_start:.2f} at start, {harness.load():.2f} at the end (other work on "
        "the same cores skews every figure)",
        *(f"- **{name} not run**: {reason}" for name, reason in skipped.items()),
        *(f"- {name} store: {_cache_line(cache)}" for name, cache in caches.items()),
    ]
    report = render(judged, header, quick=args.quick)
    stem = STEM + ("_quick" if args.quick else "")
    args.out.mkdir(parents=True, exist_ok=True)
    path: Path = args.out / f"{stem}.md"
    path.write_text(report, encoding="utf-8")
    raw = DEFAULT_CACHE_DIR / f"{stem}_traces.jsonl"
    raw.parent.mkdir(parents=True, exist_ok=True)
    raw.write_text("".join(json.dumps(line) + "\n" for line in traces), encoding="utf-8")
    print(report)
    print(f"wrote {path} (traces and gold: {raw})")
    return path


def _cache_line(cache: Mapping[str, Any] | None) -> str:
    if not cache:
        return "built in this run, not cached"
    how = "from the store cache" if cache.get("hit") else "built and cached in this run"
    return f"{how} (`{cache.get('key')}`)"


def render(judged: Sequence[Judged], header: Sequence[str], *, quick: bool) -> str:
    """The whole report: header, method, the total's table first, then one per data set."""
    names = {"tmd": "TMD", "locomo": cue_bench.LOCOMO_SET}
    datasets = list(dict.fromkeys(j.dataset for j in judged))
    lines = ["# The loop's own judgement: suspected beside confirmed (seed §1.3)", "", *header]
    if quick:
        lines.append("- **--quick**: TMD log 26 and LoCoMo conv-26 only")
    lines += [
        "",
        "One recall per cued question of the time-cue benchmark (`python -m benchmarks quality cue`: the "
        "same questions, cues and scopes), at `limit` 10 with the cue and `trace: true`. *Suspected* and "
        "*what the loop did* are read from the trace (`suspected`, `stages`, `budget.stop`); *confirmed* is "
        "`benchmarks/recall_trace_confirm.py`'s `confirm(trace, gold refs)` (`OK`: a gold record was "
        "returned). Shares are of the block's cued questions.",
        "",
        "**What a mismatch means.** The loop suspects `CANDIDATE_MISS` when the cue's *period* holds no "
        "candidate; the confirmation says `CANDIDATE_MISS` when *no arm at all* reached the gold. Suspected "
        "but not confirmed: the cue named a period with nothing in it, yet the ordinary arms found the "
        "gold, so the suspicion was right about the cue and wrong about the answer. Confirmed but not "
        "suspected: the period held other records and no arm reached the gold, a miss the loop had no "
        "symptom of, since an empty period is the only one it reads.",
        "",
        "## Results",
        "",
        *render_tables("Total", judged),
    ]
    if len(datasets) > 1:
        for dataset in datasets:
            lines += render_tables(names.get(dataset, dataset), [j for j in judged if j.dataset == dataset])
    return "\n".join(lines).rstrip() + "\n"
