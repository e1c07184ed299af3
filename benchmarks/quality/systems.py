"""The retrieval systems under test, all behind one small interface.

Each system keeps one index per corpus key (a conversation id, or a conversation's session corpus) and
answers with unit ids, best first::

    await system.index(conv_id, units)           # units: objects with .unit_id, .content, ...
    ids = await system.search(conv_id, question, k)

* :class:`BM25`: the ``bm25s`` package, Lucene variant (k1 = 1.5, b = 0.75, its defaults), one index
  per conversation. Tokenisation is bm25s's own default: lower-case, tokens ``\\b\\w\\w+\\b`` (so
  one-character words drop out), its English stop-word list, no stemming. Units sharing no term with the
  question score 0 and are **not** returned: BM25 has nothing to say about them.
* :class:`BM25Bigram`: the same BM25 (k1 = 1.5, b = 0.75, Lucene) over overlapping character bigrams of
  the NFKC-normalised, lower-cased text, whitespace dropped, no stop words: the plain baseline for
  text written without spaces (Japanese, Chinese). A one-character run counts as its own token.
* :class:`Dense`: exact cosine (numpy, every unit scored) over the cached MiniLM vectors of
  :mod:`.embed_cache`; always returns min(k, corpus size) ids.
* :class:`RRFHybrid`: reciprocal-rank fusion, score = Σ 1 / (60 + rank), of the BM25 and dense lists,
  each taken 100 deep (other depths for comparison: ``rrf:20``, ``rrf:all`` on the command line).
* :class:`Cpersona`: the engine itself, through its library API. With ``store_cache`` it keeps each
  built store on disk (see :meth:`Cpersona.preload`), so a rerun does not ingest again.

Ties are broken by position in the corpus (earlier first), so every run ranks identically.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import hashlib
import json
import shutil
import tempfile
import time
import unicodedata
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Final, Protocol

import anyio
import anyio.to_thread
import numpy as np

from cpersona.embedding_models import DEFAULT_EMBEDDING_MODEL

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    import numpy.typing as npt

    from benchmarks.quality.embed_cache import EmbeddingCache

__all__ = [
    "BM25",
    "BM25Bigram",
    "RRF_DEPTH",
    "RRF_K",
    "STORE_CACHE_VERSION",
    "Cpersona",
    "Dense",
    "RRFHybrid",
    "RetrievalSystem",
    "Unit",
    "corpora_key",
    "rank_scores",
]

RRF_K: Final = 60
RRF_DEPTH: Final = 100
STORE_CACHE_VERSION: Final = 2
"""Part of every store-cache key: bump it when a store built earlier no longer stands for the engine (2: each
document is written once, so stores built before hold BM25 statistics of twice-written documents)."""
STORE_LAYOUT_MODULES: Final = (
    "model.blocks", "engine.workers.blocks", "stores.redis.documents", "stores.redis.indexes", "model.drafts",
    "stores.redis.scope", "stores.embedding.embedders", "stores.embedding.base", "keys",
    "stores.embedding.onnx_graph", "stores.embedding.graph_file",
    "stores.embedding.model_files", "stores.embedding.quantized", "stores.embedding.loaders",
    "stores.embedding.e5_weights", "embedding_models",
    "model.records", "stores.vectors.edge", "stores.vectors.edge_worker", "stores.vectors.common",
    "model.memory_request", "model.memory_parts", "model.fields", "model.text_rules", "model.epoch_time",
    "model.associations", "stores.redis.associations",
)  # fmt: skip
"""The engine modules that decide what a built store holds; their source is part of the cache key."""
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


class BM25Bigram(BM25):
    """BM25 over character bigrams (see the module docstring)."""

    name = "bm25-bigram"

    @staticmethod
    def tokenize(texts: Sequence[str]) -> list[list[str]]:
        out: list[list[str]] = []
        for text in texts:
            tokens: list[str] = []
            for run in unicodedata.normalize("NFKC", text).lower().split():
                tokens += [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]
            out.append(tokens)
        return out


class Dense:
    """Exact cosine similarity of a question's vector (as a query) over the cached vectors of the units (as
    passages), one matrix per conversation."""

    name = "dense"

    def __init__(self, cache: EmbeddingCache) -> None:
        self._cache = cache
        self._indexes: dict[str, tuple[npt.NDArray[np.float32], npt.NDArray[np.intp], list[str]]] = {}

    @staticmethod
    def _unit_rows(matrix: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return (matrix / np.where(norms == 0.0, 1.0, norms)).astype(np.float32)

    async def index(self, conv_id: str, units: Sequence[Unit]) -> None:
        # One row per distinct text: a float32 product can differ in its last bits between two copies of
        # the same row, which would order two identical turns ("Thanks!") by noise instead of position.
        contents = [unit.content for unit in units]
        distinct = list(dict.fromkeys(contents))
        row_of = {text: row for row, text in enumerate(distinct)}
        vectors = await self._cache.embed(distinct, desc=f"embed {conv_id}")
        rows = np.array([row_of[text] for text in contents], dtype=np.intp)
        self._indexes[conv_id] = (self._unit_rows(vectors), rows, [unit.unit_id for unit in units])

    async def similarities(self, conv_id: str, question: str) -> npt.NDArray[np.float32]:
        matrix, rows, _ = self._indexes[conv_id]
        query = self._unit_rows(await self._cache.embed([question], desc="embed query", queries=True))[0]
        sims: npt.NDArray[np.float32] = (matrix @ query)[rows]
        return sims

    async def search(self, conv_id: str, question: str, k: int) -> list[str]:
        _, _, ids = self._indexes[conv_id]
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
    unit id (``dia_id``), ``timestamp`` and ``metadata`` (conversation, session, dia_id), in time order,
    then the blocks are drained. Search::

        result = await memory.recall(question, agent_id=conv_id, limit=k, **fields)

    Rows are mapped back to unit ids through the ``ref`` each store returned. A unit whose content
    duplicates an earlier one in the same agent is skipped by the engine's dedup and shares that
    record's ``ref``, so a hit on it counts for every unit that was folded into it.

    The engine embeds with its own in-process MiniLM (same model, same ONNX graph as the cache), so its
    vectors match the other systems' up to float noise. It runs on a temporary data dir (embedded Redis
    and embedded Qdrant) removed at :meth:`aclose`.

    **Store cache** (``store_cache``, off by default). Ingest is slow (every turn is embedded and cut into
    blocks), so a run may hand every corpus to :meth:`preload` before its first search. With a cache
    folder, the built store is kept under ``<store_cache>/<key>/`` (``data/``, and ``meta.json`` holding
    the ref-to-unit mapping), where the key is :func:`corpora_key`: a hash of every corpus key and unit
    (id, content, timestamp, metadata) in order, of the source of the engine modules that decide what a
    store holds (:data:`STORE_LAYOUT_MODULES`: records, documents and indexes, keys, embedder, blocks,
    vector store), and :data:`STORE_CACHE_VERSION`. A run copies the cached
    store into its temporary dir and opens the copy, so nothing a run does reaches the cache. The store
    is built as the incremental :meth:`index` calls would build it (same engine settings, same order,
    one engine for all corpora), so results do not depend on whether it came from the cache. A build
    goes to ``<key>.building`` and is renamed into place only when complete; a cached store whose vector
    collections or per-agent record counts differ from what the current engine opens is rebuilt.

    ``engine_settings`` are further :class:`cpersona.Settings` fields for every engine this system opens
    (the build's too). They are not part of the cache key, so they must not change what is stored: the
    query-embedding cache, timeouts and recall settings are fine.
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
        store_cache: Path | None = None,
        engine_settings: Mapping[str, Any] | None = None,
    ) -> None:
        self._data_dir = data_dir
        self._threads = embedding_threads
        self._mode = mode
        self._arms = self.ARM_SETS[arms]
        self.name = name
        self.store_cache = store_cache
        self._overrides = dict(engine_settings or {})
        self._stack = contextlib.AsyncExitStack()
        self._memory: Any = None
        self._refs: dict[str, dict[str, list[str]]] = {}
        # Corpus key -> digest of the units a preloaded store holds for it.
        self._preloaded: dict[str, str] = {}
        self.cache_info: dict[str, Any] | None = None
        """What :meth:`preload` did: the cache key, whether it hit, build and copy times."""

    @staticmethod
    def unavailable_reason() -> str | None:
        """Why this system cannot run yet, or ``None`` when it can."""
        import cpersona

        if not hasattr(cpersona.Engine, "recall"):
            return "cpersona.Engine has no 'recall' method yet (recall is still being written); skipped"
        return None

    def _settings(self, data_dir: Path) -> Any:
        from cpersona.settings import Settings

        threads = (
            self._threads if self._threads is not None else Settings(data_dir=data_dir).embedding_threads
        )
        return Settings(data_dir=data_dir, embedding_threads=threads, **self._overrides)

    def _work_dir(self) -> Path:
        if self._data_dir is not None:
            return self._data_dir
        return Path(self._stack.enter_context(tempfile.TemporaryDirectory(prefix="cpersona-q-")))

    async def _engine(self, data_dir: Path | None = None) -> Any:
        """The open engine; the first call opens it on ``data_dir`` (default: the working dir)."""
        if self._memory is not None:
            return self._memory
        reason = self.unavailable_reason()
        if reason is not None:
            raise RuntimeError(reason)
        import cpersona

        settings = self._settings(data_dir if data_dir is not None else self._work_dir())
        # The arm variant is the engine's arm wrapper, given when it opens and fixed for its life.
        wrapper = None if self._arms is None else _only(self._arms)
        self._memory = await self._stack.enter_async_context(
            cpersona.open(settings, background=False, arm_wrapper=wrapper)
        )
        return self._memory

    async def engine(self) -> Any:
        """The open :class:`cpersona.Engine` (for harnesses that call ``recall`` with other fields)."""
        return await self._engine()

    def unit_ids(self, conv_id: str, row: Any) -> list[str]:
        """The unit ids one returned row stands for (several when the engine folded duplicates)."""
        return list(self._refs.get(conv_id, {}).get(row.ref) or ([row.msg_id] if row.msg_id else []))

    def refs_of(self, conv_id: str, unit_ids: Iterable[str]) -> list[str]:
        """The refs of the records that hold ``unit_ids`` (the inverse of :meth:`unit_ids`), in ref order."""
        wanted = set(unit_ids)
        return [ref for ref, units in self._refs.get(conv_id, {}).items() if wanted & set(units)]

    async def preload(self, corpora: Sequence[tuple[str, Sequence[Unit]]]) -> bool:
        """Make the engine hold every corpus, from the store cache when it can; ``True`` on a cache hit.

        Without a store cache this is :meth:`index` for each corpus in order. After it, :meth:`index` of
        a preloaded corpus with the same units does nothing; other units are refused, since the store
        would no longer match its key.
        """
        if self._memory is not None:
            raise RuntimeError("preload must come before the engine is first used")
        reason = self.unavailable_reason()
        if reason is not None:
            raise RuntimeError(reason)
        if self.store_cache is None:
            for conv_id, units in corpora:
                await self.index(conv_id, units)
            return False
        model = self._overrides.get("embedding_model", DEFAULT_EMBEDDING_MODEL)
        key = await anyio.to_thread.run_sync(corpora_key, corpora, model)
        home = self.store_cache / key
        began = time.perf_counter()
        meta = await anyio.to_thread.run_sync(_read_meta, home)
        built = meta is None
        if meta is None:
            meta = await self._build(home, corpora)
        copy_secs = 0.0
        for attempt in range(2):
            target = self._work_dir() / f"store-{attempt}"
            copied = time.perf_counter()
            await anyio.to_thread.run_sync(_copy_store, home / "data", target)
            copy_secs = time.perf_counter() - copied
            memory = await self._engine(target)
            if await _matches(memory, target, meta):
                break
            if attempt == 1:
                raise RuntimeError(f"a freshly built store at {home} does not match what the engine opens")
            # Built by an older engine: close the copy and build the store again.
            await self._reset()
            meta = await self._build(home, corpora)
            built = True
        self._refs = {conv_id: dict(refs) for conv_id, refs in meta["refs"].items()}
        self._preloaded = {conv_id: _units_digest(units) for conv_id, units in corpora}
        self.cache_info = {
            "key": key,
            "hit": not built,
            "folder": str(home),
            "built_secs": meta.get("built_secs"),
            "copy_secs": copy_secs,
            "ready_secs": time.perf_counter() - began,
        }
        return not built

    async def _build(self, home: Path, corpora: Sequence[tuple[str, Sequence[Unit]]]) -> dict[str, Any]:
        import cpersona

        work = home.with_name(home.name + ".building")
        await anyio.to_thread.run_sync(functools.partial(shutil.rmtree, work, ignore_errors=True))
        began = time.perf_counter()
        refs: dict[str, dict[str, list[str]]] = {}
        async with cpersona.open(self._settings(work / "data"), background=False) as memory:
            for conv_id, units in corpora:
                refs[conv_id] = await _store_units(memory, conv_id, units)
            await memory.drain_blocks()
        meta = {
            "version": STORE_CACHE_VERSION,
            "key": home.name,
            "corpora": [[conv_id, len(units)] for conv_id, units in corpora],
            "refs": refs,
            "collections": await anyio.to_thread.run_sync(_collections, work / "data"),
            "built_secs": time.perf_counter() - began,
            "built_at": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "cpersona": cpersona.__version__,
        }
        await anyio.to_thread.run_sync(_finish_build, work, home, meta)
        return meta

    async def _reset(self) -> None:
        self._memory = None
        await self._stack.aclose()
        self._stack = contextlib.AsyncExitStack()

    async def index(self, conv_id: str, units: Sequence[Unit]) -> None:
        if conv_id in self._preloaded:
            if _units_digest(units) != self._preloaded[conv_id]:
                raise ValueError(f"{conv_id} was preloaded with other units than these")
            return
        memory = await self._engine()
        refs = await _store_units(memory, conv_id, units)
        known = self._refs.setdefault(conv_id, {})
        for ref, ids in refs.items():
            known.setdefault(ref, []).extend(ids)
        if hasattr(memory, "drain_blocks"):
            # Blocks are built after the store; measure with them in place, as a settled store has them.
            await memory.drain_blocks()

    async def search(self, conv_id: str, question: str, k: int) -> list[str]:
        memory = await self._engine()
        fields = {} if self._mode is None else {"mode": self._mode}
        result = await memory.recall(question, agent_id=conv_id, limit=k, **fields)
        ids: list[str] = []
        for row in result.rows:
            for unit_id in self.unit_ids(conv_id, row):
                if unit_id not in ids:
                    ids.append(unit_id)
        return ids[:k]

    async def aclose(self) -> None:
        await self._reset()


async def _store_units(memory: Any, conv_id: str, units: Sequence[Unit]) -> dict[str, list[str]]:
    """Store ``units`` in order as agent ``conv_id``; returns ref -> unit ids (duplicates share a ref)."""
    refs: dict[str, list[str]] = {}
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
    return refs


async def _matches(memory: Any, data_dir: Path, meta: dict[str, Any]) -> bool:
    """Whether the engine opened on a cached store sees what the build left: same collections, counts."""
    if await anyio.to_thread.run_sync(_collections, data_dir) != meta["collections"]:
        return False
    for conv_id, refs in meta["refs"].items():
        stats = await memory.stats(conv_id)
        if stats["memories"] != len(refs):
            return False
    return True


def _units_digest(units: Sequence[Unit]) -> str:
    digest = hashlib.sha256()
    for unit in units:
        part = [unit.unit_id, unit.content, repr(float(unit.timestamp)), unit.metadata]
        digest.update(json.dumps(part, sort_keys=True, ensure_ascii=False).encode())
        digest.update(b"\0")
    return digest.hexdigest()


def corpora_key(
    corpora: Sequence[tuple[str, Sequence[Unit]]], embedding_model: str = DEFAULT_EMBEDDING_MODEL
) -> str:
    """The store-cache key of a list of corpora: counts, a hash of keys, units, the embedding model and the
    engine's store layout (the source of :data:`STORE_LAYOUT_MODULES`), and the version. Reads those source
    files."""
    import importlib.util

    digest = hashlib.sha256()
    digest.update(f"{embedding_model}\n".encode())
    for module in STORE_LAYOUT_MODULES:
        spec = importlib.util.find_spec(f"cpersona.{module}")
        if spec is None or spec.origin is None:
            raise RuntimeError(f"cpersona.{module} not found: the store cache key cannot be computed")
        digest.update(Path(spec.origin).read_bytes())
    for conv_id, units in corpora:
        digest.update(json.dumps([conv_id, len(units), _units_digest(units)]).encode())
    units_total = sum(len(units) for _, units in corpora)
    return f"c{len(corpora)}-u{units_total}-{digest.hexdigest()[:16]}-v{STORE_CACHE_VERSION}"


def _read_meta(home: Path) -> dict[str, Any] | None:
    path = home / "meta.json"
    if not path.is_file():
        return None
    meta: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return meta if meta.get("version") == STORE_CACHE_VERSION else None


def _finish_build(work: Path, home: Path, meta: dict[str, Any]) -> None:
    # meta.json is written last and the folder renamed into place, so a build that dies half-way never
    # passes for a cached store.
    (work / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    shutil.rmtree(home, ignore_errors=True)
    work.rename(home)


def _copy_store(source: Path, target: Path) -> None:
    # The lock names whichever engine last had the store open; a copy starts unlocked.
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("engine.lock"))


def _collections(data_dir: Path) -> list[str]:
    root = data_dir / "qdrant"
    return sorted(p.name for p in root.iterdir()) if root.is_dir() else []


def _only(keep: frozenset[str]) -> Any:
    """An arm wrapper that lets only the ``keep`` arms run; the others answer with no rows."""
    from cpersona.model.candidates import ArmResult

    def wrap(name: str, call: Any) -> Any:
        if name in keep:
            return call

        async def nothing() -> ArmResult:
            return ArmResult(name, status="skipped", detail="switched off for this benchmark variant")  # type: ignore[arg-type]

        return nothing

    return wrap
