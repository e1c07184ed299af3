"""The ``cpersona`` command: run the HTTP API, store, import, inspect and forget memories by hand, and
follow recall traces live (``cpersona trace tail``).

The command parses its arguments, reads the settings (``CPERSONA_*`` variables plus a few flags), and
then makes one ``anyio.run`` call that opens the engine and awaits the library; it holds no logic of its
own beyond presenting results. Exit codes:

- 0 success
- 1 the record does not exist, or another failure the message explains
- 2 bad input (a field, a flag, a JSONL line, a setting); the message is ``error: <field>: <problem>``
- 3 a backend (Redis, the vector store, the embedder) is unavailable
- 130 interrupted
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio
import orjson

from cpersona.edges.cli.importing import import_jsonl
from cpersona.edges.cli.outcomes import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_UNAVAILABLE,
    BadInput,
)
from cpersona.edges.cli.parser import build_parser
from cpersona.edges.cli.trace_tail import tail_traces
from cpersona.edges.http.app import record_to_json, serve, single_error
from cpersona.engine.facade import Engine
from cpersona.errors import BackendUnavailable, CpersonaError, InvalidRequest, InvalidSetting
from cpersona.model.fields import arguments, validate
from cpersona.model.memory_request import StoreRequest
from cpersona.model.recall_query import RecallQuery
from cpersona.settings import Settings

__all__ = ["main", "when_to_cue"]


def _settings(args: argparse.Namespace) -> Settings:
    overrides: dict[str, object] = {}
    if args.data_dir is not None:
        overrides["data_dir"] = args.data_dir.expanduser()
    if args.redis_url is not None:
        overrides["redis_url"] = args.redis_url
    if args.command == "serve":
        if args.host is not None:
            overrides["host"] = args.host
        if args.port is not None:
            overrides["port"] = args.port
    return Settings.from_env(None, **overrides)


# --------------------------------------------------------------------------------------------- commands


async def _serve(settings: Settings, args: argparse.Namespace) -> int:
    if not await serve(settings):
        print("error: the server did not start (the log above says why)", file=sys.stderr)
        return EXIT_UNAVAILABLE
    return EXIT_OK


async def _remember(engine: Engine, args: argparse.Namespace) -> int:
    fields: dict[str, Any] = {"agent_id": args.agent}
    for name, value in (("project_id", args.project), ("channel", args.channel), ("id", args.msg_id)):
        if value is not None:
            fields[name] = value
    if args.timestamp is not None:
        fields["timestamp"] = _number_or_text(args.timestamp)
    if args.metadata is not None:
        try:
            fields["metadata"] = orjson.loads(args.metadata)
        except orjson.JSONDecodeError as exc:
            raise InvalidRequest("metadata", f"is not valid JSON ({exc})") from None
    result = await engine.store(
        **arguments(validate(StoreRequest, {"content": args.text, **fields}, engine.settings))
    )
    if args.json:
        print(orjson.dumps(result.to_json()).decode())
        return EXIT_OK
    line = f"{result.result} {result.ref}"
    if result.skipped_reason:
        line += f" ({result.skipped_reason})"
    print(line)
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return EXIT_OK


def _number_or_text(value: str) -> float | str:
    # Epoch seconds arrive as text on the command line; the engine reads numbers as epoch seconds.
    try:
        return float(value)
    except ValueError:
        return value


async def _stats(engine: Engine, args: argparse.Namespace) -> int:
    stats = await engine.stats(args.agent)
    if args.json:
        print(orjson.dumps(stats).decode())
        return EXIT_OK
    for key, value in stats.items():
        if key != "ok":
            print(f"{key}: {'-' if value is None else value}")
    return EXIT_OK


async def _get(engine: Engine, args: argparse.Namespace) -> int:
    record = await engine.get(args.ref, agent_id=args.agent)
    print(orjson.dumps(record_to_json(record), option=orjson.OPT_INDENT_2).decode())
    return EXIT_OK


async def _recall(engine: Engine, args: argparse.Namespace) -> int:
    fields: dict[str, Any] = {"agent_id": args.agent, "limit": args.limit, "deep": args.deep}
    for name, value in (
        ("project_id", args.project),
        ("channel", args.channel),
        ("source_id", args.source),
        ("mode", args.mode),
    ):
        if value is not None:
            fields[name] = value
    if args.when is not None:
        fields["time_cue"] = when_to_cue(args.when)
    body = {"query": args.question, "full_content": args.full, **fields}
    result = await engine.recall(**arguments(validate(RecallQuery, body, engine.settings)))
    if args.json:
        print(orjson.dumps(result.to_json()).decode())
        return EXIT_OK
    print(f"{len(result.rows)} row(s), policy {result.policy['process']}, mode {result.mode}")
    if result.time_cue is not None:
        print("time cue: " + ", ".join(f"{k} {v}" for k, v in result.time_cue.items() if k != "policy"))
    for degraded in result.degraded:
        print(f"degraded: {degraded.arm} {degraded.status} ({degraded.detail})", file=sys.stderr)
    width = max((len(str(r.ref)) for r in result.rows), default=3)
    for n, row in enumerate(result.rows, 1):
        reason = row.match_reason or {}
        signal = str(reason.get("signal", "-"))
        score = reason.get("score", reason.get("cosine"))
        shown = "" if score is None else f"{score:.4f}"
        text = " ".join(row.content.split())
        if len(text) > 100:
            text = text[:99] + "…"
        print(f"{n:>3}  {row.ref!s:<{width}}  {signal:<6} {shown:>7}  {text}")
    return EXIT_OK


_AGO = re.compile(r"^(\d+)\s+(day|week|month)s?\s+ago$")


def when_to_cue(text: str) -> dict[str, Any]:
    """Read ``--when`` into the ``time_cue`` mapping the engine takes (which checks the dates themselves).

    A JSON object is passed as it is; otherwise the last word is the confidence and the rest is a day
    (``2026-08-14``), a range (``after..before``, either end empty), ``N days|weeks|months ago`` or
    ``long ago``.
    """
    raw = text.strip()
    if raw.startswith("{"):
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise BadInput(f"--when: not valid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise BadInput("--when: a JSON cue must be an object")
        return value
    words = raw.replace(",", " ").split()
    if not words or words[-1].lower() not in ("sure", "likely", "vague"):
        raise BadInput("--when: end it with how sure you are: sure, likely or vague")
    confidence, rest = words[-1].lower(), " ".join(words[:-1]).lower()
    if rest in ("long ago", "long_ago"):
        return {"ago": "long_ago", "confidence": confidence}
    ago = _AGO.match(rest)
    if ago:
        return {"ago": {"unit": ago[2] + "s", "value": int(ago[1])}, "confidence": confidence}
    if ".." in rest:
        after, _, before = (part.strip() for part in rest.partition(".."))
        cue: dict[str, Any] = {"confidence": confidence}
        if after:
            cue["after"] = after
        if before:
            cue["before"] = before
        if len(cue) == 1:
            raise BadInput("--when: a range needs at least one end, as in 2026-08-01..2026-08-31")
        return cue
    if rest and " " not in rest and rest[0].isdigit():
        # A day (or a time); the engine reads it and names the field if it cannot.
        return {"after": rest, "before": rest, "confidence": confidence}
    raise BadInput(
        f"--when: cannot read {' '.join(words[:-1])!r}; give a day, a range (after..before), "
        "'N days|weeks|months ago' or 'long ago'"
    )


async def _optimize(engine: Engine, args: argparse.Namespace) -> int:
    started = time.monotonic()
    await engine.optimize()
    print(f"optimized in {time.monotonic() - started:.1f} s")
    return EXIT_OK


async def _trace_tail(settings: Settings, args: argparse.Namespace) -> int:
    # No engine here: the tailer only listens on the Redis the engines publish to.
    if args.count is not None and args.count < 1:
        raise BadInput("--count: must be at least 1")
    await tail_traces(settings, agent=args.agent, project=args.project, as_json=args.json, count=args.count)
    return EXIT_OK


async def _forget(engine: Engine, args: argparse.Namespace) -> int:
    result = await engine.delete_agent_data(args.agent)
    print(f"deleted {result.deleted} record(s) of agent {args.agent!r}")
    return EXIT_OK


# ------------------------------------------------------------------------------------------------ main

_Command = Callable[[Engine, argparse.Namespace], Awaitable[int]]
_COMMANDS: dict[str, _Command] = {
    "remember": _remember,
    "import": import_jsonl,
    "stats": _stats,
    "get": _get,
    "forget": _forget,
    "recall": _recall,
    "optimize": _optimize,
}


async def _run(settings: Settings, args: argparse.Namespace) -> int:
    if args.command == "serve":
        return await _serve(settings, args)
    if args.command == "trace":
        return await _trace_tail(settings, args)
    if args.command == "forget" and not args.yes:
        raise InvalidRequest("--yes", f"is required to delete all data of agent {args.agent!r}")
    async with Engine(settings) as engine:
        return await _COMMANDS[args.command](engine, args)


def _fail(exc: BaseException) -> int:
    """Print a one-line error for ``exc`` and return the exit code; re-raise what is not ours."""
    if isinstance(exc, InvalidRequest | InvalidSetting | BadInput):
        code = EXIT_BAD_INPUT
    elif isinstance(exc, BackendUnavailable):
        code = EXIT_UNAVAILABLE
    elif isinstance(exc, CpersonaError):
        # RecordNotFound, and a data dir that another engine (e.g. a running server) holds.
        code = EXIT_FAILED
    else:
        raise exc
    print(f"error: {exc}", file=sys.stderr)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``cpersona`` console script and of ``python -m cpersona``."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.command == "serve" else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        settings = _settings(args)
        return anyio.run(_run, settings, args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        return _fail(single_error(exc))
