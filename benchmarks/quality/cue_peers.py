"""The time cue inside a side-by-side run, for every system whose recall takes a time period.

Both side-by-side commands of :mod:`benchmarks.quality.__main__` (``locomo`` and ``tmd``, and ``all``,
which runs the two) hand a :class:`CueRuns` to the harness as its ``after_run`` hook. While a system that
takes a period (:data:`CUE_SYSTEMS`) is still open after its plain run, the hook asks the dataset's cued
questions (:func:`.cue_bench.locomo_questions` or :func:`.cue_bench.tmd_questions`) three ways with
:func:`.cue_bench.run_questions`: no cue, cue, and no cue with as many extra rows as the cue's seats, at
``limit`` 10 as the ``cue`` command does. :func:`cue_sections` writes the comparison for the report: the
same table for every dataset, NDCG over the returned rows, and the seed's rule for saying a cue helps.

:data:`PERIOD_SUPPORT` says which systems take a period and where that was checked; the others are
listed as taking none.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

from benchmarks.peers import PeerError
from benchmarks.quality import cue_bench
from benchmarks.quality.cues import SAID_AFTER_DAYS

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

__all__ = ["CUE_SYSTEMS", "PERIOD_SUPPORT", "CueRuns", "cue_sections", "write_answers"]

CUE_SYSTEMS: Final = ("cpersona", "cpersona-2.6.14")
"""The systems whose recall takes a time period: they get the cue comparison."""

PERIOD_SUPPORT: Final[Mapping[str, str]] = {
    "cpersona": "takes `time_cue` (`Engine.recall(..., time_cue=...)`; probed with an absolute cue before "
    "the run, as the `cue` command does)",
    "cpersona-2.6.14": "takes `time_cue`: `memory_handlers.do_recall(..., time_cue=...)` and its reader "
    "`cpersona/cue.py` (policy `cued-v0.3`: after/before or ago, with a confidence) in the installed "
    "package (`benchmarks/.cache/peers/cpersona-2.6.14/venv/.../site-packages/cpersona/`); the worker reads "
    "the parameter off `do_recall`'s signature at start and the report takes the policy from its answers",
    "bm25": "takes no period: a ranking over the text alone",
    "dense": "takes no period: a ranking over the vectors alone",
    "rrf": "takes no period: a fusion of bm25 and dense",
    "mem0": "takes no period: in `mem0ai` 2.2.1 (`mem0/memory/main.py` in its venv) `Memory.search`'s "
    "`reference_date` is documented as platform-only and raises `ValueError` in the open-source package, "
    "and its metadata `filters` keep or drop rows (a hard filter on stored fields), which is not a cue "
    "that ranks inside the answer",
}


class CueRuns:
    """The time-cue runs, as :func:`~benchmarks.quality.__main__.run_benchmark`'s ``after_run`` hook.

    For each system of :data:`CUE_SYSTEMS` that has just answered the plain questions, ask every cued
    question of ``selection`` three times (:func:`.cue_bench.run_questions`) on the same open system. A
    system that turns out not to take the cue, or a peer that fails during these runs, is recorded in
    :attr:`errors` with the exact message and keeps its plain figures.
    """

    def __init__(
        self, selection: cue_bench.Selection, *, progress: bool, unsupported: Mapping[str, str] | None = None
    ) -> None:
        self.selection = selection
        self.progress = progress
        self.outcomes: dict[str, list[cue_bench.Outcome]] = {}
        self.errors: dict[str, str] = dict(unsupported or {})

    async def __call__(self, system: Any, run: Any) -> None:
        name = system.name
        if name not in CUE_SYSTEMS or name in self.errors or not self.selection.questions:
            return
        if name == "cpersona":
            ask = cue_bench.engine_ask(system, await system.engine())
        else:
            if system.takes_time_cue is not True:
                self.errors[name] = (
                    f"the running release has no time_cue parameter on its recall "
                    f"(worker hello: {system.hello.get('time_cue')!r})"
                )
                return
            ask = cue_bench.peer_ask(system)
        try:
            self.outcomes[name] = await cue_bench.run_questions(
                ask, self.selection.questions, progress=self.progress, desc=f"cue {name}"
            )
        except PeerError as exc:
            self.errors[name] = str(exc)


def _policy(outcomes: Sequence[cue_bench.Outcome]) -> str:
    said = {str((o.cue.time_cue or {}).get("policy")) for o in outcomes if o.cue.time_cue}
    return ", ".join(sorted(said)) or "-"


def _which_questions(selection: cue_bench.Selection) -> str:
    """The report's sentence on which of the dataset's questions carry a cue, and why the others do not."""
    counts = selection.counts
    cued = len(selection.questions)
    total = sum(c.get("items", 0) for c in counts.values())
    parser = "the cue parser (`benchmarks/quality/cues.py`)"
    if selection.dataset == "locomo":
        return (
            f"the {cued} of {total} non-adversarial LoCoMo questions whose text names a date, month or year "
            f"as {parser} reads it, with the last session as now (`cue_bench.locomo_questions`, the set "
            "`quality_cue.md` uses). LoCoMo stamps a turn with its session's time, when a thing was *said*, "
            f'so each period ends {SAID_AFTER_DAYS} days later; relative phrases ("last week") are left '
            "out, being relative to the session they were said in, not to the last one. The rows "
            "`LoCoMo/<kind>` split the same questions by the kind of cue read (and its confidence)"
        )
    return (
        f"the {cued} of {total} TMD questions {parser}, question text and the log's last turn as now, "
        "gives a period; the session-number sets and the content questions that name no time get none"
    )


def cue_sections(
    runs: CueRuns | None, systems: Sequence[str], *, not_run: Mapping[str, str] | None = None
) -> list[str]:
    """The cue comparison: no cue / cue / extra for each system that takes a period, set by set.

    ``not_run`` is the harness's list of systems that did not run at all (their exact error); a system
    that takes a period and is in it gets the same error here.
    """
    lines = [
        "## Time cue: no cue / cue / the same number of extra uncued rows",
        "",
        "Which systems take a time period, and where that was checked:",
        "",
    ]
    lines += [f"- **{name}**: {PERIOD_SUPPORT.get(name, 'not checked')}" for name in systems]
    lines.append("")
    if runs is None:
        return [*lines, "Not run (`--no-cue`).", ""]
    errors = dict(runs.errors)
    for name in systems:
        if name in CUE_SYSTEMS and name in (not_run or {}) and name not in errors:
            errors[name] = f"the system did not run: {(not_run or {})[name]}"
    for name, error in errors.items():
        lines.append(f"- **{name}: cue runs not done**: {error}")
    if errors:
        lines.append("")
    if not runs.selection.questions:
        return [*lines, "No question of this data gets a cue: nothing to compare.", ""]
    if not runs.outcomes:
        return [*lines, "No system ran the cue.", ""]
    lines += [
        f"Questions: {_which_questions(runs.selection)}. Each is asked at `limit` 10 without the cue, with "
        "it (the same absolute `time_cue` for both systems), and without it at `limit` 10 + the seats the "
        "cued answer used (*extra*), as in `quality_cue.md`. The headline is NDCG over every returned row "
        "(`cue_bench.score`); a cue *helps* on a set when it beats both no cue and extra. Policy each "
        "system reported: "
        + "; ".join(f"{name} `{_policy(found)}`" for name, found in runs.outcomes.items())
        + ".",
        "",
        "| set | n | system | no cue | cue | extra | cue - no cue | up / down vs no cue (p) "
        "| up / down vs extra (p) | cue beats both |",
        "|---|---:|---|---:|---:|---:|---:|---|---|---|",
    ]
    by_system = {name: cue_bench.summaries(found, locomo_kinds=True) for name, found in runs.outcomes.items()}
    order = [s.name for s in next(iter(by_system.values()))]
    for set_name in order:
        for name, sums in by_system.items():
            s = next((x for x in sums if x.name == set_name), None)
            if s is None:
                continue
            m = s.means
            lines.append(
                f"| {set_name} | {s.n} | {name} "
                f"| {m['no cue']['ndcg_rows']:.4f} | {m['cue']['ndcg_rows']:.4f} "
                f"| {m['extra']['ndcg_rows']:.4f} | {m['cue']['ndcg_rows'] - m['no cue']['ndcg_rows']:+.4f} "
                f"| {s.up} / {s.down} ({cue_bench._sign_p(s.up, s.down):.2g}) "
                f"| {s.up_extra} / {s.down_extra} ({cue_bench._sign_p(s.up_extra, s.down_extra):.2g}) "
                f"| {'yes' if s.verdict else 'no'} |"
            )
    lines += ["", "Verdicts (the seed's rule: the cue must beat both no cue and extra):", ""]
    lines += [
        f"- **{name}**, {s.name} {cue_bench.verdict_line(s)}"
        for name, sums in by_system.items()
        for s in sums
        if not s.subset
    ]
    lines += [
        "",
        "#### The same runs, other measures (means per question)",
        "",
        "| set | system | run | NDCG@10 | recall@10 | recall (rows) | any hit (rows) | rows |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for set_name in order:
        for name, sums in by_system.items():
            s = next((x for x in sums if x.name == set_name), None)
            if s is None or s.subset:
                continue
            for arm in cue_bench.ARMS:
                a = s.means[arm]
                lines.append(
                    f"| {set_name} | {name} | {arm} | {a['ndcg@10']:.4f} | {a['recall@10']:.4f} "
                    f"| {a['recall_rows']:.4f} | {a['any_rows']:.4f} | {a['rows']:.1f} |"
                )
    lines += [
        "",
        "#### Honesty of the cue runs",
        "",
        "| system | set | same returned rows as no cue (seats aside) | cue seats used "
        "| places changed (harness) | rows moved (system's count) "
        "| not used: recent-only (harness / system) |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    for name, sums in by_system.items():
        for s in sums:
            if s.subset:
                continue
            lines.append(
                f"| {name} | {s.name} | {cue_bench._frac(s.same_rows, s.n)} | {s.seated} | {s.reordered} "
                f"| {s.moved} | {s.ignored_harness} / {s.ignored_engine} |"
            )
    lines += [
        "",
        "- Both systems promise that a cue reorders the rows the plain recall returns and adds seats after "
        "them, never other rows; the first column checks that on every cued question.",
        "- *Places changed* counts, over the cued questions, the places of the answer (seats aside) that "
        "hold another row with the cue than without it, the same count for both systems. *Rows moved* is "
        "each system's own `time_cue.moved`, which the two define differently: cpersona counts the rows the "
        "cue lifted, 2.6.14 every row whose place changed (lifted or pushed down), so that column does not "
        "compare the systems.",
        "- The question order, the alternation of no cue and cue, and the five warm-up questions are "
        "`cue_bench.run_questions`'s; times are not compared here (the `cue` command measures the cue's "
        "cost for cpersona).",
        "",
    ]
    return lines


def write_answers(runs: CueRuns | None, path: Path) -> Path | None:
    """Keep every cued question's three answers, system by system, for reading the figures afterwards."""
    if runs is None or not runs.outcomes:
        return None
    answers = {name: cue_bench._raw(found) for name, found in runs.outcomes.items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(answers), encoding="utf-8")
    return path
