"""What every embedder shares: the query cache in front of ``embed``, batching and unit length."""

from __future__ import annotations

import abc
import collections
import math
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final

import numpy as np

from cpersona.embedding_models import UNSCALED
from cpersona.stores.embedding.coalesce import QueryCoalescer

if TYPE_CHECKING:
    import numpy.typing as npt

    from cpersona.embedding_models import GateScale
    from cpersona.stores.protocols import Vector

__all__ = ["DEFAULT_BATCH_SIZE", "BaseEmbedder", "Clock", "QueryCache", "chunks", "unit_vector"]

Clock = Callable[[], float]

DEFAULT_BATCH_SIZE: Final = 64


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
        if not self._fresh(entry):
            del self._entries[text]
            self.misses += 1
            return None
        self._entries.move_to_end(text)
        self.hits += 1
        return entry[1].copy()

    def holds(self, text: str) -> bool:
        """Whether :meth:`get` would find ``text`` now (counts neither a hit nor a miss)."""
        entry = self._entries.get(text)
        return entry is not None and self._fresh(entry)

    def _fresh(self, entry: tuple[float, Vector]) -> bool:
        """Whether an entry (its expiry time, its vector) has not expired."""
        return self._clock() < entry[0]

    def put(self, text: str, vector: Vector) -> None:
        if self._size == 0:
            return
        self._entries[text] = (self._clock() + self._ttl, vector.copy())
        self._entries.move_to_end(text)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        self._entries.clear()


class BaseEmbedder(abc.ABC):
    """What every mode shares: the query cache in front of :meth:`embed`, and the queries of concurrent
    callers embedded together (:class:`~.coalesce.QueryCoalescer`)."""

    coalesces_queries: bool = False
    """Whether concurrent queries share a batch (run by :meth:`embed_queries`). Only for a local model: a
    remote service fails a batch as a whole (one over-long query would fail its neighbours) and a batch
    outlives its runner's cancellation, which a local thread does anyway but an HTTP request need not."""

    query_prefix: str = ""
    passage_prefix: str = ""
    """What the model expects before a query and before a stored text (``query: `` and ``passage: `` for
    the e5 family); empty for a model trained without them. Applied here, so callers pass bare texts and
    the query cache is keyed by the bare query (one embedder, one model, one prefix)."""

    def __init__(self, cache: QueryCache, *, query_batch: int = DEFAULT_BATCH_SIZE) -> None:
        self.cache = cache
        self.queries = QueryCoalescer(self.embed_queries, max_batch=query_batch)

    @property
    @abc.abstractmethod
    def name(self) -> str: ...

    @property
    @abc.abstractmethod
    def dim(self) -> int: ...

    @property
    def gate_scale(self) -> GateScale:
        return UNSCALED

    @abc.abstractmethod
    async def _encode(self, texts: Sequence[str]) -> list[Vector]:
        """The model's vectors of ``texts`` exactly as given (prefixes already applied)."""

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        """Stored texts (passages), in order."""
        return await self._encode(_prefixed(self.passage_prefix, texts))

    async def embed_queries(self, texts: Sequence[str]) -> list[Vector]:
        """The queries of concurrent callers, embedded as one batch."""
        return await self._encode(_prefixed(self.query_prefix, texts))

    @abc.abstractmethod
    async def aclose(self) -> None: ...

    def is_cached(self, text: str) -> bool:
        return self.cache.holds(text)

    async def embed_query(self, text: str) -> Vector:
        cached = self.cache.get(text)
        if cached is not None:
            return cached
        if self.coalesces_queries:
            vector = await self.queries.embed_one(text)
        else:
            [vector] = await self.embed_queries([text])
        self.cache.put(text, vector)
        return vector


def _prefixed(prefix: str, texts: Sequence[str]) -> Sequence[str]:
    return [prefix + text for text in texts] if prefix else texts


def chunks(items: Sequence[str], size: int) -> list[Sequence[str]]:
    return [items[start : start + size] for start in range(0, len(items), size)]


def unit_vector(vector: npt.NDArray[np.float32]) -> Vector:
    norm = float(np.linalg.norm(vector))
    if not math.isfinite(norm) or norm == 0.0:
        raise ValueError("a vector has zero or non-finite length")
    return (vector / np.float32(norm)).astype(np.float32, copy=False)
