"""What the two peer systems share: a venv, a loopback embedding server, a worker process, one lifecycle.

:class:`PeerSystem` implements the quality harness's ``RetrievalSystem`` protocol (``index``, ``search``,
``aclose``) on top of a worker script run by the peer's own interpreter. On first use (or an explicit
:meth:`PeerSystem.start`) it

1. makes sure the peer's venv is installed (:mod:`._venv`),
2. starts :func:`~benchmarks.peers.embed_server.serve_embeddings` on the run's vector source,
3. starts the worker (:mod:`._process`) in a fresh temporary folder with the environment the subclass
   builds, and lets the subclass check what the worker says about itself.

Everything is torn down in reverse order at :meth:`PeerSystem.aclose`. Any failure is a
:class:`~benchmarks.peers._process.PeerError` carrying the exact error, for the report. A started peer
holds task groups (the server's, the worker's): close peers in the reverse order of starting them, as
the harness does by running one system at a time.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Final

import anyio
import anyio.to_thread

from benchmarks.peers._process import PeerError, Worker, open_worker
from benchmarks.peers.embed_server import EmbedServer, serve_embeddings

if TYPE_CHECKING:
    from collections.abc import Sequence

    from benchmarks.peers._venv import PeerVenv
    from benchmarks.peers.embed_server import Source
    from benchmarks.quality.systems import Unit

__all__ = ["PeerError", "PeerSystem", "peer_environment"]

HERE: Final = Path(__file__).resolve().parent
STORE_CHUNK: Final = 100
DEADLINES: Final = {"start": 180.0, "store": 900.0, "recall": 120.0, "*": 120.0}
"""Seconds per worker op: generous, since the machine is shared; they exist so a hang cannot stall a run."""
_KEEP_ENV: Final = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TZ", "SSL_CERT_FILE", "OPENBLAS_CORETYPE")


def peer_environment(extra: dict[str, str]) -> dict[str, str]:
    """A clean environment for a worker: a few of our variables (never ``CPERSONA_*``), then ``extra``.

    Our own engine reads ``CPERSONA_*`` too, and a variable meant for it must not leak into the peer's
    configuration (or the other way round).
    """
    env = {k: v for k, v in os.environ.items() if k in _KEEP_ENV}
    env.setdefault("PATH", "/usr/bin:/bin")
    return {**env, **extra}


class PeerSystem:
    """The shared lifecycle; subclasses say which venv, which script, which environment and arguments."""

    name: str
    venv: ClassVar[PeerVenv]
    script: ClassVar[str]
    model: ClassVar[str] = "all-MiniLM-L6-v2"

    def __init__(self, source: Source, *, name: str, work_dir: Path | None = None) -> None:
        """``work_dir`` keeps the peer's files (database, log) in a folder that outlives the run;
        by default they go to a temporary folder removed at :meth:`aclose`."""
        self.name = name
        self._source = source
        self._stack = contextlib.AsyncExitStack()
        self._worker: Worker | None = None
        self.server: EmbedServer | None = None
        self.installed: dict[str, Any] | None = None
        self.work_dir = work_dir
        self._given_work_dir = work_dir

    # ------------------------------------------------------------------ subclass hooks

    def environment(self, server: EmbedServer, work_dir: Path) -> dict[str, str]:
        raise NotImplementedError

    def arguments(self, server: EmbedServer, work_dir: Path) -> list[str]:
        return []

    def check_hello(self, hello: dict[str, Any]) -> None:
        """Raise :class:`PeerError` when the worker runs with something other than what was asked."""

    def describe(self) -> list[str]:
        """Report lines: what ran, with which settings."""
        return []

    # ------------------------------------------------------------------ lifecycle

    @property
    def hello(self) -> dict[str, Any]:
        return self._worker.hello if self._worker is not None else {}

    async def start(self) -> Worker:
        """Install, serve embeddings, start the worker (once); the running worker."""
        if self._worker is not None:
            return self._worker
        self.installed = await self.venv.ensure()
        self.server = await self._stack.enter_async_context(serve_embeddings(self._source, model=self.model))
        if self.work_dir is None:
            made = functools.partial(tempfile.mkdtemp, prefix=f"peer-{self.venv.name}-")
            self.work_dir = Path(await anyio.to_thread.run_sync(made))
            removal = functools.partial(shutil.rmtree, self.work_dir, ignore_errors=True)
            self._stack.push_async_callback(anyio.to_thread.run_sync, removal)
        work = self.work_dir
        await anyio.to_thread.run_sync(lambda: work.mkdir(parents=True, exist_ok=True))
        worker = await self._stack.enter_async_context(
            open_worker(
                self.name,
                self.venv.python,
                HERE / self.script,
                env=self.environment(self.server, work),
                cwd=work,
                deadlines=DEADLINES,
                arguments=self.arguments(self.server, work),
            )
        )
        self.check_hello(worker.hello)
        self._worker = worker
        return worker

    async def call(self, op: str, **fields: Any) -> dict[str, Any]:
        worker = await self.start()
        return await worker.call(op, **fields)

    async def store_chunks(self, conv_id: str, records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Store ``records`` as agent ``conv_id`` in chunks, in order; every reply, in order."""
        replies = []
        for start in range(0, len(records), STORE_CHUNK):
            chunk = list(records[start : start + STORE_CHUNK])
            replies.append(await self.call("store", agent=conv_id, records=chunk))
        return replies

    async def aclose(self) -> None:
        self._worker = None
        try:
            await self._stack.aclose()
        finally:
            self.work_dir = self._given_work_dir

    # ------------------------------------------------------------------ the protocol's other half

    async def index(self, conv_id: str, units: Sequence[Unit]) -> None:
        raise NotImplementedError

    async def search(self, conv_id: str, question: str, k: int) -> list[str]:
        raise NotImplementedError
