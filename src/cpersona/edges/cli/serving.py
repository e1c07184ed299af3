"""``cpersona serve``: run the HTTP API, say what it runs on, and let the other commands find it.

Before anything starts, a bind beyond loopback with keys off (unless ``--insecure-no-keys``) and a data
dir that another server or engine holds are refused in one line (the engine would refuse the dir too, but
from inside uvicorn's lifespan, with a traceback). Once the server listens it prints the data dir, Redis,
vector engine and embedder it started with (its engine's own health, so they are what it really opened;
the workers' read from ``/health``), whether requests need an API key and where it logs, and records its
URL beside the engine lock (:class:`~cpersona.stores.server_record.ServerRecord`) until it stops. With
``--workers N`` it runs N server processes on the one port (:mod:`~cpersona.edges.cli.workers`), which
needs the shared engines (``CPERSONA_REDIS_URL``, ``CPERSONA_QDRANT_URL``): the embedded ones stay one
engine per data dir.
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any

import httpx

from cpersona.edges.cli.outcomes import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, EXIT_UNAVAILABLE
from cpersona.edges.cli.workers import serve_workers, workers_refusal
from cpersona.edges.http.app import serve
from cpersona.edges.http.auth import exposure_refusal, keys_in_force
from cpersona.edges.http.hosts import is_loopback
from cpersona.errors import DataDirLocked
from cpersona.stores.attach import embedded_redis_log, shown_redis_address
from cpersona.stores.data_dir import DataDirLock
from cpersona.stores.server_record import ServerRecord, running_server_url
from cpersona.version import __version__

if TYPE_CHECKING:
    from collections.abc import Mapping

    from cpersona.settings import Settings

__all__ = ["describe", "serve_command"]

_HEALTH_SECS = 10.0


async def serve_command(settings: Settings) -> int:
    exposed = exposure_refusal(settings)
    if exposed is not None:
        print(f"error: {exposed}", file=sys.stderr)
        return EXIT_BAD_INPUT
    refused = workers_refusal(settings)
    if refused is not None:
        print(f"error: {refused}", file=sys.stderr)
        return EXIT_BAD_INPUT
    held = _held_by(settings)
    if held is not None:
        print(f"error: {held}", file=sys.stderr)
        return EXIT_FAILED
    record = ServerRecord(settings.data_dir)
    # The server's look at its own /health is no request worth a log line of its own.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    if settings.workers > 1:
        return _serve_workers(settings, record)

    async def started(url: str, health: Mapping[str, Any]) -> None:
        _publish(record, url)
        print(describe(settings, url, health), file=sys.stderr, flush=True)

    try:
        if not await serve(settings, on_started=started):
            print("error: the server did not start (the log above says why)", file=sys.stderr)
            return EXIT_UNAVAILABLE
    finally:
        record.withdraw()
    return EXIT_OK


def _serve_workers(settings: Settings, record: ServerRecord) -> int:
    def ready(url: str) -> None:
        _publish(record, url)
        print(describe(settings, url, _health_now(settings, url)), file=sys.stderr, flush=True)

    # The supervisor blocks this thread, the main one, for the signals it takes; this command's event loop
    # has nothing else to run meanwhile.
    try:
        if not serve_workers(settings, ready):
            print("error: the workers did not all start (the log above says why)", file=sys.stderr)
            return EXIT_UNAVAILABLE
    finally:
        record.withdraw()
    return EXIT_OK


def _publish(record: ServerRecord, url: str) -> None:
    if not record.publish(url):
        print(
            f"warning: another server recorded itself in {record.path}; the CLI will use that one",
            file=sys.stderr,
        )


def _held_by(settings: Settings) -> str | None:
    """Why the data dir cannot be served now, or ``None`` when it is free."""
    url = running_server_url(settings.data_dir)
    if url is not None:
        return f"a cpersona server already serves the data dir {settings.data_dir} at {url}"
    # The engine locks the dir only for what it keeps there (see Lifecycle._connect).
    if settings.embedded_redis or (settings.embedded_qdrant and settings.embedding_mode != "none"):
        lock = DataDirLock(settings.data_dir)
        try:
            lock.acquire()
        except DataDirLocked as exc:
            return str(exc)
        lock.release()
    return None


def _health_now(settings: Settings, url: str) -> Mapping[str, Any]:
    # The workers' supervisor holds this thread; the look is a blocking one. With keys in force /health
    # shows its details only to a key: CPERSONA_API_KEY's, when this process has one.
    key = settings.api_key
    headers = {} if key is None else {"authorization": f"Bearer {key.get_secret_value()}"}
    try:
        answer = httpx.get(f"{url}/health", headers=headers, timeout=_HEALTH_SECS).json()
    except (httpx.HTTPError, ValueError):
        return {}
    return answer if isinstance(answer, dict) else {}


def describe(settings: Settings, url: str, health: Mapping[str, Any]) -> str:
    """What the server started with, a few lines: where it answers, its data dir and its backends."""
    redis = health.get("redis")
    redis = redis if isinstance(redis, dict) else {}
    modules = ", ".join(f"{name} {version}" for name, version in (redis.get("modules") or {}).items())
    where = shown_redis_address(settings)
    embedder = health.get("embedder")
    if isinstance(embedder, dict):
        embedding = f"{embedder.get('name', '?')} ({embedder.get('dim', '?')}-d)"
    else:
        embedding = "none (keyword recall only)"
    vectors = health.get("vector_engine") or "none (no embedder, no vectors)"
    lines = [
        f"cpersona {__version__} serving {url}",
        f"  data dir  {settings.data_dir}",
        f"  redis     {redis.get('version', '?')} at {where}" + (f" ({modules})" if modules else ""),
        f"  vectors   {vectors}",
        f"  embedder  {embedding}",
    ]
    if settings.workers > 1:
        lines.append(f"  workers   {settings.workers} processes sharing that Redis and vector engine")
    lines.append(f"  api keys  {_keys_line(settings)}")
    # uvicorn's own logging: its access log goes to stdout, everything else to stderr.
    redis_log = embedded_redis_log(settings)
    logs = "stderr, one line per request on stdout"
    lines.append(f"  logs      {logs}" + ("" if redis_log is None else f"; embedded Redis {redis_log}"))
    return "\n".join(lines)


def _keys_line(settings: Settings) -> str:
    mode = f"CPERSONA_KEYS={settings.keys}"
    if keys_in_force(settings):
        return f"required ({mode}): send 'Authorization: Bearer <key>'; make one with cpersona keys create"
    if is_loopback(settings.host):
        return f"not required ({mode}; listening on loopback only)"
    return f"NOT required ({mode}, CPERSONA_INSECURE_NO_KEYS): anyone who reaches the port has every agent"
