"""``recall.associate``: spreading activation from one memory, over the same module as the query's
second wave (:mod:`cpersona.operations.activation`), within the caller's scope.

The type filter is applied soundly, at every hop: only edges of the listed types are walked, so every
result's whole path is made of them. The reference walks every edge and filters afterwards, keeping a
node two or more hops away whatever the edges that led there, and cuts to ``limit`` before filtering
(so fewer than ``limit`` may come back while more qualify); neither happens here. ``relevance_score`` is
the activation level; content is returned exactly (no noise in any mode), and nothing is written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cpersona.errors import InvalidRequest, RecordNotFound
from cpersona.model.cue_query_response import AssociateResult
from cpersona.model.scope import ReadScope
from cpersona.operations.activation import edge_target, spread
from cpersona.operations.query import scoped_loader
from cpersona.operations.query.records import recalled

if TYPE_CHECKING:
    from cpersona.model.cue_query_associate import AssociateRequest
    from cpersona.model.fidelity import FidelityCurve
    from cpersona.model.records import MemoryRecord
    from cpersona.stores.cue_store import CueStore

__all__ = ["associate", "memory_id"]


def memory_id(record_id: str) -> str:
    """The memory UUID of ``mem:<uuid>`` or a bare UUID; else a 400 naming ``record_id``."""
    found = edge_target(record_id)
    if found is None:
        raise InvalidRequest("record_id", "must be a memory ref (mem:<uuid>) or a bare UUID")
    return found


async def associate(
    cues: CueStore, req: AssociateRequest, record_id: str, *, now: float, curve: FidelityCurve
) -> AssociateResult:
    """The memories reached from ``record_id``, most activated first (404 outside the caller's scope)."""
    rid = memory_id(record_id)
    if req.record_id is not None and edge_target(req.record_id) != rid:
        raise InvalidRequest("record_id", "names another record than the path")
    scope = ReadScope(req.agent_id, req.project_id, req.channel)
    records: dict[str, MemoryRecord] = {}
    load = scoped_loader(cues, scope, records)
    source = (await load([rid])).get(rid)
    if source is None:
        raise RecordNotFound(f"mem:{rid}", "record_id")
    types = None if req.association_types is None else tuple(req.association_types)
    activated = await spread([(source, 1.0)], load, depth=req.depth, min_weight=req.min_weight, types=types)
    order = sorted(activated.values(), key=lambda a: (-a.level, a.record_id))
    memories = [
        recalled(records[a.record_id], a.level, a.path, "perfect", now, curve) for a in order[: req.limit]
    ]
    return AssociateResult(memories=memories, total_candidates=len(order))
