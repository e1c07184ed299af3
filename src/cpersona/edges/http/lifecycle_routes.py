"""The lifecycle routes (Cerememory §6, §7): decay tick, decay forecast, forget, consolidate, export and
import, each reading its body into its model and answering its result's JSON. Added to the route table
by :mod:`cpersona.edges.http.routes` (``*LIFECYCLE_OPERATIONS``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import orjson
from starlette.responses import StreamingResponse

from cpersona.edges.http.errors import ORJSONResponse, failure_response
from cpersona.edges.http.operation import Operation
from cpersona.edges.http.reading import read_body
from cpersona.edges.http.state import services_of
from cpersona.model.lifecycle_requests import (
    ConsolidateRequest,
    DecayForecastRequest,
    DecayTickRequest,
    ExportRequest,
    ForgetRequest,
    ImportRequest,
)
from cpersona.model.lifecycle_responses import (
    ConsolidateResult,
    DecayForecastResult,
    DecayTickResult,
    ExportResult,
    ForgetResult,
    ImportResult,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from starlette.requests import Request
    from starlette.responses import Response

__all__ = ["LIFECYCLE_OPERATIONS"]

# The forget's answer as it goes, when the caller accepts it (see _forget_streamed).
_NDJSON: Final = "application/x-ndjson"


async def _decay_tick(request: Request) -> Response:
    req = await read_body(request, DecayTickRequest)
    return ORJSONResponse((await services_of(request).upkeep.decay_tick(req)).model_dump(mode="json"))


async def _decay_forecast(request: Request) -> Response:
    req = await read_body(request, DecayForecastRequest)
    return ORJSONResponse((await services_of(request).upkeep.decay_forecast(req)).model_dump(mode="json"))


async def _forget(request: Request) -> Response:
    req = await read_body(request, ForgetRequest)
    if _NDJSON in request.headers.get("accept", ""):
        return await _forget_streamed(request, req)
    return ORJSONResponse((await services_of(request).upkeep.forget(req)).model_dump(mode="json"))


async def _forget_streamed(request: Request, req: ForgetRequest) -> Response:
    """A forget that reports as it goes, one JSON line per page deleted (``{"records_deleted": n}``), then
    the result's own line; a failure part way ends the stream with the error envelope the request would
    have got (its request id, no file names) and the count so far.

    The request is validated and confirmed before the answer starts, so those refusals are plain error
    responses with their status; a backend that fails once pages are being deleted can only end the
    stream. A caller that hangs up stops the forget after the page under way (each page is deleted
    whole): what was counted so far is gone, the rest is not.
    """
    progress = services_of(request).upkeep.forget_progress(req)
    await anext(progress)
    request_id = request.scope.get("state", {}).get("request_id")

    async def lines() -> AsyncIterator[bytes]:
        deleted = 0
        try:
            async for deleted in progress:
                yield orjson.dumps({"records_deleted": deleted}) + b"\n"
        except Exception as exc:
            failed = orjson.loads(failure_response(exc, request_id, "DELETE /v1/lifecycle/forget").body)
            yield orjson.dumps({**failed, "records_deleted": deleted}) + b"\n"
            return
        yield orjson.dumps(ForgetResult(records_deleted=deleted).model_dump(mode="json")) + b"\n"

    return StreamingResponse(lines(), media_type=_NDJSON)


async def _consolidate(request: Request) -> Response:
    req = await read_body(request, ConsolidateRequest)
    return ORJSONResponse((await services_of(request).upkeep.consolidate(req)).model_dump(mode="json"))


async def _export(request: Request) -> Response:
    # Both formats name the one form; the model has checked that a key comes with encrypt and only then.
    req = await read_body(request, ExportRequest)
    return ORJSONResponse((await services_of(request).upkeep.export(req)).model_dump(mode="json"))


async def _import(request: Request) -> Response:
    # archive_id is informational.
    req = await read_body(request, ImportRequest)
    return ORJSONResponse((await services_of(request).upkeep.import_archive(req)).model_dump(mode="json"))


LIFECYCLE_OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "POST",
        "/v1/lifecycle/decay-tick",
        _decay_tick,
        "Sweep an agent's memories for decay (lifecycle.decay_tick)",
        DecayTickResult,
        body=DecayTickRequest,
        errors=(400, 503, 507),
        description="Fidelity is a function of the time since each memory's baseline, never compounded "
        "per tick. `tick_duration_seconds` (default 0, unlike Cerememory's 3600) ages every memory that "
        "much beyond the wall clock, additively. Memories below 0.01 are counted as decayed and hidden by "
        "the recall operations unless `include_decayed`; they are deleted only when CPERSONA_DECAY_PRUNE "
        "is on (`pruning` says which).",
    ),
    Operation(
        "POST",
        "/v1/introspect/decay-forecast",
        _decay_forecast,
        "Each memory's fidelity now and at a later time (introspect.decay_forecast)",
        DecayForecastResult,
        body=DecayForecastRequest,
        errors=(400, 404, 503),
        description="`estimated_threshold_date` is computed in closed form; null when the memory is "
        "already below the threshold or never falls below it. One unknown id is a 404 for the request.",
    ),
    Operation(
        "DELETE",
        "/v1/lifecycle/forget",
        _forget,
        "Delete memories by id, store, period or age (lifecycle.forget)",
        ForgetResult,
        body=ForgetRequest,
        errors=(400, 503),
        description="A JSON body. The union of what each selector names, only the caller's memories, "
        "through the one delete path (claims, vectors, associations go too); the raw journal is untouched. "
        "`confirm: false` is a 400 FORGET_UNCONFIRMED. Unknown ids are not counted. With `Accept: "
        'application/x-ndjson` the answer streams one line `{"records_deleted": n}` per page of 256 '
        "deleted, then the result's line.",
    ),
    Operation(
        "POST",
        "/v1/lifecycle/consolidate",
        _consolidate,
        "Merge near-duplicate episodic memories and give the rest a semantic copy (lifecycle.consolidate)",
        ConsolidateResult,
        body=ConsolidateRequest,
        errors=(400, 409, 503, 507),
        description="Idempotent: a second call with the same arguments creates and deletes nothing. "
        "`records_pruned` is always 0 (consolidation never deletes but merged duplicates).",
    ),
    Operation(
        "POST",
        "/v1/lifecycle/export",
        _export,
        "An agent's memory as JSON Lines (lifecycle.export)",
        ExportResult,
        body=ExportRequest,
        errors=(400, 503),
        description="Header line, one record per line, footer with the SHA-256 of the lines before it. "
        "Exporting, importing into a fresh agent and exporting again gives the same bytes. With `encrypt` "
        "and `encryption_key` the archive is AES-256-GCM under a scrypt-stretched key (the checksum stays "
        "the plain archive's).",
    ),
    Operation(
        "POST",
        "/v1/lifecycle/import",
        _import,
        "Import an archive into an agent (lifecycle.import)",
        ImportResult,
        body=ImportRequest,
        errors=(400, 409, 413, 503, 507),
        description="Every line and the checksum are checked before anything is written (a bad checksum "
        "is a 400 naming `checksum`; a wrong key one naming `decryption_key`). An archive of another agent "
        "of this store is imported as a copy (`copied: true`): every record under a new id derived from "
        "this agent and its id, every reference among them following; a second import of it finds those "
        "ids held and the conflict rule decides. A copy's id held by yet another agent is a 409 "
        "IMPORT_CONFLICT, the same answer whichever record and agent it is.",
    ),
)
