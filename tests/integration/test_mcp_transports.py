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
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from cpersona.edges.mcp.server import TOOLS
from serving import environment_without_settings, free_port, start_serve, stop_serve_off_loop, wait_healthy

if TYPE_CHECKING:
    from pathlib import Path

    from anyio.abc import Process

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
            print((await anyio.Path(log).read_text())[-3000:])
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
        await stop_serve_off_loop(proc)


async def test_stdio_is_refused_where_a_server_is_named(tmp_path: Path) -> None:
    env = environment_without_settings() | _server_env(tmp_path)
    env["CPERSONA_URL"] = "http://127.0.0.1:9"
    with anyio.fail_after(120):
        refused = await anyio.run_process([sys.executable, "-m", "cpersona", "mcp"], env=env, check=False)
    assert refused.returncode == 1
    assert "http://127.0.0.1:9/mcp" in refused.stderr.decode()
    # Nothing was opened: the refusal comes before an engine.
    assert not await anyio.Path(tmp_path / "redis").exists()


class _Lines:
    """A JSON-RPC session over a real stdio server's pipes, one message a line."""

    def __init__(self, process: Process) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self._stdin = process.stdin
        self._stdout = BufferedByteReceiveStream(process.stdout)

    async def send(self, line: bytes) -> None:
        await self._stdin.send(line + b"\n")

    async def close(self) -> None:
        """End the session as a client does: its end of stdin closed."""
        await self._stdin.aclose()

    async def answer(self) -> dict[str, Any]:
        answer: dict[str, Any] = json.loads(await self._stdout.receive_until(b"\n", 10 * 1024 * 1024))
        return answer

    async def call(self, id_: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        params = {"name": name, "arguments": arguments}
        await self.send(
            json.dumps({"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": params}).encode()
        )
        answer = await self.answer()
        assert answer["id"] == id_, answer
        structured: dict[str, Any] = answer["result"]["structuredContent"]
        return structured


_REFUSED_LINES = (
    # The SDK keeps the last of a repeated key: this would store for "bob", not "ann".
    (
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "store", "arguments": '
        b'{"agent_id": "ann", "content": "meant for ann", "agent_id": "bob"}}}',
        "agent_id: is given more than once",
    ),
    # An id that is no string or integer: the SDK took it for a notification, stored, and answered nothing.
    (
        b'{"jsonrpc": "2.0", "id": {}, "method": "tools/call", "params": {"name": "store", "arguments": '
        b'{"agent_id": "bob", "content": "meant for no one"}}}',
        "id: must be a string or an integer",
    ),
    (b'{"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}', "id: must be a string or an integer"),
)


async def test_stdio_refuses_the_lines_mcp_over_http_refuses(tmp_path: Path) -> None:
    """A repeated key or an odd id is answered with a JSON-RPC error, as ``/mcp`` answers it, reaches no
    tool, and the session goes on."""
    env = environment_without_settings() | _server_env(tmp_path / "data")
    with (tmp_path / "mcp.log").open("w") as errlog, anyio.fail_after(_SESSION_SECS):
        async with await anyio.open_process(
            [sys.executable, "-m", "cpersona", "mcp"], env=env, stderr=errlog
        ) as process:
            lines = _Lines(process)
            hello = {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            }
            await lines.send(
                json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello}).encode()
            )
            assert (await lines.answer())["id"] == 0
            await lines.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
            for raw, said in _REFUSED_LINES:
                await lines.send(raw)
                answer = await lines.answer()
                assert answer["id"] is None, answer
                assert answer["error"]["code"] == -32600
                assert said in answer["error"]["message"]
            for agent in ("ann", "bob"):
                assert (await lines.call(2, "stats", {"agent_id": agent}))["memories"] == 0
            stored = await lines.call(3, "store", {"agent_id": "ann", "content": "meant for ann"})
            assert stored["result"] == "stored"
            await lines.close()
            assert await process.wait() == 0
