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
import contextlib
import dataclasses
import logging
import re
import sys
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import orjson
from tqdm import tqdm

from cpersona.edges.cli.trace_tail import tail_traces
from cpersona.edges.http.app import record_to_json, serve, single_error
from cpersona.engine.facade import Engine
from cpersona.errors import BackendUnavailable, CpersonaError, InvalidRequest, InvalidSetting
from cpersona.model.fields import arguments, validate
from cpersona.model.memory_request import StoreRequest
from cpersona.model.recall_query import RecallQuery
from cpersona.settings import Settings

__all__ = ["main"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_UNAVAILABLE = 3
EXIT_INTERRUPTED = 130

_DEFAULT_BATCH = 256
_READ_CHUNK = 1024 * 1024
_BATCH_FIELD = re.compile(r"records\[(\d+)\]\.?(.*)")


class _BadInput(Exception):
    """A command-line problem found before or outside the engine (printed as ``error: <message>``)."""


# ---------------------------------------------------------------------------------------------- parser


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--data-dir", type=Path, help="data directory (default: CPERSONA_DATA_DIR or the user dir)"
    )
    common.add_argument("--redis-url", help="use this Redis instead of the embedded one (CPERSONA_REDIS_URL)")

    parser = argparse.ArgumentParser(
        prog="cpersona",
        description="An asynchronous recall engine for agent memory. Settings come from CPERSONA_* "
        "variables; a flag overrides its variable.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("serve", parents=[common], help="run the HTTP API")
    p.add_argument("--host", help="listen address (CPERSONA_HOST, default 127.0.0.1)")
    p.add_argument("--port", type=int, help="listen port (CPERSONA_PORT, default 8077)")

    p = sub.add_parser("remember", parents=[common], help="store one memory")
    p.add_argument("text", help="the memory's text")
    p.add_argument("--agent", required=True, help="agent id")
    p.add_argument("--project", help="project id")
    p.add_argument("--channel", help="channel")
    p.add_argument("--id", dest="msg_id", help="your message id (a repeat is skipped)")
    p.add_argument("--timestamp", help="the memory's own time: ISO 8601 or epoch seconds")
    p.add_argument("--metadata", help="a JSON object kept with the memory")
    p.add_argument("--json", action="store_true", help="print the result as JSON")

    p = sub.add_parser("import", parents=[common], help="store memories from a JSONL file")
    p.add_argument("file", type=Path, help="one /v1/encode body per line")
    p.add_argument("--agent", help="agent id for lines that have none")
    p.add_argument(
        "--on-error",
        choices=("skip", "stop"),
        default="stop",
        help="on a bad line: report it and go on (skip), or stop there (stop, the default)",
    )
    p.add_argument("--batch-size", type=int, default=_DEFAULT_BATCH, help="records per write (default 256)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")

    p = sub.add_parser("stats", parents=[common], help="record counts")
    p.add_argument("--agent", help="count only this agent's records")
    p.add_argument("--json", action="store_true", help="print JSON")

    p = sub.add_parser("get", parents=[common], help="print one record as JSON")
    p.add_argument("ref", help="mem:<uuid>, ep:<uuid> or raw:<uuid>")
    p.add_argument("--agent", required=True, help="the owning agent")

    p = sub.add_parser("recall", parents=[common], help="recall the rows that answer a question")
    p.add_argument("question", help="the question (an empty string lists the newest records)")
    p.add_argument("--agent", required=True, help="agent id")
    p.add_argument("--project", help="project id (sees the project and the global pool)")
    p.add_argument("--channel", help="channel (sees the channel and the global pool)")
    p.add_argument("--source", help="source id, or a prefix when it ends in a non-alphanumeric")
    p.add_argument("--limit", type=int, default=10, help="rows to return (default 10)")
    p.add_argument("--mode", choices=("rrf", "rsf", "cascade"), help="fusion mode (CPERSONA_RECALL_MODE)")
    p.add_argument("--deep", action="store_true", help="halve the gate's thresholds")
    p.add_argument("--full", action="store_true", help="whole contents, not 500-character previews")
    p.add_argument(
        "--when",
        help="a time cue ending in sure, likely or vague: '2026-08-01..2026-08-31 likely', '..2026-08-31 "
        "sure', '2026-08-14 sure', '3 weeks ago likely', 'long ago vague', or a JSON object",
    )
    p.add_argument("--json", action="store_true", help="print the response as JSON")

    p = sub.add_parser(
        "optimize",
        parents=[common],
        help="build the embedded vector indexes now (after a large import; the embedded engine never does "
        "it on its own)",
    )

    p = sub.add_parser("trace", help="follow recall traces")
    trace_sub = p.add_subparsers(dest="trace_command", required=True, metavar="ACTION")
    p = trace_sub.add_parser(
        "tail",
        parents=[common],
        help="print recall traces as engines publish them (on the Redis they share) until Ctrl-C",
    )
    p.add_argument("--agent", help="only this agent's traces (default: every agent)")
    p.add_argument("--project", help="only traces whose scope names this project")
    p.add_argument("--json", action="store_true", help="one JSON trace per line")
    p.add_argument("--count", type=int, help="stop after this many traces")

    p = sub.add_parser("forget", parents=[common], help="delete all data of one agent")
    p.add_argument("--agent", required=True, help="agent id")
    p.add_argument("--yes", action="store_true", help="confirm the deletion")
    return parser


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
            raise _BadInput(f"--when: not valid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise _BadInput("--when: a JSON cue must be an object")
        return value
    words = raw.replace(",", " ").split()
    if not words or words[-1].lower() not in ("sure", "likely", "vague"):
        raise _BadInput("--when: end it with how sure you are: sure, likely or vague")
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
            raise _BadInput("--when: a range needs at least one end, as in 2026-08-01..2026-08-31")
        return cue
    if rest and " " not in rest and rest[0].isdigit():
        # A day (or a time); the engine reads it and names the field if it cannot.
        return {"after": rest, "before": rest, "confidence": confidence}
    raise _BadInput(
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
        raise _BadInput("--count: must be at least 1")
    await tail_traces(settings, agent=args.agent, project=args.project, as_json=args.json, count=args.count)
    return EXIT_OK


async def _forget(engine: Engine, args: argparse.Namespace) -> int:
    result = await engine.delete_agent_data(args.agent)
    print(f"deleted {result.deleted} record(s) of agent {args.agent!r}")
    return EXIT_OK


# ----------------------------------------------------------------------------------------------- import


@dataclasses.dataclass(slots=True)
class _ImportTally:
    stored: int = 0
    skipped: int = 0
    failed: int = 0


async def _read_lines(path: anyio.Path) -> AsyncGenerator[tuple[int, bytes], None]:
    """``(line number, line)`` for each line of ``path``, read in large chunks off the event loop."""
    number = 0
    tail = b""
    async with await path.open("rb") as file:
        while chunk := await file.read(_READ_CHUNK):
            lines = (tail + chunk).split(b"\n")
            tail = lines.pop()
            for line in lines:
                number += 1
                yield number, line
    if tail:
        yield number + 1, tail


async def _count_lines(path: anyio.Path) -> int:
    count = 0
    last = b"\n"
    async with await path.open("rb") as file:
        while chunk := await file.read(_READ_CHUNK):
            count += chunk.count(b"\n")
            last = chunk[-1:]
    return count + (last != b"\n")


def _parse_line(line: bytes, agent: str | None, settings: Settings) -> StoreRequest:
    """One JSONL line as a validated ``/v1/encode`` body; raises :class:`InvalidRequest` naming the field."""
    try:
        body = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest("body", f"is not valid JSON ({exc})") from None
    if not isinstance(body, dict):
        raise InvalidRequest("body", "must be a JSON object")
    if agent is not None and "agent_id" not in body:
        body["agent_id"] = agent
    # Validate here, line by line, so a bad line is named by its number and a good batch never fails.
    request = validate(StoreRequest, body, settings)
    request.draft(settings)
    return request


async def _import(engine: Engine, args: argparse.Namespace) -> int:
    settings = engine.settings
    if not 1 <= args.batch_size <= settings.batch_max:
        raise InvalidRequest("--batch-size", f"must be between 1 and {settings.batch_max}")
    path = anyio.Path(args.file)
    if not await path.is_file():
        raise _BadInput(f"{args.file}: no such file")
    total = await _count_lines(path)
    tally = _ImportTally()
    started = time.monotonic()
    stop: InvalidRequest | None = None
    batch: list[tuple[int, StoreRequest]] = []
    # Shown on a pipe too (not only on a terminal), so a log of the import shows how far it got.
    bar = tqdm(total=total, desc="import", unit="rec", file=sys.stderr, disable=args.no_progress)

    def report(number: int, exc: InvalidRequest) -> None:
        tally.failed += 1
        bar.write(f"line {number}: {exc}", file=sys.stderr)

    async def flush() -> InvalidRequest | None:
        if not batch:
            return None
        try:
            result = await engine.store_batch([body for _, body in batch])
        except InvalidRequest as exc:
            # Every line was validated on its own, so this is only a safety net; it still names the
            # line, and stops whatever --on-error says, since nothing of this batch was written.
            match = _BATCH_FIELD.fullmatch(exc.field)
            if match is None:
                raise
            number = batch[int(match.group(1))][0]
            bad = InvalidRequest(match.group(2) or "body", exc.problem)
            report(number, bad)
            batch.clear()
            return InvalidRequest(f"line {number}: {bad.field}", bad.problem)
        tally.stored += result.stored
        tally.skipped += result.skipped
        bar.update(len(batch))
        batch.clear()
        return None

    try:
        async with contextlib.aclosing(_read_lines(path)) as lines:
            async for number, line in lines:
                if not line.strip():
                    bar.update(1)
                    continue
                try:
                    batch.append((number, _parse_line(line, args.agent, settings)))
                except InvalidRequest as exc:
                    report(number, exc)
                    bar.update(1)
                    if args.on_error == "stop":
                        stop = InvalidRequest(f"line {number}: {exc.field}", exc.problem)
                        break
                    continue
                if len(batch) >= args.batch_size:
                    stop = await flush()
                    if stop is not None:
                        break
        # The lines before a bad one are written even when the import stops at it.
        last = await flush()
        stop = last if stop is None else stop
    finally:
        bar.close()
    elapsed = time.monotonic() - started
    done = tally.stored + tally.skipped
    rate = done / elapsed if elapsed > 0 else 0.0
    print(
        f"stored {tally.stored}, skipped {tally.skipped} (duplicates), failed {tally.failed} "
        f"in {elapsed:.2f} s ({rate:.1f} records/s)"
    )
    if engine.builds_blocks and tally.stored:
        # No worker runs in a one-shot command: build the new records' blocks before exiting.
        built = await engine.drain_blocks()
        print(f"built the blocks of {built} record(s)")
    if stop is not None:
        print(f"error: {stop}; stopped there (lines before it were stored)", file=sys.stderr)
        return EXIT_BAD_INPUT
    return EXIT_OK


# ------------------------------------------------------------------------------------------------ main

_Command = Callable[[Engine, argparse.Namespace], Awaitable[int]]
_COMMANDS: dict[str, _Command] = {
    "remember": _remember,
    "import": _import,
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
    if isinstance(exc, InvalidRequest | InvalidSetting | _BadInput):
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
    args = _parser().parse_args(argv)
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
