"""Embedding vectors on disk, so that a rerun of a quality benchmark embeds nothing it has embedded before.

Vectors are computed by the project's own embedder
(:func:`cpersona.stores.embedding.embedders.open_embedder`, mode ``onnx``: the registered model asked for,
multilingual-e5-small by default) and kept per model under
``<cache_dir>/embeddings/<model>/`` as two files:

* ``vectors.npy``: float32, one row per text, in the order the texts were first embedded;
* ``index.json``: the model name, the vector width, a probe vector, and ``keys``, where ``keys[i]`` is
  the sha256 of the UTF-8 text the model read for row ``i``: the text behind the model's query or passage
  prefix (:meth:`EmbeddingCache.key`). A question is embedded as a query (``queries=True``), a stored text
  as a passage; for a model with prefixes (multilingual-e5-small) the two are different vectors under
  different keys, for one without (MiniLM) the same vector under the same key, as before prefixes existed.

Both are replaced atomically, the vectors first, so a crash leaves either the old pair or extra
unindexed rows, never an index that points past the vectors. The probe (the vector of a fixed sentence)
is compared with a fresh one whenever the embedder is opened: if the embedder's output has changed, the
cache is discarded rather than mixed with new vectors.

The ONNX model itself is built into ``<cache_dir>/models`` the first time (the embedder's ``data_dir``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Final

import numpy as np
import numpy.typing as npt
from tqdm import tqdm

from cpersona.embedding_models import DEFAULT_EMBEDDING_MODEL, embedding_model
from cpersona.settings import Settings
from cpersona.stores.embedding.embedders import OnnxEmbedder, open_embedder

if TYPE_CHECKING:
    from collections.abc import Sequence


__all__ = ["DEFAULT_CACHE_DIR", "MODEL_NAME", "EmbeddingCache", "text_key"]

DEFAULT_CACHE_DIR: Final = Path(__file__).resolve().parents[1] / ".cache"
MODEL_NAME: Final = f"onnx:{DEFAULT_EMBEDDING_MODEL}"
"""The name the default model's vectors are cached under."""

_PROBE_TEXT = "Caroline: I went to a support group yesterday and it was so powerful."
_PROBE_TOLERANCE = 1e-4
# Texts handed to the embedder per step: big enough for its own batching, small enough that the
# progress bar moves and a save happens every few seconds.
_CHUNK = 512

Matrix = npt.NDArray[np.float32]


def text_key(text: str) -> str:
    """The cache key of one text: sha256 of its UTF-8 bytes, hex."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _slug(model: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", model)


class EmbeddingCache:
    """Texts to vectors through a disk cache; the embedder is opened only when something is missing.

    Use it as an async context manager (``async with EmbeddingCache(dir) as cache``) or call
    :meth:`aclose`. :meth:`embed` returns an ``(n, dim)`` float32 matrix in the order of the texts.
    """

    def __init__(
        self,
        cache_dir: Path = DEFAULT_CACHE_DIR,
        *,
        model: str = DEFAULT_EMBEDDING_MODEL,
        threads: int | None = None,
        progress: bool = True,
    ) -> None:
        self.cache_dir = cache_dir
        self._entry = embedding_model(model)
        self.model = f"onnx:{self._entry.name}"
        self.folder = cache_dir / "embeddings" / _slug(self.model)
        self._threads = threads
        self._progress = progress
        self._embedder: OnnxEmbedder | None = None
        self._row: dict[str, int] = {}
        self._keys: list[str] = []
        self._vectors: Matrix = np.zeros((0, 0), dtype=np.float32)
        self._probe: list[float] | None = None
        self.computed = 0
        """How many texts this instance had to embed (the rest came from disk)."""
        self._load()

    # ------------------------------------------------------------------ disk

    @property
    def _index_path(self) -> Path:
        return self.folder / "index.json"

    @property
    def _vectors_path(self) -> Path:
        return self.folder / "vectors.npy"

    def _load(self) -> None:
        if not self._index_path.is_file() or not self._vectors_path.is_file():
            return
        index = json.loads(self._index_path.read_text(encoding="utf-8"))
        vectors = np.load(self._vectors_path)
        keys = list(index["keys"])
        if index.get("model") != self.model or vectors.ndim != 2 or len(keys) > len(vectors):
            # Not ours or inconsistent: start afresh rather than trust it.
            return
        self._keys = keys
        self._vectors = np.ascontiguousarray(vectors[: len(keys)], dtype=np.float32)
        self._row = {key: row for row, key in enumerate(keys)}
        self._probe = index.get("probe")

    def _save(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        vectors_tmp = self._vectors_path.with_suffix(".tmp.npy")
        np.save(vectors_tmp, self._vectors)
        os.replace(vectors_tmp, self._vectors_path)
        index = {
            "model": self.model,
            "dim": int(self._vectors.shape[1]) if self._vectors.size else 0,
            "probe": self._probe,
            "keys": self._keys,
        }
        index_tmp = self._index_path.with_suffix(".tmp")
        index_tmp.write_text(json.dumps(index), encoding="utf-8")
        os.replace(index_tmp, self._index_path)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, text: object) -> bool:
        """Whether ``text`` is cached as a passage."""
        return isinstance(text, str) and self.key(text) in self._row

    def key(self, text: str, *, queries: bool = False) -> str:
        """The key of ``text`` as a query or as a passage: the digest of what the model reads."""
        prefix = self._entry.query_prefix if queries else self._entry.passage_prefix
        return text_key(prefix + text)

    # ------------------------------------------------------------------ embedding

    async def _open_embedder(self) -> OnnxEmbedder:
        if self._embedder is not None:
            return self._embedder
        defaults = Settings(data_dir=self.cache_dir)
        settings = Settings(
            data_dir=self.cache_dir,
            embedding_mode="onnx",
            embedding_model=self._entry.name,
            # The query cache would only duplicate this one.
            embedding_cache_size=0,
            embedding_threads=self._threads if self._threads is not None else defaults.embedding_threads,
        )
        embedder = await open_embedder(settings)
        # OnnxEmbedder: its embed_queries batches questions through the query prefix.
        if not isinstance(embedder, OnnxEmbedder) or embedder.name != self.model:
            raise RuntimeError(f"expected the {self.model} embedder, got {embedder and embedder.name}")
        self._embedder = embedder
        [probe] = await embedder.embed([_PROBE_TEXT])
        fresh = [float(x) for x in probe]
        if self._probe is not None:
            drift = float(np.max(np.abs(np.asarray(self._probe, dtype=np.float32) - probe)))
            if len(self._probe) != len(fresh) or drift > _PROBE_TOLERANCE:
                print(f"embedding cache: the embedder's output changed (probe drift {drift:.2e}); discarding")
                self._keys, self._row = [], {}
                self._vectors = np.zeros((0, 0), dtype=np.float32)
        self._probe = fresh
        return embedder

    async def ensure(self, texts: Sequence[str], *, desc: str = "embedding", queries: bool = False) -> int:
        """Embed and store every text not cached yet, as queries or as passages; return how many were
        computed."""
        missing = list(dict.fromkeys(t for t in texts if self.key(t, queries=queries) not in self._row))
        if not missing:
            return 0
        embedder = await self._open_embedder()
        # The probe check may have emptied the cache: recompute what is missing now.
        missing = [t for t in missing if self.key(t, queries=queries) not in self._row]
        with tqdm(total=len(missing), desc=desc, unit="text", disable=not self._progress) as bar:
            for start in range(0, len(missing), _CHUNK):
                chunk = missing[start : start + _CHUNK]
                vectors = await (embedder.embed_queries(chunk) if queries else embedder.embed(chunk))
                rows = np.stack(vectors).astype(np.float32, copy=False)
                base = self._vectors if self._vectors.size else np.zeros((0, rows.shape[1]), np.float32)
                self._vectors = np.concatenate([base, rows])
                for text in chunk:
                    key = self.key(text, queries=queries)
                    self._row[key] = len(self._keys)
                    self._keys.append(key)
                self._save()
                bar.update(len(chunk))
        self.computed += len(missing)
        return len(missing)

    def lookup(self, texts: Sequence[str], *, queries: bool = False) -> Matrix:
        """The cached vectors of ``texts`` as queries or as passages (``KeyError`` naming the first text
        that is not cached)."""
        rows = []
        for text in texts:
            row = self._row.get(self.key(text, queries=queries))
            if row is None:
                raise KeyError(f"not in the embedding cache: {text[:60]!r}")
            rows.append(row)
        if not rows:
            width = self._vectors.shape[1] if self._vectors.size else 0
            return np.zeros((0, width), dtype=np.float32)
        return self._vectors[np.asarray(rows, dtype=np.int64)]

    async def embed(self, texts: Sequence[str], *, desc: str = "embedding", queries: bool = False) -> Matrix:
        """The vectors of ``texts`` as passages, or as queries (questions) with ``queries``."""
        await self.ensure(texts, desc=desc, queries=queries)
        return self.lookup(texts, queries=queries)

    async def aclose(self) -> None:
        embedder, self._embedder = self._embedder, None
        if embedder is not None:
            await embedder.aclose()

    async def __aenter__(self) -> EmbeddingCache:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
