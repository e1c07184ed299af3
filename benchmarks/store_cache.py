"""Stores of a corpus built once through the engine and cached, for the benchmarks that measure on them.

A store is built through ``store_batch`` (batches of :data:`BATCH`), then ``Engine.optimize()`` is called
(the embedded engine has no background optimiser) and timed, with a short single-caller probe before and
after, so the effect of the index build is visible. Built stores are cached under
``benchmarks/.cache/recall_speed/`` (gitignored), keyed by size, a hash of the corpus text,
:data:`CACHE_VERSION` (bump it when the engine's stored layout changes) and, for any model but
:data:`UNNAMED_MODEL`, the embedding model's name (a store's vectors
are its model's, and the engine refuses to open them with another). A larger store is grown from
the largest cached smaller one (a corpus is a prefix of every larger one), and an interrupted build
resumes where it stopped.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio
import anyio.to_thread
from tqdm import tqdm

import cpersona
from benchmarks.harness import git_commit
from benchmarks.recall_levels import AGENT, LIMIT, WARMUP, run_level
from cpersona import Settings
from cpersona.embedding_models import DEFAULT_EMBEDDING_MODEL

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "BATCH",
    "CACHE",
    "CACHE_VERSION",
    "REOPEN_SECS",
    "build_store",
    "cached_store",
    "collections",
    "corpus_key",
    "drain_blocks",
    "ingest",
    "settings_for",
    "wait_indexed",
]

CACHE: Final = Path(__file__).resolve().parent / ".cache" / "recall_speed"

CACHE_VERSION: Final = 1
"""Part of every cache key: bump it when a store built earlier no longer represents the engine."""

BATCH: Final = 256
REOPEN_SECS: Final = 600.0
"""How long a reopened store may take to answer: the embedded Redis replays its append-only file first."""

_PROBE_RECALLS = 100
_INDEX_WAIT_SECS = 300.0


UNNAMED_MODEL: Final = "all-MiniLM-L6-v2"
"""The model whose cached stores and results files name no model: the only one there was when they were
first written (the default then). Tied to the name, not to the default, so a change of default never
reads one model's store as another's."""


def corpus_key(corpus: Sequence[str], embedding_model: str = DEFAULT_EMBEDDING_MODEL) -> str:
    """The cache key of a store of ``corpus`` embedded with ``embedding_model``.

    :data:`UNNAMED_MODEL`'s key names no model, as keys did before there was a choice, so the stores
    cached then stay valid; any other model's name is appended.
    """
    digest = hashlib.sha256()
    for text in corpus:
        digest.update(text.encode())
        digest.update(b"\0")
    key = f"n{len(corpus)}-{digest.hexdigest()[:12]}-v{CACHE_VERSION}"
    return key if embedding_model == UNNAMED_MODEL else f"{key}-{embedding_model}"


def settings_for(data_dir: Path, embedding_model: str = DEFAULT_EMBEDDING_MODEL) -> Settings:
    # from_env({}) ignores CPERSONA_* variables of the shell: the figures are for the defaults, except the
    # query cache, which is off so that every recall pays for its embedding as a new question would,
    # and the embedding model, which is the caller's choice (the default unless it says otherwise).
    # The startup allowance is raised because a reopened store of 100k memories replays its append-only
    # file before the embedded Redis answers (the time is reported as "reopen").
    return Settings.from_env(
        {},
        data_dir=data_dir,
        embedding_cache_size=0,
        embedding_model=embedding_model,
        redis_startup_timeout_secs=REOPEN_SECS,
    )


def collections(data_dir: Path) -> list[str]:
    root = data_dir / "qdrant"
    return sorted(p.name for p in root.iterdir()) if root.is_dir() else []


async def wait_indexed(memory: cpersona.Engine, size: int) -> None:
    """Wait until the search index and the vector store hold every memory.

    A store reopened from its append-only file may still be re-indexing when the engine is up; a
    measurement then would search a partial index.
    """
    deadline = time.monotonic() + _INDEX_WAIT_SECS
    while True:
        stats = await memory.stats(AGENT)
        if stats["memories"] == size and stats["vectors"] == size and stats["vector_pending"] == 0:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"store not ready after {_INDEX_WAIT_SECS:.0f}s: {stats}")
        await anyio.sleep(0.5)


async def drain_blocks(memory: cpersona.Engine) -> None:
    # Engines that build block vectors off the write path must finish them before the store is measured.
    drain = getattr(memory, "drain_blocks", None)
    if drain is not None:
        await drain()


async def ingest(memory: cpersona.Engine, corpus: Sequence[str], start: int, label: str) -> dict[str, float]:
    # Memories go in in corpus order and each batch is one Redis transaction, so the count of stored
    # memories is where an interrupted build resumes.
    held = (await memory.stats(AGENT))["memories"]
    start = max(start, held)
    stored = skipped = 0
    began = time.perf_counter()
    with tqdm(total=len(corpus), initial=start, desc=label, unit="mem", file=sys.stderr) as bar:
        for first in range(start, len(corpus), BATCH):
            chunk = corpus[first : first + BATCH]
            result = await memory.store_batch([{"agent_id": AGENT, "content": text} for text in chunk])
            stored += result.stored
            skipped += result.skipped
            bar.update(len(chunk))
    store_secs = time.perf_counter() - began
    if skipped:
        raise RuntimeError(f"{skipped} memories were skipped as duplicates; the corpus must be unique")
    drained = time.perf_counter()
    await drain_blocks(memory)
    return {
        "stored": stored,
        "store_secs": store_secs,
        "records_per_sec": stored / store_secs if store_secs else 0.0,
        "drain_blocks_secs": time.perf_counter() - drained,
        "resumed_from": start,
    }


async def build_store(
    data_dir: Path,
    corpus: Sequence[str],
    start: int,
    questions: Sequence[str],
    probes: int,
    embedding_model: str = DEFAULT_EMBEDDING_MODEL,
) -> dict[str, Any]:
    """Ingest ``corpus[start:]`` into the store at ``data_dir`` (embedded with ``embedding_model``),
    optimise it, and say how that went."""
    async with cpersona.open(settings_for(data_dir, embedding_model)) as memory:
        meta: dict[str, Any] = {"size": len(corpus), "grown_from": start, "embedding_model": embedding_model}
        meta["ingest"] = await ingest(memory, corpus, start, f"ingest {len(corpus):,}")
        await wait_indexed(memory, len(corpus))
        for question in questions[:WARMUP]:
            await memory.recall(question, agent_id=AGENT, limit=LIMIT)
        before = await run_level(memory, questions, 1, probes)
        began = time.perf_counter()
        await memory.optimize()
        meta["optimize_secs"] = time.perf_counter() - began
        after = await run_level(memory, questions, 1, probes)
        meta["probe"] = {"recalls": probes, "before_p50_ms": before.pct(0.5), "after_p50_ms": after.pct(0.5)}
    meta["collections"] = await anyio.to_thread.run_sync(collections, data_dir)
    meta["built_at"] = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    meta["built_commit"] = git_commit()
    return meta


def _cached_meta(home: Path) -> dict[str, Any] | None:
    path = home / "meta.json"
    return json.loads(path.read_text()) if path.is_file() else None


def _start_build(
    work: Path, corpus: Sequence[str], smaller: Sequence[int], rebuild: bool, embedding_model: str
) -> int:
    """Seed ``work`` with the largest cached smaller store and return that store's size.

    An interrupted build (a long one is likely to meet a restart) is resumed where it stopped: its
    ``seed.json`` says what it started from, and :func:`ingest` skips what the store already holds.
    """
    seed = work / "seed.json"
    if not rebuild and seed.is_file() and (work / "data").is_dir():
        return int(json.loads(seed.read_text())["grown_from"])
    shutil.rmtree(work, ignore_errors=True)
    start = 0
    for size in sorted(smaller, reverse=True):
        base = CACHE / corpus_key(corpus[:size], embedding_model)
        if (base / "meta.json").is_file():
            shutil.copytree(base / "data", work / "data")
            start = size
            break
    (work / "data").mkdir(parents=True, exist_ok=True)
    seed.write_text(json.dumps({"grown_from": start}))
    return start


def _finish_build(work: Path, home: Path, meta: dict[str, Any]) -> None:
    # meta.json is written last and the directory renamed into place, so a build that dies half-way
    # never passes for a cached store.
    (work / "meta.json").write_text(json.dumps(meta, indent=2))
    shutil.rmtree(home, ignore_errors=True)
    work.rename(home)


async def cached_store(
    corpus: Sequence[str],
    smaller: Sequence[int],
    questions: Sequence[str],
    rebuild: bool,
    embedding_model: str = DEFAULT_EMBEDDING_MODEL,
) -> tuple[Path, dict[str, Any]]:
    """The cache directory holding a built store of ``corpus`` embedded with ``embedding_model`` (building
    it, from a smaller one of the same model if cached)."""
    key = corpus_key(corpus, embedding_model)
    home = CACHE / key
    meta = None if rebuild else await anyio.to_thread.run_sync(_cached_meta, home)
    if meta is not None:
        return home, {**meta, "from_cache": True}
    work = CACHE / f"{key}.building"
    start = await anyio.to_thread.run_sync(_start_build, work, corpus, smaller, rebuild, embedding_model)
    meta = await build_store(work / "data", corpus, start, questions, _PROBE_RECALLS, embedding_model)
    await anyio.to_thread.run_sync(_finish_build, work, home, meta)
    return home, {**meta, "from_cache": False}
