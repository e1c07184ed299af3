"""Drives the released CPersona (PyPI ``cpersona``) through its library API, under its own interpreter.

Run by :class:`benchmarks.peers.cpersona_ref.CPersonaRef` as ``<peer venv>/bin/python
_cpersona_worker.py``; never imported by the benchmark (the package name is the same as ours). The
benchmark sets every ``CPERSONA_*`` variable in the environment before this starts, because CPersona reads
its configuration at import. The calls are the ones its own benchmarks make (reference
``cpersona-recall.md`` §6.2 A): ``server.do_store_boundary`` to store and ``memory_handlers.do_recall``
to recall, with the HTTP embedding client it builds from the environment.

Ops (JSON lines, see :mod:`_wire`):

* ``store`` ``{agent, records: [{content, msg_id, timestamp, metadata}]}`` stores in order and answers
  ``{results: [{result, id, reason?}]}``;
* ``recall`` ``{agent, query, limit, time_cue?, trace?}`` answers ``{rows: [{ref, id, signal}],
  elapsed_ms, time_cue?, trace_keys?}``, best first (CPersona returns its messages best last), the
  profile row left out (it has no ref); ``signal`` is the row's ``match_reason.signal`` (``cue`` marks a
  seat the time cue held) and ``time_cue`` is what CPersona says it did with a cue it was given. With
  ``trace`` the call asks ``do_recall`` for its recall trace; the trace itself stays here (shipping it
  over the pipe would add a cost the library call does not have) and ``trace_keys`` counts its top-level
  keys, to show that one was built;
* ``reconstruct`` ``{agent, query, mode?}`` calls ``reconstruct.do_reconstruct`` at its defaults (``mode``
  ``lite`` or ``pro`` when given) and answers ``{items: [{refs}], elapsed_ms, mode}``: per item, every ref
  it cites (head, claims, excerpts), first seen first;
* ``declare`` ``{agent, entities: [name], anchor?}`` declares those entities through
  ``server.do_declare_associations_boundary`` (with ``anchor``, a ``mem:<id>``, as mentioned by that
  record) and answers ``{entities, mentions}``: how many it recorded;
* ``stats`` answers the row counts of the database;
* ``span`` ``{agent}`` answers ``{memories, oldest, newest}``: the stored timestamps (ISO 8601) of the
  agent's oldest and newest memory, for a benchmark that builds a time cue from them.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import platform
import sys
import time
from typing import TYPE_CHECKING, Any

# Run as a script under the peer's interpreter, where this folder is on sys.path and the repository is not.
if TYPE_CHECKING:
    from benchmarks.peers._wire import Handler, claim_stdout, serve
else:
    from _wire import claim_stdout, serve

CHANNEL = claim_stdout()

import anyio  # noqa: E402


def _released(name: str) -> Any:
    """A module of the released CPersona. mypy sees only this repository's package of the same name, so
    the released one is untyped here; it is imported by name, in the order the plain imports took."""
    return importlib.import_module(f"cpersona.{name}")


config = _released("config")
cue = _released("cue")
database = _released("database")
server = _released("server")
vector = _released("vector")
mh = _released("memory_handlers")
reconstruct_module = _released("reconstruct")

# What the benchmark pins, read back after import so that it can check the pins took effect.
_CONFIG_ECHO = (
    "EMBEDDING_MODE",
    "EMBEDDING_URL",
    "EMBEDDING_CACHE_SIZE",
    "FUSED_GATE_ENABLED",
    "AUTOCUT_ENABLED",
    "AUTO_CALIBRATE",
    "TASK_QUEUE_ENABLED",
    "BLOCK_BUILD_ENABLED",
    "BLOCK_RETRIEVAL_ENABLED",
    "RECALL_MODE",
    "MAX_MEMORIES",
    "RECALL_LIBRARY_MAX_LIMIT",
    "UPDATE_CHECK_ENABLED",
    "DB_PATH",
)


async def store(request: dict[str, Any]) -> dict[str, Any]:
    results = []
    for record in request["records"]:
        reply = await server.do_store_boundary(
            request["agent"],
            content=record["content"],
            msg_id=record.get("msg_id", ""),
            timestamp=record.get("timestamp", ""),
            metadata=record.get("metadata"),
        )
        if reply.get("result") not in ("stored", "skipped") or not reply.get("embedded", True):
            # A row stored without its vector would silently leave the vector arm; refuse instead.
            raise RuntimeError(f"store of {record.get('msg_id')!r} answered {reply}")
        results.append({"result": reply["result"], "id": reply.get("id"), "reason": reply.get("reason")})
    return {"results": results}


async def recall(request: dict[str, Any]) -> dict[str, Any]:
    started = time.perf_counter()
    # The cue goes in as the caller's mapping, the form CPersona's recall tool passes on. Neither field
    # is passed unless asked for, so a plain recall is the same call as before these options existed.
    extra: dict[str, Any] = {"time_cue": request["time_cue"]} if request.get("time_cue") else {}
    if request.get("trace"):
        extra["trace"] = True
    reply = await mh.do_recall(request["agent"], request["query"], int(request["limit"]), **extra)
    elapsed_ms = (time.perf_counter() - started) * 1000.0
    if reply.get("error") or reply.get("ok") is False:
        raise RuntimeError(f"recall answered { ({k: v for k, v in reply.items() if k != 'messages'}) }")
    rows = [
        {
            "ref": message["ref"],
            "id": message.get("id", ""),
            "signal": str((message.get("match_reason") or {}).get("signal", "")),
        }
        for message in reversed(reply.get("messages") or [])
        if message.get("ref")
    ]
    said = {k: reply[k] for k in ("advisory", "gate_fallback", "depth", "time_cue") if k in reply}
    if request.get("trace"):
        trace = reply.get("trace")
        if not isinstance(trace, dict) or not trace:
            raise RuntimeError(f"a recall asked for its trace answered without one: {sorted(reply)}")
        said["trace_keys"] = len(trace)
    return {"rows": rows, "elapsed_ms": elapsed_ms, **said}


def _cited(item: dict[str, Any]) -> list[str]:
    """Every ref one reconstruct item cites: its head, its claims and its excerpts, first seen first."""
    refs = [item.get("head_ref")]
    refs += [claim.get("ref") for claim in item.get("claims") or ()]
    refs += [excerpt.get("ref") for excerpt in item.get("excerpts") or () if isinstance(excerpt, dict)]
    return list(dict.fromkeys(ref for ref in refs if isinstance(ref, str) and ref))


async def reconstruct(request: dict[str, Any]) -> dict[str, Any]:
    started = time.perf_counter()
    mode = request.get("mode")
    reply = await reconstruct_module.do_reconstruct(request["agent"], request["query"], mode=mode)
    elapsed_ms = (time.perf_counter() - started) * 1000.0
    if reply.get("error") or reply.get("ok") is False:
        raise RuntimeError(f"reconstruct answered { ({k: v for k, v in reply.items() if k != 'items'}) }")
    items = [{"refs": _cited(item)} for item in reply.get("items") or ()]
    return {"items": items, "elapsed_ms": elapsed_ms, "mode": reply.get("mode")}


async def declare(request: dict[str, Any]) -> dict[str, Any]:
    entities = [{"name": name} for name in request["entities"]]
    anchor = str(request.get("anchor") or "")
    reply = await server.do_declare_associations_boundary(
        request["agent"], {"entities": entities}, anchor_ref=anchor
    )
    if reply.get("ok") is False or reply.get("dropped"):
        raise RuntimeError(f"declare_associations answered {reply}")
    return {"entities": len(reply.get("entities") or ()), "mentions": int(reply.get("mentions") or 0)}


async def stats(request: dict[str, Any]) -> dict[str, Any]:
    db = await database.get_db()
    counts = {}
    for table in ("memories", "episodes", "record_blocks"):
        async with db.execute(f"SELECT COUNT(*) FROM {table}") as cursor:
            row = await cursor.fetchone()
        counts[table] = int(row[0]) if row else 0
    return counts


async def span(request: dict[str, Any]) -> dict[str, Any]:
    db = await database.get_db()
    query = "SELECT COUNT(*), MIN(timestamp), MAX(timestamp) FROM memories WHERE agent_id = ?"
    async with db.execute(query, (request["agent"],)) as cursor:
        row = await cursor.fetchone()
    count, oldest, newest = row if row else (0, None, None)
    return {"memories": int(count), "oldest": oldest, "newest": newest}


async def main() -> None:
    client = vector.build_embedding_client()
    if client is None:
        raise SystemExit("CPERSONA_EMBEDDING_MODE is none: the benchmark must set http")
    vector._embedding_client = client
    await client.initialize()
    await database.init_db()
    parameters = inspect.signature(mh.do_recall).parameters
    try:
        hello = {
            "peer": "cpersona",
            "version": importlib.metadata.version("cpersona"),
            "python": platform.python_version(),
            "config": {name: getattr(config, name, None) for name in _CONFIG_ECHO},
            # Whether this release's recall takes a time period and can return a trace, read from the
            # installed code itself.
            "time_cue": {"parameter": "time_cue" in parameters, "policy": getattr(cue, "POLICY", None)},
            "trace": {"parameter": "trace" in parameters},
        }
        ops: dict[str, Handler] = {
            "store": store, "recall": recall, "stats": stats, "span": span,
            "reconstruct": reconstruct, "declare": declare,
        }  # fmt: skip
        await serve(CHANNEL, hello, ops)
    finally:
        await database.close_db()


if __name__ == "__main__":
    anyio.run(main)
    sys.exit(0)
