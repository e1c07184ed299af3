"""recall.graph's request body (``POST /v1/recall/graph``, ``Engine.graph``).

``center_id`` is a memory of the caller's scope, as ``mem:<uuid>`` or the bare UUID the Cerememory SDK
sends; one the scope does not see (absent, or another agent's) is a 404 ``RECORD_NOT_FOUND``, the answer
every read by ref gives, rather than the reference's empty graph, which reads like a record without
edges. Without a center the walk starts from the scope's newest memories (by insertion), up to
``limit_nodes`` of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from pydantic import AfterValidator, ConfigDict, Field

from cpersona.model.fields import WHOLE, Header, KeyText, RequestModel
from cpersona.model.record_queries import UUID_PATTERN
from cpersona.model.records import AssociationType
from cpersona.model.wording import pattern_in_words

__all__ = ["DEFAULT_LIMIT_NODES", "GraphRequest", "MAX_GRAPH_DEPTH", "MAX_LIMIT_NODES"]

MAX_GRAPH_DEPTH = 8
MAX_LIMIT_NODES = 1_000
DEFAULT_LIMIT_NODES = 10


def _bare(value: str) -> str:
    return value.lower().removeprefix("mem:")


_CenterId = Annotated[
    str,
    Field(
        pattern=pattern_in_words(f"^(mem:)?{UUID_PATTERN}$", "a memory id: a UUID, or mem:<uuid>"),
        description="A memory: mem:<uuid>, or the bare <uuid> as Cerememory sends it",
    ),
    AfterValidator(_bare),
]


class GraphRequest(RequestModel):
    """Which subgraph of memories and their edges to return, for whom."""

    model_config = ConfigDict(title="RecallGraphRequest")

    agent_id: KeyText = Field(description="The agent whose memory is read (exact)")
    center_id: _CenterId | None = Field(
        default=None, description="The memory to walk from (default: the scope's newest memories)"
    )
    depth: Annotated[int, Field(ge=0, le=MAX_GRAPH_DEPTH), WHOLE] = Field(
        default=2, description="Edges followed outward from the start"
    )
    edge_types: Annotated[Sequence[AssociationType], Field(max_length=16)] | None = Field(
        default=None,
        description="Only these association types (default all); a declared record relation is "
        "`user_defined`",
    )
    include_meta: bool = Field(default=False, description="Each node's meta-memory, and the meta edges")
    limit_nodes: Annotated[int, Field(ge=1, le=MAX_LIMIT_NODES), WHOLE] = Field(
        default=DEFAULT_LIMIT_NODES, description="Nodes at most; `truncated` says when more were reachable"
    )
    project_id: KeyText | None = Field(
        default=None, description="Project X sees X and the global pool ''; '' sees only the pool"
    )
    channel: KeyText | None = Field(default=None, description="Channel X sees X and the global pool ''")
    source_id: KeyText = Field(
        default="", description="Exact source id, or a prefix when it ends in a non-alphanumeric"
    )
    header: Header = None
