"""The tools that delete, tune and look after an agent's memory: deletes, the gate's calibration and
choice, counts and health, and the lifecycle operations (decay, forget, consolidate, export, import)."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

from cpersona.edges.http.operation import NoQuery
from cpersona.edges.mcp.tool import Tool, route_arguments
from cpersona.errors import ForgetUnconfirmed, InvalidRequest
from cpersona.model.agent_requests import CalibrateRequest, GateRequest
from cpersona.model.lifecycle_requests import (
    ConsolidateRequest,
    DecayForecastRequest,
    DecayTickRequest,
    ExportRequest,
    ForgetRequest,
    ImportRequest,
)
from cpersona.model.record_queries import StatsQuery

if TYPE_CHECKING:
    from cpersona.engine.facade import Engine

__all__ = ["ADMIN_TOOLS", "DeleteAgentArguments", "DeleteRecordArguments", "unconfirmed"]

DeleteRecordArguments = route_arguments("DELETE", "/v1/records/{ref}", "DeleteMemoryArguments")
DeleteAgentArguments = route_arguments("DELETE", "/v1/agents/{agent_id}", "DeleteAgentDataArguments")


def unconfirmed(exc: InvalidRequest) -> InvalidRequest:
    """A delete of all of an agent's data without its confirmation is FORGET_UNCONFIRMED, as over HTTP."""
    if exc.field != "confirm":
        return exc
    return ForgetUnconfirmed("confirm", "deleting all data of an agent needs confirm: true")


async def _delete(engine: Engine, req: Any, _: str | None) -> dict[str, Any]:
    return (await engine.services.writes.delete(req.ref, req.agent_id)).model_dump(mode="json")


async def _delete_agent(engine: Engine, req: Any, _: str | None) -> dict[str, Any]:
    result = await engine.services.writes.delete_agent_data(req.agent_id)
    return {**result.model_dump(mode="json"), "agent_id": req.agent_id}


async def _calibrate(engine: Engine, req: CalibrateRequest, _: str | None) -> dict[str, Any]:
    return {"ok": True, "calibration": await engine.services.recall.calibrate(req)}


async def _select_gate(engine: Engine, req: GateRequest, _: str | None) -> dict[str, Any]:
    return {"ok": True, **await engine.services.recall.select_gate(req)}


async def _stats(engine: Engine, req: StatsQuery, _: str | None) -> dict[str, Any]:
    return await engine.services.reads.stats(req.agent_id)


async def _health(engine: Engine, req: NoQuery, _: str | None) -> dict[str, Any]:
    return {"ok": True, "status": "ok", **await engine.health()}


async def _decay_tick(engine: Engine, req: DecayTickRequest, _: str | None) -> dict[str, Any]:
    return (await engine.services.upkeep.decay_tick(req)).model_dump(mode="json")


async def _decay_forecast(engine: Engine, req: DecayForecastRequest, _: str | None) -> dict[str, Any]:
    return (await engine.services.upkeep.decay_forecast(req)).model_dump(mode="json")


async def _forget(engine: Engine, req: ForgetRequest, _: str | None) -> dict[str, Any]:
    return (await engine.services.upkeep.forget(req)).model_dump(mode="json")


async def _consolidate(engine: Engine, req: ConsolidateRequest, _: str | None) -> dict[str, Any]:
    return (await engine.services.upkeep.consolidate(req)).model_dump(mode="json")


async def _export(engine: Engine, req: ExportRequest, _: str | None) -> dict[str, Any]:
    # Both formats name the one form; the model has checked that a key comes with encrypt and only then.
    result = await engine.services.upkeep.export(req)
    # Base64 text, which import_memories takes, rather than the route's byte values (Cerememory's form):
    # a JSON number per byte costs an agent's context some two tokens a byte.
    return {**result.model_dump(mode="json"), "archive_data": base64.b64encode(result.archive_data).decode()}


async def _import(engine: Engine, req: ImportRequest, _: str | None) -> dict[str, Any]:
    # archive_id is informational.
    return (await engine.services.upkeep.import_archive(req)).model_dump(mode="json")


ADMIN_TOOLS: tuple[Tool, ...] = (
    Tool(
        "delete_memory",
        DeleteRecordArguments,
        _delete,
        "Delete one record (`ref`) with its claims, vector and associations; cannot be undone.",
        read_only=False,
        destructive=True,
        idempotent=True,
    ),
    Tool(
        "delete_agent_data",
        DeleteAgentArguments,
        _delete_agent,
        "Delete every record, claim, profile and vector of one agent (`confirm: true`); cannot be undone.",
        read_only=False,
        destructive=True,
        idempotent=True,
        refine=unconfirmed,
    ),
    Tool(
        "calibrate_threshold",
        CalibrateRequest,
        _calibrate,
        "Calibrate the agent's recall gate from its own memories (deterministic) and select it.",
        read_only=False,
        idempotent=True,
    ),
    Tool(
        "select_gate",
        GateRequest,
        _select_gate,
        "Select the agent's recall gate: `calibrated` (needs a calibration) or `heuristic`.",
        read_only=False,
        idempotent=True,
    ),
    Tool(
        "stats",
        StatsQuery,
        _stats,
        "Record counts of one agent (or of all), and pending vector writes.",
        read_only=True,
        idempotent=True,
    ),
    Tool(
        "check_health",
        NoQuery,
        _health,
        "The backends' health: Redis, the vector engine, the embedder.",
        read_only=True,
        idempotent=True,
    ),
    Tool(
        "decay_tick",
        DecayTickRequest,
        _decay_tick,
        "Sweep the agent's memories for decay (`tick_duration_seconds` ages them beyond the clock).",
        read_only=False,
    ),
    Tool(
        "decay_forecast",
        DecayForecastRequest,
        _decay_forecast,
        "Each memory's fidelity now and at `forecast_at`.",
        read_only=True,
        idempotent=True,
    ),
    Tool(
        "forget",
        ForgetRequest,
        _forget,
        "Delete the agent's memories named by ids, store, period or age (`confirm: true`); cannot be undone.",
        read_only=False,
        destructive=True,
        idempotent=True,
    ),
    Tool(
        "consolidate",
        ConsolidateRequest,
        _consolidate,
        "Merge near-duplicate episodic memories and give the rest a semantic copy (`dry_run` counts only).",
        read_only=False,
        destructive=True,
        idempotent=True,
    ),
    Tool(
        "export_memories",
        ExportRequest,
        _export,
        "The agent's memory as a JSON Lines archive (optionally encrypted), in base64 as "
        "`import_memories` takes it.",
        read_only=True,
        idempotent=True,
    ),
    Tool(
        "import_memories",
        ImportRequest,
        _import,
        "Import an archive into the agent (`strategy: replace` deletes what it holds first).",
        read_only=False,
        destructive=True,
    ),
)
