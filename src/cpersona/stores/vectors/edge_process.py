"""The embedded shard in a child process: starting it, asking it, and stopping it.

:mod:`.edge_worker` is the child. Requests go out as frames on its standard input, each with its own id,
and replies come back on its standard output in whatever order the child finishes them. No task reads
the pipe in the background: a caller waiting for its reply reads frames itself when nobody else is,
hands each reply to the caller it belongs to (waking that caller alone), and stops at its own; then, or
when it gives up, it wakes one caller still waiting to read on. A caller that gives up (its deadline,
a cancellation) leaves its reply to be dropped when it arrives; what it read so far stays in the
shared :class:`~anyio.streams.buffered.BufferedByteReceiveStream`, and a frame's length, once read,
stays with the link until its body is in.

When the child exits unasked (killed, out of memory, a crash), its pipe ends: every waiting caller and
every later one gets :class:`~cpersona.VectorStoreUnavailable` with the exit code, and the link stays
dead (the store's supervisor starts a new one, :meth:`~.edge.EdgeVectorStore.restart`). The child also
ends when its input does, so it never outlives this process by more than the call it is running.
"""

from __future__ import annotations

import itertools
import pickle
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio
from anyio.streams.buffered import BufferedByteReceiveStream

from cpersona.errors import VectorStoreUnavailable
from cpersona.stores import owner_only
from cpersona.stores.vectors import edge_worker
from cpersona.stores.vectors.edge_worker import ShardError, write_frame

if TYPE_CHECKING:
    from anyio.abc import Process

__all__ = ["ProcessLink"]

_WORKER: Final = Path(edge_worker.__file__)
_LENGTH_BYTES: Final = 4
_EXIT_WAIT_SECS: Final = 1.0  # after the pipe ends, how long to wait for the exit code


class _Reply:
    __slots__ = ("done", "ok", "value", "wake")

    def __init__(self) -> None:
        self.done = False
        self.ok = False
        self.value: Any = None
        # Set when the reply is in, when the pipe is handed to this caller, or when the child is gone.
        self.wake = anyio.Event()


class ProcessLink:
    """Calls into one shard that lives in a child process. Start it with :meth:`start`."""

    def __init__(self, process: Process, label: str) -> None:
        self._process = process
        self._label = label
        self._ids = itertools.count(1)
        self._waiting: dict[int, _Reply] = {}
        # receive_exactly keeps what a cancelled read got in its buffer; the length of a frame whose body
        # is still to come is kept here, so a reader that gives up between the two leaves the pipe in step.
        self._replies = BufferedByteReceiveStream(process.stdout)  # type: ignore[arg-type]
        self._body_size: int | None = None
        self._reading = False
        self._send_lock = anyio.Lock()
        self._failure: str | None = None

    @classmethod
    async def start(cls, label: str, open_args: tuple[Any, ...]) -> tuple[ProcessLink, str]:
        """Start the child and open the shard in it; the link and the engine's version.

        Raises :class:`ShardError` when the shard would not open (the child has exited then), and
        :class:`~cpersona.VectorStoreUnavailable` when the child could not be started.
        """
        try:
            # -P: the worker's own folder is not put on the module path (its neighbours are engine
            # modules that must not shadow anything the worker imports). A session of its own: a Ctrl-C
            # at the terminal reaches this process, which closes the shard in order, not the child.
            process = await anyio.open_process(
                [sys.executable, "-P", str(_WORKER)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                start_new_session=True,
                # The shard's segments and WAL are created owner-only (stores/owner_only.py).
                umask=owner_only.UMASK,
            )
        except OSError as exc:
            raise VectorStoreUnavailable(f"cannot start the process for {label}: {exc}") from exc
        link = cls(process, label)
        try:
            version = await link.call("open", *open_args)
        except BaseException:
            await link.kill()
            raise
        return link, str(version)

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def alive(self) -> bool:
        """Whether the child is running and its pipe has not ended."""
        return self._failure is None and self._process.returncode is None

    async def wait_exited(self) -> int:
        """Wait until the child exits (of itself, or closed); its exit code."""
        return await self._process.wait()

    async def call(self, op: str, *args: Any) -> Any:
        """Send one request and wait for its reply. Raises :class:`ShardError` for the shard's own
        failures and :class:`~cpersona.VectorStoreUnavailable` when the child is gone."""
        self._check_alive()
        request_id = next(self._ids)
        reply = self._waiting[request_id] = _Reply()
        try:
            await self._send(write_frame((request_id, op, args)))
            while not reply.done:
                self._check_alive()
                if self._reading:
                    await reply.wake.wait()
                    reply.wake = anyio.Event()
                else:
                    await self._read_until(reply)
        finally:
            del self._waiting[request_id]
        if not reply.ok:
            raise ShardError(str(reply.value))
        return reply.value

    async def _send(self, frame: bytes) -> None:
        async with self._send_lock:
            self._check_alive()
            try:
                await self._process.stdin.send(frame)  # type: ignore[union-attr]
            except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                raise VectorStoreUnavailable(await self._ended()) from exc

    async def _read_until(self, own: _Reply) -> None:
        """Read frames and hand each to its caller (or drop it: nobody waits) until ``own`` is in or the
        pipe ends; then hand the pipe to a caller still waiting."""
        self._reading = True
        try:
            while not own.done:
                # Our own child is the only writer of this pipe.
                request_id, ok, value = pickle.loads(await self._receive_frame())
                reply = self._waiting.get(request_id)
                if reply is not None:
                    reply.done, reply.ok, reply.value = True, ok, value
                    reply.wake.set()
        except (anyio.IncompleteRead, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await self._ended()
        finally:
            self._reading = False
            self._hand_over(own)

    def _hand_over(self, own: _Reply) -> None:
        """Wake a caller still waiting (not ``own``, which leaves), to read next; every one of them once
        the child is gone."""
        for reply in self._waiting.values():
            if not reply.done and reply is not own:
                reply.wake.set()
                if self._failure is None:
                    return

    async def _receive_frame(self) -> bytes:
        """The next frame's pickle (see :mod:`.edge_worker` for the framing)."""
        if self._body_size is None:
            head = await self._replies.receive_exactly(_LENGTH_BYTES)
            self._body_size = int.from_bytes(head, "little")
        body = await self._replies.receive_exactly(self._body_size)
        self._body_size = None
        return body

    async def _ended(self) -> str:
        """The child's pipe ended: record why, so every caller fails with it; the reason."""
        with anyio.move_on_after(_EXIT_WAIT_SECS):
            await self._process.wait()
        code = self._process.returncode
        failure = f"{self._label}: the vector engine process (pid {self._process.pid}) exited" + (
            "" if code is None else f" with code {code}"
        )
        self._failure = failure
        return failure

    def _check_alive(self) -> None:
        if self._failure is not None:
            raise VectorStoreUnavailable(self._failure)

    async def close(self) -> None:
        """Ask the child to close the shard (it finishes the requests it holds, then flushes) and wait for
        it to exit; kill it if that fails. The caller bounds the time. A child that has already exited
        is only reaped: every write it acknowledged had been flushed."""
        if not self.alive:
            await self.kill()
            return
        try:
            await self.call("close")
            await self._process.wait()
        except BaseException:
            await self.kill()
            raise
        finally:
            await self._process.aclose()

    async def kill(self) -> None:
        """Stop the child now (a failed start or close)."""
        with anyio.CancelScope(shield=True):
            if self._process.returncode is None:
                self._process.kill()
            with anyio.move_on_after(_EXIT_WAIT_SECS):
                await self._process.wait()
            await self._process.aclose()
