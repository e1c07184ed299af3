"""TMD side by side: what the ``tmd`` command adds to the quality harness's LoCoMo path.

Run from the repository root::

    .venv/bin/python -m benchmarks.quality tmd --systems bm25,dense,rrf,cpersona,cpersona-2.6.14,mem0
                                               [--quick] [--store-cache] [--no-cue]

The run itself is the harness's (:func:`benchmarks.quality.__main__.run_benchmark`): every system indexes
each TMD log as one scope (a turn is one memory, stamped with its own time, see :mod:`.tmd`), every
question of ``content_time_qs`` and of the ``time_qs`` sets searches only its own log at depth k, and the
same honesty checks run (dense against a direct cosine; mem0 with ``infer=False`` against that cosine and
against dense). This module supplies the TMD parts:

* :data:`TMD_LAYOUT`: tables by question set, one row for all eleven ``time_qs`` sets together and one per
  set, then overall; the chart's panels are overall, ``content_time_qs`` and all ``time_qs``;
* :class:`CueRuns`, the harness's ``after_run`` hook: while a system that takes a time period is still
  open after its plain run, it asks TMD's cued questions three ways with :mod:`.cue_bench`'s runs (no cue
  / cue / no cue with as many extra rows as the cue's seats), at ``limit`` 10 as that benchmark does;
* the report's TMD sections (data, questions, the cue comparison, the method notes).

Which systems take a period, and where that was checked, is :data:`PERIOD_SUPPORT`. ``--quick`` runs log
:data:`QUICK_LOG` only and writes ``quality_tmd_peers_quick.*``; the full run writes
``benchmarks/results/quality_tmd_peers.md`` and ``quality_tmd_peers.png``.
"""

from __future__ import annotations

import collections
import statistics
from typing import TYPE_CHECKING, Any, Final

from benchmarks.peers import PeerError
from benchmarks.quality import cue_bench
from benchmarks.quality.layout import Layout
from benchmarks.quality.tmd import CONTENT_SET, TIME_SETS

if TYPE_CHECKING:
    from collections.abc import Hashable, Mapping, Sequence

    from benchmarks.quality.tmd import TMD, TmdQuestion

__all__ = [
    "CUE_SYSTEMS",
    "PERIOD_SUPPORT",
    "QUICK_LOG",
    "TMD_LAYOUT",
    "CueRuns",
    "cue_sections",
    "data_lines",
    "method_notes",
]

QUICK_LOG: Final = cue_bench.QUICK_TMD_LOG
TIME_GROUP: Final = "time_qs"
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


def _set_groups(question: TmdQuestion) -> tuple[Hashable, ...]:
    if question.set_name == CONTENT_SET:
        return (CONTENT_SET,)
    return (TIME_GROUP, question.set_name)


TMD_LAYOUT: Final = Layout(
    groups=(CONTENT_SET, TIME_GROUP, *TIME_SETS),
    labels={
        CONTENT_SET: "content_time_qs (content and a time)",
        TIME_GROUP: f"time_qs, all {len(TIME_SETS)} sets",
        **{name: f"time_qs/{name}" for name in TIME_SETS},
    },
    group_of=_set_groups,
    chart_groups=(CONTENT_SET, TIME_GROUP),
    chart_title="TMD turn-level recall@k (content_time_qs and time_qs, no time cue)",
    row_name="question set",
)


# ------------------------------------------------------------------------------------------------ the cue


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


def cue_sections(runs: CueRuns | None, systems: Sequence[str]) -> list[str]:
    """The cue comparison: no cue / cue / extra for each system that takes a period, set by set."""
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
    for name, error in runs.errors.items():
        lines.append(f"- **{name}: cue runs not done**: {error}")
    if runs.errors:
        lines.append("")
    if not runs.outcomes:
        return [*lines, "No system ran the cue.", ""]
    counts = runs.selection.counts
    cued = len(runs.selection.questions)
    lines += [
        f"Questions: the {cued} of {sum(c.get('items', 0) for c in counts.values())} TMD questions the "
        "cue parser (`benchmarks/quality/cues.py`, question text and the log's last turn as now) gives a "
        "period; the session-number sets and the content questions that name no time get none. Each is "
        "asked at `limit` 10 without the cue, with it (the same absolute `time_cue` for both systems), and "
        "without it at `limit` 10 + the seats the cued answer used (*extra*), as in `quality_cue.md`. "
        "The headline is NDCG over every returned row; a cue *helps* on a set when it beats both no cue "
        "and extra. Policy each system reported: "
        + "; ".join(f"{name} `{_policy(found)}`" for name, found in runs.outcomes.items())
        + ".",
        "",
        "| set | n | system | no cue | cue | extra | cue - no cue | up / down vs no cue (p) "
        "| up / down vs extra (p) | cue beats both |",
        "|---|---:|---|---:|---:|---:|---:|---|---|---|",
    ]
    by_system = {name: cue_bench.summaries(found) for name, found in runs.outcomes.items()}
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
                m = s.means[arm]
                lines.append(
                    f"| {set_name} | {name} | {arm} | {m['ndcg@10']:.4f} | {m['recall@10']:.4f} "
                    f"| {m['recall_rows']:.4f} | {m['any_rows']:.4f} | {m['rows']:.1f} |"
                )
    lines += [
        "",
        "#### Honesty of the cue runs",
        "",
        "| system | set | same returned rows as no cue (seats aside) | cue seats used | rows moved "
        "| not used: recent-only (harness / system) |",
        "|---|---|---|---:|---:|---|",
    ]
    for name, sums in by_system.items():
        for s in sums:
            if s.subset:
                continue
            lines.append(
                f"| {name} | {s.name} | {cue_bench._frac(s.same_rows, s.n)} | {s.seated} | {s.moved} "
                f"| {s.ignored_harness} / {s.ignored_engine} |"
            )
    lines += [
        "",
        "- Both systems promise that a cue reorders the rows the plain recall returns and adds seats after "
        "them, never other rows; the first column checks that on every cued question.",
        "- The question order, the alternation of no cue and cue, and the five warm-up questions are "
        "`cue_bench.run_questions`'s; times are not compared here (the `cue` command measures the cue's "
        "cost for cpersona).",
        "",
    ]
    return lines


# ------------------------------------------------------------------------------------------------ report


def data_lines(data: TMD, *, depth: int, quick: bool) -> list[str]:
    """The report's data line and its section on the questions."""
    turns = sum(len(conv.turns) for conv in data.conversations)
    logs = ", ".join(str(conv.log) for conv in data.conversations)
    lines = [
        f"- data: `{data.path.name}/` (ConversationData and TestData), sha256 over the files read "
        f"`{data.digest[:16]}…`; {len(data.conversations)} log(s) ({logs}), {turns} turns"
        + (f" (**--quick: log {QUICK_LOG} only, not comparable with the full run**)" if quick else ""),
        f"- depth asked of every system: k = {depth}; protocol: `shared/reference/benchmark-protocol.md`",
        "",
        "## Questions",
        "",
        "| question set | questions | mean gold turns | recall@10 ceiling |",
        "|---|---:|---:|---:|",
    ]
    by_set: dict[str, list[TmdQuestion]] = collections.defaultdict(list)
    for q in data.questions:
        by_set[q.set_name].append(q)
    for name in data.sets:
        found = by_set.get(name, [])
        if not found:
            continue
        gold = [len(q.gold) for q in found]
        # What a perfect ranking would score: |G| above 10 caps recall@10 at 10 / |G|.
        ceiling = statistics.fmean(min(10, g) / g for g in gold)
        lines.append(f"| {name} | {len(found)} | {statistics.fmean(gold):.1f} | {ceiling:.3f} |")
    lines += [
        "",
        f"- used: **{len(data.questions)}** questions; gold ids naming no turn of their log: "
        f"{data.unknown_gold}; questions left with no gold (dropped): {len(data.dropped)}",
        "- each item lists several wordings; the first is asked. The `ambiguous_time_qs` sets are not "
        "loaded: each of their questions is a short dialogue whose time must first be resolved from the "
        "exchange, a reader model's task (see `benchmarks/quality/tmd.py`).",
        '- the time sets ask what was said in a period ("what did we talk about last Tuesday?"): their gold '
        "is every turn of that period, so recall@10 is capped well below 1 (the ceiling column) and "
        "NDCG@10 is the fairer figure there.",
        "",
    ]
    return lines


def method_notes(system_notes: Sequence[str]) -> list[str]:
    """TMD's method section: its units, then the notes every dataset shares."""
    return [
        "## Method and choices",
        "",
        "- **Units**: one turn = one unit, content `<speaker>: <text>` (an image turn appends "
        "` [image: <blip_caption>]`), unit id = the turn's `response_number` (the id the gold lists "
        "use), timestamp = the turn's own `date_time` read as UTC. One index (scope) per log, `tmd-<n>`; "
        "a question searches only its own log. Ingest in response-number order, which is time order.",
        *system_notes,
        "",
    ]
