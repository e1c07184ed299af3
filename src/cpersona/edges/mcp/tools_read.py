"""The tools that read: recall, reconstruct, traverse, records by ref, the newest records, the profile,
and the raw journal. None of them writes (a recall publishes its trace, which stores nothing of the
agent's)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field

from cpersona.edges.http.records import record_json
from cpersona.edges.mcp.tool import Tool, fixed, route_arguments, with_fields
from cpersona.errors import RecordNotFound
from cpersona.model.associations import TraverseRequest
from cpersona.model.raw_query import RawQueryRequest
from cpersona.model.recall_query import RecallQuery
from cpersona.model.reconstruct_request import ReconstructRequest
from cpersona.model.record_queries import ListQuery, RecordQuery, RecordRef

if TYPE_CHECKING:
    from cpersona.engine.facade import Engine

__all__ = ["MAX_CONTENT_REFS", "READ_TOOLS", "ContentsArguments", "ProfileQuery"]

# The recall operations seed caps a request's limit at 100 rows, as the HTTP edge does.
_MAX_LIMIT = 100
MAX_CONTENT_REFS = 20
"""How many refs one ``get_contents`` reads (the reference's batch)."""

ContentsArguments = with_fields(
    RecordQuery,
    "GetContentsArguments",
    {
        "refs": Annotated[
            list[RecordRef], Field(min_length=1, max_length=MAX_CONTENT_REFS, description="Refs to read")
        ]
    },
)
"""``GET /v1/records/{ref}``'s query with many refs in place of its path's one."""


ProfileQuery = route_arguments("GET", "/v1/profile/{agent_id}", "GetProfileArguments")
"""``GET /v1/profile/{agent_id}``: its path's agent."""
MemoryList = fixed(ListQuery, "ListMemoriesArguments", "kind", "memory")
EpisodeList = fixed(ListQuery, "ListEpisodesArguments", "kind", "episode")


async def _recall(engine: Engine, req: RecallQuery, _: str | None) -> dict[str, Any]:
    return (await engine.services.recall.recall(req, limit_cap=_MAX_LIMIT)).model_dump(mode="json")


async def _reconstruct(engine: Engine, req: ReconstructRequest, _: str | None) -> dict[str, Any]:
    return (await engine.services.recall.reconstruct(req)).model_dump(mode="json")


async def _traverse(engine: Engine, req: TraverseRequest, _: str | None) -> dict[str, Any]:
    return (await engine.services.associations.traverse(req)).model_dump(mode="json")


async def _raw_query(engine: Engine, req: RawQueryRequest, _: str | None) -> dict[str, Any]:
    return (await engine.services.recall.raw_query(req)).model_dump(mode="json")


async def _get_contents(engine: Engine, req: Any, _: str | None) -> dict[str, Any]:
    records: list[dict[str, Any]] = []
    missing: list[str] = []
    # One ref that is not the agent's is reported, not the whole read refused.
    for ref in dict.fromkeys(req.refs):
        try:
            records.append(record_json(await engine.services.reads.get(ref, req.agent_id)))
        except RecordNotFound:
            missing.append(ref)
    return {"ok": True, "records": records, "not_found": missing}


async def _get_profile(engine: Engine, req: Any, _: str | None) -> dict[str, Any]:
    record = await engine.services.reads.get_profile(req.agent_id)
    return {"ok": True, "profile": None if record is None else record_json(record)}


async def _list(engine: Engine, req: ListQuery, _: str | None) -> dict[str, Any]:
    records = await engine.services.reads.list(req)
    return {
        "ok": True,
        "kind": req.kind,
        "count": len(records),
        "records": [record_json(r) for r in records],
    }


# Filling a cue with today's date is the observed way a cue goes wrong.
_TIME_CUE = "Pass `time_cue` only when the request itself names a time, never today's date."

READ_TOOLS: tuple[Tool, ...] = (
    Tool(
        "recall",
        RecallQuery,
        _recall,
        "Recall the rows of an agent's memory that answer a question, best first, each with why in "
        "`match_reason` (`trace: true` adds the recall's trace). " + _TIME_CUE,
        read_only=True,
        idempotent=True,
        empty={"rows": []},
    ),
    Tool(
        "reconstruct",
        ReconstructRequest,
        _reconstruct,
        "The evidence for an answer: items quoting stored rows of one recall, bundled and ordered (`mode` "
        "holds them to a token cap). " + _TIME_CUE,
        read_only=True,
        idempotent=True,
        empty={"items": [], "returned_count": 0},
    ),
    Tool(
        "traverse",
        TraverseRequest,
        _traverse,
        "The records reached from an entity over its declared relations, breadth-first (hop 0: the "
        "records mentioning it).",
        read_only=True,
        idempotent=True,
    ),
    Tool(
        "get_contents",
        ContentsArguments,
        _get_contents,
        f"The whole records of up to {MAX_CONTENT_REFS} refs of one agent; a ref it does not hold is "
        "listed in `not_found`.",
        read_only=True,
        idempotent=True,
    ),
    Tool(
        "get_profile",
        ProfileQuery,
        _get_profile,
        "The agent's profile (`profile: null` when none was set).",
        read_only=True,
        idempotent=True,
    ),
    Tool(
        "list_memories",
        MemoryList,
        _list,
        "The newest memories of an agent in a scope.",
        read_only=True,
        idempotent=True,
    ),
    Tool(
        "list_episodes",
        EpisodeList,
        _list,
        "The newest episodes of an agent in a scope.",
        read_only=True,
        idempotent=True,
    ),
    Tool(
        "raw_query",
        RawQueryRequest,
        _raw_query,
        "Raw journal entries holding every word of `query`, verbatim and oldest first (no decay, no side "
        "effect).",
        read_only=True,
        idempotent=True,
    ),
)
