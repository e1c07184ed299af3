"""What an open engine holds: the stores, vector collections and workers its steps run on, and the
recaller over them."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cpersona.engine.workers.blocks import BlockBuilder
    from cpersona.operations.query.reconsolidation import ReconsolidationQueue
    from cpersona.recall.recaller import Recaller
    from cpersona.recall.trace.publisher import TracePublisher
    from cpersona.stores.backends import Stores
    from cpersona.stores.protocols import Embedder, RecordStore, VectorStore

__all__ = ["Backends"]


@dataclasses.dataclass(frozen=True, slots=True)
class Backends:
    """Opened together by :class:`~cpersona.engine.lifecycle.Lifecycle`, gone again when it closes."""

    stores: Stores
    """The stores on Redis, one per role (:func:`~cpersona.stores.backends.open_stores`)."""
    vectors: VectorStore | None
    embedder: Embedder | None
    recaller: Recaller
    """Runs every recall over the stores above (its policies are the engine's own dict)."""
    blocks: VectorStore | None = None
    builder: BlockBuilder | None = None
    publisher: TracePublisher | None = None
    reconsolidation: ReconsolidationQueue | None = None
    """Strengthens what cue queries returned, after their answers (run in the background group)."""

    @property
    def records(self) -> RecordStore:
        """The record store, which nearly every step reads or writes (``stores.records``)."""
        return self.stores.records

    @property
    def trace_publisher(self) -> TracePublisher:
        publisher = self.publisher
        assert publisher is not None
        return publisher
