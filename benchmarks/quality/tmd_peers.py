"""TMD side by side: what the ``tmd`` command adds to the quality harness's LoCoMo path.

Run from the repository root::

    .venv/bin/python -m benchmarks quality tmd --systems bm25,dense,rrf,cpersona,cpersona-2.6.14,mem0
                                               [--quick] [--store-cache] [--no-cue]

The run itself is the harness's (:func:`benchmarks.quality.__main__.run_benchmark`): every system indexes
each TMD log as one scope (a turn is one memory, stamped with its own time, see :mod:`.tmd`), every
question of ``content_time_qs`` and of the ``time_qs`` sets searches only its own log at depth k, and the
same honesty checks run (dense against a direct cosine; mem0 with ``infer=False`` against that cosine and
against dense). This module supplies the TMD parts:

* :data:`TMD_LAYOUT`: tables by question set, one row for all eleven ``time_qs`` sets together and one per
  set, then overall; the chart's panels are overall, ``content_time_qs`` and all ``time_qs``;
* the report's TMD sections (data, questions, the method notes).

The time cue's runs and report section live in :mod:`.cue_peers`, shared with the LoCoMo side by side.
``--quick`` runs log
:data:`QUICK_LOG` only and writes ``quality_tmd_peers_quick.*``; the full run writes
``benchmarks/results/quality_tmd_peers.md`` and ``quality_tmd_peers.png``.
"""

from __future__ import annotations

import collections
import statistics
from typing import TYPE_CHECKING, Final

from benchmarks.quality import cue_bench
from benchmarks.quality.layout import Layout
from benchmarks.quality.tmd import CONTENT_SET, TIME_SETS

if TYPE_CHECKING:
    from collections.abc import Hashable, Sequence

    from benchmarks.quality.tmd import TMD, TmdQuestion

__all__ = [
    "QUICK_LOG",
    "TMD_LAYOUT",
    "data_lines",
    "method_notes",
]

QUICK_LOG: Final = cue_bench.QUICK_TMD_LOG
TIME_GROUP: Final = "time_qs"


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
