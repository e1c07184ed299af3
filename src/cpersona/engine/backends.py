"""What an open engine holds: the clients and workers its steps run on, and the recaller over them."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping

    from cpersona.engine.workers.blocks import BlockBuilder
    from cpersona.operations.query.reconsolidation import ReconsolidationQueue
    from cpersona.recall.recaller import Recaller
    from cpersona.recall.trace.publisher import TracePublisher
    from cpersona.stores.cue_store import CueStore
    from cpersona.stores.key_store import KeyStore, RateLimits
    from cpersona.stores.protocols import Embedder, RecordStore, VectorStore
    from cpersona.stores.redis.connection import RedisClient
    from cpersona.stores.redis.server import EmbeddedRedis

__all__ = ["Backends"]


@dataclasses.dataclass(frozen=True, slots=True)
class Backends:
    """Opened together by :class:`~cpersona.engine.lifecycle.Lifecycle`, gone again when it closes."""

    redis: RedisClient
    records: RecordStore
    vectors: VectorStore | None
    embedder: Embedder | None
    redis_info: Mapping[str, Any]
    recaller: Recaller
    """Runs every recall over the stores above (its policies are the engine's own dict)."""
    blocks: VectorStore | None = None
    builder: BlockBuilder | None = None
    publisher: TracePublisher | None = None
    server: EmbeddedRedis | None = None
    """The engine's own Redis server; ``None`` with ``CPERSONA_REDIS_URL``."""
    cues: CueStore | None = None
    """The recall operations' reads beyond the record store's (emotion index, time ranges, batches)."""
    reconsolidation: ReconsolidationQueue | None = None
    """Strengthens what cue queries returned, after their answers (run in the background group)."""
    api_keys: KeyStore | None = None
    rate_limits: RateLimits | None = None
    """``None`` when ``CPERSONA_RATE_LIMIT_PER_SEC`` is 0 (nothing is limited)."""

    @property
    def key_store(self) -> KeyStore:
        api_keys = self.api_keys
        assert api_keys is not None
        return api_keys

    @property
    def trace_publisher(self) -> TracePublisher:
        publisher = self.publisher
        assert publisher is not None
        return publisher
