"""The MCP edge: the engine's operations as MCP tools, over stdio (``cpersona mcp``) and over streamable
HTTP at ``/mcp`` in the HTTP app.

- :mod:`~cpersona.edges.mcp.tool` what a tool is; its arguments are the request model of the HTTP route
  that does the same thing, so its input schema is that model's, compacted for an agent's context
  (:mod:`~cpersona.edges.mcp.schema`)
- :mod:`~cpersona.edges.mcp.results` the recall operations' answers, text first
- :mod:`~cpersona.edges.mcp.tools_write`, :mod:`~cpersona.edges.mcp.tools_read`,
  :mod:`~cpersona.edges.mcp.tools_recall`, :mod:`~cpersona.edges.mcp.tools_admin` the tools
- :mod:`~cpersona.edges.mcp.server` the SDK server over them: validation, agent access, the answer
- :mod:`~cpersona.edges.mcp.errors` the one failure shape, ``{ok: false, error}``
- :mod:`~cpersona.edges.mcp.endpoint` the ``/mcp`` endpoint (:mod:`~cpersona.edges.mcp.http` its route);
  :mod:`~cpersona.edges.mcp.stdio` ``cpersona mcp``

This package imports nothing of the MCP SDK itself, so the command line can register ``cpersona mcp``
without paying for the SDK's import.
"""

MCP_PATH = "/mcp"
"""Where the HTTP app serves MCP's streamable HTTP transport."""
