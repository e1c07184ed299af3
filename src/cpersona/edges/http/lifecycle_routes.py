"""The lifecycle routes (Cerememory §6, §7): decay tick, decay forecast, forget, consolidate, export and
import, each reading its body into its model and answering its result's JSON. Added to the route table
by :mod:`cpersona.edges.http.routes` (``*LIFECYCLE_OPERATIONS``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, TypeVar

import orjson
from starlette.responses import StreamingResponse

from cpersona.edges.http.errors import ORJSONResponse, failure_response
from cpersona.edges.http.operation import Operation
from cpersona.edges.http.reading import read_body
from cpersona.edges.http.state import engine_of
from cpersona.model.fields import RequestModel, arguments
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

    from cpersona.engine.facade import Engine

__all__ = ["LIFECYCLE_OPERATIONS"]

_M = TypeVar("_M", bound=RequestModel)

# The forget's answer as it goes, when the caller accepts it (see _forget_streamed).
_NDJSON: Final = "application/x-ndjson"


async def _body(request: Request, model: type[_M]) -> tuple[Engine, dict[str, Any]]:
    """The engine and the body's fields as the typed method's keywords: read (with the caller's agent,
    :func:`~cpersona.edges.http.reading.read_body`) and validated once here, before the engine is asked."""
    return engine_of(request), arguments(await read_body(request, model))


async def _decay_tick(request: Request) -> Response:
    engine, args = await _body(request, DecayTickRequest)
    return ORJSONResponse((await engine.decay_tick(**args)).model_dump(mode="json"))


async def _decay_forecast(request: Request) -> Response:
    engine, args = await _body(request, DecayForecastRequest)
    return ORJSONResponse((await engine.decay_forecast(**args)).model_dump(mode="json"))


async def _forget(request: Request) -> Response:
    if _NDJSON in request.headers.get("accept", ""):
        return await _forget_streamed(request, await read_body(request, ForgetRequest))
    engine, args = await _body(request, ForgetRequest)
    if args.get("temporal_range") is not None:
        args["temporal_range"] = args["temporal_range"].model_dump()
    return ORJSONResponse((await engine.forget(**args)).model_dump(mode="json"))


async def _forget_streamed(request: Request, req: ForgetRequest) -> Response:
    """A forget that reports as it goes, one JSON line per page deleted (``{"records_deleted": n}``), then
    the result's own line; a failure part way ends the stream with the error envelope the request would
    have got (its request id, no file names) and the count so far.

    The request is validated and confirmed before the answer starts, so those refusals are plain error
    responses with their status; a backend that fails once pages are being deleted can only end the
    stream. A caller that hangs up stops the forget after the page under way (each page is deleted
    whole): what was counted so far is gone, the rest is not.
    """
    progress = engine_of(request).forget_progress(req)
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
    engine, args = await _body(request, ConsolidateRequest)
    return ORJSONResponse((await engine.consolidate(**args)).model_dump(mode="json"))


async def _export(request: Request) -> Response:
    engine, args = await _body(request, ExportRequest)
    # Both formats name the one form; the model has checked that a key comes with encrypt and only then.
    picked = {
        k: v for k, v in args.items() if k in ("agent_id", "stores", "include_raw_journal", "encryption_key")
    }
    return ORJSONResponse((await engine.export(**picked)).model_dump(mode="json"))


async def _import(request: Request) -> Response:
    engine, args = await _body(request, ImportRequest)
    agent, data = args.pop("agent_id"), args.pop("archive_data")
    # archive_id is informational.
    rules = {k: v for k, v in args.items() if k in ("strategy", "conflict_resolution", "decryption_key")}
    return ORJSONResponse((await engine.import_archive(agent, data, **rules)).model_dump(mode="json"))


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
        "is a 400 naming `checksum`; a wrong key one naming `decryption_key`). A record id held by another "
        "agent is a 409 IMPORT_CONFLICT, the same answer whichever record and agent it is.",
    ),
)
