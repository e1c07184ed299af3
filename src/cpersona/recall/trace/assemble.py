"""The recall trace (``trace_version`` 1): a record of what each stage of one recall kept, dropped and
reordered, and why.

The trace is read from what the recall already produced, never by running anything again: the chain's
run (:class:`~cpersona.recall.stages.chain.ChainRun`) holds every set it made, so the fused and scored
candidates, the gate's decisions, the count cut and the arms' lists are read from it by type. The only new
work is the coverage ledger (``recall.trace.coverage``), which reads the returned records' stored text.

The sections are the models of :mod:`cpersona.model.trace`; this module is the one place they are
built from a finished recall. It carries references, ranks, scores and reasons, never stored text: a
record is its ref (``mem:<id>``, ``ep:<id>``) and a part of the question is a span. The profile row,
whose ref in the response is ``profile:<agent_id>``, is ``"profile"`` everywhere in the trace
(trace_version 1 named it so before the row had a ref): in the gate's decisions, the orders, the
coverage ledger.

Fields whose meaning the seed leaves to the implementation:

``arms``
    Every arm that ran, as handed to fusion (after the source filter and exclusions, re-ranked from 0):
    the fused arms cut to the depth, the block arm at its own length (``limit`` + block seats), since it
    feeds seats, not fusion. An arm that failed or timed out is an empty list.
``gate``
    ``heuristic_min`` and ``calibrated`` are as applied (``deep`` halves both). ``signal`` and
    ``threshold`` name the rule for the mode's main rows: ``rsf`` and the heuristic minimum under rsf;
    ``cosine`` and the calibrated threshold when one is selected, else the heuristic minimum carried
    into the embedder's cosines by ``cosine_scale`` (shown only when it is not (0, 1)), under rrf,
    informed and cascade. Each decision carries its own exact threshold.
``fusion_weights``
    Under ``informed`` fusion only: each fused list's weight for this query and the scores it was
    measured from (its top and median raw score).
``autocut``
    ``kept`` is how many rows it left, ``dropped`` the refs it removed.
``cue``, ``stages``, ``suspected``, ``budget``
    With a cue: the loop's stages, what it suspected, the bounded move and seats and why it stopped
    (read from the loop's :class:`~cpersona.recall.cue_loop.CueOutcome` and the chain's run); or
    ``cue_ignored`` when the cue was not used. Without one, ``stages`` is the one stage of every arm.
``timing_ms``
    The recall's own times (``retrieve``, one per stage its policy's chain lists, ``total`` — the recall
    without the trace), then ``trace`` (building this record, the ledger excluded) and ``coverage`` (the
    ledger).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from cpersona.model.time_cue import iso
from cpersona.model.trace import (
    TRACE_VERSION,
    ArmRowTrace,
    ArmStage,
    Autocut,
    Budget,
    CueIgnored,
    CueLift,
    CueStageTrace,
    CueTrace,
    FusionRow,
    FusionWeight,
    GateDecisionTrace,
    GateTrace,
    OrderTrace,
    RecallConfig,
    RecallRequestTrace,
    RecallTrace,
    ScopeTrace,
    Scoring,
    SeatTrace,
    SuspectedTrace,
    TimeCueTrace,
    TracedRef,
    TracePolicy,
    TracePrior,
)
from cpersona.recall.stages.chain import Counted, Gated, Ranked, Retrieved, Seated
from cpersona.recall.trace.coverage import coverage
from cpersona.version import __version__

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

    from cpersona.model.candidates import ArmRow
    from cpersona.model.time_cue import Period
    from cpersona.recall.cue_loop import CueOutcome
    from cpersona.recall.policy import Policy
    from cpersona.recall.request import RecallRequest, RecallResult
    from cpersona.recall.stages.chain import ChainRun
    from cpersona.recall.stages.gate import GateConfig
    from cpersona.settings import Settings
    from cpersona.stores.protocols import HydratedRecord, StoredProfile

__all__ = ["PROFILE_REF", "TRACE_VERSION", "build_trace"]

PROFILE_REF = "profile"

_MISS = "the cue period holds no candidate"


def build_trace(
    req: RecallRequest,
    result: RecallResult,
    *,
    run: ChainRun,
    cue: CueOutcome | None,
    policy: Policy,
    gate: GateConfig,
    settings: Settings,
    scan_window: int,
    embedding_model: str | None,
    docs: Mapping[str, HydratedRecord],
    profile: StoredProfile | None,
) -> RecallTrace:
    """The trace of a finished recall.

    ``run`` is the chain's run that made ``result.final``, ``cue`` what the cue loop did (``None``
    without a cue), ``gate`` the configuration the gate stage compared against, ``scan_window`` the
    window the vector arms searched, ``docs`` the hydrated records (their full stored text feeds the
    coverage ledger; none of it enters the trace) and ``profile`` the profile the response rendered.
    """
    started = time.perf_counter()
    seated, counted, gated, ranked, retrieved = _walk(run)
    profile_ref = retrieved.profile_ref

    def ref_of(ref: str) -> str:
        return PROFILE_REF if ref == profile_ref else ref

    sections = {
        "trace_version": TRACE_VERSION,
        "policy": TracePolicy(scoring=result.policy["scoring"], process=result.policy["process"]),
        "server_version": __version__,
        "scope": _scope(req),
        "request": _request(req, result, policy),
        "config": _config(policy, gate, settings, scan_window, embedding_model),
        "arms": {
            name: [ArmRowTrace(ref=row.ref, rank=row.rank, raw=row.raw) for row in rows]
            for name, rows in _arm_lists(retrieved)
        },
        "fusion": [
            FusionRow(ref=c.ref, score=c.fused, votes=dict(c.votes))
            for c in ranked.fused
            if c.kind != "profile"
        ],
        "fusion_weights": {
            w.arm: FusionWeight(weight=w.weight, informative=w.informative, top=w.top, bulk=w.bulk)
            for w in ranked.weights
        },
        "scoring": Scoring(episode_penalty=dict(ranked.penalty), prior=dict(ranked.prior)),
        "gate": _gate(gated, gate, result.mode, ref_of),
        "autocut": Autocut(
            fired=gated.autocut_fired,
            kept=len(gated.rows),
            dropped=[ref_of(r) for r in gated.autocut_dropped],
        ),
        "order": OrderTrace(
            before_cut=[TracedRef(ref=ref_of(r)) for r in counted.before_cut],
            limit=result.limit,
            cut_by_count=[ref_of(r) for r in counted.cut_by_count],
        ),
        "reservation": [SeatTrace(ref=seat.ref, kind=seat.kind) for seat in seated.seats],
        "stages": [ArmStage(stage=0, searched="all arms", next=None)],
        "suspected": [],
        **({} if cue is None else _cue_loop(cue, counted, gated, seated)),
    }
    ledger_started = time.perf_counter()
    ledger = coverage(req.query, _returned_texts(result, docs, profile))
    ledger_done = time.perf_counter()
    timing = {
        **result.timing_ms,
        "coverage": (ledger_done - ledger_started) * 1000,
        # The rest of the build, up to here; serialising the trace is the caller's cost.
        "trace": (ledger_started - started + time.perf_counter() - ledger_done) * 1000,
    }
    return RecallTrace.model_validate({**sections, "coverage": ledger, "timing_ms": timing})


def _cue_loop(cue: CueOutcome, counted: Counted, gated: Gated, seated: Seated) -> dict[str, object]:
    """What the cue loop did: its stages, what it suspected, the bounded move and seats, or why the cue
    was not used."""
    if cue.recent_only:
        return {"cue_ignored": CueIgnored(reason="recent_only", period=_ends(cue.ignored))}
    moves = counted.moves or gated.moves
    return {
        "stages": [
            CueStageTrace(
                stage=s.stage,
                searched="all arms and the cue arm" if s.stage == 0 else "the cue arm",
                confidence=s.confidence,
                period=_ends(s.period),
                found=s.found,
                next=s.next,
            )
            for s in cue.stages
        ],
        "suspected": [
            SuspectedTrace(stage=s.stage, code="CANDIDATE_MISS", reason=_MISS, action=s.action)
            for s in cue.suspected
        ],
        "cue": CueTrace(
            bound=cue.plan.policy.lift[cue.confidence],
            confidence=cue.confidence,
            lifted=[
                CueLift.model_validate({"row": m.ref, "from": m.from_, "to": m.to})
                for m in moves
                if m.to < m.from_
            ],
            seated=[seat.ref for seat in seated.seats if seat.kind == "cue"],
        ),
        "budget": Budget(cue_time_limit_ms=cue.plan.limit_ms, stop=cue.stop),
    }


def _ends(period: Period | None) -> tuple[str, str] | None:
    """A period as its ISO ends."""
    if period is None:
        return None
    return iso(period.start), iso(period.end)


def _scope(req: RecallRequest) -> ScopeTrace:
    scope = req.scope
    return ScopeTrace(
        agent_id=scope.agent_id, project_id=scope.project_id, channel=scope.channel, source_id=scope.source_id
    )


def _request(req: RecallRequest, result: RecallResult, policy: Policy) -> RecallRequestTrace:
    """What the recall was asked, as it ran: limit and depth after the policy's bounds, the priors."""
    vector = policy.vector
    rules = policy.score_adjust
    return RecallRequestTrace(
        limit=result.limit,
        depth=result.depth,
        deep=req.deep,
        mode=result.mode,
        confidence_ordering="none",
        prior=TracePrior(
            far_weight=vector.far_weight,
            age_rate=rules.prior_age_rate,
            age_floor=rules.prior_age_floor,
            age_anchor=rules.prior_age_anchor,
        ),
        episode_penalty=rules.episode_penalty,
        time_cue=None
        if req.time_cue is None
        else TimeCueTrace.model_validate(req.time_cue.model_dump(mode="json")),
        keyword_seats=policy.seats.keyword,
        # How many extra lexical terms the arms got (reconstruct's cues list them in its own trace).
        lexical_terms=len(req.lexical_terms),
    )


def _config(
    policy: Policy, gate: GateConfig, settings: Settings, scan_window: int, embedding_model: str | None
) -> RecallConfig:
    vector = policy.vector
    return RecallConfig(
        embedding_mode=settings.embedding_mode,
        embedding_model=embedding_model,
        scan_window=scan_window,
        vector_reach=vector.reach,
        vector_far_limit=vector.far_limit,
        fused_gate_enabled=gate.calibrated is not None,
        autocut_enabled=policy.autocut.enabled,
    )


def _arm_lists(retrieved: Retrieved) -> Iterator[tuple[str, tuple[ArmRow, ...]]]:
    for name, arm in retrieved.arms.items():
        yield name, arm.rows
    if retrieved.cue is not None:
        yield "cue", retrieved.cue.rows


def _walk(run: ChainRun) -> tuple[Seated, Counted, Gated, Ranked, Retrieved]:
    """The last set of each type the chain made: the gated set after autocut (and the cue move), the
    ranked set after scoring (which still holds fusion's own order in ``fused``)."""
    return run.last(Seated), run.last(Counted), run.last(Gated), run.last(Ranked), run.last(Retrieved)


def _gate(gated: Gated, cfg: GateConfig, mode: str, ref_of: Callable[[str], str]) -> GateTrace:
    relative = mode == "rsf"  # informed rows are gated as rrf's are (see the gate's module)
    if relative:
        threshold = cfg.effective_min
    else:
        threshold = cfg.calibrated if cfg.calibrated is not None else cfg.cosine_min
    decisions = [
        GateDecisionTrace(
            ref=ref_of(d.ref),
            signal=d.signal,
            score=d.score,
            threshold=d.threshold,
            passed=d.passed,
            reason=d.reason,
        )
        for d in gated.decisions
    ]
    return GateTrace(
        signal="rsf" if relative else "cosine",
        threshold=threshold,
        heuristic_min=cfg.effective_min,
        cosine_scale=cfg.scale,
        calibrated=cfg.calibrated,
        origin=cfg.origin,
        pool=cfg.pool,
        decisions=decisions,
        gate_fallback=False,
    )


def _returned_texts(
    result: RecallResult, docs: Mapping[str, HydratedRecord], profile: StoredProfile | None
) -> Iterator[tuple[str, str]]:
    """``(ref, full stored text)`` for each returned record, in the order the response lists them."""
    for row in result.rows:
        if row.kind == "profile":
            if profile is not None:
                yield PROFILE_REF, profile.content
            continue
        doc = docs.get(row.ref)
        if doc is None:
            continue
        yield row.ref, doc.full_text()
