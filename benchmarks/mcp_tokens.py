"""What the MCP tools cost an agent in tokens: the ``tools/list`` result, and one small recall's result.

An agent's client puts the whole ``tools/list`` result (every tool's name, description and input schema)
in the model's context before the agent does anything, and every tool result it reads after. This
counts both in cl100k_base tokens with the tokenizer the engine already ships
(:func:`cpersona.operations.reconstruct.tokens.count_tokens`, offline), over the JSON exactly as the
server answers it on ``/mcp`` (the app ``cpersona serve`` runs, in this process, on an embedded Redis in
a temporary data dir, with the default embedder unless ``--embedding-mode`` says otherwise):

* the ``tools/list`` result: total tokens and bytes, and each tool's tokens (its entry in the list);
* one memory of 44 characters, stored with ``store``, then read back with ``query`` (Cerememory's
  ``recall.query``, ``recall_mode: perfect``) and with ``recall``: the tokens of each result's text (what
  the model reads) and of the whole result (text and structured content, as the wire carries them).

Run from the repository root::

    .venv/bin/python -m benchmarks mcp_tokens            # prints a markdown section
    .venv/bin/python -m benchmarks mcp_tokens --json     # the same figures as JSON
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio
import httpx2

from benchmarks import harness
from benchmarks.in_process import running
from cpersona.edges.http.app import create_app
from cpersona.operations.reconstruct.tokens import count_tokens
from cpersona.settings import Settings

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


__all__ = ["MEMORY", "Figures", "main", "measure", "render"]

MEMORY: Final = "Mira keeps the spare boat keys in a blue tin"
"""The stored memory: 44 characters (tested below), a fact an agent would keep."""
AGENT: Final = "bench"
_ACCEPT: Final = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25"}

Figures = dict[str, Any]


def wire(value: object) -> str:
    """``value`` as the server writes JSON: compact, UTF-8 as is."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@contextlib.asynccontextmanager
async def mcp_http(settings: Settings) -> AsyncIterator[httpx2.AsyncClient]:
    """An HTTP client on the app over ``settings``, in this process."""
    app = create_app(settings, background=False)
    async with running(app) as (asgi, _):
        transport = httpx2.ASGITransport(app=asgi)
        async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            yield http


async def rpc(http: httpx2.AsyncClient, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """The ``result`` of one JSON-RPC request to ``/mcp``."""
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    answer = await http.post("/mcp", json=message, headers=_ACCEPT)
    answer.raise_for_status()
    body = answer.json()
    if "result" not in body:
        raise RuntimeError(f"{method}: {body}")
    result: dict[str, Any] = body["result"]
    return result


def _result_figures(result: dict[str, Any]) -> dict[str, int]:
    text = "".join(part.get("text", "") for part in result["content"])
    return {
        "text_tokens": count_tokens(text),
        "result_tokens": count_tokens(wire(result)),
        "result_bytes": len(wire(result).encode()),
    }


async def measure(embedding_mode: str | None = None) -> Figures:
    assert len(MEMORY) == 44, len(MEMORY)
    with tempfile.TemporaryDirectory(prefix="mcp-tokens-") as data:
        chosen = {} if embedding_mode is None else {"embedding_mode": embedding_mode}
        settings = Settings(data_dir=Path(data), **chosen)
        async with mcp_http(settings) as http:
            listed = await rpc(http, "tools/list", {})
            tools = listed["tools"]

            async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
                result = await rpc(http, "tools/call", {"name": name, "arguments": arguments})
                if result.get("isError"):
                    raise RuntimeError(f"{name}: {result}")
                return result

            await call("store", {"agent_id": AGENT, "content": MEMORY})
            query = await call(
                "query", {"agent_id": AGENT, "cue": {"text": "spare keys"}, "recall_mode": "perfect"}
            )
            recall = await call("recall", {"agent_id": AGENT, "query": "spare keys"})
    return {
        "tools": len(tools),
        "list_tokens": count_tokens(wire(listed)),
        "list_bytes": len(wire(listed).encode()),
        "per_tool": {tool["name"]: count_tokens(wire(tool)) for tool in tools},
        "query": _result_figures(query),
        "recall": _result_figures(recall),
        "query_text": "".join(part.get("text", "") for part in query["content"]),
    }


def render(figures: Figures, command: str, load_start: float) -> str:
    lines = [*harness.header(command, load_start=load_start), ""]
    lines += [
        f"`tools/list` ({figures['tools']} tools): **{figures['list_tokens']:,} tokens**, "
        f"{figures['list_bytes']:,} bytes",
        "",
        "| tool | tokens |",
        "|---|---:|",
    ]
    per_tool = sorted(figures["per_tool"].items(), key=lambda item: -item[1])
    lines += [f"| `{name}` | {tokens:,} |" for name, tokens in per_tool]
    lines += [
        "",
        f"One memory of {len(MEMORY)} characters (`{MEMORY}`), read back:",
        "",
        "| tool | result text (tokens) | whole result (tokens) | whole result (bytes) |",
        "|---|---:|---:|---:|",
    ]
    for name in ("query", "recall"):
        f = figures[name]
        lines.append(f"| `{name}` | {f['text_tokens']:,} | {f['result_tokens']:,} | {f['result_bytes']:,} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--embedding-mode", help="the engine's CPERSONA_EMBEDDING_MODE (default: the setting's default)"
    )
    parser.add_argument("--show-query", action="store_true", help="also print the query result's text")
    args = parser.parse_args(argv)
    load_start = harness.load()
    figures = anyio.run(measure, args.embedding_mode)
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    print(render(figures, harness.command("mcp_tokens", argv), load_start))
    if args.show_query:
        print(figures["query_text"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
