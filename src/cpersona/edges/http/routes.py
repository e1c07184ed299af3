"""Every route of the HTTP API in one table: its handler, and the models of what it reads and answers.

A handler reads its body or query string into the route's request model (the one validation, shared
with the Python API and the CLI), hands that model to the engine's service, and answers with the result's
JSON.
The OpenAPI document is generated from this table (:mod:`cpersona.edges.http.openapi`), so a route
cannot exist without its description.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from pydantic import Field

from cpersona.edges.http.auth import shows_health_details
from cpersona.edges.http.errors import ORJSONResponse
from cpersona.edges.http.introspect_routes import INTROSPECT_OPERATIONS
from cpersona.edges.http.keys_routes import KEY_OPERATIONS
from cpersona.edges.http.lifecycle_routes import LIFECYCLE_OPERATIONS
from cpersona.edges.http.operation import NoQuery, Operation
from cpersona.edges.http.query_routes import QUERY_OPERATIONS, cue_query
from cpersona.edges.http.raw_routes import RAW_OPERATIONS
from cpersona.edges.http.reading import json_object, read_body, read_query
from cpersona.edges.http.records import record_json
from cpersona.edges.http.state import engine_of, services_of
from cpersona.edges.http.timeline_routes import TIMELINE_OPERATIONS
from cpersona.edges.http.trace_page import TRACE_OPERATIONS
from cpersona.edges.mcp.http import MCP_OPERATIONS
from cpersona.errors import ForgetUnconfirmed, InvalidRequest
from cpersona.model.agent_requests import CalibrateRequest, GateRequest, ProfileRequest
from cpersona.model.association_results import DeclareResult, TraverseResult
from cpersona.model.associations import DeclareRequest, TraverseRequest
from cpersona.model.cue_query import CueQueryRequest
from cpersona.model.cue_query_response import CueQueryResult
from cpersona.model.episode_request import EpisodeRequest
from cpersona.model.fields import AgentId, KeyText, RequestModel, validate
from cpersona.model.memory_request import BatchRequest, StoreRequest
from cpersona.model.raw_request import RawBatchRequest, RawRequest
from cpersona.model.recall_query import RecallQuery
from cpersona.model.reconstruct_request import ReconstructRequest
from cpersona.model.reconstruct_response import ReconstructResult
from cpersona.model.record_queries import (
    UUID_PATTERN,
    ForgetQuery,
    ListQuery,
    MemoryRef,
    RecordQuery,
    RecordRef,
    StatsQuery,
)
from cpersona.model.responses import (
    CalibrationResponse,
    GateResponse,
    HealthResponse,
    ProfileResponse,
    RecordListResponse,
    RecordResponse,
    StatsResponse,
)
from cpersona.model.results import BatchResult, DeleteResult, StoreResult
from cpersona.model.update_request import UpdateRequest
from cpersona.recall.request import RecallResult

if TYPE_CHECKING:
    from collections.abc import Mapping

    from starlette.requests import Request
    from starlette.responses import Response

__all__ = ["HTTP_MAX_LIMIT", "OPERATIONS"]

# The recall operations seed caps a request's limit at 100 rows; library callers may ask for more.
HTTP_MAX_LIMIT = 100

_UUID = re.compile(UUID_PATTERN)
_M = TypeVar("_M", bound=RequestModel)


# ------------------------------------------------------------------------------------------ reading


async def _body(request: Request, model: type[_M]) -> _M:
    return await read_body(request, model)


def _query(request: Request, model: type[_M]) -> _M:
    return read_query(request, model)


def _ok(body: Mapping[str, Any]) -> ORJSONResponse:
    return ORJSONResponse({"ok": True, **body})


# ------------------------------------------------------------------------------------------ handlers


async def _health(request: Request) -> Response:
    _query(request, NoQuery)
    engine = engine_of(request)
    # Redis is asked either way (a 503 when it does not answer); what runs where is told to a key only.
    details = await engine.health()
    if not shows_health_details(request, engine.settings):
        return _ok({"status": "ok"})
    return _ok({"status": "ok", **details})


async def _encode(request: Request) -> Response:
    req = await _body(request, StoreRequest)
    return ORJSONResponse((await services_of(request).writes.store(req)).model_dump(mode="json"))


async def _encode_batch(request: Request) -> Response:
    req = await _body(request, BatchRequest)
    return ORJSONResponse((await services_of(request).writes.store_batch(req)).model_dump(mode="json"))


async def _encode_raw(request: Request) -> Response:
    req = await _body(request, RawRequest)
    return ORJSONResponse((await services_of(request).writes.store_raw(req)).model_dump(mode="json"))


async def _encode_raw_batch(request: Request) -> Response:
    req = await _body(request, RawBatchRequest)
    return ORJSONResponse((await services_of(request).writes.store_raw_batch(req)).model_dump(mode="json"))


async def _update(request: Request) -> Response:
    ref = request.path_params["ref"]
    # Cerememory addresses a record by its bare UUID; only memories can be updated, so a bare UUID here
    # can only mean a memory.
    if _UUID.fullmatch(ref):
        ref = f"mem:{ref.lower()}"
    req = await _body(request, UpdateRequest)
    record = await services_of(request).writes.update(ref, req)
    return _ok({"record": record_json(record)})


async def _archive_episode(request: Request) -> Response:
    req = await _body(request, EpisodeRequest)
    return ORJSONResponse((await services_of(request).writes.archive_episode(req)).model_dump(mode="json"))


async def _put_profile(request: Request) -> Response:
    req = await _body(request, ProfileRequest)
    record = await services_of(request).writes.update_profile(request.path_params["agent_id"], req.profile)
    return _ok({"profile": record_json(record)})


async def _get_profile(request: Request) -> Response:
    _query(request, NoQuery)
    record = await services_of(request).reads.get_profile(request.path_params["agent_id"])
    return _ok({"profile": None if record is None else record_json(record)})


async def _get_record(request: Request) -> Response:
    query = _query(request, RecordQuery)
    record = await services_of(request).reads.get(request.path_params["ref"], query.agent_id)
    return _ok({"record": record_json(record)})


async def _list_records(request: Request) -> Response:
    q = _query(request, ListQuery)
    records = await services_of(request).reads.list(q)
    return _ok({"kind": q.kind, "count": len(records), "records": [record_json(r) for r in records]})


async def _delete_record(request: Request) -> Response:
    query = _query(request, RecordQuery)
    result = await services_of(request).writes.delete(request.path_params["ref"], query.agent_id)
    return ORJSONResponse(result.model_dump(mode="json"))


async def _delete_agent(request: Request) -> Response:
    agent_id = request.path_params["agent_id"]
    try:
        _query(request, ForgetQuery)
    except InvalidRequest as exc:
        if exc.field != "confirm":
            raise
        message = f"deleting all data of agent {agent_id!r} needs ?confirm=true"
        raise ForgetUnconfirmed("confirm", message) from None
    result = await services_of(request).writes.delete_agent_data(agent_id)
    return ORJSONResponse({**result.model_dump(mode="json"), "agent_id": agent_id})


async def _stats(request: Request) -> Response:
    query = _query(request, StatsQuery)
    return ORJSONResponse(await services_of(request).reads.stats(query.agent_id))


async def _recall_query(request: Request) -> Response:
    # One route, two shapes: `query` is CPersona's recall, `cue` the multimodal query (query_routes).
    raw = await json_object(request, request.app.state.max_body_bytes)
    if "cue" in raw:
        if "query" in raw:
            raise InvalidRequest("cue", "a body has `query` (recall) or `cue` (multimodal query), not both")
        return await cue_query(request, raw)
    # Neither: the recall's own refusal names `query`, as it always has.
    req = validate(RecallQuery, raw, engine_of(request).settings)
    result = await services_of(request).recall.recall(req, limit_cap=HTTP_MAX_LIMIT)
    return ORJSONResponse(result.model_dump(mode="json"))


async def _calibrate(request: Request) -> Response:
    req = await _body(request, CalibrateRequest)
    doc = await services_of(request).recall.calibrate(req)
    return _ok({"calibration": doc})


async def _select_gate(request: Request) -> Response:
    req = await _body(request, GateRequest)
    return _ok(await services_of(request).recall.select_gate(req))


async def _declare_associations(request: Request) -> Response:
    req = await _body(request, DeclareRequest)
    return ORJSONResponse((await services_of(request).associations.declare(req)).model_dump(mode="json"))


async def _traverse(request: Request) -> Response:
    req = await _body(request, TraverseRequest)
    return ORJSONResponse((await services_of(request).associations.traverse(req)).model_dump(mode="json"))


async def _reconstruct(request: Request) -> Response:
    req = await _body(request, ReconstructRequest)
    return ORJSONResponse((await services_of(request).recall.reconstruct(req)).model_dump(mode="json"))


# ---------------------------------------------------------------------------------------------- table

_REF = {"ref": RecordRef}
_AGENT = {"agent_id": Annotated[AgentId, Field(description="The agent (may contain '/')")]}
_ANY_AGENT = {"agent_id": Annotated[KeyText, Field(min_length=1, description="The agent (may contain '/')")]}
_WRITE_ERRORS = (400, 409, 413, 503, 507)
# A memory's declared relations may name a record that is not there (404).
_RELATING_WRITE_ERRORS = (400, 404, 409, 413, 503, 507)

OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "GET",
        "/health",
        _health,
        "Backends' health: Redis version and modules, the vector engine, the embedder",
        HealthResponse,
        errors=(503,),
        description="Needs no key. When keys are in force, a request without one gets the status only "
        "(`ok`, `status`); one with a live key, as with keys off, also the versions, engines and counters.",
    ),
    Operation(
        "POST",
        "/v1/encode",
        _encode,
        "Store one memory (encode.store)",
        StoreResult,
        body=StoreRequest,
        errors=_RELATING_WRITE_ERRORS,
        description="A repeat of the caller's `id` (within agent+project) or of identical content (within "
        "agent+project+channel) is not stored again: `result: skipped` with the first record's ref and "
        "store. A timestamp more than CPERSONA_FUTURE_TIMESTAMP_SLACK_SECS ahead of the server clock adds "
        "the warning "
        "`timestamp_ahead_of_clock` (or is refused, per CPERSONA_FUTURE_TIMESTAMP_MODE).",
    ),
    Operation(
        "POST",
        "/v1/encode/batch",
        _encode_batch,
        "Store many memories (encode.batch)",
        BatchResult,
        body=BatchRequest,
        errors=_RELATING_WRITE_ERRORS,
    ),
    Operation(
        "POST",
        "/v1/encode/raw",
        _encode_raw,
        "Append one raw journal entry (encode.store_raw)",
        StoreResult,
        body=RawRequest,
        errors=_WRITE_ERRORS,
    ),
    Operation(
        "POST",
        "/v1/encode/raw/batch",
        _encode_raw_batch,
        "Append many raw journal entries (encode.batch_raw)",
        BatchResult,
        body=RawBatchRequest,
        errors=_WRITE_ERRORS,
    ),
    Operation(
        "PATCH",
        "/v1/encode/{ref}",
        _update,
        "Update a memory (encode.update)",
        RecordResponse,
        body=UpdateRequest,
        errors=(400, 404, 409, 413, 503, 507),
        path_params={"ref": MemoryRef},
        not_a_sibling=("ref",),
        description="Unlike Cerememory (204, empty body), answers 200 with the updated record. A content "
        "change re-embeds the memory.",
    ),
    Operation(
        "POST",
        "/v1/episodes",
        _archive_episode,
        "Archive a session summary (archive_episode)",
        StoreResult,
        body=EpisodeRequest,
        errors=_WRITE_ERRORS,
    ),
    Operation(
        "PUT",
        "/v1/profile/{agent_id}",
        _put_profile,
        "Set the agent's profile text",
        ProfileResponse,
        body=ProfileRequest,
        errors=_WRITE_ERRORS,
        greedy=("agent_id",),
        path_params=_AGENT,
    ),
    Operation(
        "GET",
        "/v1/profile/{agent_id}",
        _get_profile,
        "The agent's profile (`profile: null` when none was set)",
        ProfileResponse,
        greedy=("agent_id",),
        path_params=_AGENT,
    ),
    Operation(
        "GET",
        "/v1/records",
        _list_records,
        "The newest records of one kind in a scope",
        RecordListResponse,
        query=ListQuery,
    ),
    Operation(
        "GET",
        "/v1/records/{ref}",
        _get_record,
        "One record",
        RecordResponse,
        query=RecordQuery,
        errors=(400, 404, 503),
        path_params=_REF,
    ),
    Operation(
        "DELETE",
        "/v1/records/{ref}",
        _delete_record,
        "Delete one record (with its dedup claims and vector)",
        DeleteResult,
        query=RecordQuery,
        errors=(400, 404, 503),
        path_params=_REF,
    ),
    Operation(
        "DELETE",
        "/v1/agents/{agent_id}",
        _delete_agent,
        "Delete every record, claim, profile and vector of an agent",
        DeleteResult,
        query=ForgetQuery,
        greedy=("agent_id",),
        path_params=_ANY_AGENT,
    ),
    Operation(
        "GET",
        "/v1/introspect/stats",
        _stats,
        "Record counts (of one agent, or all), pending vector writes, and Cerememory's stats "
        "(introspect.stats)",
        StatsResponse,
        query=StatsQuery,
    ),
    Operation(
        "POST",
        "/v1/recall/query",
        _recall_query,
        "Recall the rows that answer a question (recall.query)",
        RecallResult,
        body=RecallQuery,
        alternative=(CueQueryRequest, CueQueryResult),
        description="Rows come back best first (`order: best_last` gives CPersona's order, best row last). "
        "Each row says why it is there in `match_reason`. An arm that fails or misses its deadline "
        "contributes nothing and is named in `degraded`; the recall still answers. A body with `cue` "
        "instead of `query` is the multimodal query (RecallCueRequest → RecallCueResult): text, "
        "embedding, emotion and time range as arms fused by reciprocal rank, spreading activation from "
        "the leaders; a body with both is refused naming `cue`.",
    ),
    Operation(
        "POST",
        "/v1/recall/calibrate",
        _calibrate,
        "Calibrate the agent's gate from its own memories (deterministic) and select it",
        CalibrationResponse,
        body=CalibrateRequest,
    ),
    Operation(
        "PUT",
        "/v1/recall/gate",
        _select_gate,
        "Select the agent's gate: calibrated or heuristic",
        GateResponse,
        body=GateRequest,
    ),
    Operation(
        "POST",
        "/v1/associations",
        _declare_associations,
        "Declare entities, aliases and relations, or retract them (declare_associations)",
        DeclareResult,
        body=DeclareRequest,
        errors=(400, 404, 503, 507),
        description="Scoped like records (agent, project, channel). With `anchor_ref`, the entities become "
        "that record's mentions; the anchor, and both ends of a record relation, must be records the "
        "declaration's scope may read (else 404). Declaring twice changes nothing (all counts 0).",
    ),
    Operation(
        "POST",
        "/v1/traverse",
        _traverse,
        "The records reached from an entity over its relations (traverse)",
        TraverseResult,
        body=TraverseRequest,
        description="Breadth-first over entity relations in either direction: hop 0 is the records "
        "mentioning the entity, each record comes once at its fewest hops, at most `limit` of them.",
    ),
    Operation(
        "POST",
        "/v1/reconstruct",
        _reconstruct,
        "Items that quote stored rows, bundled, ordered and given roles, over one recall (reconstruct)",
        ReconstructResult,
        body=ReconstructRequest,
        errors=(400, 422, 503),
        description="Read-only: it never composes text and never writes. Each item's content and excerpts "
        "are spans of the stored records it cites; a clamp of count or budget is reported "
        "(`count_policy`, `budget_policy`), a value out of its range is a 400 naming the field. With "
        "`mode` the whole answer fits the mode's cl100k token cap, or it is a 422 `CAP_BELOW_MINIMUM`.",
    ),
    *TIMELINE_OPERATIONS,
    *RAW_OPERATIONS,
    *INTROSPECT_OPERATIONS,
    *LIFECYCLE_OPERATIONS,
    *QUERY_OPERATIONS,
    *KEY_OPERATIONS,
    *TRACE_OPERATIONS,
    *MCP_OPERATIONS,
)
