"""The recall trace (``trace_version`` 1): a record of what each stage of one recall kept, dropped and
reordered, and why.

The trace is read from what the recall already produced, never by running anything again: the chain's
run (:class:`~cpersona.recall.stages.chain.ChainRun`) holds every set it made, so the fused and scored
candidates, the gate's decisions, the count cut and the arms' lists are read from it by type. The only new
work is the coverage ledger (``recall.trace.coverage``), which reads the returned records' stored text.

It carries references, ranks, scores and reasons, never stored text: a record is its ref (``mem:<id>``,
``ep:<id>``) and a part of the question is a span. The profile row, whose ref in the response is
``profile:<agent_id>``, is ``"profile"`` everywhere in the trace (trace_version 1 named it so before the
row had a ref): in the gate's decisions, the orders, the coverage ledger.

Fields whose meaning the seed leaves to the implementation:

``arms``
    Every arm that ran, as handed to fusion (after the source filter and exclusions, re-ranked from 0):
    the fused arms cut to the depth, the block arm at its own length (``limit`` + block seats), since it
    feeds seats, not fusion. An arm that failed or timed out is an empty list.
``gate``
    ``heuristic_min`` and ``calibrated`` are as applied (``deep`` halves both). ``signal`` and
    ``threshold`` name the rule for the mode's main rows: ``rsf`` and the heuristic minimum under rsf;
    ``cosine`` and the calibrated threshold when one is selected, else the heuristic minimum, under rrf
    and cascade. Each decision carries its own exact threshold.
``autocut``
    ``kept`` is how many rows it left, ``dropped`` the refs it removed.
``timing_ms``
    The recall's own times (``retrieve``, one per stage its policy's chain lists, ``total`` — the recall
    without the trace), then ``trace`` (building this record, the ledger excluded) and ``coverage`` (the
    ledger).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from cpersona.recall.stages.chain import Counted, Gated, Ranked, Retrieved, Seated
from cpersona.recall.trace.coverage import coverage
from cpersona.version import __version__

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

    from cpersona.model.candidates import ArmRow
    from cpersona.recall.policy import Policy
    from cpersona.recall.request import RecallRequest, RecallResult
    from cpersona.recall.stages.chain import ChainRun
    from cpersona.recall.stages.gate import GateConfig
    from cpersona.settings import Settings
    from cpersona.stores.protocols import HydratedRecord, StoredProfile

__all__ = ["PROFILE_REF", "TRACE_VERSION", "build_trace"]

TRACE_VERSION = 1
PROFILE_REF = "profile"


def build_trace(
    req: RecallRequest,
    result: RecallResult,
    *,
    run: ChainRun,
    policy: Policy,
    gate: GateConfig,
    settings: Settings,
    scan_window: int,
    embedding_model: str | None,
    docs: Mapping[str, HydratedRecord],
    profile: StoredProfile | None,
) -> dict[str, Any]:
    """The trace of a finished recall.

    ``run`` is the chain's run that made ``result.final``, ``gate`` the configuration the gate stage
    compared against, ``scan_window`` the window the vector arms searched, ``docs`` the hydrated records
    (their full stored text feeds the coverage ledger; none of it enters the trace) and ``profile`` the
    profile the response rendered, if any.
    """
    started = time.perf_counter()
    trace: dict[str, Any] = {
        "trace_version": TRACE_VERSION,
        "policy": dict(result.policy),
        "server_version": __version__,
        "scope": _scope(req),
        "request": _request(req, result, policy),
        "config": _config(policy, gate, settings, scan_window, embedding_model),
        **_chain_sections(run, gate, result),
    }
    if result.cue_log is not None:
        # What the cue loop did: its stages, what it suspected, the bounded move and seats, or why the
        # cue was not used.
        trace.update(result.cue_log)
    ledger_started = time.perf_counter()
    trace["coverage"] = coverage(req.query, _returned_texts(result, docs, profile))
    ledger_done = time.perf_counter()
    trace["timing_ms"] = {
        **result.timing_ms,
        "coverage": (ledger_done - ledger_started) * 1000,
        # The rest of the build, up to here; serialising the trace is the caller's cost.
        "trace": (ledger_started - started + time.perf_counter() - ledger_done) * 1000,
    }
    return trace


def _chain_sections(run: ChainRun, gate: GateConfig, result: RecallResult) -> dict[str, Any]:
    """The sections read from the chain's sets, ``arms`` to ``suspected``, in the trace's key order."""
    seated, counted, gated, ranked, retrieved = _walk(run)
    profile_ref = retrieved.profile_ref

    def ref_of(ref: str) -> str:
        return PROFILE_REF if ref == profile_ref else ref

    return {
        "arms": {
            name: [{"ref": row.ref, "rank": row.rank, "raw": row.raw} for row in rows]
            for name, rows in _arm_lists(retrieved)
        },
        "fusion": [
            {"ref": c.ref, "score": c.fused, "votes": dict(c.votes)}
            for c in ranked.fused
            if c.kind != "profile"
        ],
        "scoring": _scoring(ranked),
        "gate": _gate(gated, gate, result.mode, ref_of),
        "autocut": {
            "fired": gated.autocut_fired,
            "kept": len(gated.rows),
            "dropped": [ref_of(r) for r in gated.autocut_dropped],
        },
        "order": {
            "before_cut": [{"ref": ref_of(r)} for r in counted.before_cut],
            "limit": result.limit,
            "cut_by_count": [ref_of(r) for r in counted.cut_by_count],
        },
        "reservation": [{"ref": seat.ref, "kind": seat.kind} for seat in seated.seats],
        "stages": [{"stage": 0, "searched": "all arms", "next": None}],
        "suspected": [],
    }


def _scope(req: RecallRequest) -> dict[str, Any]:
    scope = req.scope
    return {
        "agent_id": scope.agent_id,
        "project_id": scope.project_id,
        "channel": scope.channel,
        "source_id": scope.source_id,
    }


def _request(req: RecallRequest, result: RecallResult, policy: Policy) -> dict[str, Any]:
    """What the recall was asked, as it ran: limit and depth after the policy's bounds, the priors."""
    vector = policy.vector
    rules = policy.score_adjust
    asked: dict[str, Any] = {}
    if req.keyword_seats:
        asked["keyword_seats"] = req.keyword_seats
    if req.lexical_terms:
        # How many extra lexical terms the arms got (reconstruct's cues list them in its own trace).
        asked["lexical_terms"] = len(req.lexical_terms)
    return {
        "limit": result.limit,
        "depth": result.depth,
        "deep": req.deep,
        "mode": result.mode,
        "confidence_ordering": "none",
        "prior": {
            "far_weight": vector.far_weight,
            "age_rate": rules.prior_age_rate,
            "age_floor": rules.prior_age_floor,
            "age_anchor": rules.prior_age_anchor,
        },
        "episode_penalty": rules.episode_penalty,
        "time_cue": None if req.time_cue is None else req.time_cue.to_json(),
        **asked,
    }


def _config(
    policy: Policy, gate: GateConfig, settings: Settings, scan_window: int, embedding_model: str | None
) -> dict[str, Any]:
    vector = policy.vector
    return {
        "embedding_mode": settings.embedding_mode,
        "embedding_model": embedding_model,
        "scan_window": scan_window,
        "vector_reach": vector.reach,
        "vector_far_limit": vector.far_limit,
        "fused_gate_enabled": gate.calibrated is not None,
        "autocut_enabled": policy.autocut.enabled,
    }


def _arm_lists(retrieved: Retrieved) -> Iterator[tuple[str, tuple[ArmRow, ...]]]:
    for name, arm in retrieved.arms.items():
        yield name, arm.rows
    if retrieved.cue is not None:
        yield "cue", retrieved.cue.rows


def _walk(run: ChainRun) -> tuple[Seated, Counted, Gated, Ranked, Retrieved]:
    """The last set of each type the chain made: the gated set after autocut (and the cue move), the
    ranked set after scoring (which still holds fusion's own order in ``fused``)."""
    return run.last(Seated), run.last(Counted), run.last(Gated), run.last(Ranked), run.last(Retrieved)


def _scoring(ranked: Ranked) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if ranked.penalty:
        out["episode_penalty"] = dict(ranked.penalty)
    if ranked.prior:
        out["prior"] = dict(ranked.prior)
    return out


def _gate(gated: Gated, cfg: GateConfig, mode: str, ref_of: Callable[[str], str]) -> dict[str, Any]:
    if mode == "rsf":
        signal, threshold = "rsf", cfg.effective_min
    else:
        signal = "cosine"
        threshold = cfg.calibrated if cfg.calibrated is not None else cfg.effective_min
    decisions: list[dict[str, Any]] = []
    for d in gated.decisions:
        entry: dict[str, Any] = {
            "ref": ref_of(d.ref),
            "signal": d.signal,
            "score": d.score,
            "threshold": d.threshold,
            "passed": d.passed,
        }
        if d.reason is not None:
            entry["reason"] = d.reason
        decisions.append(entry)
    return {
        "signal": signal,
        "threshold": threshold,
        "heuristic_min": cfg.effective_min,
        "calibrated": cfg.calibrated,
        "origin": cfg.origin,
        "pool": cfg.pool,
        "decisions": decisions,
        "gate_fallback": False,
    }


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
