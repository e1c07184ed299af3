"""Re-embedding a store with the configured model (``cpersona reembed``).

An engine refuses a store whose vectors another model made (:mod:`~cpersona.engine.vector_model`); this
is the way on. It opens the store without that check, marks every memory and episode pending, empties the
vector collections, records the configured model, then writes every record's vector again through the
pending path and rebuilds the blocks. Stopped half way, the store is left as one of the new model with its
remaining records pending: the next start, or this again, finishes them. A caller's own vectors are
replaced by the model's too (they were another model's, and nothing keeps them to carry over).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from cpersona.engine.lifecycle import Lifecycle, checked_policies, drain_blocks
from cpersona.engine.vector_model import VectorModel
from cpersona.engine.vector_writes import finish_pending
from cpersona.keys import Keys

if TYPE_CHECKING:
    from collections.abc import Callable

    from cpersona.settings import Settings

__all__ = ["Reembedded", "reembed"]


@dataclasses.dataclass(frozen=True, slots=True)
class Reembedded:
    model: str
    """The model the store's vectors are now made with, as the store records it."""
    records: int
    """Records whose vector was written."""
    pending: int
    """Records left pending (the embedder or the vector store failed for them; the next start retries)."""
    blocks: int
    """Block events processed."""


async def reembed(settings: Settings, progress: Callable[[int, int], None] | None = None) -> Reembedded:
    """Re-embed every record of the store ``settings`` name with its configured model; ``progress`` is
    called with the records done so far and the total after each batch."""
    life = Lifecycle(settings, Keys(settings.key_prefix), checked_policies(settings), None)
    await life.open(reembed=True)
    try:
        b = life.backends
        assert b.embedder is not None
        written = await finish_pending(b, progress)
        pending = len(await b.records.pending_refs())
        blocks = await drain_blocks(b)
        return Reembedded(str(VectorModel.of(b.embedder)), written, pending, blocks)
    finally:
        await life.close()
