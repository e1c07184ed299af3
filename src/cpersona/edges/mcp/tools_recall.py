"""The recall operations' tools (Cerememory's ``recall.*``): the multimodal query by cue and the walk of
a memory's associations. The raw journal's query is among the reading tools (``raw_query``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cpersona.edges.mcp.tool import Tool, route_arguments
from cpersona.model.cue_query import CueQueryRequest

if TYPE_CHECKING:
    from cpersona.engine.facade import Engine

__all__ = ["AssociateArguments", "RECALL_TOOLS"]

AssociateArguments = route_arguments("POST", "/v1/recall/associate/{record_id}", "AssociateArguments")
"""``POST /v1/recall/associate/{record_id}``'s body with its path's record."""


async def _query(engine: Engine, req: CueQueryRequest) -> dict[str, Any]:
    # No request id: each call is its own reconsolidation (a client's retry of a call is a new call).
    return (await engine.query_request(req)).to_json()


async def _associate(engine: Engine, req: Any) -> dict[str, Any]:
    return (await engine.associate_request(req.record_id, req)).to_json()


RECALL_TOOLS: tuple[Tool, ...] = (
    Tool(
        "query", CueQueryRequest, _query,
        "Recall an agent's memories by a cue: any mix of `text`, an `embedding`, an `emotion` and a "
        "`temporal` range, fused, with spreading activation over the memories' associations; best first, "
        "each rendered with the noise its fidelity gives (`recall_mode: perfect` for the exact text). "
        "`cue.temporal` is a hard filter: give it ONLY when the request itself names a period, never "
        "today's date or the conversation's. With `reconsolidate` (the default) the returned memories "
        "are strengthened after the answer, so this tool writes.",
        read_only=False, empty={"memories": []},
    ),
    Tool(
        "associate", AssociateArguments, _associate,
        "The memories reached from one memory (`record_id`: mem:<uuid> or its bare UUID) over its typed, "
        "weighted associations, most activated first, each with its `activation_path`.",
        read_only=True, idempotent=True,
    ),
)  # fmt: skip
