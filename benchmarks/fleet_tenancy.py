"""Shard configurations for a fleet, compared on the engine's own vector-store adapter (issue 17 target 3).

Qdrant's multitenancy guidance for many small tenants is one collection with the tenant as an indexed
``is_tenant`` keyword, and, where building the index is the bottleneck, no global HNSW graph (``m=0``)
but one per tenant (``payload_m=16``). The engine already keys every collection by ``agent_id`` as a
tenant (``stores/vectors/common.py``, ``PAYLOAD_INDEXES``) and leaves HNSW at qdrant-edge's defaults.
This module measures, on shards of the fleet's first agents and the caller vectors of their memories,
what each configuration costs to build and what the filtered search in one agent's scope costs before
and after ``optimize()``:

* the engine's configuration (:func:`~cpersona.stores.vectors.edge_worker.shard_config`, HNSW defaults);
* the guidance: ``m=0, payload_m=16`` (Qdrant's defaults for ``ef_construct`` and the full-scan
  threshold), the engine's payload indexes;
* the guidance with per-value graphs only for the tenant: the other keyword indexes declared with
  ``enable_hnsw=False``, since with ``payload_m`` the optimiser builds a graph for every value of an
  indexed keyword field, and ``kind``, ``project_id`` and ``channel`` hold one value for the whole fleet.

Each shard is written and searched through :class:`~cpersona.stores.vectors.edge.EdgeVectorStore`, the
adapter the engine uses, with the engine's payload and filter. The engine's configuration is not changed
here; the report says what the figures suggest.
"""

from __future__ import annotations

import importlib.metadata
import tempfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio.to_thread
import qdrant_edge as qe

from benchmarks.harness import percentile
from benchmarks.quality.embed_cache import EmbeddingCache
from benchmarks.recall_levels import LIMIT
from cpersona.stores.protocols import VectorFilter, VectorPoint
from cpersona.stores.vectors.common import PAYLOAD_INDEXES
from cpersona.stores.vectors.edge import EdgeVectorStore
from cpersona.stores.vectors.edge_gate import ThreadLink
from cpersona.stores.vectors.edge_worker import ShardOps, shard_config

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    import numpy as np
    import numpy.typing as npt

__all__ = ["CONFIGS", "compare", "section"]

_DIM = 384
_WRITE = 1_000
_TIMEOUT = 3_600.0


def _guidance(dim: int) -> qe.EdgeConfig:
    return qe.EdgeConfig(
        vectors=qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine),
        hnsw_config=qe.HnswIndexConfig(m=0, ef_construct=100, full_scan_threshold=10_000, payload_m=16),
    )


def _index(kind: str, *, tenant_graphs_only: bool) -> qe.PayloadSchemaType | qe.KeywordIndexParams:
    if kind == "tenant":
        return qe.KeywordIndexParams(is_tenant=True)
    if kind == "keyword":
        return (
            qe.KeywordIndexParams(enable_hnsw=False) if tenant_graphs_only else qe.PayloadSchemaType.Keyword
        )
    return qe.PayloadSchemaType.Float if kind == "float" else qe.PayloadSchemaType.Integer


CONFIGS: dict[str, tuple[Callable[[int], qe.EdgeConfig], bool]] = {
    "engine (HNSW defaults)": (lambda dim: shard_config(dim, False, None), False),
    "guidance: m=0, payload_m=16": (_guidance, False),
    "guidance, graphs for the tenant only": (_guidance, True),
}
"""Name: (the shard's configuration, whether the non-tenant keyword indexes build no graphs)."""


def _create(path: Path, config: qe.EdgeConfig, tenant_graphs_only: bool) -> qe.EdgeShard:
    shard = qe.EdgeShard.create(str(path), config)
    for key, kind in PAYLOAD_INDEXES.items():
        shard.update(
            qe.UpdateOperation.create_field_index(key, _index(kind, tenant_graphs_only=tenant_graphs_only))
        )
    shard.flush()
    return shard


async def _searches(store: EdgeVectorStore, queries: npt.NDArray[np.float32], scope: str) -> dict[str, float]:
    flt = VectorFilter(agent_id=scope)
    ms = []
    for query in queries:
        began = time.perf_counter()
        await store.search(query.tolist(), flt, LIMIT)
        ms.append((time.perf_counter() - began) * 1000)
    return {"p50_ms": percentile(ms, 0.5), "p95_ms": percentile(ms, 0.95)}


async def _one(
    name: str,
    points: Sequence[VectorPoint],
    queries: npt.NDArray[np.float32],
    scope: str,
    tmp: Path,
) -> dict[str, Any]:
    make, tenant_only = CONFIGS[name]
    path = tmp / uuid.uuid4().hex
    shard = await anyio.to_thread.run_sync(_create, path, make(_DIM), tenant_only)
    version = importlib.metadata.version("qdrant-edge-py")
    # The shard is built here with a configuration of its own, so the store gets it in thread mode.
    link = ThreadLink(ShardOps(shard, oversampling=None), str(path), _TIMEOUT)
    store = EdgeVectorStore(
        link,
        path=path,
        name=path.name,
        dim=_DIM,
        timeout_secs=_TIMEOUT,
        binary_quantized=False,
        version=version,
    )
    async with store:
        began = time.perf_counter()
        for first in range(0, len(points), _WRITE):
            await store.upsert(points[first : first + _WRITE])
        out: dict[str, Any] = {
            "config": name,
            "points": len(points),
            "upsert_secs": time.perf_counter() - began,
        }
        out["before"] = await _searches(store, queries, scope)
        began = time.perf_counter()
        await store.optimize(timeout_secs=_TIMEOUT)
        out["optimize_secs"] = time.perf_counter() - began
        out["after"] = await _searches(store, queries, scope)
        info = shard.info()
        out["indexed_vectors"], out["segments"] = info.indexed_vectors_count, info.segments_count
    return out


async def compare(
    agents: Sequence[tuple[str, Sequence[str]]],
    vector_of: Callable[[str], npt.NDArray[np.float32]],
    questions: Sequence[str],
    searches: int,
) -> list[dict[str, Any]]:
    """Build a shard of these agents' memories in each configuration and time it and ``searches``
    searches in the scope of the middle agent, before and after ``optimize()``."""
    scope = agents[len(agents) // 2][0]
    members = ((a, t) for a, texts in agents for t in texts)
    points = [
        VectorPoint(str(uuid.uuid4()), vector_of(text), "memory", agent, "", "", float(seq), seq)
        for seq, (agent, text) in enumerate(members, 1)
    ]
    async with EmbeddingCache() as cache:
        queries = await cache.embed(
            [questions[n % len(questions)] for n in range(searches)], desc="questions"
        )
    with tempfile.TemporaryDirectory(prefix="fleet-tenancy-") as tmp:
        return [await _one(name, points, queries, scope, Path(tmp)) for name in CONFIGS]


def section(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The report's section on the comparison (nothing when it did not run)."""
    if not rows:
        return []
    lines = [
        "## Shard configuration for a fleet (Qdrant's multitenancy guidance)",
        "",
        f"One shard of the fleet's first {rows[0]['points']:,} memories (same agents, vectors and payload) "
        "per configuration, written and searched through the engine's own adapter (`EdgeVectorStore`); "
        "the search is the memory arm's, in the middle agent's scope (`limit=10`). "
        "See `benchmarks/fleet_tenancy.py` for the configurations.",
        "",
        "| configuration | upsert s | search p50 / p95 ms, not optimized | optimize s "
        "| search p50 / p95 ms, optimized | indexed vectors | segments |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        b, a = r["before"], r["after"]
        lines.append(
            f"| {r['config']} | {r['upsert_secs']:.1f} | {b['p50_ms']:.2f} / {b['p95_ms']:.2f} "
            f"| {r['optimize_secs']:.1f} | {a['p50_ms']:.2f} / {a['p95_ms']:.2f} | {r['indexed_vectors']:,} "
            f"| {r['segments']} |"
        )
    engine = rows[0]
    if not engine["indexed_vectors"]:
        note = "no configuration built an index: the shard is under the indexing threshold"
        return [*lines, "", f"- At {engine['points']:,} points {note}.", ""]
    cheapest = min(rows, key=lambda r: r["optimize_secs"])
    before, after = engine["before"]["p50_ms"], engine["after"]["p50_ms"]
    effect = (
        "the index build does not make it faster: an agent's points are few enough that the planner reads "
        "them from the tenant index and scores them exactly"
        if after >= 0.9 * before
        else f"the index build makes it {before / after:.1f}x faster"
    )
    lines += [
        "",
        f"- A scoped search costs {before:.2f} ms p50 on the engine's configuration before its index build "
        f"and {after:.2f} ms after: {effect}.",
        f"- The cheapest index build is {cheapest['config']} ({cheapest['optimize_secs']:.1f} s, against "
        f"{engine['optimize_secs']:.1f} s for the engine's). With `payload_m` the optimiser builds a graph "
        "for each value of an indexed keyword field with enough points, and `kind`, `project_id` and "
        "`channel` have one value across the whole fleet here.",
        "",
    ]
    return lines
