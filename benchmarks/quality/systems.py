"""The retrieval systems under test, all behind one small interface.

Each system keeps one index per corpus key (a conversation id, or a conversation's session corpus) and
answers with unit ids, best first::

    await system.index(conv_id, units)           # units: objects with .unit_id, .content, ...
    ids = await system.search(conv_id, question, k)

* :class:`BM25`: the ``bm25s`` package, Lucene variant (k1 = 1.5, b = 0.75, its defaults), one index
  per conversation. Tokenisation is bm25s's own default: lower-case, tokens ``\\b\\w\\w+\\b`` (so
  one-character words drop out), its English stop-word list, no stemming. Units sharing no term with the
  question score 0 and are **not** returned: BM25 has nothing to say about them.
* :class:`Dense`: exact cosine (numpy, every unit scored) over the cached MiniLM vectors of
  :mod:`.embed_cache`; always returns min(k, corpus size) ids.
* :class:`RRFHybrid`: reciprocal-rank fusion, score = Σ 1 / (60 + rank), of the BM25 and dense lists,
  each taken 100 deep (other depths for comparison: ``rrf:20``, ``rrf:all`` on the command line).
* :class:`Cpersona`: the engine itself, through its library API (a slot: recall is still being
  written; see the class).

Ties are broken by position in the corpus (earlier first), so every run ranks identically.
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Final, Protocol

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy.typing as npt

    from benchmarks.quality.embed_cache import EmbeddingCache

__all__ = [
    "BM25",
    "RRF_DEPTH",
    "RRF_K",
    "Cpersona",
    "Dense",
    "RRFHybrid",
    "RetrievalSystem",
    "Unit",
    "rank_scores",
]

RRF_K: Final = 60
RRF_DEPTH: Final = 100
_STORE_CHUNK = 500


class Unit(Protocol):
    """What a system indexes: a turn or a session of :mod:`.locomo` (or anything shaped alike)."""

    @property
    def unit_id(self) -> str: ...
    @property
    def content(self) -> str: ...
    @property
    def timestamp(self) -> float: ...
    @property
    def metadata(self) -> dict[str, Any]: ...


class RetrievalSystem(Protocol):
    name: str

    async def index(self, conv_id: str, units: Sequence[Unit]) -> None: ...

    async def search(self, conv_id: str, question: str, k: int) -> list[str]: ...

    async def aclose(self) -> None: ...


def rank_scores(scores: npt.NDArray[Any], k: int, *, positive_only: bool = False) -> list[int]:
    """Positions of the ``k`` highest scores, best first, ties by position (earlier first)."""
    values = np.asarray(scores, dtype=np.float64)
    # lexsort's last key is the primary one: descending score, then ascending position.
    order = np.lexsort((np.arange(len(values)), -values))
    if positive_only:
        order = order[values[order] > 0.0]
    return [int(i) for i in order[:k]]


class BM25:
    """BM25 with bm25s's default tokenisation and English stop words (see the module docstring)."""

    name = "bm25"

    def __init__(self, *, k1: float = 1.5, b: float = 0.75, method: str = "lucene") -> None:
        self._params = {"k1": k1, "b": b, "method": method}
        self._indexes: dict[str, tuple[Any, list[str]]] = {}

    @staticmethod
    def tokenize(texts: Sequence[str]) -> list[list[str]]:
        import bm25s

        tokens: list[list[str]] = bm25s.tokenize(
            list(texts), stopwords="en", return_ids=False, show_progress=False
        )
        return tokens

    async def index(self, conv_id: str, units: Sequence[Unit]) -> None:
        import bm25s

        retriever = bm25s.BM25(**self._params)
        retriever.index(self.tokenize([unit.content for unit in units]), show_progress=False)
        self._indexes[conv_id] = (retriever, [unit.unit_id for unit in units])

    def scores(self, conv_id: str, question: str) -> npt.NDArray[np.float32] | None:
        """BM25 score of every unit, or ``None`` when no question term occurs in the corpus."""
        retriever, ids = self._indexes[conv_id]
        [tokens] = self.tokenize([question])
        known = [token for token in tokens if token in retriever.vocab_dict]
        if not known:
            return None
        scores: npt.NDArray[np.float32] = retriever.get_scores(known)
        if len(scores) != len(ids):
            raise RuntimeError(f"bm25s scored {len(scores)} units of {len(ids)}")
        return scores

    async def search(self, conv_id: str, question: str, k: int) -> list[str]:
        _, ids = self._indexes[conv_id]
        scores = self.scores(conv_id, question)
        if scores is None:
            return []
        return [ids[i] for i in rank_scores(scores, k, positive_only=True)]

    async def aclose(self) -> None:
        self._indexes.clear()


class Dense:
    """Exact cosine similarity over the cached MiniLM vectors, one matrix per conversation."""

    name = "dense"

    def __init__(self, cache: EmbeddingCache) -> None:
        self._cache = cache
        self._indexes: dict[str, tuple[npt.NDArray[np.float32], list[str]]] = {}

    @staticmethod
    def _unit_rows(matrix: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return (matrix / np.where(norms == 0.0, 1.0, norms)).astype(np.float32)

    async def index(self, conv_id: str, units: Sequence[Unit]) -> None:
        vectors = await self._cache.embed([unit.content for unit in units], desc=f"embed {conv_id}")
        self._indexes[conv_id] = (self._unit_rows(vectors), [unit.unit_id for unit in units])

    async def similarities(self, conv_id: str, question: str) -> npt.NDArray[np.float32]:
        matrix, _ = self._indexes[conv_id]
        query = self._unit_rows(await self._cache.embed([question], desc="embed query"))[0]
        sims: npt.NDArray[np.float32] = matrix @ query
        return sims

    async def search(self, conv_id: str, question: str, k: int) -> list[str]:
        _, ids = self._indexes[conv_id]
        return [ids[i] for i in rank_scores(await self.similarities(conv_id, question), k)]

    async def aclose(self) -> None:
        self._indexes.clear()


class RRFHybrid:
    """Reciprocal-rank fusion of :class:`BM25` and :class:`Dense`: Σ 1 / (k_rrf + rank), rank from 1."""

    name = "rrf"

    def __init__(
        self, cache: EmbeddingCache, *, k_rrf: int = RRF_K, depth: int | None = RRF_DEPTH, name: str = "rrf"
    ) -> None:
        """``depth`` is how far down each list is read; ``None`` reads every unit of the corpus."""
        self.name = name
        self._bm25 = BM25()
        self._dense = Dense(cache)
        self._k_rrf = k_rrf
        self._depth = depth
        self._order: dict[str, dict[str, int]] = {}

    async def index(self, conv_id: str, units: Sequence[Unit]) -> None:
        await self._bm25.index(conv_id, units)
        await self._dense.index(conv_id, units)
        self._order[conv_id] = {unit.unit_id: position for position, unit in enumerate(units)}

    async def search(self, conv_id: str, question: str, k: int) -> list[str]:
        fused: dict[str, float] = {}
        order = self._order[conv_id]
        depth = len(order) if self._depth is None else self._depth
        for ranked in (
            await self._bm25.search(conv_id, question, depth),
            await self._dense.search(conv_id, question, depth),
        ):
            for rank, unit_id in enumerate(ranked, start=1):
                fused[unit_id] = fused.get(unit_id, 0.0) + 1.0 / (self._k_rrf + rank)
        return sorted(fused, key=lambda unit_id: (-fused[unit_id], order[unit_id]))[:k]

    async def aclose(self) -> None:
        await self._bm25.aclose()
        await self._dense.aclose()


class Cpersona:
    """cpersona's engine through its library API: one agent per conversation.

    Ingest: ``Engine.store_batch`` with ``content``, ``agent_id`` = the corpus key, ``msg_id`` = the
    unit id (``dia_id``), ``timestamp`` and ``metadata`` (conversation, session, dia_id), in time order.

    Search assumes this recall API (being written by another engineer when this slot was made)::

        fields = {} if self._mode is None else {"mode": self._mode}
        result = await memory.recall(question, agent_id=conv_id, limit=k, **fields)
        for row in result.rows: row.msg_id, row.ref

    Rows are mapped back to unit ids through the ``ref`` each store returned. A unit whose content
    duplicates an earlier one in the same agent is skipped by the engine's dedup and shares that
    record's ``ref``, so a hit on it counts for every unit that was folded into it.

    The engine embeds with its own in-process MiniLM (same model, same ONNX graph as the cache), so its
    vectors match the other systems' up to float noise. It runs on a temporary data dir (embedded Redis
    and embedded Qdrant) removed at :meth:`aclose`.
    """

    name = "cpersona"

    # Ablations of the same engine: which arms a variant keeps (the others contribute nothing).
    ARM_SETS: ClassVar[dict[str, frozenset[str] | None]] = {
        "all": None,
        "bm25": frozenset({"memory_keyword", "episode_fts"}),
        "dense": frozenset({"vector_near", "vector_far"}),
    }

    def __init__(
        self,
        *,
        data_dir: Path | None = None,
        embedding_threads: int | None = None,
        mode: str | None = None,
        arms: str = "all",
        name: str = "cpersona",
    ) -> None:
        self._data_dir = data_dir
        self._threads = embedding_threads
        self._mode = mode
        self._arms = self.ARM_SETS[arms]
        self.name = name
        self._stack = contextlib.AsyncExitStack()
        self._memory: Any = None
        self._refs: dict[str, dict[str, list[str]]] = {}

    @staticmethod
    def unavailable_reason() -> str | None:
        """Why this system cannot run yet, or ``None`` when it can."""
        import cpersona

        if not hasattr(cpersona.Engine, "recall"):
            return "cpersona.Engine has no 'recall' method yet (recall is still being written); skipped"
        return None

    async def _engine(self) -> Any:
        if self._memory is not None:
            return self._memory
        reason = self.unavailable_reason()
        if reason is not None:
            raise RuntimeError(reason)
        import cpersona
        from cpersona._settings import Settings

        data_dir = self._data_dir
        if data_dir is None:
            data_dir = Path(self._stack.enter_context(tempfile.TemporaryDirectory(prefix="cpersona-q-")))
        threads = (
            self._threads if self._threads is not None else Settings(data_dir=data_dir).embedding_threads
        )
        settings = Settings(data_dir=data_dir, embedding_threads=threads)
        self._memory = await self._stack.enter_async_context(cpersona.open(settings, background=False))
        keep = self._arms
        if keep is not None:
            self._memory.recaller.arm_wrapper = _only(keep)
        return self._memory

    async def index(self, conv_id: str, units: Sequence[Unit]) -> None:
        memory = await self._engine()
        refs = self._refs.setdefault(conv_id, {})
        for start in range(0, len(units), _STORE_CHUNK):
            chunk = units[start : start + _STORE_CHUNK]
            records = [
                {
                    "content": unit.content,
                    "agent_id": conv_id,
                    "msg_id": unit.unit_id,
                    "timestamp": unit.timestamp,
                    "metadata": unit.metadata,
                }
                for unit in chunk
            ]
            batch = await memory.store_batch(records)
            for unit, result in zip(chunk, batch.results, strict=True):
                refs.setdefault(result.ref, []).append(unit.unit_id)
        if hasattr(memory, "drain_blocks"):
            # Blocks are built after the store; measure with them in place, as a settled store has them.
            await memory.drain_blocks()

    async def search(self, conv_id: str, question: str, k: int) -> list[str]:
        memory = await self._engine()
        fields = {} if self._mode is None else {"mode": self._mode}
        result = await memory.recall(question, agent_id=conv_id, limit=k, **fields)
        refs = self._refs.get(conv_id, {})
        ids: list[str] = []
        for row in result.rows:
            for unit_id in refs.get(row.ref) or [row.msg_id]:
                if unit_id and unit_id not in ids:
                    ids.append(unit_id)
        return ids[:k]

    async def aclose(self) -> None:
        self._memory = None
        await self._stack.aclose()


def _only(keep: frozenset[str]) -> Any:
    """An arm wrapper that lets only the ``keep`` arms run; the others answer with no rows."""
    from cpersona._candidates import ArmResult

    def wrap(name: str, call: Any) -> Any:
        if name in keep:
            return call

        async def nothing() -> ArmResult:
            return ArmResult(name, status="skipped", detail="switched off for this benchmark variant")  # type: ignore[arg-type]

        return nothing

    return wrap
