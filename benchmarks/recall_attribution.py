"""Does the trace reproduce a manual attribution? Seed §1.4, readiness check 2, on LoCoMo.

Every non-adversarial LoCoMo question is asked of its own conversation (one agent per conversation, one
memory per turn, stored as the quality harness's ``Cpersona`` system stores them) with ``limit=10`` and
``trace=True``. A question **failed** when some gold turn is not among the returned rows. Each failure is
then attributed twice, by two paths that never see each other's inputs:

* **the trace path** reads nothing but the trace, as the JSON bytes the live channel would carry
  (:func:`cpersona.recall.trace.publisher.encode_trace`, parsed back), and asks the confirmation tool
  (``benchmarks/recall_trace_confirm.py``) for a code;
* **the manual path** never looks at the trace or at the stage sets the recall kept. It re-runs the recall
  by hand from the engine's pieces — it embeds the question, calls each arm itself
  (:func:`~cpersona.recall.arms.vector.vector_near`, the record store's
  :meth:`~cpersona.stores.protocols.RecordStore.memory_keyword` and
  :meth:`~cpersona.stores.protocols.RecordStore.episode_fts`, :func:`~cpersona.recall.arms.block.block_arm`),
  reads the records and the gate's inputs from Redis, then fuses (:mod:`cpersona.recall.stages.fusion`),
  gates (:func:`~cpersona.recall.stages.gate.decide`),
  autocuts, counts and seats as plain function calls — and decides the code from what it saw:
  a gold no arm reached is ``CANDIDATE_MISS``; one the gate or autocut refused is ``FILTER_DROP``; one
  that passed but fell below the count cut, or that only the block arm reached and no seat held, is
  ``RANKING_MISS``.

Both paths attribute the question's *missing* golds (the returned ones need no explaining). Each missing
gold gets its own code, and the question gets one code by the confirmation tool's order (reference §5):
``CANDIDATE_MISS`` when no missing gold was reached; ``FILTER_DROP`` when some were fused and none of those
got past the gate and autocut; ``RANKING_MISS`` when one was cut by the count or reached only by the block
arm; else ``UNATTRIBUTED``. Returned golds are compared too (both paths must say "returned"), and the
manual re-run must return exactly the rows the response returned, or the manual attribution is not a
replay of that recall; such questions are listed apart.

What agreement shows: the trace records faithfully what the stages did — a wrong field, a set read from the
wrong stage, a mislabelled decision or cut would each make the paths disagree (the tests plant one such
bug). What it cannot show: a fault inside the pure functions both paths call (fusion, the gate's rule,
autocut), or inside the arms, would be reproduced by the re-run and agreed on.

The replay covers what the shipped single-pass policy does: rrf, rsf, informed or cascade fusion,
heuristic or calibrated gate (in the embedder's units, its gate scale), autocut, count cut and block seats
(above the gate's cosine floor where the policy has one), without a source filter, exclusions, time cue,
episode penalty or age prior (it refuses a policy that enables the last two rather than guess).

Run from the repository root (``--quick``: the first conversation only; the full run ingests all ten
conversations, which takes a long time on a shared machine)::

    .venv/bin/python -m benchmarks recall_attribution [--quick] [--sessions N] [--questions N]
                                                       [--out PATH] [--save-traces PATH]

``--save-traces`` also writes each failed question's trace and missing golds as JSON lines, the input of
``python -m benchmarks recall_trace_confirm``, so the tool's own command can count the same record.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio

import cpersona
from benchmarks import harness
from benchmarks.quality.locomo import CATEGORY_NAMES, DEFAULT_DATA, REPO_ROOT, load_locomo
from benchmarks.recall_trace_confirm import CANDIDATE_MISS, FILTER_DROP, RANKING_MISS, UNATTRIBUTED, confirm
from cpersona import Settings
from cpersona.embedding_models import UNSCALED
from cpersona.model.scope import ReadScope
from cpersona.recall.arms.block import block_arm
from cpersona.recall.arms.vector import ScopeStatsCache, vector_far, vector_near
from cpersona.recall.plan import VectorBar
from cpersona.recall.stages.fusion import Candidate, cascade, informed, kind_of, rrf, rsf
from cpersona.recall.stages.gate import autocut, decide, gate_config, literal_matches
from cpersona.recall.trace.publisher import encode_trace
from cpersona.stores.redis.connection import json_ops

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from benchmarks.quality.locomo import Conversation, LoCoMo, Question
    from cpersona.model.candidates import ArmResult, ArmRow
    from cpersona.model.policy import Policy
    from cpersona.recall.stages.gate import GateConfig
    from cpersona.stores.recall_reads import RecallReads

__all__ = [
    "Attribution",
    "Replay",
    "Report",
    "attribute",
    "LOST_AT",
    "ingest",
    "lost_at",
    "main",
    "manual_code",
    "manual_ref_code",
    "replay",
    "restrict",
    "run",
    "trace_codes",
]

RESULTS: Final = REPO_ROOT / "benchmarks" / "results" / "recall_attribution.md"
QUICK_RESULTS: Final = REPO_ROOT / "benchmarks" / ".cache" / "recall_attribution_quick.md"
LIMIT: Final = 10
CODES: Final = (CANDIDATE_MISS, FILTER_DROP, RANKING_MISS, UNATTRIBUTED)
RETURNED: Final = "returned"
"""The per-gold verdict of both paths for a gold the response holds."""
_BATCH: Final = 500
_REPLAY_DEADLINE_SECS: Final = 120.0
# The response names the profile row ``ref: null`` and the trace ``"profile"``; the replay uses the
# internal ref. Gold refs are never the profile, so these only matter when comparing row lists.
_PROFILE_PREFIX: Final = "profile:"


# ------------------------------------------------------------------------------------------ the replay


@dataclasses.dataclass(frozen=True, slots=True)
class Replay:
    """One recall re-run by hand: what each step saw, by ref.

    ``arms`` are the arms' lists as fusion reads them (records that no longer exist dropped, cut to the
    depth; the block arm at its own length). ``candidates`` is fusion's order, ``refused`` what the gate
    refused, ``autocut_dropped`` what autocut removed after it, ``kept`` and ``cut_by_count`` the two sides
    of the count cut, ``seated`` the rows the block seats admitted.
    """

    arms: Mapping[str, tuple[str, ...]]
    candidates: tuple[str, ...]
    refused: frozenset[str]
    autocut_dropped: frozenset[str]
    kept: tuple[str, ...]
    cut_by_count: tuple[str, ...]
    seated: tuple[str, ...]

    @property
    def returned(self) -> tuple[str, ...]:
        return self.kept + self.seated

    def reached(self, ref: str) -> bool:
        return any(ref in refs for refs in self.arms.values())


class UnsupportedReplay(ValueError):
    """The replay does not cover what this recall would do (it says what, instead of guessing)."""


def _clears_floor(row: ArmRow, gate: GateConfig, rules: Policy) -> bool:
    if row.raw is None:
        return False
    return decide(Candidate(ref=row.ref, kind=kind_of(row.ref), cosine=row.raw), gate, rules.gate).passed


async def replay(
    memory: cpersona.Engine, agent: str, query: str, *, limit: int, policy: str | None = None
) -> Replay:
    """Re-run one recall of ``query`` in ``agent``'s scope step by step, without the stage chain."""
    pieces = memory.backends.recaller
    settings = memory.settings
    rules = memory.policies[policy or settings.recall_policy]
    adjust = rules.score_adjust
    if adjust.episode_penalty or adjust.prior_age_rate > 0:
        raise UnsupportedReplay(f"policy {rules.name!r} re-scores rows (episode penalty or age prior)")
    mode = settings.recall_mode
    blank = not query.strip()
    depth = limit
    if mode != "cascade" and not blank:
        floor = rules.depth.floor if settings.recall_depth_floor is None else settings.recall_depth_floor
        depth = min(rules.depth.max, max(limit, floor))
    scope = ReadScope(agent)
    records = memory.backends.records
    window = settings.max_memories or rules.vector.scan_window
    stats = await ScopeStatsCache().get(records, scope, window, rules.vector.reach)
    calibrated = await records.calibrated_gate(agent)
    scale = UNSCALED if pieces.embedder is None else pieces.embedder.gate_scale
    bar = VectorBar(calibrated, rules.vector.min_similarity, scale)
    threshold = bar.floor()
    vector_floor = threshold if mode == "cascade" else bar.floor(rules.vector.rrf_threshold_factor)

    found: dict[str, ArmResult] = {
        "memory_keyword": await records.memory_keyword(scope, query, depth),
    }
    if not blank:
        found["episode_fts"] = await records.episode_fts(scope, query, depth)
    vector = None
    if pieces.embedder is not None and not blank:
        vector = await pieces.embedder.embed_query(query)
    if vector is not None and pieces.vectors is not None:
        found["vector_near"] = await vector_near(
            pieces.vectors, vector, scope, stats, fetch=depth, floor=vector_floor, with_episodes=True
        )
        if rules.vector.reach > window:
            far = min(depth, rules.vector.far_limit or depth)
            found["vector_far"] = await vector_far(
                pieces.vectors, vector, scope, stats, fetch=far, floor=vector_floor, with_episodes=True
            )
    if vector is not None and pieces.blocks is not None and rules.seats.block > 0:
        found["block"] = await block_arm(
            pieces.blocks, vector, scope, limit=limit + rules.seats.block, max_hits=rules.blocks.search_hits
        )

    docs = await _documents(memory, {row.ref for arm in found.values() for row in arm.rows})
    arms = {name: _present(arm, docs, None if name == "block" else depth) for name, arm in found.items()}
    profile = await records.recall_profile(agent)
    profile_ref = _PROFILE_PREFIX + agent if profile is not None else None

    if mode == "cascade" or blank:
        fused = cascade(arms, limit=limit, vector_threshold=threshold, profile_ref=profile_ref)
    elif mode == "rsf":
        fused = rsf(arms, far_weight=rules.vector.far_weight, profile_ref=profile_ref)
    else:
        single = _single_arm(arms, docs, has_vector=vector is not None)
        k, weight = rules.fusion.rrf_k, rules.vector.far_weight
        if mode == "informed":
            fused, _ = informed(
                arms, k=k, far_weight=weight, profile_ref=profile_ref, single_arm_refs=single, scale=scale
            )
        else:
            fused = rrf(arms, k=k, far_weight=weight, profile_ref=profile_ref, single_arm_refs=single)
    gate = gate_config(
        stats.pool,
        rules.gate,
        deep=False,
        calibrated=calibrated,
        rrf_k=rules.fusion.rrf_k,
        blank_query=blank,
        literal=frozenset() if blank else _literal(records, query, arms, docs),
        scale=scale,
    )
    verdicts = [(row, decide(row, gate, rules.gate).passed) for row in fused]
    passed = [row for row, ok in verdicts if ok]
    _, dropped = autocut(passed, rules.autocut)
    ordered = [row.ref for row in passed if row.ref not in set(dropped)]
    kept = tuple(ordered[:limit])
    seated: list[str] = []
    block = arms.get("block")
    if block is not None and not blank:
        for row in block.rows:
            if len(seated) == rules.seats.block:
                break
            if row.ref in kept or row.ref in seated:
                continue
            # Under a policy with the seat floor a seat must clear the gate's cosine rule with its block's
            # cosine, like a vector row.
            if rules.seats.floor and not _clears_floor(row, gate, rules):
                continue
            seated.append(row.ref)
    return Replay(
        arms={name: tuple(row.ref for row in arm.rows) for name, arm in arms.items()},
        candidates=tuple(row.ref for row in fused),
        refused=frozenset(row.ref for row, ok in verdicts if not ok),
        autocut_dropped=frozenset(dropped),
        kept=kept,
        cut_by_count=tuple(ordered[limit:]),
        seated=tuple(seated),
    )


def _literal(
    records: RecallReads, query: str, arms: Mapping[str, ArmResult], docs: Mapping[str, Mapping[str, Any]]
) -> frozenset[str]:
    """The rows the literal-match rule admits: a keyword arm's first row holding every term it searched
    (a memory's content, an episode's summary, as the recall reads them)."""

    def holds_every_term(ref: str) -> bool:
        text = docs.get(ref, {}).get("content" if ref.startswith("mem:") else "summary")
        if text is None:
            return False
        held, searched = records.terms_held(query, str(text))
        return searched > 0 and held == searched

    return literal_matches(arms, holds_every_term)


async def _documents(memory: cpersona.Engine, refs: Iterable[str]) -> dict[str, Mapping[str, Any]]:
    """The stored records behind ``refs`` (records deleted since the arm ran are absent)."""
    wanted = sorted(refs)
    if not wanted:
        return {}
    keys = memory.keys
    names = [keys.memory(ref[4:]) if ref.startswith("mem:") else keys.episode(ref[3:]) for ref in wanted]
    docs = await json_ops(memory.backends.stores.redis).mget(names, "$")
    return {ref: doc[0] for ref, doc in zip(wanted, docs, strict=True) if doc}


def _present(arm: ArmResult, docs: Mapping[str, Mapping[str, Any]], cap: int | None) -> ArmResult:
    rows = [row for row in arm.rows if row.ref in docs][:cap]
    return dataclasses.replace(
        arm, rows=tuple(dataclasses.replace(row, rank=rank) for rank, row in enumerate(rows))
    )


def _single_arm(
    arms: Mapping[str, ArmResult], docs: Mapping[str, Mapping[str, Any]], *, has_vector: bool
) -> frozenset[str]:
    # Who counts as found by one arm for the gate (reference §3.3.1): every lexical row when the query
    # has no vector, else a lexical list's first row that has no stored vector.
    lexical = [arms[name] for name in ("episode_fts", "memory_keyword") if name in arms]
    if not has_vector:
        return frozenset(row.ref for arm in lexical for row in arm.rows)
    return frozenset(
        arm.rows[0].ref for arm in lexical if arm.rows and not docs[arm.rows[0].ref].get("embedded", False)
    )


# ------------------------------------------------------------------------------------- the two verdicts


# Where the manual path saw a gold lost, and the code each place stands for.
LOST_AT: Final[Mapping[str, str]] = {
    "no arm": CANDIDATE_MISS,
    "gate": FILTER_DROP,
    "autocut": FILTER_DROP,
    "count cut": RANKING_MISS,
    "below the block seats": RANKING_MISS,
    "unexplained": UNATTRIBUTED,
    RETURNED: RETURNED,
}


def lost_at(seen: Replay, ref: str) -> str:
    """The step of the replay where one gold left the answer (``returned`` if it did not)."""
    if ref in seen.returned:
        return RETURNED
    if not seen.reached(ref):
        return "no arm"
    if ref in seen.candidates:
        if ref in seen.refused:
            return "gate"
        if ref in seen.autocut_dropped:
            return "autocut"
        if ref in seen.cut_by_count:
            return "count cut"
        return "unexplained"
    if ref in seen.arms.get("block", ()):
        return "below the block seats"
    return "unexplained"


def manual_ref_code(seen: Replay, ref: str) -> str:
    """Why one gold is not in the replayed answer, from the replay alone (``returned`` if it is)."""
    return LOST_AT[lost_at(seen, ref)]


def manual_code(seen: Replay, missing: Iterable[str]) -> str:
    """One code for a question whose ``missing`` golds the replay did not return (reference §5 order)."""
    golds = list(missing)
    if not any(seen.reached(ref) for ref in golds):
        return CANDIDATE_MISS
    fused = [ref for ref in golds if ref in seen.candidates]
    survived = [ref for ref in fused if ref not in seen.refused and ref not in seen.autocut_dropped]
    if fused and not survived:
        return FILTER_DROP
    if any(ref in seen.cut_by_count for ref in golds):
        return RANKING_MISS
    if any(ref in seen.arms.get("block", ()) for ref in golds):
        return RANKING_MISS
    return UNATTRIBUTED


def trace_codes(payload: bytes, golds: Sequence[str]) -> tuple[str | None, dict[str, str]]:
    """The trace path: the question's code over its missing golds and a verdict per gold, read from the
    trace's JSON bytes only. A gold the trace shows as returned is ``returned``."""
    trace = json.loads(payload)
    per_gold: dict[str, str] = {}
    for ref in golds:
        code = confirm(trace, [ref])
        per_gold[ref] = RETURNED if code is None else code
    missing = [ref for ref in golds if per_gold[ref] != RETURNED]
    return (confirm(trace, missing) if missing else None), per_gold


# ------------------------------------------------------------------------------------ one question


@dataclasses.dataclass(frozen=True, slots=True)
class Attribution:
    """Both paths' verdicts on one question."""

    qid: str
    category: int
    golds: tuple[str, ...]
    missing: tuple[str, ...]
    """Golds the response does not hold."""
    trace_code: str | None
    manual_code: str | None
    trace_by_gold: Mapping[str, str]
    manual_by_gold: Mapping[str, str]
    manual_lost_at: Mapping[str, str]
    """Per gold, the step of the manual re-run where it left the answer."""
    replayed: bool
    """Whether the manual re-run returned exactly the response's rows, in order."""
    degraded: tuple[str, ...]
    trace_bytes: bytes = b""

    @property
    def failed(self) -> bool:
        return bool(self.missing)

    @property
    def agree(self) -> bool:
        return self.trace_code == self.manual_code and dict(self.trace_by_gold) == dict(self.manual_by_gold)


async def attribute(
    memory: cpersona.Engine,
    agent: str,
    question: str,
    golds: Iterable[str],
    *,
    limit: int = LIMIT,
    policy: str | None = None,
    qid: str = "",
    category: int = 0,
) -> Attribution:
    """Ask ``question`` once with a trace, re-run it by hand, and attribute its missing golds both ways."""
    fields: dict[str, Any] = {} if policy is None else {"policy": policy}
    result = await memory.recall(question, agent_id=agent, limit=limit, trace=True, **fields)
    if result.trace is None:
        raise RuntimeError(f"{qid or question!r}: the recall returned no trace although one was asked for")
    payload = encode_trace(result.trace)
    answer = tuple(_PROFILE_PREFIX + agent if row.ref is None else row.ref for row in result.rows)
    gold = tuple(dict.fromkeys(golds))
    missing = tuple(ref for ref in gold if ref not in answer)

    by_trace_code, by_trace = trace_codes(payload, gold)
    # The engine's clients carry their own deadlines; this one only bounds the whole re-run.
    with anyio.fail_after(_REPLAY_DEADLINE_SECS):
        seen = await replay(memory, agent, question, limit=limit, policy=policy)
    where = {ref: lost_at(seen, ref) for ref in gold}
    by_hand = {ref: LOST_AT[step] for ref, step in where.items()}
    by_hand_code = manual_code(seen, missing) if missing else None
    return Attribution(
        qid=qid,
        category=category,
        golds=gold,
        missing=missing,
        trace_code=by_trace_code,
        manual_code=by_hand_code,
        trace_by_gold=by_trace,
        manual_by_gold=by_hand,
        manual_lost_at=where,
        replayed=seen.returned == answer,
        degraded=tuple(f"{d.arm} {d.status}" for d in result.degraded),
        trace_bytes=payload,
    )


# ----------------------------------------------------------------------------------------- LoCoMo


def restrict(conversation: Conversation, sessions: int | None) -> Conversation:
    """The conversation's first ``sessions`` sessions (in time order) and the questions whose evidence
    lies wholly inside them; the whole conversation when ``sessions`` is ``None``."""
    if sessions is None:
        return conversation
    chosen = conversation.sessions[:sessions]
    numbers = {session.session for session in chosen}
    turns = tuple(turn for turn in conversation.turns if turn.session in numbers)
    held = {turn.dia_id for turn in turns}
    questions = tuple(q for q in conversation.questions if set(q.evidence) <= held)
    return dataclasses.replace(conversation, sessions=chosen, turns=turns, questions=questions)


async def ingest(memory: cpersona.Engine, conversation: Conversation) -> dict[str, str]:
    """Store the conversation's turns as memories of agent ``conv_id`` (as the quality harness's
    ``Cpersona`` system does) and build their blocks; return ``dia_id -> ref``.

    A turn whose content repeats an earlier one is folded into that record by the engine's dedup and
    shares its ref.
    """
    refs: dict[str, str] = {}
    turns = conversation.turns
    for start in range(0, len(turns), _BATCH):
        chunk = turns[start : start + _BATCH]
        batch = await memory.store_batch(
            [
                {
                    "content": turn.content,
                    "agent_id": conversation.conv_id,
                    "msg_id": turn.dia_id,
                    "timestamp": turn.timestamp,
                    "metadata": turn.metadata,
                }
                for turn in chunk
            ]
        )
        for turn, stored in zip(chunk, batch.results, strict=True):
            refs[turn.dia_id] = stored.ref
    await memory.drain_blocks()
    return refs


@dataclasses.dataclass(frozen=True, slots=True)
class Report:
    attributions: tuple[Attribution, ...]
    conversations: tuple[str, ...]
    turns: int
    ingest_secs: float
    attribute_secs: float

    @property
    def failed(self) -> list[Attribution]:
        return [a for a in self.attributions if a.failed]

    def counts(self, path: str) -> dict[str, int]:
        """Questions per code on one path (``trace`` or ``manual``), failed questions only."""
        tally = Counter(a.trace_code if path == "trace" else a.manual_code for a in self.failed)
        return {code: tally.get(code, 0) for code in CODES}

    def gold_counts(self, path: str) -> dict[str, int]:
        """Missing golds per code on one path."""
        tally: Counter[str] = Counter()
        for a in self.failed:
            verdicts = a.trace_by_gold if path == "trace" else a.manual_by_gold
            tally.update(verdicts[ref] for ref in a.missing)
        return {code: tally.get(code, 0) for code in CODES}

    def lost_at_counts(self) -> dict[str, int]:
        """Missing golds per step where the manual re-run saw them leave the answer."""
        tally = Counter(a.manual_lost_at[ref] for a in self.failed for ref in a.missing)
        return {step: tally.get(step, 0) for step in LOST_AT if step != RETURNED}

    @property
    def disagreements(self) -> list[Attribution]:
        return [a for a in self.attributions if not a.agree]

    @property
    def not_replayed(self) -> list[Attribution]:
        return [a for a in self.attributions if not a.replayed]


async def run(
    memory: cpersona.Engine,
    conversations: Sequence[Conversation],
    *,
    limit: int = LIMIT,
    max_questions: int | None = None,
    recall_categories: Sequence[int] = (1, 2, 3, 4),
    progress: bool = False,
) -> Report:
    """Ingest each conversation into ``memory`` and attribute every scored question of it."""
    out: list[Attribution] = []
    ingest_secs = attribute_secs = 0.0
    turns = 0
    for conversation in conversations:
        questions: list[Question] = [q for q in conversation.questions if q.category in recall_categories]
        if max_questions is not None:
            if len(out) >= max_questions:
                break
            questions = questions[: max_questions - len(out)]
        began = time.perf_counter()
        refs = await ingest(memory, conversation)
        ingest_secs += time.perf_counter() - began
        turns += len(conversation.turns)
        began = time.perf_counter()
        for n, q in enumerate(questions, 1):
            golds = [refs[dia_id] for dia_id in q.evidence]
            out.append(
                await attribute(
                    memory,
                    conversation.conv_id,
                    q.question,
                    golds,
                    limit=limit,
                    qid=q.qid,
                    category=q.category,
                )
            )
            if progress and (n % 25 == 0 or n == len(questions)):
                print(f"  {conversation.conv_id}: {n}/{len(questions)} questions", file=sys.stderr)
        attribute_secs += time.perf_counter() - began
    return Report(tuple(out), tuple(c.conv_id for c in conversations), turns, ingest_secs, attribute_secs)


# ------------------------------------------------------------------------------------------ report


def _table(report: Report, title: str, trace: dict[str, int], manual: dict[str, int]) -> list[str]:
    lines = [f"| {title} | trace + confirmation tool | manual re-run |", "|---|---|---|"]
    for code in CODES:
        lines.append(f"| {code} | {trace[code]} | {manual[code]} |")
    lines.append(f"| total | {sum(trace.values())} | {sum(manual.values())} |")
    return lines


def render(
    report: Report,
    data: LoCoMo,
    *,
    command: str,
    load_start: float,
    sessions: int | None,
    limit: int,
    partial: bool = False,
) -> str:
    attributions = report.attributions
    failed = report.failed
    by_category = Counter(a.category for a in attributions)
    failed_by_category = Counter(a.category for a in failed)
    scope = (
        f"first {sessions} session(s) of each, questions whose evidence lies there" if sessions else "whole"
    )
    lines = [
        "# Recall trace readiness: does the trace reproduce a manual attribution? (seed §1.4, item 2)",
        "",
        *harness.header(command, load_start=load_start),
        f"- data: {data.path.name} (sha256 {data.sha256[:12]}), conversations "
        f"{', '.join(report.conversations)} ({scope}); {report.turns:,} turns stored as memories, one agent "
        "per conversation",
        f"- recall: `limit={limit}`, `trace=True`, the engine's default policy and mode; "
        f"{len(attributions):,} non-adversarial questions asked",
        f"- time: ingest {report.ingest_secs:.0f} s (blocks included), recall + replay "
        f"{report.attribute_secs:.0f} s",
        "",
        *(
            [
                "**A partial run** (a subset of LoCoMo). The full run, every conversation and every "
                "non-adversarial question: `.venv/bin/python -m benchmarks recall_attribution` (it ingests "
                "about 5,900 turns; give it a quiet machine).",
                "",
            ]
            if partial
            else []
        ),
        "A question **failed** when some gold turn is not among the returned rows. The trace path reads "
        "only the trace's JSON bytes (as published) and asks `benchmarks/recall_trace_confirm.py`; the "
        "manual path re-runs the recall from the engine's arms and pure stage functions, never reading the "
        "trace, and names the stage where each missing gold was lost (see the module docstring of "
        "`benchmarks/recall_attribution.py`).",
        "",
        "## Outcome",
        "",
        f"- questions: {len(attributions):,}; all gold returned: {len(attributions) - len(failed):,}; "
        f"failed: {len(failed):,}",
        "- failed by category: "
        + ", ".join(
            f"{CATEGORY_NAMES.get(cat, cat)} {failed_by_category[cat]}/{by_category[cat]}"
            for cat in sorted(by_category)
        ),
        f"- **questions where the two paths disagree: {len(report.disagreements)}** (target: none; the "
        "comparison covers the question's code and every gold's verdict, returned golds included), "
        f"{sum(1 for a in report.disagreements if not a.replayed)} of them on questions the re-run did "
        "not reproduce",
        f"- questions whose manual re-run did not return exactly the response's rows: "
        f"{len(report.not_replayed)}",
        f"- recalls that came back degraded (an arm failed or ran out of time): "
        f"{sum(1 for a in attributions if a.degraded)}",
        "",
        "## Failed questions per code",
        "",
        *_table(report, "code", report.counts("trace"), report.counts("manual")),
        "",
        "## Missing gold turns per code",
        "",
        *_table(report, "code", report.gold_counts("trace"), report.gold_counts("manual")),
        "",
        "Where the manual re-run saw the missing golds leave the answer: "
        + ", ".join(f"{step} {n}" for step, n in report.lost_at_counts().items())
        + ".",
        "",
    ]
    if report.disagreements:
        lines += [
            "## Disagreements",
            "",
            "| question | category | missing golds | trace | manual | per gold (trace / manual) |",
            "|---|---|---|---|---|---|",
        ]
        for a in report.disagreements:
            per = "; ".join(
                f"{ref}: {a.trace_by_gold[ref]} / {a.manual_by_gold[ref]}"
                for ref in a.golds
                if a.trace_by_gold[ref] != a.manual_by_gold[ref]
            )
            lines.append(
                f"| {a.qid} | {a.category} | {len(a.missing)} | {a.trace_code} | {a.manual_code} | {per} |"
            )
        lines.append("")
    if report.not_replayed:
        lines += [
            "## Not reproduced by the re-run",
            "",
            "The manual path's attribution of these is not a replay of the recall the trace recorded "
            "(an arm's answer changed between the two runs, or an arm was degraded):",
            "",
            ", ".join(
                f"{a.qid}" + (f" ({'; '.join(a.degraded)})" if a.degraded else "")
                for a in report.not_replayed
            ),
            "",
        ]
    return "\n".join(lines)


def save_traces(report: Report, path: Path) -> None:
    """Failed questions as the confirmation tool's JSON-lines input (trace and missing golds)."""
    with path.open("w", encoding="utf-8") as handle:
        for a in report.failed:
            line = {"qid": a.qid, "trace": json.loads(a.trace_bytes), "gold": list(a.missing)}
            handle.write(json.dumps(line) + "\n")


# -------------------------------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the first conversation only")
    parser.add_argument("--conversations", help="comma-separated sample ids (default: all, or the first)")
    parser.add_argument("--sessions", type=int, help="keep each conversation's first N sessions only")
    parser.add_argument("--questions", type=int, help="stop after this many questions in all")
    parser.add_argument("--limit", type=int, default=LIMIT, help="rows per recall (default 10)")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="locomo10.json")
    parser.add_argument("--out", type=Path, help="report path (default: results/, or .cache/ for --quick)")
    parser.add_argument("--save-traces", type=Path, help="write failed questions' traces as JSON lines")
    return parser


async def _run_fresh(
    args: argparse.Namespace, conversations: Sequence[Conversation], data_dir: Path
) -> Report:
    # A fresh data dir with the embedded Redis and Qdrant; the shell's CPERSONA_* variables are ignored so
    # the run measures the engine's defaults.
    settings = Settings.from_env({}, data_dir=data_dir)
    async with cpersona.open(settings, background=False) as memory:
        return await run(memory, conversations, limit=args.limit, max_questions=args.questions, progress=True)


def main(argv: Sequence[str] | None = None) -> Report:
    args = build_parser().parse_args(argv)
    wanted = None if args.conversations is None else [c.strip() for c in args.conversations.split(",")]
    data = load_locomo(args.data, conversations=wanted)
    conversations = list(data.conversations)
    if args.quick:
        conversations = conversations[:1]
    conversations = [restrict(c, args.sessions) for c in conversations]
    out = args.out or (QUICK_RESULTS if args.quick else RESULTS)
    command = harness.command("recall_attribution", argv)
    load_start = harness.load()
    with tempfile.TemporaryDirectory(prefix="cpersona-attr-") as tmp:
        report = anyio.run(_run_fresh, args, conversations, Path(tmp))
    text = render(
        report,
        data,
        command=command,
        load_start=load_start,
        sessions=args.sessions,
        limit=args.limit,
        partial=bool(args.quick or args.conversations or args.sessions or args.questions),
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    if args.save_traces is not None:
        save_traces(report, args.save_traces)
    print(text)
    print(f"wrote {out}", file=sys.stderr)
    return report


if __name__ == "__main__":
    main()
