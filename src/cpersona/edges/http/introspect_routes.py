"""The routes Cerememory's clients call that are not operations of their own elsewhere: readiness, one
record as CMP's ``MemoryRecord`` (``introspect.record``), and the CMP operations this engine does not offer.

Those answer 501 ``NOT_IMPLEMENTED`` in the error envelope, a code CMP has not, which the Cerememory SDK
raises as its base ``CerememoryError`` with the code and the status (never its ``InternalError``, which
would say the server failed):

- ``lifecycle.dream_tick``: summarising the raw journal into new memories needs a summariser this engine
  does not have; a deterministic stand-in would write memories nobody asked for.
- ``lifecycle.set_mode``: the reference engine keeps one process-wide mode for every caller; here the
  mode is a field of each recall (``recall_mode``), so a global switch would change other agents' recalls.
- ``introspect.evolution``: the reference reports parameter adjustments it never applies; this engine
  makes none and runs no analysis that could report "none found".
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from cpersona.edges.http.errors import (
    NotImplementedHere,
    ORJSONResponse,
    backend_message,
    error_envelope,
)
from cpersona.edges.http.operation import Handler, NoQuery, Operation
from cpersona.edges.http.reading import read_query
from cpersona.edges.http.state import engine_of
from cpersona.errors import InvalidRequest
from cpersona.model.cmp_record import cmp_record
from cpersona.model.cmp_responses import CmpMemoryRecord, ReadinessResponse
from cpersona.model.fields import check
from cpersona.model.record_queries import UUID_PATTERN, MemoryRef, RecordQuery
from cpersona.model.records import MemoryRecord

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

__all__ = ["INTROSPECT_OPERATIONS", "memory_ref"]

_BARE_UUID = re.compile(UUID_PATTERN)


async def _readiness(request: Request) -> Response:
    read_query(request, NoQuery)
    ready = await request.state.engine.readiness()
    exc = ready.failure
    if exc is not None:
        request_id = request.scope.get("state", {}).get("request_id")
        body = error_envelope(exc.code, backend_message(exc), None, request_id)
        down = next(name for name, state in ready.components.items() if state == "down")
        reason = f"{down} unavailable"
        not_ready = {
            **body,
            "status": "not_ready",
            "reason": reason,
            "components": ready.components,
            "mode": ready.mode,
        }
        return ORJSONResponse(not_ready, 503)
    return ORJSONResponse({"ok": True, "status": "ready", "components": ready.components, "mode": ready.mode})


def memory_ref(record_id: str) -> str:
    """A memory's id as a ref: Cerememory's bare UUID (any case) names a memory, as ``mem:<uuid>`` does."""
    bare = record_id.removeprefix("mem:")
    return f"mem:{bare.lower()}" if _BARE_UUID.fullmatch(bare) else record_id


async def _introspect_record(request: Request) -> Response:
    query = read_query(request, RecordQuery)
    engine = engine_of(request)
    # CMP's records are memories: an episode or a raw entry has no MemoryRecord shape.
    record_id = check(MemoryRef, request.path_params["record_id"], "record_id", engine.settings)
    record = await engine.get(memory_ref(record_id), agent_id=query.agent_id)
    if not isinstance(record, MemoryRecord):  # pragma: no cover - a mem: ref reads a memory
        raise InvalidRequest("record_id", "must name a memory")
    # Engine.get hands out the record as read (its fidelity at this moment, model/fidelity.as_read): no
    # second decay here.
    return ORJSONResponse(cmp_record(record))


def _not_implemented(operation: str, reason: str) -> Handler:
    async def refuse(request: Request) -> Response:
        read_query(request, NoQuery)
        raise NotImplementedHere(operation, reason)

    return refuse


_DREAM = "it needs a summariser of the raw journal, which this engine does not have"
_MODE = "the recall mode is per request here (recall.query's recall_mode), not one switch for every caller"
_EVOLUTION = "this engine adjusts no parameters by itself, so there is nothing to report"
_NOT_OURS = (501,)

INTROSPECT_OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "GET",
        "/readiness",
        _readiness,
        "Ready to serve: the engine is open and no component is down",
        ReadinessResponse,
        errors=(503,),
        description="Cerememory's readiness probe. `components` gives each one's state (`up`, `down`, or "
        "`off` when the engine runs without it): `redis`, `vectors.records`, `vectors.blocks` (down while "
        "an embedded shard's process is being restarted) and `embedder`. `mode` is `read-only` while every "
        "write is refused with 507 for want of disk (an engine that started on a full disk, or a disk under "
        "CPERSONA_MIN_FREE_MB), else `read-write`. Not ready is a 503 error envelope that also says "
        "`status: not_ready`, the `reason` (the first component down), the `components` and the `mode`.",
    ),
    Operation(
        "GET",
        "/v1/introspect/record/{record_id}",
        _introspect_record,
        "One memory as Cerememory's MemoryRecord (introspect.record)",
        CmpMemoryRecord,
        query=RecordQuery,
        errors=(400, 404, 503),
        path_params={"record_id": MemoryRef},
        description="`record_id` is the bare UUID (as Cerememory sends it) or `mem:<uuid>`. Reading does not "
        "reconsolidate. Fidelity and noise are their values now.",
    ),
    Operation(
        "POST",
        "/v1/lifecycle/dream-tick",
        _not_implemented("lifecycle.dream_tick", _DREAM),
        "Cerememory's dream tick: not implemented (501)",
        None,
        errors=_NOT_OURS,
    ),
    Operation(
        "PUT",
        "/v1/lifecycle/mode",
        _not_implemented("lifecycle.set_mode", _MODE),
        "Cerememory's global recall mode: not implemented (501)",
        None,
        errors=_NOT_OURS,
    ),
    Operation(
        "GET",
        "/v1/introspect/evolution",
        _not_implemented("introspect.evolution", _EVOLUTION),
        "Cerememory's evolution metrics: not implemented (501)",
        None,
        errors=_NOT_OURS,
    ),
)
