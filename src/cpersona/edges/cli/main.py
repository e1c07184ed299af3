"""The ``cpersona`` command: run the HTTP API, store, import and inspect memories by hand, delete an
agent's data (``cpersona delete-agent``), and follow recall traces live (``cpersona trace tail``).

The command parses its arguments, reads the settings (``CPERSONA_*`` variables plus a few flags), and
then makes one ``anyio.run`` call that awaits the library; it holds no logic of its own beyond presenting
results. It opens the engine itself unless a server is there to ask: ``CPERSONA_URL``, or the
``cpersona serve`` that holds the data dir (:mod:`~cpersona.edges.cli.service`), which it then asks over
HTTP and prints the same. Exit codes:

- 0 success
- 1 the record does not exist, or another failure the message explains
- 2 bad input (a field, a flag, a JSONL line, a setting); the message is ``error: <field>: <problem>``
- 3 a backend (Redis, the vector store, the embedder) is unavailable
- 130 interrupted
- 141 the reader of the output went away (``cpersona get … | head``)
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio
import orjson

from cpersona.edges.cli.archive import export_command, import_command
from cpersona.edges.cli.flags import number_or_text, with_given
from cpersona.edges.cli.keys import keys_command
from cpersona.edges.cli.outcomes import (
    EXIT_BAD_INPUT,
    EXIT_BROKEN_PIPE,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_UNAVAILABLE,
    BadInput,
)
from cpersona.edges.cli.parser import OLD_NAMES, build_parser
from cpersona.edges.cli.raw import raw_command
from cpersona.edges.cli.reconstruct import reconstruct_command
from cpersona.edges.cli.reembed import reembed_command
from cpersona.edges.cli.service import LocalService, RemoteService, ServerRefused, Service, server_url
from cpersona.edges.cli.serving import serve_command
from cpersona.edges.cli.stats import stats_command
from cpersona.edges.cli.timeline import timeline_command
from cpersona.edges.cli.trace_follow import follow_server_traces
from cpersona.edges.cli.trace_tail import tail_traces
from cpersona.edges.http.app import single_error
from cpersona.edges.mcp.stdio import mcp_command
from cpersona.engine.facade import Engine
from cpersona.errors import BackendUnavailable, CpersonaError, InvalidRequest, InvalidSetting
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
        if args.workers is not None:
            overrides["workers"] = args.workers
        if args.insecure_no_keys:
            overrides["insecure_no_keys"] = True
    return Settings.from_env(None, **overrides)


# --------------------------------------------------------------------------------------------- commands


async def _remember(service: Service, args: argparse.Namespace) -> int:
    given = (("project_id", args.project), ("channel", args.channel), ("id", args.msg_id))
    fields = with_given({"agent_id": args.agent}, given)
    if args.timestamp is not None:
        fields["timestamp"] = number_or_text(args.timestamp)
    if args.metadata is not None:
        try:
            fields["metadata"] = orjson.loads(args.metadata)
        except orjson.JSONDecodeError as exc:
            raise InvalidRequest("metadata", f"is not valid JSON ({exc})") from None
    result = await service.store({"content": args.text, **fields})
    if args.json:
        print(orjson.dumps(result).decode())
        return EXIT_OK
    line = f"{result['result']} {result['ref']}"
    if result.get("reason"):
        line += f" ({result['reason']})"
    print(line)
    for warning in result.get("warnings", ()):
        print(f"warning: {warning}", file=sys.stderr)
    return EXIT_OK


async def _get(service: Service, args: argparse.Namespace) -> int:
    record = await service.get(args.ref, args.agent)
    print(orjson.dumps(record, option=orjson.OPT_INDENT_2).decode())
    return EXIT_OK


async def _recall(service: Service, args: argparse.Namespace) -> int:
    given = (
        ("project_id", args.project),
        ("channel", args.channel),
        ("source_id", args.source),
        ("mode", args.mode),
    )
    fields = with_given({"agent_id": args.agent, "limit": args.limit, "deep": args.deep}, given)
    if args.when is not None:
        fields["time_cue"] = when_to_cue(args.when)
    body = {"query": args.question, "full_content": args.full, **fields}
    result = await service.recall(body)
    if args.json:
        print(orjson.dumps(result).decode())
        return EXIT_OK
    rows = result["rows"]
    head = f"{len(rows)} row(s), policy {result['policy']['process']}, mode {result['mode']}"
    # The rows past the limit are held seats: say so, since a user who asked for one row may see three.
    print(f"{head}; limit {result['limit']}, {result['seated']} seated")
    time_cue = result.get("time_cue")
    if time_cue is not None:
        print(_cue_line(time_cue))
    for degraded in result.get("degraded", ()):
        print(f"degraded: {degraded['arm']} {degraded['status']} ({degraded['detail']})", file=sys.stderr)
    width = max((len(str(r.get("ref"))) for r in rows), default=3)
    for n, row in enumerate(rows, 1):
        reason = row.get("match_reason") or {}
        signal = str(reason.get("signal", "-"))
        score = reason.get("score", reason.get("cosine"))
        shown = "" if score is None else f"{score:.4f}"
        text = " ".join(str(row.get("content", "")).split())
        if len(text) > 100:
            text = text[:99] + "…"
        print(f"{n:>3}  {row.get('ref')!s:<{width}}  {signal:<6} {shown:>7}  {text}")
    return EXIT_OK


def _cue_line(time_cue: dict[str, Any]) -> str:
    """The response's ``time_cue`` as one line a person reads."""
    period = time_cue.get("period")
    span = "no period" if not period else f"{period[0]} .. {period[1]}"
    if "ignored" in time_cue:
        return f"time cue: {span}, not used ({time_cue['ignored']})"
    widened = "widened once" if time_cue.get("revised") else "not widened"
    return (
        f"time cue: {span} ({time_cue.get('confidence')}), {widened}; "
        f"{time_cue.get('moved', 0)} row(s) moved up, {time_cue.get('seated', 0)} seated"
    )


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
    # No engine here: the tailer only listens, to the server's stream when a server is the target (its
    # key checks bind the tail), else on the Redis the engines publish to.
    if args.count is not None and args.count < 1:
        raise BadInput("--count: must be at least 1")
    asked = {"agent": args.agent, "project": args.project, "as_json": args.json, "count": args.count}
    if server_url(settings) is None:
        await tail_traces(settings, **asked)
    else:
        await follow_server_traces(settings, **asked, out=sys.stdout, err=sys.stderr)
    return EXIT_OK


async def _delete_agent(service: Service, args: argparse.Namespace) -> int:
    result = await service.delete_agent(args.agent)
    print(f"deleted {result['deleted']} record(s) of agent {args.agent!r}")
    return EXIT_OK


# ------------------------------------------------------------------------------------------------ main

_Command = Callable[[Service, argparse.Namespace], Awaitable[int]]
_COMMANDS: dict[str, _Command] = {
    "remember": _remember,
    "import": import_command,
    "export": export_command,
    "stats": stats_command,
    "get": _get,
    "delete-agent": _delete_agent,
    "recall": _recall,
    "reconstruct": reconstruct_command,
    "timeline": timeline_command,
    "raw": raw_command,
}


async def _run(settings: Settings, args: argparse.Namespace) -> int:
    if args.command == "serve":
        return await serve_command(settings)
    if args.command == "mcp":
        return await mcp_command(settings)
    if args.command == "trace":
        return await _trace_tail(settings, args)
    if args.command == "keys":
        return await keys_command(settings, args)
    if args.command == "reembed":
        return await reembed_command(settings, args)
    if args.command == "delete-agent" and not args.yes:
        raise InvalidRequest("--yes", f"is required to delete all data of agent {args.agent!r}")
    url = server_url(settings)
    if url is None:
        async with Engine(settings) as engine:
            if args.command == "optimize":
                return await _optimize(engine, args)
            return await _COMMANDS[args.command](LocalService(engine), args)
    if args.command == "optimize":
        raise ServerRefused(
            f"the server at {url} holds the data dir, and optimize runs only in-process: stop the server, "
            "run optimize, start it again"
        )
    key = None if settings.api_key is None else settings.api_key.get_secret_value()
    async with RemoteService.client(url, key) as client:
        return await _COMMANDS[args.command](RemoteService(settings, url, client), args)


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
    renamed = OLD_NAMES.get(args.command)
    if renamed is not None:
        print(
            f"note: 'cpersona {args.command}' is deprecated: use 'cpersona {renamed}', the same command",
            file=sys.stderr,
        )
        args.command = renamed
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
        error = single_error(exc)
        if isinstance(error, BrokenPipeError):
            return _reader_gone()
        return _fail(error)


def _reader_gone() -> int:
    # Whatever is still buffered for stdout would fail again when the interpreter flushes it at exit
    # (and print a traceback there): point stdout at /dev/null first.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_BROKEN_PIPE
