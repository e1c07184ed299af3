"""The MCP server: the tool table (:data:`TOOLS`) served by the SDK's low-level ``Server``.

A call reads its arguments into the tool's request model (the one validation every edge shares; errors
name the field), asks the access seam whether the request may act for each agent it names, and hands the
model to the engine's service. Over streamable HTTP the engine is the one the app's routes use (the request's
``state.engine``) and the agents a key may act for are the request's (:mod:`cpersona.edges.http.access`);
over stdio the engine is the server's own (its lifespan's) and no key is in force. Every answer is JSON,
in the tool result's text and as its structured content; a failure is ``{ok: false, error}`` and marks
the result ``isError`` (:mod:`cpersona.edges.mcp.errors`).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import mcp_types as types
import orjson
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from starlette.requests import Request

from cpersona.edges.http.access import AgentForbidden, key_agents, permit
from cpersona.edges.http.auth import ADMIN_ONLY_TOOLS, require_admin
from cpersona.edges.http.reading import caller_agent, takes_agent, with_agent
from cpersona.edges.mcp.errors import failure
from cpersona.edges.mcp.tool import Tool, acting_agents, input_schema
from cpersona.edges.mcp.tools_admin import ADMIN_TOOLS
from cpersona.edges.mcp.tools_read import READ_TOOLS
from cpersona.edges.mcp.tools_recall import RECALL_TOOLS
from cpersona.edges.mcp.tools_write import WRITE_TOOLS
from cpersona.engine.facade import Engine
from cpersona.errors import InvalidRequest
from cpersona.model.fields import RequestModel, validate
from cpersona.version import __version__

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Mapping
    from contextlib import AbstractAsyncContextManager

    from mcp.server.context import ServerRequestContext

    from cpersona.settings import Settings

    Context = ServerRequestContext[dict[str, Any], Any]
    Lifespan = Callable[[Server[dict[str, Any]]], AbstractAsyncContextManager[dict[str, Any]]]

__all__ = ["INSTRUCTIONS", "TOOLS", "build_server", "tool_listing"]

TOOLS: tuple[Tool, ...] = (*WRITE_TOOLS, *READ_TOOLS, *RECALL_TOOLS, *ADMIN_TOOLS)
"""Every tool the server offers, in the order it lists them."""

INSTRUCTIONS = (
    "Long-term memory for agents. Every tool acts for one agent (`agent_id`). A record is kept in a "
    "`project_id` and a `channel` ('' is the global pool, the default); a read in project or channel X "
    "sees X and the pool, and its `source_id` matches a record's source exactly, or as a prefix when it "
    "ends in a non-alphanumeric. Store what is worth remembering with `store`, and read it back with "
    "`recall` (rows) or `reconstruct` (quoted evidence). Pass a `time_cue` only when the request itself "
    "names a time, never today's date."
)
"""What the server tells a client at the start; it says once what the scope fields of every tool mean
(their schemas do not repeat it, :data:`~cpersona.edges.mcp.schema.SCOPE_FIELDS`)."""


def tool_listing(tool: Tool, settings: Settings) -> types.Tool:
    """How ``tools/list`` shows a tool: its model's schema, with the limits of ``settings``."""
    return types.Tool(
        name=tool.name,
        description=tool.description,
        input_schema=input_schema(tool, settings),
        annotations=types.ToolAnnotations(
            read_only_hint=tool.read_only,
            # The protocol reads these two only of a tool that writes.
            destructive_hint=None if tool.read_only else tool.destructive,
            idempotent_hint=None if tool.read_only else tool.idempotent,
            # The tools reach only this engine's stores.
            open_world_hint=False,
        ),
    )


def build_server(lifespan: Lifespan | None = None) -> Server[dict[str, Any]]:
    """The server over :data:`TOOLS`. ``lifespan`` yields ``{"engine": Engine}`` where no HTTP request
    brings the engine (stdio); over HTTP the default, empty one is right."""
    by_name = {tool.name: tool for tool in TOOLS}
    # The listing depends only on the engine's settings, fixed for its life; building its schemas takes
    # some 25 ms of the event loop, so it is built once per settings (the settings kept, so their id
    # cannot be reused by others).
    listings: dict[int, tuple[Settings, types.ListToolsResult]] = {}

    async def list_tools(ctx: Context, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        settings = _engine(ctx).settings
        built = listings.get(id(settings))
        if built is None or built[0] is not settings:
            built = (settings, types.ListToolsResult(tools=[tool_listing(tool, settings) for tool in TOOLS]))
            listings[id(settings)] = built
        # A copy: the SDK may fill in fields of the result it answers with.
        return built[1].model_copy(deep=True)

    async def call_tool(ctx: Context, params: types.CallToolRequestParams) -> types.CallToolResult:
        tool = by_name.get(params.name)
        if tool is None:
            raise MCPError(code=types.INVALID_PARAMS, message=f"no tool named {params.name!r}")
        body, failed = await run_tool(tool, ctx, params.arguments or {})
        text = orjson.dumps(body).decode()
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structured_content=orjson.loads(text),
            is_error=failed,
        )

    return Server(
        "cpersona",
        version=__version__,
        instructions=INSTRUCTIONS,
        lifespan=lifespan if lifespan is not None else _no_engine,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def run_tool(tool: Tool, ctx: Context, arguments: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """The tool's answer to ``arguments`` and whether it failed."""
    try:
        engine = _engine(ctx)
        request = _read(tool, ctx, engine, arguments)
        _permit(ctx, request)
        http = _http_request(ctx)
        if tool.name in ADMIN_ONLY_TOOLS and http is not None:
            require_admin(http)  # as DELETE /v1/agents/{id}: an admin key's alone (edges/http/auth.py)
        return dict(await tool.call(engine, request, _request_id(ctx))), False
    except Exception as exc:
        return {**failure(exc, tool.name), **tool.empty}, True


def _read(tool: Tool, ctx: Context, engine: Engine, arguments: Mapping[str, Any]) -> RequestModel:
    # A request that names no agent takes the caller's, as a route does: over HTTP its header (or the key
    # bound to one agent), else the server's default agent.
    http = _http_request(ctx)
    if not takes_agent(tool.model):
        fallback = None
    else:
        fallback = caller_agent(http) if http is not None else engine.settings.default_agent
    try:
        # JSON arguments are typed: no text is read as a number, even where a query string's would be.
        return validate(tool.model, with_agent(tool.model, arguments, fallback), engine.settings, strict=True)
    except InvalidRequest as exc:
        raise (tool.refine(exc) if tool.refine is not None else exc) from None


def _permit(ctx: Context, request: RequestModel) -> None:
    http = _http_request(ctx)
    if http is None:
        return  # stdio: the client started this process on its own data; no key is in force
    agents = key_agents(http)
    for agent in acting_agents(request):
        if agent is not None:
            permit(agents, agent)
        elif agents is not None:
            # "Every agent" (stats without an agent) is more than a key bound to some agents may see.
            raise AgentForbidden("this key may act only for its own agents: name agent_id")


def _http_request(ctx: Context) -> Request | None:
    request = ctx.request
    return request if isinstance(request, Request) else None


def _request_id(ctx: Context) -> str | None:
    http = _http_request(ctx)
    found = http.scope.get("state", {}).get("request_id") if http is not None else None
    return found if isinstance(found, str) else None


def _engine(ctx: Context) -> Engine:
    http = _http_request(ctx)
    engine = http.state.engine if http is not None else ctx.lifespan_context.get("engine")
    if not isinstance(engine, Engine):  # pragma: no cover - the app's or the stdio lifespan puts one there
        raise TypeError("no engine for this MCP request")
    return engine


@contextlib.asynccontextmanager
async def _no_engine(server: Server[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
    yield {}
