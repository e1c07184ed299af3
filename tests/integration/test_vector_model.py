"""A store records the model its vectors were made with, and an engine of another model refuses to open it.

Real parts throughout: the session's Redis, an in-memory Qdrant, the ONNX embedder, a second model
registered as a new model is (``test_embedding_models.PREFIXED``: MiniLM's files under another name and
prefixes) and the ``http`` embedder against a loopback ``/embed`` service of other-length vectors.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread
import pytest

import cpersona
from cpersona import EmbeddingModelMismatch, Settings
from cpersona.edges.http.app import create_app
from cpersona.engine.reembed import reembed
from cpersona.keys import Keys
from cpersona.stores.embedding.embedders import OnnxEmbedder
from cpersona.stores.embedding.model_files import BUNDLED_DIR, ModelFiles
from serving import environment_without_settings
from suite_model import SUITE_MODEL
from test_embedding import Reply, Request, loopback_server
from test_embedding_models import prefixed_model  # noqa: F401  (a fixture)

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable
    from contextlib import AbstractAsyncContextManager
    from pathlib import Path

    import httpx
    from starlette.applications import Starlette

    from cpersona.embedding_models import EmbeddingModel
    from cpersona.stores.redis.connection import RedisClient

MINILM = {"name": "onnx:all-MiniLM-L6-v2", "dim": 384}
"""The model these stores are made with (``SUITE_MODEL``), as the engine names it."""


@pytest.fixture
def onnx_settings(vector_settings: Settings) -> Settings:
    return vector_settings


@pytest.fixture
def prefixed_settings(
    onnx_settings: Settings,
    prefixed_model: EmbeddingModel,  # noqa: F811
) -> Settings:
    """:func:`onnx_settings` (the same store) configured for the second registered model."""
    return onnx_settings.with_(embedding_model=prefixed_model.name)


async def _recorded(redis: RedisClient, key_prefix: str) -> object:
    stored = await redis.get(Keys(key_prefix).vector_model)
    return None if stored is None else json.loads(stored)


async def _eight_wide(request: Request) -> Reply:
    """An ``/embed`` service of another model: 8-d vectors."""
    vectors = [[float(len(t)), 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0] for t in request.body["texts"]]
    return 200, json.dumps({"embeddings": vectors}).encode()


def _one_line(exc: EmbeddingModelMismatch, stored: str, configured: str) -> None:
    message = str(exc)
    assert "\n" not in message
    assert (exc.stored, exc.configured) == (stored, configured)
    assert stored in message
    assert configured in message
    # What to do: the settings of the store's model, or the command.
    assert "set CPERSONA_EMBEDDING_MODE=onnx and CPERSONA_EMBEDDING_MODEL=all-MiniLM-L6-v2 back" in message
    assert "run 'cpersona reembed'" in message


async def test_the_first_open_records_the_model_and_the_same_model_reopens(
    redis: RedisClient, key_prefix: str, onnx_settings: Settings
) -> None:
    assert await _recorded(redis, key_prefix) is None
    async with cpersona.open(onnx_settings, background=False) as memory:
        await memory.store("the deploy key rotates on Fridays", agent_id="a")
    assert await _recorded(redis, key_prefix) == MINILM
    async with cpersona.open(onnx_settings, background=False) as memory:
        assert (await memory.health())["embedder"] == MINILM
    assert await _recorded(redis, key_prefix) == MINILM


async def test_another_registered_model_is_refused_in_one_line(
    redis: RedisClient, key_prefix: str, onnx_settings: Settings, prefixed_settings: Settings
) -> None:
    async with cpersona.open(onnx_settings, background=False) as memory:
        await memory.store("the deploy key rotates on Fridays", agent_id="a")
    with pytest.raises(EmbeddingModelMismatch) as err:
        async with cpersona.open(prefixed_settings, background=False):
            pass
    _one_line(err.value, "onnx:all-MiniLM-L6-v2 (384-d)", "onnx:minilm-with-prefixes (384-d)")
    assert await _recorded(redis, key_prefix) == MINILM
    # Set back, the store opens as before.
    async with cpersona.open(onnx_settings, background=False):
        pass


async def test_a_model_of_another_length_is_refused_before_any_collection_opens(
    redis: RedisClient, key_prefix: str, onnx_settings: Settings
) -> None:
    async with cpersona.open(onnx_settings, background=False) as memory:
        await memory.store("the deploy key rotates on Fridays", agent_id="a")
    async with loopback_server(_eight_wide) as (url, _):
        remote = onnx_settings.with_(embedding_mode="http", embedding_url=url)
        with pytest.raises(EmbeddingModelMismatch) as err:
            async with cpersona.open(remote, background=False):
                pass
    _one_line(err.value, "onnx:all-MiniLM-L6-v2 (384-d)", f"http:{url} (8-d)")
    assert await _recorded(redis, key_prefix) == MINILM


async def test_an_http_embedder_records_its_url_and_learned_length(
    redis: RedisClient, key_prefix: str, onnx_settings: Settings
) -> None:
    async with loopback_server(_eight_wide) as (url, _):
        remote = onnx_settings.with_(embedding_mode="http", embedding_url=url)
        async with cpersona.open(remote, background=False) as memory:
            await memory.store("the deploy key rotates on Fridays", agent_id="a")
            assert (await memory.health())["embedder"] == {"name": f"http:{url}", "dim": 8}
    assert await _recorded(redis, key_prefix) == {"name": f"http:{url}", "dim": 8}


# A store made before the record existed has none. Its records each name the model that made their
# vector, so it is judged by them: adopting whatever model is configured would let the first start after
# a change of model write a second model's vectors beside the first's.


async def test_a_store_from_before_the_record_adopts_the_model_its_records_name(
    redis: RedisClient, key_prefix: str, onnx_settings: Settings
) -> None:
    async with cpersona.open(onnx_settings, background=False) as memory:
        await memory.store("the deploy key rotates on Fridays", agent_id="a")
    await redis.delete(Keys(key_prefix).vector_model)
    async with cpersona.open(onnx_settings, background=False):
        pass
    assert await _recorded(redis, key_prefix) == MINILM


async def test_a_store_from_before_the_record_refuses_another_model(
    redis: RedisClient, key_prefix: str, onnx_settings: Settings, prefixed_settings: Settings
) -> None:
    async with cpersona.open(onnx_settings, background=False) as memory:
        await memory.store("the deploy key rotates on Fridays", agent_id="a")
    await redis.delete(Keys(key_prefix).vector_model)
    with pytest.raises(EmbeddingModelMismatch) as err:
        async with cpersona.open(prefixed_settings, background=False):
            pass
    _one_line(err.value, "onnx:all-MiniLM-L6-v2", "onnx:minilm-with-prefixes (384-d)")
    assert await _recorded(redis, key_prefix) is None


async def test_a_store_without_vectors_takes_the_configured_model(
    redis: RedisClient, key_prefix: str, onnx_settings: Settings, prefixed_settings: Settings
) -> None:
    async with cpersona.open(onnx_settings.with_(embedding_mode="none"), background=False) as memory:
        await memory.store("the deploy key rotates on Fridays", agent_id="a")
    assert await _recorded(redis, key_prefix) is None
    async with cpersona.open(prefixed_settings, background=False):
        pass
    assert await _recorded(redis, key_prefix) == {"name": "onnx:minilm-with-prefixes", "dim": 384}


async def test_float32_weights_of_minilm_are_the_same_model(tmp_path: Path, model_dir: Path) -> None:
    """Other weights of the same model (a Hugging Face folder of float32 weights) make its vectors: the
    identity a store records is the model's, not its weights file's."""
    from safetensors.numpy import save_file

    folder = tmp_path / "model"

    def write_folder() -> None:
        folder.mkdir()
        save_file(ModelFiles.default().load_weights(), str(folder / "model.safetensors"))
        for name in ("config.json", "tokenizer.json"):
            (folder / name).write_bytes((BUNDLED_DIR / name).read_bytes())

    await anyio.to_thread.run_sync(write_folder)
    floats = await OnnxEmbedder.open(
        Settings(data_dir=tmp_path / "data", embedding_model=SUITE_MODEL), model_dir=folder
    )
    shipped = await OnnxEmbedder.open(Settings(data_dir=model_dir, embedding_model=SUITE_MODEL))
    try:
        assert (floats.name, floats.dim) == (shipped.name, shipped.dim) == (MINILM["name"], MINILM["dim"])
    finally:
        await floats.aclose()
        await shipped.aclose()


async def test_health_names_the_model(
    onnx_settings: Settings,
    redis: RedisClient,
    serve_asgi: Callable[[Starlette], AbstractAsyncContextManager[httpx.AsyncClient]],
) -> None:
    async with serve_asgi(create_app(onnx_settings, background=False)) as client:
        response = await client.get("/health")
    assert response.status_code == 200
    assert response.json()["embedder"] == MINILM


# ------------------------------------------------------------------------------------------- reembed


@pytest.fixture
async def embedded_settings(redis_url: str, key_prefix: str, built_models: Path, tmp_path: Path) -> Settings:
    """The embedded vector engine in this test's data dir (a re-embedding deletes its shards), with the
    session's built model."""
    return Settings(
        data_dir=tmp_path,
        redis_url=redis_url,
        key_prefix=key_prefix,
        qdrant_process=False,
        embedding_model=SUITE_MODEL,
        models_dir=built_models,
    )


TEXTS = ["the deploy key rotates on Fridays", "melanie paints the lake at sunrise", "the bakery opens at six"]


async def test_reembed_makes_every_vector_again_with_the_configured_model(
    redis: RedisClient,
    key_prefix: str,
    embedded_settings: Settings,
    prefixed_model: EmbeddingModel,  # noqa: F811
) -> None:
    async with cpersona.open(embedded_settings, background=False) as memory:
        for text in TEXTS:
            await memory.store(text, agent_id="a")
        await memory.archive_episode("a week of chores", agent_id="a")
        await memory.drain_blocks()
        before = await memory.stats(None)
    assert (before["memories"], before["episodes"], before["vectors"]) == (3, 1, 4)
    other = embedded_settings.with_(embedding_model=prefixed_model.name)
    seen: list[tuple[int, int]] = []
    done = await reembed(other, lambda n, total: seen.append((n, total)))
    assert (done.model, done.records, done.pending) == ("onnx:minilm-with-prefixes (384-d)", 4, 0)
    assert done.blocks >= 4
    assert seen[-1] == (4, 4)
    assert await _recorded(redis, key_prefix) == {"name": "onnx:minilm-with-prefixes", "dim": 384}
    async with cpersona.open(other, background=False) as memory:
        after = await memory.stats(None)
        assert memory.backends.embedder is not None
        memories = await memory.list("memory", agent_id="a")
        rows = await redis.json().mget(  # type: ignore[no-untyped-call]
            [Keys(key_prefix).memory(m.id) for m in memories], "$.embedding_model"
        )
    assert (after["memories"], after["episodes"], after["vectors"]) == (
        before["memories"],
        before["episodes"],
        before["vectors"],
    )
    assert {row[0] for row in rows} == {"onnx:minilm-with-prefixes"}
    with pytest.raises(EmbeddingModelMismatch):
        async with cpersona.open(embedded_settings, background=False):
            pass


async def test_the_cli_refuses_in_one_line_then_reembeds_into_another_length(
    key_prefix: str, embedded_settings: Settings
) -> None:
    async with cpersona.open(embedded_settings, background=False) as memory:
        for text in TEXTS:
            await memory.store(text, agent_id="a")
    async with loopback_server(_eight_wide) as (url, _):
        env = {
            **environment_without_settings(),
            "CPERSONA_REDIS_URL": str(embedded_settings.redis_url),
            "CPERSONA_KEY_PREFIX": key_prefix,
            "CPERSONA_DATA_DIR": str(embedded_settings.data_dir),
            "CPERSONA_QDRANT_PROCESS": "false",
            "CPERSONA_EMBEDDING_MODE": "http",
            "CPERSONA_EMBEDDING_URL": url,
        }

        async def cli(*args: str) -> subprocess.CompletedProcess[bytes]:
            return await anyio.run_process([sys.executable, "-m", "cpersona", *args], env=env, check=False)

        refused = await cli("stats", "--agent", "a")
        assert refused.returncode != 0
        [line] = refused.stderr.decode().splitlines()
        assert line.startswith(
            "error: the store's vectors were made by onnx:all-MiniLM-L6-v2 (384-d), not by"
        )
        assert f"the configured http:{url} (8-d): set CPERSONA_EMBEDDING_MODE=onnx and" in line
        done = await cli("reembed")
        assert done.returncode == 0, done.stderr
        assert done.stdout.decode().startswith(f"re-embedded 3 record(s) with http:{url} (8-d)")
        assert "reembed" in done.stderr.decode()  # the progress bar
        stats = await cli("stats", "--agent", "a", "--json")
        assert stats.returncode == 0, stats.stderr
        assert json.loads(stats.stdout)["vectors"] == 3
