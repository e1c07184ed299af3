"""Shared test fixtures: one real Redis for the whole session, and per-test isolation by key prefix.

No mock stands in for Redis. The session starts one :class:`EmbeddedRedis` in a temporary data dir
(or uses the Redis named by ``CPERSONA_TEST_REDIS_URL``, which must have search and JSON), and every
test that touches it works under its own key prefix, whose keys and search indexes are deleted when
the test ends. Fixtures:

``redis_url``   the session's Redis URL.
``key_prefix``  a fresh prefix per test (``t`` + 8 hex digits, no ``:``), for ``Keys(prefix)`` or
                ``Settings(key_prefix=...)``.
``redis``       a connected client (``connect_redis``: replies as bytes) for this test; at teardown
                every key under ``<key_prefix>:`` and every index named ``<key_prefix>:...`` is dropped.
``settings``    ``Settings`` pointing at the session's Redis with this test's prefix and a fresh
                ``tmp_path`` data dir; ``settings.with_(...)`` gives a copy with anything else changed.
``engine``, ``vector_engine``   an engine under this test's prefix, lexical only or with the embedder
                                (``vector_settings``, its settings).
``client``, ``keyed``           an HTTP client of a lexical-only app, without or with API keys.
``open_test_engine``            opens an engine under a fresh prefix, for the engines a module shares.

The engines these fixtures open embed with ``suite_model.SUITE_MODEL`` (all-MiniLM-L6-v2) unless a test
names another model; every encoder graph is built once per run (``built_models``).

A test module never redefines one of these names; it gives its own variant a name of its own.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from typing import TYPE_CHECKING, Any, cast

import anyio
import httpx
import pytest
from benchmarks import in_process
from blockbuster import blockbuster_ctx
from pytest_asyncio import is_async_test

import cpersona
from cpersona.edges.http.app import create_app
from cpersona.settings import Settings
from cpersona.stores.redis.connection import close_redis, connect_redis
from cpersona.stores.redis.server import EmbeddedRedis
from suite_model import SUITE_MODEL

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator
    from contextlib import AbstractAsyncContextManager
    from pathlib import Path

    from starlette.applications import Starlette

    from cpersona.stores.redis.connection import RedisClient

_CLEANUP_SECS = 10.0


@pytest.fixture(scope="session")
async def redis_url(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    external = os.environ.get("CPERSONA_TEST_REDIS_URL")
    if external:
        yield external
        return
    settings = Settings(data_dir=tmp_path_factory.mktemp("session-redis"))
    async with EmbeddedRedis(settings) as server:
        yield server.url


@pytest.fixture
def key_prefix() -> str:
    return "t" + uuid.uuid4().hex[:8]


@pytest.fixture
def settings(redis_url: str, key_prefix: str, tmp_path: Path, built_models: Path) -> Settings:
    return Settings(
        redis_url=redis_url,
        key_prefix=key_prefix,
        data_dir=tmp_path / "data",
        embedding_model=SUITE_MODEL,
        models_dir=built_models,
    )


@pytest.fixture
async def redis(redis_url: str, key_prefix: str) -> AsyncIterator[RedisClient]:
    settings = Settings(redis_url=redis_url, key_prefix=key_prefix)
    client = await connect_redis(settings, redis_url)
    try:
        yield client
    finally:
        try:
            with anyio.fail_after(_CLEANUP_SECS):
                await _drop_prefix(client, key_prefix)
        finally:
            await close_redis(client)


@pytest.fixture
async def engine(
    redis: object, redis_url: str, key_prefix: str, tmp_path: Path
) -> AsyncIterator[cpersona.Engine]:
    """An engine on the shared Redis under this test's key prefix, without an embedder (lexical arms
    only); ``vector_engine`` has the embedder, and a module that needs other settings opens its own
    engine under a name of its own (no fixture here is shadowed)."""
    settings = Settings(data_dir=tmp_path, redis_url=redis_url, key_prefix=key_prefix, embedding_mode="none")
    # A fixture exits in another task than it entered, so no background task group (see cpersona.open).
    async with cpersona.open(settings, background=False) as memory:
        yield memory


@pytest.fixture
def vector_settings(redis: object, redis_url: str, key_prefix: str, model_dir: Path) -> Settings:
    """Settings of an engine with the ONNX embedder (:data:`SUITE_MODEL`) and an in-memory Qdrant on the
    shared Redis under this test's key prefix; the model is built once, in ``model_dir``, which is why the
    engine is given ``redis_url``."""
    return Settings(
        data_dir=model_dir,
        redis_url=redis_url,
        key_prefix=key_prefix,
        qdrant_url=":memory:",
        embedding_model=SUITE_MODEL,
    )


@pytest.fixture
async def vector_engine(vector_settings: Settings) -> AsyncIterator[cpersona.Engine]:
    """An engine opened with :func:`vector_settings`."""
    async with cpersona.open(vector_settings, background=False) as memory:
        yield memory


@pytest.fixture
async def client(
    settings: Settings,
    redis: RedisClient,
    serve_asgi: Callable[[Starlette], AbstractAsyncContextManager[httpx.AsyncClient]],
) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client on an app over the shared Redis under this test's prefix, without an embedder and
    with an in-memory vector store; a module that needs other settings serves its own app with
    ``serve_asgi`` under a name of its own."""
    app = create_app(settings.with_(qdrant_url=":memory:", embedding_mode="none"), background=False)
    async with serve_asgi(app) as c:
        yield c


async def _drop_prefix(client: RedisClient, prefix: str) -> None:
    # Indexes first, so that deleting their documents does not make Redis re-index them one by one.
    untyped = cast("Any", client)
    for raw in await untyped.execute_command("FT._LIST") or ():
        name = raw.decode() if isinstance(raw, bytes) else str(raw)
        if name.startswith(prefix):
            await untyped.execute_command("FT.DROPINDEX", name)
    batch: list[bytes] = []
    async for key in client.scan_iter(match=f"{prefix}:*", count=500):
        batch.append(key)
        if len(batch) >= 500:
            await client.delete(*batch)
            batch.clear()
    if batch:
        await client.delete(*batch)


@pytest.fixture(scope="session", autouse=True)
def built_models(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One folder of built encoder graphs for the whole run, every xdist worker and child process included:
    a graph is built once (a few hundred MB of work), not once per data dir.

    It is exported as ``CPERSONA_MODELS_DIR``, which engines opened from the environment and the child
    processes of :mod:`serving` read; engines built from ``Settings(...)`` on ``model_dir`` reach it
    through that dir's ``models`` link. A test that checks where an engine builds its graph sets its own.
    """
    base = tmp_path_factory.getbasetemp()
    # Under xdist each worker's base is a folder of the run's own: their parent is shared by all of them.
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = root / "built-models"
    folder.mkdir(mode=0o700, exist_ok=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CPERSONA_MODELS_DIR", str(folder))
        yield folder


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory, built_models: Path) -> Path:
    """A data dir shared by the session's engines so the ONNX model is built once, not per test (its
    ``models`` folder is the run's :func:`built_models`).

    Engines that use it must not take the data-dir lock: give them ``redis_url`` and ``qdrant_url``.
    """
    data_dir = tmp_path_factory.mktemp("models")
    (data_dir / "models").symlink_to(built_models, target_is_directory=True)
    return data_dir


@pytest.fixture(scope="session")
def serve_asgi() -> Callable[[Starlette], AbstractAsyncContextManager[httpx.AsyncClient]]:
    """An HTTP client on an app, its lifespan entered for as long as the client is open.

    An ``AsyncClient`` fixture cannot hold the task group that ``serving`` in ``test_http`` runs the
    lifespan in, so :func:`benchmarks.in_process.running` enters the lifespan's context directly. Give the
    app ``background=False``: background tasks need a task group around the app's life.
    """

    @contextlib.asynccontextmanager
    async def serve(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
        async with in_process.running(app) as (asgi, _):
            transport = httpx.ASGITransport(app=asgi)
            async with httpx.AsyncClient(transport=transport, base_url="http://cpersona.test") as client:
                yield client

    return serve


@pytest.fixture
async def keyed(
    settings: Settings,
    redis: RedisClient,
    serve_asgi: Callable[[Starlette], AbstractAsyncContextManager[httpx.AsyncClient]],
) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client of a lexical-only app with API keys on and no rate limit (the key tests')."""
    app = create_app(
        settings.with_(qdrant_url=":memory:", embedding_mode="none", keys="on", rate_limit_per_sec=0),
        background=False,
    )
    async with serve_asgi(app) as c:
        yield c


@pytest.fixture(scope="session")
def open_test_engine(
    redis_url: str, model_dir: Path
) -> Callable[..., AbstractAsyncContextManager[cpersona.Engine]]:
    """Open an engine with the ONNX embedder on the session's Redis and an in-memory Qdrant, under a
    fresh key prefix starting with ``tag``; its keys and indexes are dropped when it closes.

    Opening one costs about a second, so modules share one (``scope="module"``) and each test works
    under its own agent id. ``overrides`` are further settings; ``arm_wrapper`` is the engine's arm
    wrapper (``cpersona.open``'s testing seam).
    """

    @contextlib.asynccontextmanager
    async def open_engine(
        tag: str, *, arm_wrapper: Any = None, **overrides: Any
    ) -> AsyncIterator[cpersona.Engine]:
        prefix = tag + uuid.uuid4().hex[:8]
        settings = Settings(
            data_dir=model_dir,
            redis_url=redis_url,
            key_prefix=prefix,
            qdrant_url=":memory:",
            **({"embedding_model": SUITE_MODEL} | overrides),
        )
        async with cpersona.open(settings, background=False, arm_wrapper=arm_wrapper) as memory:
            try:
                yield memory
            finally:
                with anyio.fail_after(_CLEANUP_SECS):
                    await _drop_prefix(memory.backends.stores.redis, prefix)

    return open_engine


# Calls made on the event loop on purpose: (file, functions, why blocking there is harmless).
_MAY_BLOCK: tuple[tuple[str, frozenset[str], str], ...] = (
    (
        "cpersona/recall/policy.py",
        frozenset({"load_policies", "policy_dir"}),
        "the policy TOML files (a few KB in the package) are read once as an engine is constructed",
    ),
    (
        "<frozen importlib._bootstrap>",
        frozenset({"_find_and_load"}),
        "a module's first import reads its files once a process (the MCP SDK's, as an app is built)",
    ),
    (
        "tests/serving.py",
        frozenset({"start_serve"}),
        "Popen reads a few bytes from the child as it execs, once per server a test starts",
    ),
)


@pytest.fixture(autouse=True)
def _no_blocking_on_loop(request: pytest.FixtureRequest) -> Iterator[None]:
    """In every async test, make a blocking call (sleep, file or socket I/O, a stat) that the package makes
    on the event loop's thread raise ``BlockingError``; the same call in a worker thread is left alone,
    and so are the calls of ``_MAY_BLOCK``. A test's own setup (a file it writes before it starts a
    server, say) is not the product's and is not checked: only a call with a ``cpersona`` frame on its
    stack is."""
    if not is_async_test(request.node):
        yield
        return
    with blockbuster_ctx("cpersona") as buster:
        for function in buster.functions.values():
            for filename, names, _why in _MAY_BLOCK:
                function.can_block_in(filename, names)
        yield
