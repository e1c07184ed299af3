"""``/mcp`` on ``cpersona serve --workers 2``: the transport keeps no session in a worker's memory, so a
tool call may land on either worker and sees what a call on the other one wrote.

Each message goes on a fresh connection to one chosen worker (:func:`worker_pool.only`), as the JSON-RPC
message a client of the handshake era sends without a session (no ``initialize`` first: stateless).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx

from redis_nodes import redis_node
from serving import environment_without_settings, free_port
from worker_pool import REQUEST_SECS, only, running_serve, worker_pids

if TYPE_CHECKING:
    from pathlib import Path

_HEADERS = {
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2025-11-25",
    "connection": "close",
}


def _call(url: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    answer = httpx.post(f"{url}/mcp", json=message, headers=_HEADERS, timeout=REQUEST_SECS)
    assert answer.status_code == 200, answer.text
    result = answer.json()["result"]
    assert result["isError"] is False, result
    body: dict[str, Any] = result["structuredContent"]
    return body


def test_a_call_on_one_worker_sees_what_a_call_on_the_other_wrote(tmp_path: Path) -> None:
    with redis_node(tmp_path / "redis", free_port()) as redis_url:
        env = environment_without_settings() | {
            "CPERSONA_DATA_DIR": str(tmp_path / "data"),
            "CPERSONA_EMBEDDING_MODE": "none",
            "CPERSONA_REDIS_URL": redis_url,
        }
        port = free_port()
        with running_serve(env, port, tmp_path / "serve.log", "--workers", "2") as supervisor:
            workers = worker_pids(supervisor)
            assert len(workers) == 2, workers
            url = f"http://127.0.0.1:{port}"
            with only(workers[0], workers):
                stored = _call(url, "store", {"agent_id": "fleet", "content": "The yard gate code is 4711"})
            with only(workers[1], workers):
                recalled = _call(url, "recall", {"agent_id": "fleet", "query": "yard gate code"})
            assert [row["ref"] for row in recalled["rows"]] == [stored["ref"]]
