"""The tools that write: a memory, a raw journal entry, an episode, associations, the profile, an update.

Each reads its arguments into the model of the route that does the same write (``POST /v1/encode`` for
``store``…) and answers that route's JSON.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cpersona.edges.http.records import record_json
from cpersona.edges.mcp.tool import Tool, route_arguments
from cpersona.model.associations import DeclareRequest
from cpersona.model.episode_request import EpisodeRequest
from cpersona.model.memory_request import StoreRequest
from cpersona.model.raw_request import RawRequest

if TYPE_CHECKING:
    from cpersona.engine.facade import Engine

__all__ = ["ProfileArguments", "UpdateArguments", "WRITE_TOOLS"]

ProfileArguments = route_arguments("PUT", "/v1/profile/{agent_id}", "UpdateProfileArguments")
"""``PUT /v1/profile/{agent_id}``'s body with its path's agent."""
UpdateArguments = route_arguments("PATCH", "/v1/encode/{ref}", "UpdateMemoryArguments")
"""``PATCH /v1/encode/{ref}``'s body with its path's ref."""


async def _store(engine: Engine, req: StoreRequest, _: str | None) -> dict[str, Any]:
    return (await engine.services.writes.store(req)).model_dump(mode="json")


async def _store_raw(engine: Engine, req: RawRequest, _: str | None) -> dict[str, Any]:
    return (await engine.services.writes.store_raw(req)).model_dump(mode="json")


async def _archive_episode(engine: Engine, req: EpisodeRequest, _: str | None) -> dict[str, Any]:
    return (await engine.services.writes.archive_episode(req)).model_dump(mode="json")


async def _declare(engine: Engine, req: DeclareRequest, _: str | None) -> dict[str, Any]:
    return (await engine.services.associations.declare(req)).model_dump(mode="json")


async def _update_profile(engine: Engine, req: Any, _: str | None) -> dict[str, Any]:
    record = await engine.services.writes.update_profile(req.agent_id, req.profile)
    return {"ok": True, "profile": record_json(record)}


async def _update_memory(engine: Engine, req: Any, _: str | None) -> dict[str, Any]:
    # A bare UUID names a memory, as the route reads it (only memories are updated).
    ref = req.ref if req.ref.startswith("mem:") else f"mem:{req.ref.lower()}"
    record = await engine.services.writes.update(ref, req)
    return {"ok": True, "record": record_json(record)}


WRITE_TOOLS: tuple[Tool, ...] = (
    Tool(
        "store",
        StoreRequest,
        _store,
        "Store one memory of an agent and answer its `ref` (mem:<uuid>). A repeat of your `id` or of the "
        "same content is not stored again: `result: skipped` with the first ref.",
        read_only=False,
        idempotent=True,
    ),
    Tool(
        "store_raw",
        RawRequest,
        _store_raw,
        "Append one verbatim entry (a conversation turn, a tool output) to the agent's raw journal; "
        "`raw_query` reads it back, `recall` never does.",
        read_only=False,
    ),
    Tool(
        "archive_episode",
        EpisodeRequest,
        _archive_episode,
        "Archive a session summary you wrote (`summary`, `keywords`); `history` is read only for its "
        "messages' timestamps.",
        read_only=False,
    ),
    Tool(
        "declare_associations",
        DeclareRequest,
        _declare,
        "Declare entities (with aliases) and relations between them, as mentions of `anchor_ref` if "
        "given; `retract: true` removes the same declaration.",
        read_only=False,
        destructive=True,
        idempotent=True,
    ),
    Tool(
        "update_profile",
        ProfileArguments,
        _update_profile,
        "Set the agent's profile text (at most 2,000 characters), which recall shows as a profile row.",
        read_only=False,
        destructive=True,
        idempotent=True,
    ),
    Tool(
        "update_memory",
        UpdateArguments,
        _update_memory,
        "Replace the given fields of one memory (`ref`); a field given as null is reset, one left out kept.",
        read_only=False,
        destructive=True,
        idempotent=True,
        nulls=True,
    ),
)
