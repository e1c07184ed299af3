"""``cpersona export`` and the archive form of ``cpersona import``: one agent's memory as a JSON Lines
archive (:mod:`cpersona.operations.lifecycle.archive`), with a progress bar on stderr.

In-process, export streams the archive from the engine to the file line by line and import reads the
file line by line (twice: once to check every line and the checksum, once to write), so a large agent
never sits whole in memory. Against a running server the archive travels whole in one request
(``POST /v1/lifecycle/export`` / ``import``), so it must fit the server's CPERSONA_MAX_BODY_BYTES.

``cpersona import FILE`` reads an archive when the file's first line is an archive header, and one
``/v1/encode`` body per line otherwise (:mod:`cpersona.edges.cli.importing`). An archive names no agent
(so it can be imported into any): ``--agent`` says which.
"""

from __future__ import annotations

import base64
import contextlib
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import anyio
import orjson
from tqdm import tqdm

from cpersona.edges.cli.importing import import_jsonl
from cpersona.edges.cli.outcomes import EXIT_OK, BadInput
from cpersona.edges.cli.service import LocalService, RemoteService
from cpersona.operations.lifecycle.archive import ARCHIVE_FORMAT, is_record_line

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Iterator

    from cpersona.edges.cli.service import Service

__all__ = ["export_command", "import_command", "is_archive"]


def is_archive(path: Path) -> bool:
    """Whether the file starts with an archive header (else it is a file of ``/v1/encode`` bodies)."""
    try:
        with path.open("rb") as file:
            first = file.readline(64 * 1024)
        head = orjson.loads(first)
    except (OSError, orjson.JSONDecodeError):
        return False
    return isinstance(head, dict) and head.get("kind") == "header" and head.get("format") == ARCHIVE_FORMAT


def _export_body(args: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {"agent_id": args.agent, "include_raw_journal": args.raw}
    if args.store:
        body["stores"] = list(args.store)
    return body


async def _expected_lines(service: LocalService, args: argparse.Namespace) -> int:
    counts = await service.engine.stats(args.agent)
    return int(counts["memories"]) + int(counts["episodes"]) + (int(counts["raw_entries"]) if args.raw else 0)


async def _export_local(
    service: LocalService, args: argparse.Namespace, out: IO[bytes], bar: tqdm[Any]
) -> int:
    bar.total = await _expected_lines(service, args)
    records = 0
    lines = service.engine.export_lines(args.agent, stores=args.store or None, include_raw_journal=args.raw)
    async with contextlib.aclosing(lines):
        async for line in lines:
            out.write(line)
            # The lines the footer counts: not the header, an associations line or the footer itself.
            if is_record_line(line):
                records += 1
                bar.update(1)
    return records


async def export_command(service: Service, args: argparse.Namespace) -> int:
    target = Path(args.output) if args.output else None
    # Shown on a pipe too, so a log of the export shows how far it got; stdout may be the archive itself.
    bar = tqdm(desc="export", unit="rec", file=sys.stderr, disable=args.no_progress)
    with target.open("wb") if target is not None else contextlib.nullcontext(sys.stdout.buffer) as out:
        try:
            if isinstance(service, LocalService):
                records = await _export_local(service, args, out, bar)
            elif isinstance(service, RemoteService):
                answer = await service.call("POST", "/v1/lifecycle/export", _export_body(args))
                out.write(bytes(answer["archive_data"]))
                records = int(answer["record_count"])
                bar.update(records)
            else:  # pragma: no cover - the two services are all there is
                raise TypeError(type(service).__name__)
        finally:
            bar.close()
    if target is not None:
        print(f"exported {records} record(s) of agent {args.agent!r} to {target}", file=sys.stderr)
    return EXIT_OK


def _advance(bar: tqdm[Any]) -> Callable[[int], None]:
    def advance(records: int) -> None:
        bar.update(records)

    return advance


def _file_lines(path: Path) -> Iterator[bytes]:
    with path.open("rb") as file:
        yield from file


async def _import_archive(service: Service, args: argparse.Namespace) -> int:
    if not args.agent:
        raise BadInput(f"{args.file} is an archive, which names no agent: say which with --agent")
    path = Path(args.file)
    bar = tqdm(desc="import", unit="rec", file=sys.stderr, disable=args.no_progress)
    rules = {"strategy": args.strategy, "conflict_resolution": args.conflict}
    try:
        if isinstance(service, LocalService):
            result = (
                await service.engine.import_archive(
                    args.agent, lambda: _file_lines(path), progress=_advance(bar), **rules
                )
            ).model_dump(mode="json")
        elif isinstance(service, RemoteService):
            data = base64.b64encode(await anyio.Path(path).read_bytes()).decode()
            result = await service.call(
                "POST", "/v1/lifecycle/import", {"agent_id": args.agent, "archive_data": data, **rules}
            )
            bar.update(int(result["records_imported"]))
        else:  # pragma: no cover - the two services are all there is
            raise TypeError(type(service).__name__)
    finally:
        bar.close()
    # A copy says so: its records are under new ids (the archive came from another agent of this store).
    copy = ", as a copy under new ids" if result.get("copied") else ""
    print(
        f"imported {result['records_imported']} record(s) into agent {args.agent!r}{copy}, skipped "
        f"{result['records_skipped']} (held already, or duplicates) ({result['strategy']})"
    )
    return EXIT_OK


async def import_command(service: Service, args: argparse.Namespace) -> int:
    """An archive, or a file of ``/v1/encode`` bodies, by what its first line is."""
    if is_archive(Path(args.file)):
        return await _import_archive(service, args)
    if args.strategy != "merge" or args.conflict != "keep_newer":
        raise BadInput("--strategy and --conflict apply to archives; this file is not one")
    return await import_jsonl(service, args)
