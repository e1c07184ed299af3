"""The ways in: HTTP, the command line (and later MCP)."""
