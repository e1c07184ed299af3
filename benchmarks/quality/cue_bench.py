"""The time-cue benchmark: does a cue read from the question move the evidence up, beyond extra rows?

Run from the repository root::

    .venv/bin/python -m benchmarks quality cue [--sets tmd,locomo] [--quick] [--parse-only]

For every question that gets a cue from :mod:`.cues` (question text and the data's "now" only), cpersona
answers three times at ``limit`` 10, each question in its own conversation's scope:

* **no cue** - the plain recall;
* **cue** - the same recall with the absolute ``time_cue``;
* **extra** - no cue, with ``limit`` 10 + the number of cue seats the cued recall used for that
  question (the seed's control: the seats themselves add places). When the cue used no seat, extra is
  the no-cue answer itself.

The seed's rule for claiming that the cue helps: it must beat **both** no cue and extra (§2.11, §3).

Question sets (see :mod:`.tmd` and :mod:`.locomo` for the units):

* **TMD** ``content_time_qs`` (content and a date: the main test) and the ``time_qs`` sets that name a
  time ("what did we discuss in October"); the session-number sets get no cue and are only counted.
  "Now" is each log's last turn; turns carry their own times, so cue periods are used as read.
* **LoCoMo**: the non-adversarial questions whose text names a date, month or year (a cue of a
  :data:`~.cues.NAMED_KINDS` kind). Relative phrases ("last week") are left out: in LoCoMo they are
  relative to the session in which something was said, not to the last session. Timestamps are session
  times, i.e. when a thing was *said*, so each period ends :data:`~.cues.SAID_AFTER_DAYS` days later.

The engine's clock is the machine's, so every cue is passed as absolute dates (protocol: "convert
relative cues to absolute dates for a system whose clock cannot be set"). The engine's recent-only rule
(seed §2.8: a cue whose own period starts within 24 hours of now is not used) therefore cannot fire by
itself; the harness applies it at the data's "now" instead, asking those questions without the cue, and
counts them.

Scores are defined in :data:`METHOD_NOTES`. Built engine stores are cached (``Cpersona`` with
``store_cache``, under ``benchmarks/.cache/stores``), so only the first run ingests. ``--quick`` (TMD log
26 and LoCoMo conv-26) writes ``quality_cue_quick.*``; the full run writes ``quality_cue.md`` and
``quality_cue.png`` to ``benchmarks/results``.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import json
import math
import statistics
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio
import anyio.to_thread
from tqdm import tqdm

from benchmarks import harness
from benchmarks.harness import percentile
from benchmarks.quality.cues import SAID_AFTER_DAYS, Cue, read_cue
from benchmarks.quality.embed_cache import DEFAULT_CACHE_DIR
from benchmarks.quality.locomo import DEFAULT_DATA, REPO_ROOT, load_locomo
from benchmarks.quality.metrics import capped_recall_at, ndcg_at, recall_at, unique
from benchmarks.quality.tmd import CONTENT_SET, DEFAULT_TMD, SETS, TIME_SETS, load_tmd

if TYPE_CHECKING:
    import argparse
    from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence

    from benchmarks.peers.cpersona_ref import CPersonaRef
    from benchmarks.quality.systems import Cpersona

    Ask = Callable[["CueQuestion", int, "Mapping[str, str] | None"], Awaitable["Answer"]]
    """One recall of a question at a limit, with a ``time_cue`` or without (``None``)."""

__all__ = [
    "LIMIT",
    "Answer",
    "CueQuestion",
    "Outcome",
    "add_arguments",
    "cue_unsupported",
    "engine_ask",
    "kind_label",
    "locomo_questions",
    "peer_ask",
    "run_command",
    "run_questions",
    "score",
    "select",
    "sets_arg",
    "summaries",
    "tmd_questions",
    "verdict_line",
]

LIMIT: Final = 10
SET_NAMES: Final = ("tmd", "locomo")
QUICK_TMD_LOG: Final = 26
QUICK_LOCOMO: Final = "conv-26"
RESULTS_DIR: Final = REPO_ROOT / "benchmarks" / "results"
DEFAULT_STORE_CACHE: Final = DEFAULT_CACHE_DIR / "stores"
_WARMUP: Final = 5
_CLAIM_MIN: Final = 60
"""Seed §3: a precision claim waits for a set with at least this many cued questions."""
LOCOMO_SET: Final = "LoCoMo (names a date, month or year)"
_SEAT_SIGNALS: Final = frozenset({"block", "cue"})

# Published figures the seed and the reference give for the same experiment (NDCG over the returned rows).
REFERENCES: Final[Mapping[str, dict[str, Any]]] = {
    "locomo": {
        "source": "CPersona 2.6.14, LoCoMo questions that name a date, month or year (protocol file)",
        "questions": "~200",
        "no cue": 0.278,
        "cue": 0.330,
        "extra": 0.288,
    },
    "tmd": {
        "source": "CPersona cued-v0.3 on LMEB TMD (seed §2.11, reference §7.4)",
        "questions": "1,167",
        "no cue": 0.1889,
        "cue": 0.2814,
        "extra": 0.2037,
    },
}
METHOD_NOTES: Final = [
    "## Method",
    "",
    "- **Runs** per cued question, cpersona at `limit` 10 in the question's own scope: *no cue*; *cue* "
    "(absolute `time_cue`); *extra* = no cue at `limit` 10 + s, where s is the number of cue seats the "
    "cued run used for that question (s = 0: extra is the no-cue answer itself). One recall at a time: "
    "no cue and cue in turn (no cue first on even-numbered questions, cue first on odd ones), then extra. "
    "The engine's query-embedding cache is off, so every recall embeds its question.",
    "- **Rows**: every row a recall returned, in order: the limit rows, then the seats (block seats, then "
    "cue seats). A row stands for the unit(s) stored under its ref (the engine folds a turn whose content "
    "repeats an earlier one of the same conversation into that record); repeats count once.",
    "- **NDCG (rows)**, the headline as in the reference: binary gains over *all* returned rows R, "
    "DCG = sum over places i of 1/log2(i + 1) for gold units, divided by the ideal DCG of min(|G|, |R|) "
    "gold units at the top (0 when nothing is returned). A run that returns more rows has a larger "
    "ideal when |G| is large, which counts against the cue and extra runs, not for them.",
    "- **NDCG@10, recall@10, capped recall@10**: the first 10 rows only (|G ∩ top-10| / |G| and "
    "/ min(10, |G|)). The cue moves rows only among the returned ones and puts its seats after them, so "
    "its first 10 rows hold the same units as no cue's: these columns show the move, not the seats.",
    "- **recall (rows)**, **any hit (rows)**, **MRR (rows)**: over all returned rows.",
    "- **Up / down**: questions whose NDCG (rows) is higher / lower with the cue than without it (and "
    "than extra); p is a one-sided sign test on them (ties dropped).",
    "- **Verdict**: the cue *helps* on a set when its mean NDCG (rows) beats both no cue and extra.",
    "- **Period holds evidence**: some gold turn's timestamp lies in the period: the parser's own period "
    "(LoCoMo: after the forward widening) and the period the engine searched last (after its confidence "
    "margin and any revision).",
    "- **Cue cost**: wall time of each `await memory.recall(...)` in this process, no cue vs cue, over "
    "the questions whose cue was passed; a ratio on a shared machine, not a speed benchmark.",
    "",
]


# ---------------------------------------------------------------------------------------------- questions


@dataclasses.dataclass(frozen=True, slots=True)
class CueQuestion:
    """One question with the cue it is asked with (``cue`` is what is passed; ``read`` as parsed)."""

    dataset: str
    set_name: str
    qid: str
    agent: str
    question: str
    gold: tuple[str, ...]
    gold_times: tuple[float, ...]
    now: float
    read: Cue
    cue: Cue

    @property
    def now_dt(self) -> datetime.datetime:
        return datetime.datetime.fromtimestamp(self.now, datetime.UTC)

    @property
    def recent_only(self) -> bool:
        """Whether the engine, its clock at the data's "now", would leave this cue unused (seed §2.8)."""
        return self.read.recent_only(self.now_dt)


@dataclasses.dataclass(frozen=True, slots=True)
class Selection:
    """The cued questions of one dataset and what was counted on the way."""

    dataset: str
    questions: tuple[CueQuestion, ...]
    counts: Mapping[str, Mapping[str, int]]
    """Set name -> {"items", "cued", "no cue", ...}."""
    corpora: tuple[tuple[str, Sequence[Any]], ...]
    notes: tuple[str, ...] = ()


def tmd_questions(path: Path, *, logs: Sequence[int] | None, sets: Sequence[str] = SETS) -> Selection:
    data = load_tmd(path, logs=logs, sets=sets)
    questions: list[CueQuestion] = []
    counts: dict[str, collections.Counter[str]] = {}
    paraphrases: dict[str, collections.Counter[str]] = {}
    for conv in data.conversations:
        now = datetime.datetime.fromtimestamp(conv.now, datetime.UTC)
        times = {turn.unit_id: turn.timestamp for turn in conv.turns}
        for q in conv.questions:
            tally = counts.setdefault(q.set_name, collections.Counter())
            tally["items"] += 1
            words = paraphrases.setdefault(q.set_name, collections.Counter())
            words["wordings"] += len(q.paraphrases)
            words["wordings cued"] += sum(1 for text in q.paraphrases if read_cue(text, now) is not None)
            cue = read_cue(q.question, now)
            if cue is None:
                tally["no cue"] += 1
                continue
            tally["cued"] += 1
            questions.append(
                CueQuestion(
                    dataset="tmd",
                    set_name=q.set_name,
                    qid=q.qid,
                    agent=conv.conv_id,
                    question=q.question,
                    gold=q.gold,
                    gold_times=tuple(times[g] for g in q.gold),
                    now=conv.now,
                    read=cue,
                    cue=cue,
                )
            )
    merged = {name: {**counts[name], **paraphrases[name]} for name in counts}
    notes = []
    if data.unknown_gold or data.dropped:
        notes.append(
            f"{data.unknown_gold} gold ids naming no turn were dropped; {len(data.dropped)} items were left "
            "with no gold and dropped"
        )
    corpora = tuple((conv.conv_id, conv.turns) for conv in data.conversations)
    return Selection("tmd", tuple(questions), merged, corpora, tuple(notes))


def locomo_questions(path: Path, *, conversations: Sequence[str] | None) -> Selection:
    data = load_locomo(path, conversations=conversations)
    questions: list[CueQuestion] = []
    tally: collections.Counter[str] = collections.Counter()
    for conv in data.conversations:
        now = datetime.datetime.fromtimestamp(conv.now, datetime.UTC)
        times = {turn.dia_id: turn.timestamp for turn in conv.turns}
        for q in conv.questions:
            if q.category not in (1, 2, 3, 4):
                continue
            tally["items"] += 1
            cue = read_cue(q.question, now)
            if cue is None:
                tally["no cue"] += 1
                continue
            if not cue.named:
                tally[f"relative only ({cue.kind}), left out"] += 1
                continue
            tally["cued"] += 1
            questions.append(
                CueQuestion(
                    dataset="locomo",
                    set_name="locomo",
                    qid=q.qid,
                    agent=conv.conv_id,
                    question=q.question,
                    gold=q.evidence,
                    gold_times=tuple(times[e] for e in q.evidence),
                    now=conv.now,
                    read=cue,
                    cue=cue.widened(SAID_AFTER_DAYS),
                )
            )
    corpora = tuple((conv.conv_id, conv.turns) for conv in data.conversations)
    return Selection("locomo", tuple(questions), {"locomo": dict(tally)}, corpora)


# ------------------------------------------------------------------------------------------------ running


@dataclasses.dataclass(frozen=True, slots=True)
class Answer:
    """One recall as the benchmark sees it."""

    rows: tuple[tuple[str, ...], ...]
    """Unit ids each returned row stands for, in the returned order."""
    signals: tuple[str, ...]
    """Each row's ``match_reason.signal`` (``cue`` and ``block`` mark seats)."""
    elapsed_ms: float
    time_cue: Mapping[str, Any] | None
    degraded: tuple[str, ...]

    @property
    def ids(self) -> list[str]:
        return unique(unit for row in self.rows for unit in row)

    @property
    def cue_seats(self) -> int:
        if self.time_cue is not None and isinstance(self.time_cue.get("seated"), int):
            return int(self.time_cue["seated"])
        return sum(1 for signal in self.signals if signal == "cue")

    @property
    def returned(self) -> frozenset[tuple[str, ...]]:
        """The rows that are not seats (the count's rows), as a set."""
        return frozenset(
            row for row, signal in zip(self.rows, self.signals, strict=True) if signal not in _SEAT_SIGNALS
        )


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    question: CueQuestion
    nocue: Answer
    cue: Answer
    extra: Answer
    ignored: bool
    """Asked without the cue because the engine's recent-only rule would drop it at the data's now."""


async def cue_unsupported() -> str | None:
    """Why the engine cannot take a ``time_cue`` yet, or ``None`` when it does.

    Opens a throwaway engine (no embedder) and asks one recall with an absolute cue: an
    :class:`~cpersona.InvalidRequest` naming the field ``time_cue`` itself means the field is unknown.
    """
    from benchmarks.quality.systems import Cpersona

    reason = Cpersona.unavailable_reason()
    if reason is not None:
        return reason
    import shutil

    import cpersona
    from cpersona import InvalidRequest, Settings

    folder = Path(await anyio.to_thread.run_sync(lambda: tempfile.mkdtemp(prefix="cpersona-cue-probe-")))
    try:
        settings = Settings(data_dir=folder, embedding_mode="none")
        async with cpersona.open(settings, background=False) as memory:
            try:
                await memory.recall(
                    "probe",
                    agent_id="probe",
                    limit=1,
                    time_cue={"after": "2000-01-01", "before": "2000-01-02", "confidence": "sure"},
                )
            except InvalidRequest as exc:
                if exc.field == "time_cue":
                    return f"the engine does not take time_cue yet ({exc})"
                raise
    finally:
        await anyio.to_thread.run_sync(lambda: shutil.rmtree(folder, ignore_errors=True))
    return None


async def _ask(
    system: Cpersona, memory: Any, q: CueQuestion, *, limit: int, time_cue: Mapping[str, str] | None
) -> Answer:
    fields: dict[str, Any] = {} if time_cue is None else {"time_cue": dict(time_cue)}
    started = time.perf_counter()
    result = await memory.recall(q.question, agent_id=q.agent, limit=limit, **fields)
    elapsed = (time.perf_counter() - started) * 1000.0
    rows = tuple(tuple(system.unit_ids(q.agent, row)) for row in result.rows)
    signals = tuple(str((row.match_reason or {}).get("signal", "")) for row in result.rows)
    body = result.model_dump(mode="json")
    degraded = tuple(f"{d.arm} {d.status}" for d in result.degraded)
    return Answer(rows, signals, elapsed, body.get("time_cue"), degraded)


def engine_ask(system: Cpersona, memory: Any) -> Ask:
    """Questions asked of cpersona's open engine ``memory`` (rows mapped to units by ``system``)."""

    async def ask(q: CueQuestion, limit: int, time_cue: Mapping[str, str] | None) -> Answer:
        return await _ask(system, memory, q, limit=limit, time_cue=time_cue)

    return ask


def peer_ask(peer: CPersonaRef) -> Ask:
    """Questions asked of CPersona 2.6.14 (the peer), which takes the same ``time_cue`` mapping.

    Its time is the worker's own measure of ``do_recall`` (no JSON round trip); it reports no degraded
    arms, so that column stays empty for it.
    """

    async def ask(q: CueQuestion, limit: int, time_cue: Mapping[str, str] | None) -> Answer:
        reply = await peer.recall(
            q.agent, q.question, limit, time_cue=None if time_cue is None else dict(time_cue)
        )
        rows = tuple(tuple(row["units"]) for row in reply["rows"])
        signals = tuple(str(row.get("signal", "")) for row in reply["rows"])
        return Answer(rows, signals, float(reply["elapsed_ms"]), reply.get("time_cue"), ())

    return ask


async def run_questions(
    ask: Ask, questions: Sequence[CueQuestion], *, progress: bool, desc: str
) -> list[Outcome]:
    """The three runs of every question, one recall at a time, in a fixed order."""
    for q in questions[:_WARMUP]:
        # Warm the engine's caches and code paths so the first measured recalls are not outliers.
        await ask(q, LIMIT, None)
        await ask(q, LIMIT, q.cue.time_cue())
    outcomes = []
    for index, q in enumerate(tqdm(questions, desc=desc, unit="q", disable=not progress)):
        ignored = q.recent_only
        cued = None if ignored else q.cue.time_cue()
        # Which of the two goes first alternates, so neither pays more often for whatever the first
        # recall of a question warms (the query-embedding cache is off for the same reason).
        if index % 2 == 0:
            nocue = await ask(q, LIMIT, None)
            cue = await ask(q, LIMIT, cued)
        else:
            cue = await ask(q, LIMIT, cued)
            nocue = await ask(q, LIMIT, None)
        seats = 0 if ignored else cue.cue_seats
        extra = nocue if seats == 0 else await ask(q, LIMIT + seats, None)
        outcomes.append(Outcome(q, nocue, cue, extra, ignored))
    return outcomes


# ------------------------------------------------------------------------------------------------ scoring

ARMS: Final = ("no cue", "cue", "extra")
_EPS: Final = 1e-12


def score(answer: Answer, gold: Sequence[str]) -> dict[str, float]:
    """Every per-question figure of one answer (see :data:`METHOD_NOTES` for the definitions)."""
    ids = answer.ids
    gold_set = frozenset(gold)
    hits = [i for i, unit in enumerate(ids) if unit in gold_set]
    return {
        "ndcg_rows": ndcg_at(ids, gold_set, len(ids)) if ids else 0.0,
        "ndcg@10": ndcg_at(ids, gold_set, 10),
        "recall@10": recall_at(ids, gold_set, 10),
        "capped@10": capped_recall_at(ids, gold_set, 10),
        "recall_rows": len(hits) / len(gold_set),
        "any_rows": 1.0 if hits else 0.0,
        "mrr_rows": 1.0 / (hits[0] + 1) if hits else 0.0,
        "rows": float(len(ids)),
    }


def _arm_answers(outcome: Outcome) -> dict[str, Answer]:
    return {"no cue": outcome.nocue, "cue": outcome.cue, "extra": outcome.extra}


def _sign_p(up: int, down: int) -> float:
    """One-sided sign test: P(at least ``up`` of ``up + down`` fair coin flips come up)."""
    n = up + down
    if n == 0:
        return 1.0
    # 2**n as a shift: int ** int is typed Any (a negative exponent would give a float).
    return sum(math.comb(n, k) for k in range(up, n + 1)) / (1 << n)


def _period_holds(period: Sequence[str] | None, times: Iterable[float]) -> bool | None:
    if not period or len(period) != 2:
        return None
    start, end = (datetime.datetime.fromisoformat(str(p).replace("Z", "+00:00")).timestamp() for p in period)
    return any(start <= t < end for t in times)


@dataclasses.dataclass(frozen=True, slots=True)
class SetSummary:
    name: str
    subset: bool
    """One of the TMD time sets, shown in the tables but given no verdict of its own."""
    n: int
    means: Mapping[str, Mapping[str, float]]
    """Arm -> metric -> mean."""
    up: int
    down: int
    up_extra: int
    down_extra: int
    holds_read: int
    holds_searched: int
    searched_known: int
    ignored_harness: int
    ignored_engine: int
    revised: int
    moved: int
    """Rows moved as the system counts them (cpersona: rows lifted; 2.6.14: every row that changed place)."""
    reordered: int
    """Rows whose place the cue changed, counted here the same way for every system (seats aside)."""
    seated: int
    same_rows: int
    degraded: int
    nocue_ms: tuple[float, ...]
    cue_ms: tuple[float, ...]

    @property
    def verdict(self) -> bool:
        cue = self.means["cue"]["ndcg_rows"]
        return (
            cue > self.means["no cue"]["ndcg_rows"] + _EPS and cue > self.means["extra"]["ndcg_rows"] + _EPS
        )


def _reordered(outcome: Outcome) -> int:
    """How many places hold another row with the cue than without it, seats left out of both answers."""

    def kept(answer: Answer) -> list[tuple[str, ...]]:
        return [
            row
            for row, signal in zip(answer.rows, answer.signals, strict=True)
            if signal not in _SEAT_SIGNALS
        ]

    return sum(
        1 for cued, plain in zip(kept(outcome.cue), kept(outcome.nocue), strict=False) if cued != plain
    )


def summarise(name: str, outcomes: Sequence[Outcome], *, subset: bool = False) -> SetSummary:
    scores = [
        {arm: score(answer, o.question.gold) for arm, answer in _arm_answers(o).items()} for o in outcomes
    ]
    metrics = list(scores[0]["no cue"]) if scores else []
    means = {
        arm: {m: statistics.fmean(s[arm][m] for s in scores) if scores else 0.0 for m in metrics}
        for arm in ARMS
    }
    deltas = [s["cue"]["ndcg_rows"] - s["no cue"]["ndcg_rows"] for s in scores]
    deltas_extra = [s["cue"]["ndcg_rows"] - s["extra"]["ndcg_rows"] for s in scores]
    searched = [_period_holds((o.cue.time_cue or {}).get("period"), o.question.gold_times) for o in outcomes]
    passed = [o for o in outcomes if not o.ignored]
    return SetSummary(
        name=name,
        subset=subset,
        n=len(outcomes),
        means=means,
        up=sum(1 for d in deltas if d > _EPS),
        down=sum(1 for d in deltas if d < -_EPS),
        up_extra=sum(1 for d in deltas_extra if d > _EPS),
        down_extra=sum(1 for d in deltas_extra if d < -_EPS),
        holds_read=sum(1 for o in outcomes if any(o.question.cue.holds(t) for t in o.question.gold_times)),
        holds_searched=sum(1 for h in searched if h),
        searched_known=sum(1 for h in searched if h is not None),
        ignored_harness=sum(1 for o in outcomes if o.ignored),
        ignored_engine=sum(1 for o in outcomes if (o.cue.time_cue or {}).get("ignored")),
        revised=sum(1 for o in outcomes if (o.cue.time_cue or {}).get("revised")),
        moved=sum(int((o.cue.time_cue or {}).get("moved") or 0) for o in outcomes),
        reordered=sum(_reordered(o) for o in outcomes),
        seated=sum(o.cue.cue_seats for o in passed),
        same_rows=sum(1 for o in outcomes if o.cue.returned == o.nocue.returned),
        degraded=sum(1 for o in outcomes for a in _arm_answers(o).values() if a.degraded),
        nocue_ms=tuple(o.nocue.elapsed_ms for o in passed),
        cue_ms=tuple(o.cue.elapsed_ms for o in passed),
    )


def kind_label(q: CueQuestion) -> str:
    """The row a LoCoMo question's cue kind gets when the cued questions are split by kind."""
    return f"LoCoMo/{q.read.kind} ({q.read.confidence})"


def verdict_line(s: SetSummary) -> str:
    """The seed's rule applied to one set: the three means, then whether the cue may be said to help."""
    m = s.means
    if not s.verdict:
        verdict = "the cue does not beat both: **no claim**"
    elif s.n < _CLAIM_MIN:
        verdict = f"the cue beats both, but {s.n} questions are too few for a claim (seed §3: {_CLAIM_MIN})"
    else:
        verdict = "the cue beats both: **the cue helps** on this set"
    return (
        f"(n = {s.n}): cue {m['cue']['ndcg_rows']:.4f} vs no cue {m['no cue']['ndcg_rows']:.4f} "
        f"and extra {m['extra']['ndcg_rows']:.4f}: {verdict}"
    )


def summaries(outcomes: Sequence[Outcome], *, locomo_kinds: bool = False) -> list[SetSummary]:
    """By set: TMD content, TMD time sets (together and one by one), TMD overall, LoCoMo.

    ``locomo_kinds`` adds a row for each kind of cue the LoCoMo questions were read with (date, month,
    year, ...), after the LoCoMo row and, like TMD's single time sets, with no verdict of its own.
    """
    groups: dict[str, list[Outcome]] = {}
    kinds: collections.Counter[str] = collections.Counter()
    for o in outcomes:
        q = o.question
        if q.dataset == "tmd":
            main = "TMD content_time_qs" if q.set_name == CONTENT_SET else "TMD time_qs (all cued sets)"
            for key in (main, "TMD overall"):
                groups.setdefault(key, []).append(o)
            if q.set_name != CONTENT_SET:
                groups.setdefault(f"TMD time_qs/{q.set_name}", []).append(o)
        else:
            groups.setdefault(LOCOMO_SET, []).append(o)
            if locomo_kinds:
                groups.setdefault(kind_label(q), []).append(o)
                kinds[kind_label(q)] += 1
    # The most frequent kinds first; ties by name, so the rows come out the same on every run.
    by_kind = sorted(kinds, key=lambda label: (-kinds[label], label))
    time_sets = [f"TMD time_qs/{name}" for name in TIME_SETS]
    subsets = {*time_sets, *by_kind}
    order = [
        "TMD content_time_qs",
        "TMD time_qs (all cued sets)",
        *time_sets,
        "TMD overall",
        LOCOMO_SET,
        *by_kind,
    ]
    return [summarise(name, groups[name], subset=name in subsets) for name in order if name in groups]


# ------------------------------------------------------------------------------------------------ report


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b > 0 else "-"


def _latency_cells(s: SetSummary) -> str:
    if not s.cue_ms:
        return "| - | - | - | - |"
    n50, n95 = percentile(s.nocue_ms, 0.5), percentile(s.nocue_ms, 0.95)
    c50, c95 = percentile(s.cue_ms, 0.5), percentile(s.cue_ms, 0.95)
    return f"| {n50:.1f} / {n95:.1f} | {c50:.1f} / {c95:.1f} | {_ratio(c50, n50)} | {_ratio(c95, n95)} |"


def _frac(part: int, whole: int) -> str:
    return f"{part}/{whole} ({part / whole:.0%})" if whole else "-"


@dataclasses.dataclass(frozen=True, slots=True)
class RunInfo:
    command: str
    quick: bool
    load_start: float
    load_end: float
    started: str
    selections: tuple[Selection, ...]
    caches: Mapping[str, Mapping[str, Any] | None]
    policy: str
    skipped: Mapping[str, str]
    embedding_model: str
    """The model the engines embedded with, as their settings name it (``-`` when none was opened)."""


def render(info: RunInfo, outcomes: Sequence[Outcome], chart_name: str) -> str:
    sums = summaries(outcomes)
    lines = [
        "# Time cue on TMD and LoCoMo (cpersona, limit 10)",
        "",
        *harness.header(
            info.command,
            load_start=info.load_start,
            load_end=info.load_end,
            watched=("src", "benchmarks/quality"),
            packages=("numpy",),
        ),
        f"- began: {info.started}; embedder {info.embedding_model} (cpersona's ONNX build); cue policy "
        f"reported by the engine: {info.policy}",
        '- protocol: `shared/reference/benchmark-protocol.md` (section "Time cues"); seed §2.11 and §3',
    ]
    if info.quick:
        lines.append(
            f"- **--quick**: TMD log {QUICK_TMD_LOG} and LoCoMo {QUICK_LOCOMO} only; not comparable with the "
            "reference figures"
        )
    for name, cache in info.caches.items():
        if cache is None:
            lines.append(f"- {name} store: built in this run, not cached")
        else:
            how = "from the store cache" if cache["hit"] else "built and cached in this run"
            built = cache.get("built_secs")
            lines.append(
                f"- {name} store: {how} (`{cache['key']}`"
                + (f", built in {built:.0f} s" if isinstance(built, float) else "")
                + f", ready in {cache['ready_secs']:.1f} s)"
            )
    for name, reason in info.skipped.items():
        lines.append(f"- **{name} not run**: {reason}")
    lines += ["", "## Questions", ""]
    lines += [
        "| dataset | set | items | asked with a cue | other |",
        "|---|---|---:|---:|---|",
    ]
    for selection in info.selections:
        for set_name, tally in selection.counts.items():
            other = ", ".join(
                f"{key}: {value}" for key, value in tally.items() if key not in ("items", "cued")
            )
            lines.append(
                f"| {selection.dataset} | {set_name} | {tally.get('items', 0)} "
                f"| {tally.get('cued', 0)} | {other} |"
            )
        lines += [f"- {note}" for note in selection.notes]
    kinds: dict[str, collections.Counter[str]] = {}
    for o in outcomes:
        kinds.setdefault(o.question.dataset, collections.Counter())[
            f"{o.question.read.kind} ({o.question.read.confidence})"
        ] += 1
    for dataset, tally in kinds.items():
        lines.append(
            f"- {dataset} cues by kind (confidence): "
            + ", ".join(f"{kind} {count}" for kind, count in sorted(tally.items()))
        )
    lines += [
        "",
        "TMD: each item lists several wordings; the first is asked (`wordings cued` counts how many of all "
        "wordings the parser gives a cue, as a check that the choice of wording does not decide the cue). "
        "The `ambiguous_time_qs` sets are not used: each of their questions is a short dialogue whose time "
        "must first be resolved from the exchange, a reader model's task, not a parser's. Session-number "
        "sets (`session`, `rel_session`, `session_span`) name no time and get no cue.",
        "",
        "## NDCG over the returned rows (headline)",
        "",
        f"![NDCG by set]({chart_name})",
        "",
        "| set | n | no cue | cue | extra | cue - no cue | up / down vs no cue (p) | up / down vs extra (p) "
        "| cue beats both |",
        "|---|---:|---:|---:|---:|---:|---|---|---|",
    ]
    for s in sums:
        m = s.means
        lines.append(
            f"| {s.name} | {s.n} | {m['no cue']['ndcg_rows']:.4f} | {m['cue']['ndcg_rows']:.4f} "
            f"| {m['extra']['ndcg_rows']:.4f} | {m['cue']['ndcg_rows'] - m['no cue']['ndcg_rows']:+.4f} "
            f"| {s.up} / {s.down} ({_sign_p(s.up, s.down):.2g}) "
            f"| {s.up_extra} / {s.down_extra} ({_sign_p(s.up_extra, s.down_extra):.2g}) "
            f"| {'yes' if s.verdict else 'no'} |"
        )
    lines += ["", "### Verdicts (the seed's rule: the cue must beat both no cue and extra)", ""]
    lines += [f"- **{s.name}** {verdict_line(s)}" for s in sums if not s.subset]
    lines += ["", "### Against the reference figures (NDCG over the returned rows)", ""]
    lines += ["| | questions | no cue | cue | extra |", "|---|---:|---:|---:|---:|"]
    here = {s.name: s for s in sums}
    for key, label in (("tmd", "TMD overall"), ("locomo", LOCOMO_SET)):
        ref = REFERENCES[key]
        lines.append(
            f"| reference: {ref['source']} | {ref['questions']} | {ref['no cue']:.4f} | {ref['cue']:.4f} "
            f"| {ref['extra']:.4f} |"
        )
        if label in here:
            m = here[label].means
            lines.append(
                f"| here: {label} | {here[label].n} | {m['no cue']['ndcg_rows']:.4f} "
                f"| {m['cue']['ndcg_rows']:.4f} | {m['extra']['ndcg_rows']:.4f} |"
            )
    lines += [
        "",
        "The reference TMD set counts 1,167 questions whose text states a time; which wordings and sets "
        "it took is not published, so the sets above are this harness's own choice (stated in Questions).",
        "",
        "## Other measures (means per question)",
        "",
        "| set | run | NDCG@10 | recall@10 | capped recall@10 | recall (rows) | any hit (rows) | MRR (rows) "
        "| rows |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in sums:
        for arm in ARMS:
            a = s.means[arm]
            lines.append(
                f"| {s.name} | {arm} | {a['ndcg@10']:.4f} | {a['recall@10']:.4f} | {a['capped@10']:.4f} "
                f"| {a['recall_rows']:.4f} | {a['any_rows']:.4f} | {a['mrr_rows']:.4f} | {a['rows']:.1f} |"
            )
    lines += [
        "",
        "## Honesty",
        "",
        "| set | parser's period holds evidence | searched period holds evidence | not used: recent-only "
        "(harness / engine) | revised | rows moved | cue seats used | same returned rows as no cue "
        "| recalls with a degraded arm |",
        "|---|---|---|---|---:|---:|---:|---|---:|",
    ]
    for s in sums:
        lines.append(
            f"| {s.name} | {_frac(s.holds_read, s.n)} | {_frac(s.holds_searched, s.searched_known)} "
            f"| {s.ignored_harness} / {s.ignored_engine} | {s.revised} | {s.moved} | {s.seated} "
            f"| {_frac(s.same_rows, s.n)} | {s.degraded} |"
        )
    lines += [
        "",
        "- *Not used: recent-only*: the harness asks a cue whose own period starts within 24 hours of the "
        "data's now without it (the engine's rule, seed §2.8, applied at the data's clock); the engine "
        "column counts cues the engine itself reported as ignored (its clock is the machine's, so it "
        "should be 0).",
        "- *Same returned rows*: the cued run's rows other than seats are, as a set, those of the no-cue "
        "run (the engine's invariant, seed §2.6).",
        "",
        "## Cost of the cue (same questions, same run)",
        "",
        "| set | no cue p50 / p95 (ms) | cue p50 / p95 (ms) | p50 ratio | p95 ratio |",
        "|---|---:|---:|---:|---:|",
    ]
    for s in sums:
        lines.append(f"| {s.name} " + _latency_cells(s))
    lines += ["", *METHOD_NOTES]
    lines += [
        "## The cue parser (`benchmarks/quality/cues.py`)",
        "",
        "- Question text and the data's now only. Explicit date (and date span) -> `sure`; a date with "
        '"the week/Sunday before", "by <date>" -> `likely`; month, season, relative day/week/month '
        '-> `likely`; a year, "last year", "recently" -> `vague`. A question that refers to a session '
        "by number gets none. Full table in the module docstring.",
        "- A date or month without a year is the latest one not after now. Calendar words give calendar "
        'periods of whole days; "<n> days/weeks/months ago" gives the period the engine itself makes of '
        '`{"ago": {"unit", "value"}}` at the data\'s now (one unit, centred n units back, a month = '
        "30 days), passed as ISO times.",
        f"- LoCoMo (session-stamped): the period's end moves {SAID_AFTER_DAYS} days later; its start and "
        "the confidence stay. TMD (turn-stamped): used as read.",
        "- \"Now\": TMD = the log's last turn; LoCoMo = the last session's time.",
        "",
    ]
    return "\n".join(lines).rstrip() + "\n"


def write_chart(outcomes: Sequence[Outcome], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sums = [s for s in summaries(outcomes) if not s.subset]
    fig, axis = plt.subplots(figsize=(2.2 + 2.4 * len(sums), 4.2))
    width = 0.26
    colours = {"no cue": "#8c8c8c", "cue": "#1f77b4", "extra": "#ff7f0e"}
    for i, arm in enumerate(ARMS):
        values = [s.means[arm]["ndcg_rows"] for s in sums]
        xs = [j + (i - 1) * width for j in range(len(sums))]
        axis.bar(xs, values, width, label=arm, color=colours[arm])
    for j, s in enumerate(sums):
        key = "tmd" if s.name == "TMD overall" else "locomo" if s.name == LOCOMO_SET else None
        if key is None:
            continue
        ref = REFERENCES[key]
        for i, arm in enumerate(ARMS):
            axis.plot(j + (i - 1) * width, ref[arm], marker="_", markersize=18, color="black")
    axis.plot([], [], marker="_", markersize=12, linestyle="", color="black", label="reference")
    axis.set_xticks(range(len(sums)))
    axis.set_xticklabels([f"{s.name}\n(n={s.n})" for s in sums], fontsize=8)
    axis.set_ylabel("NDCG over the returned rows")
    tops = [s.means[arm]["ndcg_rows"] for s in sums for arm in ARMS]
    tops += [REFERENCES[key][arm] for key in REFERENCES for arm in ARMS]
    axis.set_ylim(0.0, min(1.0, max(tops) * 1.25 + 0.02))
    axis.grid(axis="y", alpha=0.3)
    axis.legend(loc="upper right", fontsize=8)
    fig.suptitle("Time cue: no cue / cue / same number of extra uncued rows (cpersona, limit 10)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _raw(outcomes: Sequence[Outcome]) -> list[dict[str, Any]]:
    out = []
    for o in outcomes:
        q = o.question
        out.append(
            {
                "qid": q.qid,
                "set": q.set_name,
                "question": q.question,
                "gold": list(q.gold),
                "time_cue_sent": q.cue.time_cue(),
                "cue_kind": q.read.kind,
                "ignored": o.ignored,
                **{
                    arm: {
                        "ids": answer.ids,
                        "signals": list(answer.signals),
                        "ms": answer.elapsed_ms,
                        "time_cue": answer.time_cue,
                        **score(answer, q.gold),
                    }
                    for arm, answer in _arm_answers(o).items()
                },
            }
        )
    return out


# ------------------------------------------------------------------------------------------------ command


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sets", default="tmd,locomo", help="comma-separated: tmd, locomo")
    parser.add_argument(
        "--quick", action="store_true", help=f"TMD log {QUICK_TMD_LOG} and {QUICK_LOCOMO} only"
    )
    parser.add_argument("--tmd", type=Path, default=DEFAULT_TMD, help="path to the TMD folder")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="path to locomo10.json")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="folder for the report and chart")
    parser.add_argument(
        "--store-cache", type=Path, default=DEFAULT_STORE_CACHE, help="folder of cached engine stores"
    )
    parser.add_argument("--no-store-cache", action="store_true", help="build the stores afresh, keep nothing")
    parser.add_argument("--threads", type=int, default=None, help="embedding threads (default: setting)")
    parser.add_argument(
        "--parse-only", action="store_true", help="select questions and check cue periods; no engine"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def sets_arg(text: str) -> list[str]:
    names = [name.strip().lower() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in SET_NAMES]
    if unknown or not names:
        raise SystemExit(f"--sets: choose from {','.join(SET_NAMES)}; got {text!r}")
    return list(dict.fromkeys(names))


def select(args: argparse.Namespace, sets: Sequence[str]) -> tuple[list[Selection], dict[str, str]]:
    selections: list[Selection] = []
    skipped: dict[str, str] = {}
    for name in sets:
        try:
            if name == "tmd":
                selections.append(tmd_questions(args.tmd, logs=[QUICK_TMD_LOG] if args.quick else None))
            else:
                convs = [QUICK_LOCOMO] if args.quick else None
                selections.append(locomo_questions(args.data, conversations=convs))
        except FileNotFoundError as exc:
            print(f"{name}: {exc}; skipped")
            skipped[name] = str(exc)
    return selections, skipped


def _parse_report(selections: Sequence[Selection]) -> str:
    lines = ["set | cued | parser's period holds evidence"]
    for selection in selections:
        by_set: dict[str, list[CueQuestion]] = {}
        for q in selection.questions:
            by_set.setdefault(q.set_name, []).append(q)
        for name, qs in by_set.items():
            holds = sum(1 for q in qs if any(q.cue.holds(t) for t in q.gold_times))
            lines.append(f"{selection.dataset}:{name} | {len(qs)} | {_frac(holds, len(qs))}")
    return "\n".join(lines)


async def _run_all(
    args: argparse.Namespace, selections: Sequence[Selection]
) -> tuple[list[Outcome], dict[str, Any]]:
    from benchmarks.quality.systems import Cpersona

    outcomes: list[Outcome] = []
    caches: dict[str, Any] = {}
    policy = "-"
    models: set[str] = set()
    for selection in selections:
        if not selection.questions:
            caches[selection.dataset] = None
            continue
        system = Cpersona(
            embedding_threads=args.threads,
            name=f"cpersona-{selection.dataset}",
            store_cache=None if args.no_store_cache else args.store_cache,
            # Every recall embeds its question, as a new question would, so the cost compares like with like.
            engine_settings={"embedding_cache_size": 0},
        )
        try:
            started = time.perf_counter()
            await system.preload(selection.corpora)
            print(
                f"{selection.dataset}: store ready in {time.perf_counter() - started:.1f} s "
                f"({system.cache_info})"
            )
            caches[selection.dataset] = system.cache_info
            memory = await system.engine()
            models.add(str(memory.settings.embedding_model))
            ask = engine_ask(system, memory)
            done = await run_questions(
                ask, selection.questions, progress=not args.no_progress, desc=f"cue {selection.dataset}"
            )
            outcomes.extend(done)
            policies = {str((o.cue.time_cue or {}).get("policy")) for o in done if o.cue.time_cue}
            policy = ", ".join(sorted(policies)) or policy
        finally:
            await system.aclose()
    return outcomes, {"caches": caches, "policy": policy, "embedding_model": ", ".join(sorted(models)) or "-"}


def run_command(args: argparse.Namespace, argv: Sequence[str]) -> Path | None:
    """Run ``python -m benchmarks quality cue``; returns the report's path (``None`` for --parse-only)."""
    sets = sets_arg(args.sets)
    command = harness.command("quality", argv)
    load_start = harness.load()
    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    selections, skipped = select(args, sets)
    for selection in selections:
        print(
            f"{selection.dataset}: {len(selection.questions)} questions with a cue; {dict(selection.counts)}"
        )
    if args.parse_only:
        print(_parse_report(selections))
        return None
    if not selections:
        raise SystemExit("no data found for any set: " + "; ".join(skipped.values()))
    reason = anyio.run(cue_unsupported)
    if reason is not None:
        raise SystemExit(f"cannot run the cue benchmark: {reason}")
    outcomes, extra = anyio.run(_run_all, args, selections)
    info = RunInfo(
        command=command,
        quick=args.quick,
        load_start=load_start,
        load_end=harness.load(),
        started=started,
        selections=tuple(selections),
        caches=extra["caches"],
        policy=extra["policy"],
        skipped=skipped,
        embedding_model=extra["embedding_model"],
    )
    stem = "quality_cue" + ("_quick" if args.quick else "")
    chart = args.out / f"{stem}.png"
    report = render(info, outcomes, chart.name)
    print(report)
    args.out.mkdir(parents=True, exist_ok=True)
    path: Path = args.out / f"{stem}.md"
    path.write_text(report, encoding="utf-8")
    write_chart(outcomes, chart)
    raw = DEFAULT_CACHE_DIR / f"{stem}_last.json"
    raw.parent.mkdir(parents=True, exist_ok=True)
    raw.write_text(json.dumps(_raw(outcomes)), encoding="utf-8")
    print(f"wrote {path} and {chart} (per-question answers: {raw})")
    return path
