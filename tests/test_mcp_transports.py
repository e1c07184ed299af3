"""One MCP client session over both transports, each a real process: ``python -m cpersona mcp`` (stdio,
its own data dir) and ``python -m cpersona serve`` (streamable HTTP at ``/mcp``), driven by the SDK's own
client. The session lists the tools, stores, recalls with a trace and reconstructs.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from cpersona.edges.mcp.server import TOOLS
from serving import environment_without_settings, free_port, start_serve, stop_serve, wait_healthy

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.timeout(300)

FACTS = (
    "The harbour office moved to the old customs house on Pier Street",
    "Mira keeps the spare keys of the boat in a blue tin under the sink",
    "The ferry to the island leaves at seven every morning except Sundays",
)
# A hang guard for one session (the server's start included), not a measurement.
_SESSION_SECS = 180


def _server_env(data_dir: Path) -> dict[str, str]:
    # The server gets none of the test run's CPERSONA_* variables; PYTHONPATH keeps it on this checkout.
    env = {"CPERSONA_DATA_DIR": str(data_dir), "CPERSONA_EMBEDDING_MODE": "none"}
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


async def _call(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(name, arguments)
    assert isinstance(result.structured_content, dict)
    assert not result.is_error, result.structured_content
    return result.structured_content


async def session(client: Client) -> None:
    """List the tools, store, recall with a trace, reconstruct: what either transport must carry."""
    listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(listed) == {tool.name for tool in TOOLS}
    assert listed["recall"].input_schema["required"] == ["agent_id", "query"]
    hint = listed["delete_agent_data"].annotations
    assert hint is not None
    assert hint.destructive_hint is True

    refs = [(await _call(client, "store", {"agent_id": "deck", "content": fact}))["ref"] for fact in FACTS]
    recalled = await _call(
        client, "recall", {"agent_id": "deck", "query": "spare keys of the boat", "trace": True}
    )
    assert recalled["rows"][0]["ref"] == refs[1]
    trace = json.dumps(recalled["trace"])
    assert refs[1] in trace
    assert not any(fact in trace for fact in FACTS)
    rebuilt = await _call(client, "reconstruct", {"agent_id": "deck", "query": "spare keys boat"})
    assert rebuilt["items"][0]["head_ref"] == refs[1]

    refused = await client.call_tool("recall", {"agent_id": "deck", "query": "keys", "limit": -1})
    assert refused.is_error
    assert isinstance(refused.structured_content, dict)
    assert refused.structured_content["error"]["field"] == "limit"


async def test_a_session_over_stdio(tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "cpersona", "mcp"], env=_server_env(tmp_path / "data")
    )
    log = tmp_path / "mcp.log"
    with log.open("w") as errlog, anyio.fail_after(_SESSION_SECS):
        try:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                await session(client)
        except BaseException:
            print(log.read_text()[-3000:])
            raise


async def test_a_session_over_streamable_http_and_stdio_refused_beside_it(tmp_path: Path) -> None:
    data_dir, port, log = tmp_path / "data", free_port(), tmp_path / "serve.log"
    proc = start_serve(data_dir, port, log, embedding_mode="none")
    url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            await wait_healthy(http, proc, log)
        with anyio.fail_after(_SESSION_SECS):
            async with Client(f"{url}/mcp") as client:
                await session(client)
        # The data dir is the server's: a stdio server on it would be a second engine; it says where the
        # tools already are instead.
        env = environment_without_settings() | _server_env(data_dir)
        with anyio.fail_after(120):
            refused = await anyio.run_process([sys.executable, "-m", "cpersona", "mcp"], env=env, check=False)
        said = refused.stderr.decode()
        assert refused.returncode == 1, said
        assert f"{url}/mcp" in said
    finally:
        stop_serve(proc)


async def test_stdio_is_refused_where_a_server_is_named(tmp_path: Path) -> None:
    env = environment_without_settings() | _server_env(tmp_path)
    env["CPERSONA_URL"] = "http://127.0.0.1:9"
    with anyio.fail_after(120):
        refused = await anyio.run_process([sys.executable, "-m", "cpersona", "mcp"], env=env, check=False)
    assert refused.returncode == 1
    assert "http://127.0.0.1:9/mcp" in refused.stderr.decode()
    # Nothing was opened: the refusal comes before an engine.
    assert not (tmp_path / "redis").exists()
