"""A qdrant-edge shard in the engine's own terms: its configuration, creating or loading it with its
payload indexes, and a :class:`~cpersona.stores.protocols.VectorFilter` as the engine's filter.

Everything here is synchronous and runs in the worker thread that :mod:`.edge` hands it to; the store
class keeps the deadlines, the chunking and the closing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import qdrant_edge as qe

from cpersona.errors import VectorStoreUnavailable
from cpersona.stores.vectors.common import PAYLOAD_INDEXES, IndexKind, MatchClause, filter_clauses

if TYPE_CHECKING:
    from pathlib import Path

    from cpersona.stores.protocols import VectorFilter

__all__ = ["edge_config", "edge_filter", "open_shard"]


def edge_config(dim: int, binary_quantized: bool, indexing_threshold_kb: int | None) -> qe.EdgeConfig:
    """The shard's configuration: cosine vectors of ``dim``, optionally a 1-bit copy and an indexing
    threshold (``None``: the engine's default)."""
    return qe.EdgeConfig(
        vectors=qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine),
        quantization_config=qe.BinaryQuantizationConfig(always_ram=True) if binary_quantized else None,
        optimizers=(
            None
            if indexing_threshold_kb is None
            else qe.EdgeOptimizersConfig(indexing_threshold=indexing_threshold_kb)
        ),
    )


def _schema(kind: IndexKind) -> qe.PayloadSchemaType | qe.KeywordIndexParams:
    if kind == "tenant":
        return qe.KeywordIndexParams(is_tenant=True)
    if kind == "keyword":
        return qe.PayloadSchemaType.Keyword
    if kind == "float":
        return qe.PayloadSchemaType.Float
    return qe.PayloadSchemaType.Integer


def edge_filter(flt: VectorFilter) -> qe.Filter:
    must: list[qe.FieldCondition] = []
    for clause in filter_clauses(flt):
        if isinstance(clause, MatchClause):
            values = list(clause.values)
            match = qe.MatchValue(values[0]) if len(values) == 1 else qe.MatchAny(values)
            must.append(qe.FieldCondition(key=clause.key, match=match))
        else:
            must.append(qe.FieldCondition(key=clause.key, range=qe.RangeFloat(gte=clause.gte, lt=clause.lt)))
    return qe.Filter(must=list(must))


def open_shard(path: Path, config: qe.EdgeConfig, label: str, dim: int) -> qe.EdgeShard:
    """Create the shard, or load it and check it against ``config``; then make sure its indexes exist."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        try:
            shard = qe.EdgeShard.load(str(path), config)
        except Exception as exc:
            _explain_load_failure(path, label, dim, exc)
            raise
    else:
        shard = qe.EdgeShard.create(str(path), config)
    try:
        present = set(shard.info().payload_schema)
        missing = [(key, kind) for key, kind in PAYLOAD_INDEXES.items() if key not in present]
        for key, kind in missing:
            shard.update(qe.UpdateOperation.create_field_index(key, _schema(kind)))
        if missing:
            shard.flush()
    except BaseException:
        shard.close()
        raise
    return shard


def _explain_load_failure(path: Path, label: str, dim: int, exc: Exception) -> None:
    """Raise a clear error when it is our configuration, not the data, that the shard refused.

    A load without a configuration succeeds when the data is readable, so if it does, the shard holds
    vectors of another size (or metric) than requested. The engine's own message says which.
    """
    try:
        probe = qe.EdgeShard.load(str(path))
    except Exception:
        if "WouldBlock" in str(exc):
            raise VectorStoreUnavailable(
                f"{label} is already open in another process or store (its write-ahead log is locked)"
            ) from exc
        return
    probe.close()
    raise VectorStoreUnavailable(
        f"{label} already exists with a different vector configuration than the {dim}-d cosine vectors "
        f"requested (a different embedding model?); use another collection name or remove its directory. "
        f"Engine: {exc}"
    ) from exc
