"""Drives mem0 (PyPI ``mem0ai``) with ``infer=False`` under its own interpreter, for the benchmark.

Run by :class:`benchmarks.peers.mem0_peer.Mem0` as ``<peer venv>/bin/python _mem0_worker.py
<embeddings base URL>`` in a temporary work dir. mem0 is configured through its own config dictionary only:

* vector store: local Qdrant (``qdrant-client``'s embedded engine) in memory (``path=":memory:"``): on
  disk it commits an SQLite transaction per memory added, which only made ingest slower;
* embedder: mem0's ``openai`` provider pointed at the benchmark's loopback server, which speaks the
  OpenAI-compatible embeddings route and serves the run's MiniLM vectors (384 wide);
* LLM: never called with ``infer=False``; it is pointed at the same loopback server so that a call, if
  one ever happened, would fail loudly on this machine rather than reach the internet;
* history database (mem0's audit log of changes, not read by search) in memory too;
  ``MEM0_TELEMETRY=False`` and ``MEM0_DIR`` (inside the work dir) come from the benchmark's environment.

Ops (JSON lines, see :mod:`_wire`):

* ``store`` ``{agent, records: [{content, msg_id, metadata}]}`` adds each record as one user message
  under ``user_id=agent`` with ``infer=False`` and answers ``{ids: [...]}``;
* ``recall`` ``{agent, query, limit}`` answers ``{rows: [{id, msg_id, score}], elapsed_ms}`` from
  ``Memory.search(query, filters={"user_id": agent}, top_k=limit)`` with mem0's default threshold.

mem0 is synchronous: every call runs in a worker thread, one at a time.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import platform
import sys
import time
from typing import TYPE_CHECKING, Any

# Run as a script under the peer's interpreter, where this folder is on sys.path and the repository is not.
if TYPE_CHECKING:
    from benchmarks.peers._wire import claim_stdout, serve
else:
    from _wire import claim_stdout, serve

CHANNEL = claim_stdout()

import anyio  # noqa: E402
import anyio.to_thread  # noqa: E402
from mem0 import Memory  # noqa: E402

BASE_URL = sys.argv[1]
DIMS = 384
_ONE_AT_A_TIME = anyio.CapacityLimiter(1)

CONFIG: dict[str, Any] = {
    "vector_store": {
        "provider": "qdrant",
        "config": {"collection_name": "bench", "embedding_model_dims": DIMS, "path": ":memory:"},
    },
    "embedder": {
        "provider": "openai",
        "config": {
            "model": "all-MiniLM-L6-v2",
            "api_key": "loopback-only",
            "openai_base_url": BASE_URL,
            "embedding_dims": DIMS,
        },
    },
    "llm": {
        "provider": "openai",
        "config": {"model": "none", "api_key": "loopback-only", "openai_base_url": BASE_URL},
    },
    "history_db_path": ":memory:",
}

MEMORY = Memory.from_config(CONFIG)


def _store(request: dict[str, Any]) -> dict[str, Any]:
    ids = []
    for record in request["records"]:
        metadata = {**(record.get("metadata") or {}), "msg_id": record["msg_id"]}
        reply = MEMORY.add(
            [{"role": "user", "content": record["content"]}],
            user_id=request["agent"],
            metadata=metadata,
            infer=False,
        )
        added = [r["id"] for r in reply.get("results", []) if r.get("event") == "ADD"]
        if len(added) != 1:
            raise RuntimeError(f"add of {record['msg_id']!r} answered {reply}")
        ids.append(added[0])
    return {"ids": ids}


def _recall(request: dict[str, Any]) -> dict[str, Any]:
    started = time.perf_counter()
    reply = MEMORY.search(
        request["query"], filters={"user_id": request["agent"]}, top_k=int(request["limit"])
    )
    elapsed_ms = (time.perf_counter() - started) * 1000.0
    rows = [
        {"id": r["id"], "msg_id": (r.get("metadata") or {}).get("msg_id", ""), "score": r.get("score")}
        for r in reply.get("results", [])
    ]
    return {"rows": rows, "elapsed_ms": elapsed_ms}


async def store(request: dict[str, Any]) -> dict[str, Any]:
    return await anyio.to_thread.run_sync(_store, request, limiter=_ONE_AT_A_TIME)


async def recall(request: dict[str, Any]) -> dict[str, Any]:
    return await anyio.to_thread.run_sync(_recall, request, limiter=_ONE_AT_A_TIME)


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


async def main() -> None:
    hello = {
        "peer": "mem0",
        "version": importlib.metadata.version("mem0ai"),
        "qdrant_client": importlib.metadata.version("qdrant-client"),
        "python": platform.python_version(),
        # Without these two, mem0's search is its semantic half only (no BM25, no entity boost).
        "fastembed": _installed("fastembed"),
        "spacy": _installed("spacy"),
        "telemetry": importlib.import_module("mem0.memory.telemetry").MEM0_TELEMETRY,
    }
    await serve(CHANNEL, hello, {"store": store, "recall": recall})


if __name__ == "__main__":
    anyio.run(main)
