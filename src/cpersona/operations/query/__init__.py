"""The multimodal ``recall.query``: a cue's arms, fused, a second wave of spreading activation from the
fused leaders, the filters, and the answer rendered for the recall mode.

::

    arms (concurrent, each under a deadline: lexical, vector, emotion, temporal; see .arms)
      → read every memory they found, in one batch
      → filters: the caller's scope, stores, the time range (inclusive, on the memory's own timestamp),
        fidelity now (min_fidelity; below the prune threshold 0.01 unless include_decayed)
      → reciprocal rank fusion (.fusion) → the leaders spread activation (cpersona.operations.activation)
      → relevance = share + 0.3·activation (0.8·activation for a memory only activation reached)
      → best first, total_candidates counted, the first `limit` rendered (.records)

It only reads. Reconsolidation of what it returns is the engine's to write after the answer
(:mod:`.reconsolidation`): :class:`QueryOutcome` names the memories.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Literal

from cpersona.model.cue_query_response import ActivationNode, ActivationTrace, CueQueryResult, QueryMetadata
from cpersona.model.fidelity import is_decayed
from cpersona.model.scope import ReadScope
from cpersona.operations.activation import PRUNE, spread
from cpersona.operations.query.arms import QueryPorts, run_arms
from cpersona.operations.query.fusion import MAX_SEEDS, final_scores, fuse
from cpersona.operations.query.records import fidelity_now, recalled
from cpersona.operations.query.trace import query_trace

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from cpersona.model.cue_query import CueQueryRequest
    from cpersona.model.fidelity import FidelityCurve
    from cpersona.model.records import MemoryRecord
    from cpersona.operations.activation import Activation
    from cpersona.operations.query.fusion import Fused
    from cpersona.stores.cue_store import CueStore

__all__ = ["QueryOutcome", "QueryPorts", "cue_query", "scoped_loader"]

Verdict = Literal["ok", "unseen", "filtered"]


@dataclasses.dataclass(frozen=True, slots=True)
class QueryOutcome:
    """The answer, and the ids of the memories it returned (what reconsolidation strengthens)."""

    result: CueQueryResult
    returned: tuple[str, ...]


def scoped_loader(
    cues: CueStore, scope: ReadScope, cache: dict[str, MemoryRecord]
) -> Callable[[Sequence[str]], Awaitable[dict[str, MemoryRecord]]]:
    """Activation's loader: the memories ``scope`` sees among the ids asked for (kept in ``cache``)."""

    async def load(ids: Sequence[str]) -> dict[str, MemoryRecord]:
        found = await cues.memories(ids)
        # Only what the scope sees is kept, or counted in total_records_scanned.
        visible = {rid: rec for rid, rec in found.items() if scope.sees(rec.scope, rec.source)}
        cache.update(visible)
        return visible

    return load


def _verdict(
    record: MemoryRecord, req: CueQueryRequest, scope: ReadScope, now: float, curve: FidelityCurve
) -> Verdict:
    if not scope.sees(record.scope, record.source) or record.store not in req.store_kinds:
        return "unseen"
    t = req.cue.temporal
    if t is not None and not t.start <= record.timestamp <= t.end:
        return "unseen"
    if not req.include_decayed and is_decayed(record, now, curve=curve):
        return "filtered"
    if req.min_fidelity is not None and fidelity_now(record, now, curve) < req.min_fidelity:
        return "filtered"
    return "ok"


def _eligible(
    records: Mapping[str, MemoryRecord],
    req: CueQueryRequest,
    scope: ReadScope,
    now: float,
    curve: FidelityCurve,
) -> tuple[dict[str, MemoryRecord], int]:
    keep: dict[str, MemoryRecord] = {}
    filtered = 0
    for rid, record in records.items():
        verdict = _verdict(record, req, scope, now, curve)
        if verdict == "ok":
            keep[rid] = record
        filtered += verdict == "filtered"
    return keep, filtered


async def cue_query(
    ports: QueryPorts, req: CueQueryRequest, *, now: float, curve: FidelityCurve
) -> QueryOutcome:
    """Run one cue query (``req`` validated, its cue checked) at the moment ``now``, every fidelity read
    on ``curve``."""
    scope = ReadScope(req.agent_id, req.project_id, req.channel)
    arms = await run_arms(req, scope, ports, max(3 * req.limit, 30))
    found = list(dict.fromkeys(rid for arm in arms for rid in arm.ids))
    records = await ports.cues.memories(found)
    keep, filtered = _eligible(records, req, scope, now, curve)
    fused = fuse(arms, keep)
    activated: dict[str, Activation] = {}
    if req.activation_depth > 0 and fused:
        seeds = [(keep[f.id], f.share) for f in fused[:MAX_SEEDS]]
        load = scoped_loader(ports.cues, scope, records)
        activated = await spread(seeds, load, depth=req.activation_depth, min_weight=PRUNE)
        extra, more_filtered = _eligible(
            {rid: records[rid] for rid in activated if rid not in keep}, req, scope, now, curve
        )
        keep.update(extra)
        filtered += more_filtered
    scores = final_scores(fused, activated, keep)
    order = sorted(scores, key=lambda rid: (-scores[rid], rid))
    top = order[: req.limit]
    spreading = req.activation_depth > 0
    memories = [
        recalled(
            keep[rid],
            scores[rid],
            activated[rid].path if rid in activated else ((rid,) if spreading else None),
            req.recall_mode,
            now,
            curve,
        )
        for rid in top
    ]
    metadata = QueryMetadata(
        total_records_scanned=len(records),
        stores_searched=list(req.store_kinds),
        fidelity_filtered=filtered,
        degraded=[f"{arm.arm}: {arm.detail}" for arm in arms if arm.status != "ok"],
    )
    result = CueQueryResult(
        memories=memories,
        activation_trace=_activation_trace(fused, activated) if spreading and fused else None,
        total_candidates=len(order),
        query_metadata=metadata,
        trace=query_trace(arms, fused, activated, top, scores) if req.trace else None,
    )
    return QueryOutcome(result, tuple(top))


def _activation_trace(fused: Sequence[Fused], activated: Mapping[str, Activation]) -> ActivationTrace:
    nodes = [
        ActivationNode(
            record_id=act.record_id,
            activation_level=act.level,
            hop=act.hop,
            edge_type=act.edge_type,
            source_id=act.seed,
        )
        for act in sorted(activated.values(), key=lambda a: (-a.level, a.record_id))
    ]
    return ActivationTrace(source_id=fused[0].id, activations=nodes)
