"""``cpersona serve --workers N``: N server processes on one listening socket, over shared engines.

Every worker is a whole server with an engine of its own, opened on the same settings; what they share
lives in the shared Redis (records, indexes, the block stream's consumer group, calibrated gates, the
trace channel, the reconsolidation markers, and the keys and rate limits of the access edge) and in the
shared Qdrant. No worker keeps state another one would need, so a request may reach any of them; what a
worker does keep is its own queues (traces waiting to be published, reconsolidation jobs), whose counters
``/health`` reports for the worker that answered it. uvicorn's supervisor forks nothing: it
binds the socket once in this process, starts each worker as a fresh interpreter (``spawn``) with the
socket, restarts one that dies, and on SIGINT or SIGTERM stops them all and exits.

The embedded engines cannot be shared: the embedded Redis and the embedded vector engine belong to one
engine per data dir (:class:`~cpersona.stores.data_dir.DataDirLock`), so more than one worker needs
``CPERSONA_REDIS_URL`` and, unless the embedder is off, ``CPERSONA_QDRANT_URL``
(:func:`workers_refusal`).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import TYPE_CHECKING

from uvicorn.supervisors import Multiprocess

from cpersona.edges.http.app import _local_url, create_app, startup_refusal_in_one_line
from cpersona.edges.http.connections import server_config

if TYPE_CHECKING:
    from collections.abc import Callable

    import uvicorn
    from starlette.types import ASGIApp

    from cpersona.settings import Settings

__all__ = ["AppFactory", "serve_workers", "workers_refusal"]

log = logging.getLogger("cpersona.serve")

# Beyond the engine's own start deadlines (Redis, Qdrant, the embedder's first load on a busy machine).
_READY_SLACK_SECS = 120.0
_POLL_SECS = 0.2


def workers_refusal(settings: Settings) -> str | None:
    """Why ``settings`` cannot run ``settings.workers`` processes, or ``None`` when they can."""
    if settings.workers == 1:
        return None
    missing = []
    if settings.embedded_redis:
        missing.append("CPERSONA_REDIS_URL (or --redis-url)")
    # ':memory:' is qdrant-client's engine inside each process: N workers would hold N vector stores.
    if (settings.embedded_qdrant or settings.qdrant_url == ":memory:") and settings.embedding_mode != "none":
        missing.append("CPERSONA_QDRANT_URL of a Qdrant server (or CPERSONA_EMBEDDING_MODE=none)")
    if not missing:
        return None
    return (
        f"--workers {settings.workers} needs shared engines: set {' and '.join(missing)}. The embedded "
        "Redis and vector engine are one engine per data dir, served by one process (--workers 1)"
    )


@dataclasses.dataclass(frozen=True)
class AppFactory:
    """What each worker calls to build its app: picklable, so it reaches a spawned worker whole."""

    settings: Settings

    def __call__(self) -> ASGIApp:
        return startup_refusal_in_one_line(create_app(self.settings, owns_process=True))


class _Supervisor(Multiprocess):
    """uvicorn's supervisor, telling its caller once every worker has opened its engine and listens."""

    def __init__(self, config: uvicorn.Config, ready_secs: float, on_ready: Callable[[str], None]) -> None:
        sock = config.bind_socket()
        super().__init__(config, sockets=[sock])
        self.url = _local_url(sock.getsockname())
        self._ready_secs = ready_secs
        self._on_ready = on_ready
        self.ready = False

    def init_processes(self) -> None:
        super().init_processes()
        # Waited for here, in the supervisor's own thread, before its loop pings the workers itself
        # (two threads on one worker's pipe would take each other's answers).
        self.ready = self._all_ready()
        if self.ready:
            self._on_ready(self.url)
        elif not self.signal_queue:
            log.error("a worker did not start (its log above says why); stopping them all")
            self.should_exit.set()

    def _all_ready(self) -> bool:
        deadline = time.monotonic() + self._ready_secs
        waiting = list(self.processes)
        # A signal (Ctrl-C) while the engines open ends the wait; the supervisor's loop then handles it.
        while waiting and not self.signal_queue and time.monotonic() < deadline:
            if not all(process.process.is_alive() for process in waiting):
                return False
            waiting = [process for process in waiting if not process.is_ready(timeout=_POLL_SECS)]
            if waiting:
                time.sleep(_POLL_SECS)
        return not waiting


def serve_workers(settings: Settings, on_ready: Callable[[str], None]) -> bool:
    """Run ``settings.workers`` server processes until SIGINT or SIGTERM; whether they all started.

    Blocks this thread, which must be the main one (the supervisor takes the signals). ``on_ready`` is
    called with the URL once every worker answers; a worker that does not start stops them all.
    """
    config = server_config(AppFactory(settings), settings, factory=True, workers=settings.workers)
    supervisor = _Supervisor(config, settings.redis_startup_timeout_secs + _READY_SLACK_SECS, on_ready)
    supervisor.run()
    return supervisor.ready
