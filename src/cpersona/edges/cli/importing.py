"""``cpersona import``: store memories from a JSONL file, one ``/v1/encode`` body per line.

Each line is validated on its own (so a bad line is named by its number and a good batch never fails),
the good ones are written in batches, and a bad line is skipped or stops the import, as asked; the lines
before it are stored either way, and the import exits 2 whenever a line failed. In-process, each batch's
blocks are built before the bar moves past it, so the bar ends when the import is really done; against a
running server its own worker builds them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import sys
import time
from typing import TYPE_CHECKING, Any

import anyio
import orjson
from tqdm import tqdm

from cpersona.edges.cli.outcomes import EXIT_BAD_INPUT, EXIT_OK, BadInput
from cpersona.errors import InvalidRequest
from cpersona.model.fields import validate
from cpersona.model.memory_request import StoreRequest

if TYPE_CHECKING:
    import argparse
    from collections.abc import AsyncGenerator

    from cpersona.edges.cli.service import Service, Validated
    from cpersona.settings import Settings

__all__ = ["import_jsonl"]

_READ_CHUNK = 1024 * 1024
_BATCH_FIELD = re.compile(r"records\[(\d+)\]\.?(.*)")


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


def _parse_line(line: bytes, agent: str | None, settings: Settings) -> Validated:
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
    return body, request


@dataclasses.dataclass(slots=True)
class _Importer:
    """The running import: the batch being gathered, the tally, the progress bar."""

    service: Service
    bar: tqdm[Any]
    agent: str | None
    batch_size: int
    stop_on_error: bool
    batch: list[tuple[int, Validated]] = dataclasses.field(default_factory=list)
    stored: int = 0
    skipped: int = 0
    failed: int = 0
    built: int | None = None

    def report(self, number: int, exc: InvalidRequest) -> InvalidRequest:
        self.failed += 1
        self.bar.write(f"line {number}: {exc}", file=sys.stderr)
        return InvalidRequest(f"line {number}: {exc.field}", exc.problem)

    async def take(self, number: int, line: bytes) -> InvalidRequest | None:
        """Add one line; the error to stop at, if the import must stop here."""
        if not line.strip():
            self.bar.update(1)
            return None
        try:
            self.batch.append((number, _parse_line(line, self.agent, self.service.settings)))
        except InvalidRequest as exc:
            bad = self.report(number, exc)
            self.bar.update(1)
            return bad if self.stop_on_error else None
        return await self.flush() if len(self.batch) >= self.batch_size else None

    async def flush(self) -> InvalidRequest | None:
        if not self.batch:
            return None
        try:
            result = await self.service.store_batch([body for _, body in self.batch])
        except InvalidRequest as exc:
            # Every line was validated on its own, so this is only a safety net; it still names the
            # line, and stops whatever --on-error says, since nothing of this batch was written.
            match = _BATCH_FIELD.fullmatch(exc.field)
            if match is None:
                raise
            number = self.batch[int(match.group(1))][0]
            self.batch.clear()
            return self.report(number, InvalidRequest(match.group(2) or "body", exc.problem))
        self.stored += result["stored"]
        self.skipped += result["skipped"]
        if result["stored"]:
            await self.build_blocks()
        self.bar.update(len(self.batch))
        self.batch.clear()
        return None

    async def build_blocks(self) -> None:
        built = await self.service.drain_blocks()
        if built is not None:
            self.built = (self.built or 0) + built

    async def run(self, path: anyio.Path) -> InvalidRequest | None:
        async with contextlib.aclosing(_read_lines(path)) as lines:
            async for number, line in lines:
                stop = await self.take(number, line)
                if stop is not None:
                    break
        # The lines before a bad one are written even when the import stops at it.
        last = await self.flush()
        return last if stop is None else stop


async def import_jsonl(service: Service, args: argparse.Namespace) -> int:
    settings = service.settings
    if not 1 <= args.batch_size <= settings.batch_max:
        raise InvalidRequest("--batch-size", f"must be between 1 and {settings.batch_max}")
    path = anyio.Path(args.file)
    if not await path.is_file():
        raise BadInput(f"{args.file}: no such file")
    total = await _count_lines(path)
    started = time.monotonic()
    # Shown on a pipe too (not only on a terminal), so a log of the import shows how far it got.
    bar = tqdm(total=total, desc="import", unit="rec", file=sys.stderr, disable=args.no_progress)
    importer = _Importer(service, bar, args.agent, args.batch_size, stop_on_error=args.on_error == "stop")
    try:
        stop = await importer.run(path)
    finally:
        bar.close()
    elapsed = time.monotonic() - started
    done = importer.stored + importer.skipped
    rate = done / elapsed if elapsed > 0 else 0.0
    print(
        f"stored {importer.stored}, skipped {importer.skipped} (duplicates), failed {importer.failed} "
        f"in {elapsed:.2f} s ({rate:.1f} records/s)"
    )
    if importer.built is not None:
        print(f"built the blocks of {importer.built} record(s)")
    elif service.where is not None and importer.stored:
        print(f"the server at {service.where} builds their blocks")
    if stop is not None:
        print(f"error: {stop}; stopped there (lines before it were stored)", file=sys.stderr)
        return EXIT_BAD_INPUT
    if importer.failed:
        print(f"error: {importer.failed} line(s) failed and were skipped (named above)", file=sys.stderr)
        return EXIT_BAD_INPUT
    return EXIT_OK
