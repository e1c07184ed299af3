"""The benchmark's half of the JSON-lines protocol: start a peer's worker and call it.

:func:`open_worker` starts ``<python> <script>`` as a child process with a given environment and working
folder, waits for its hello line (under a deadline), and yields a :class:`Worker` whose :meth:`~Worker.call`
sends one request and waits for its reply under its own deadline. Several calls may be in flight at once
(replies are matched by id), which the speed benchmark uses for concurrent callers.

The worker's stderr goes to ``<cwd>/worker.log``. Whatever goes wrong (no hello, a reply with
``ok: false``, the process dying, a missed deadline) becomes a :class:`PeerError` whose message is the
exact error plus the last lines of that log, so a report can show why a peer did not run. On exit the
worker's stdin is closed so that it ends by itself; one that does not is terminated, then killed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
from typing import TYPE_CHECKING, Any, Final

import anyio
import anyio.to_thread
from anyio.streams.buffered import BufferedByteReceiveStream

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping, Sequence
    from pathlib import Path

    from anyio.abc import Process

__all__ = ["PeerError", "Worker", "open_worker"]

_MAX_LINE: Final = 256 * 1024 * 1024
_EXIT_SECS: Final = 20.0
_TAIL_LINES: Final = 25
_DEFAULT_DEADLINE_SECS: Final = 120.0


class PeerError(RuntimeError):
    """A peer could not do what was asked; the message is the exact error (and the worker's log tail)."""


@dataclasses.dataclass
class _Pending:
    done: anyio.Event = dataclasses.field(default_factory=anyio.Event)
    reply: dict[str, Any] | None = None


class Worker:
    """A running worker: :attr:`hello` is what it said about itself on start."""

    def __init__(self, name: str, process: Process, log: Path, deadlines: Mapping[str, float]) -> None:
        self.name = name
        self.deadlines = dict(deadlines)
        """Seconds an op may take, by op name (``"*"`` for the rest)."""
        self.hello: dict[str, Any] = {}
        self._process = process
        self._log = log
        self._ids = itertools.count(1)
        self._pending: dict[int, _Pending] = {0: _Pending()}
        self._send_lock = anyio.Lock()
        self._gone: str | None = None

    async def call(self, op: str, **fields: Any) -> dict[str, Any]:
        """Send ``op`` with ``fields``; the reply's fields, or :class:`PeerError` naming what went wrong.

        The reply must come within ``deadlines[op]`` seconds (the worker runs on this machine; a missed
        deadline means it hangs, and the run reports that rather than waiting forever).
        """
        limit = self.deadlines.get(op, self.deadlines.get("*", _DEFAULT_DEADLINE_SECS))
        rid = next(self._ids)
        pending = self._pending[rid] = _Pending()
        try:
            if self._gone is not None:
                raise PeerError(self._gone)
            line = json.dumps({"id": rid, "op": op, **fields}, ensure_ascii=False).encode() + b"\n"
            try:
                with anyio.fail_after(limit):
                    async with self._send_lock:
                        assert self._process.stdin is not None
                        await self._process.stdin.send(line)
                    await pending.done.wait()
            except TimeoutError:
                raise PeerError(await self._describe(f"{op} got no reply within {limit:g} s")) from None
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                raise PeerError(await self._describe(f"{op}: the worker's stdin is closed")) from None
            return self._unwrap(op, pending.reply)
        finally:
            self._pending.pop(rid, None)

    def _unwrap(self, op: str, reply: dict[str, Any] | None) -> dict[str, Any]:
        if reply is None:
            raise PeerError(self._gone or f"{self.name}: {op} got no reply")
        if not reply.get("ok"):
            raise PeerError(
                f"{self.name} {op} failed: {reply.get('error')}\n{reply.get('traceback', '')}".rstrip()
            )
        return {k: v for k, v in reply.items() if k not in ("id", "ok")}

    async def _describe(self, what: str) -> str:
        tail = await anyio.to_thread.run_sync(_tail, self._log)
        return f"{self.name}: {what}" + (f"\n--- last lines of {self._log} ---\n{tail}" if tail else "")

    async def _read_replies(self) -> None:
        assert self._process.stdout is not None
        reader = BufferedByteReceiveStream(self._process.stdout)
        try:
            while True:
                line = await reader.receive_until(b"\n", _MAX_LINE)
                if not line.strip():
                    continue
                reply = json.loads(line)
                pending = self._pending.get(int(reply.get("id", -1)))
                if pending is not None:
                    pending.reply = reply
                    pending.done.set()
        except (
            anyio.EndOfStream,
            anyio.IncompleteRead,
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
        ):
            pass
        except (anyio.DelimiterNotFound, ValueError) as exc:
            self._gone = f"unreadable reply from the worker ({type(exc).__name__}: {exc})"
        if self._gone is None:
            code = await self._process.wait()
            self._gone = f"the worker exited with code {code}"
        self._gone = await self._describe(self._gone)
        for pending in list(self._pending.values()):
            pending.done.set()


def _tail(path: Path) -> str:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-_TAIL_LINES:])


@contextlib.asynccontextmanager
async def open_worker(
    name: str,
    python: Path,
    script: Path,
    *,
    env: Mapping[str, str],
    cwd: Path,
    deadlines: Mapping[str, float],
    arguments: Sequence[str] = (),
) -> AsyncIterator[Worker]:
    """Start the worker and yield it once it has said hello (:class:`PeerError` if it never does).

    ``deadlines`` maps op names to seconds (see :attr:`Worker.deadlines`); ``"start"`` bounds the wait
    for the hello.
    """
    log = cwd / "worker.log"
    stderr = await anyio.to_thread.run_sync(log.open, "ab")
    try:
        process = await anyio.open_process(
            [str(python), "-u", str(script), *arguments], env=dict(env), cwd=str(cwd), stderr=stderr
        )
    finally:
        await anyio.to_thread.run_sync(stderr.close)
    worker = Worker(name, process, log, deadlines)
    start_secs = worker.deadlines.get("start", _DEFAULT_DEADLINE_SECS)
    # An exception leaving a task group comes out wrapped in an ExceptionGroup; the errors of this
    # context (a failed start, or one raised in the caller's block) are kept and raised after it instead,
    # so callers can catch PeerError as it is. Cancellation is not caught and passes through as usual.
    failure: Exception | None = None
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker._read_replies)
        try:
            try:
                with anyio.fail_after(start_secs):
                    await worker._pending[0].done.wait()
                worker.hello = worker._unwrap("start", worker._pending.pop(0).reply)
            except TimeoutError:
                failure = PeerError(await worker._describe(f"no hello within {start_secs:g} s"))
            except PeerError as exc:
                failure = exc
            if failure is None:
                try:
                    yield worker
                except Exception as exc:  # raised again below, outside the task group
                    failure = exc
        finally:
            with anyio.CancelScope(shield=True):
                await _stop(process)
            tg.cancel_scope.cancel()
    if failure is not None:
        raise failure


async def _stop(process: Process) -> None:
    """Close the worker's stdin (its signal to finish), then terminate and kill if it does not."""
    if process.stdin is not None:
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdin.aclose()
    for escalate in (process.terminate, process.kill):
        with anyio.move_on_after(_EXIT_SECS):
            await process.wait()
            break
        with contextlib.suppress(ProcessLookupError):
            escalate()
    await process.wait()
    await process.aclose()
