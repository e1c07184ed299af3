"""The validated writes: frozen drafts that the write path stores without further checks.

A draft is made by its request model (``StoreRequest.draft``, ``RawRequest.draft``,
``EpisodeRequest.draft``), which is the one place a write is checked.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from collections.abc import Mapping

    import numpy as np
    import numpy.typing as npt

    from cpersona.model.associations import Declaration
    from cpersona.model.records import (
        MemoryRecord,
        MetaMemory,
        RawSource,
        RawSpeaker,
        RawVisibility,
        Scope,
        SecrecyLevel,
    )

__all__ = ["CALLER_EMBEDDING", "EpisodeDraft", "MemoryDraft", "RawDraft", "WriteWarning"]

CALLER_EMBEDDING = "caller"
"""The ``embedding_model`` of a record whose vector the caller sent (a store's ``embedding``) rather than
the engine's embedder made. Nothing that embeds text may overwrite such a vector under this label: the
pending path never holds one (a store whose caller vector cannot be written fails instead), an update
that keeps the text keeps the vector, and one that changes the text embeds the new text under the
model's own name."""


WriteWarning = Literal["timestamp_ahead_of_clock"]
"""What a stored write may warn of (a timestamp ahead of the server clock, kept as sent)."""


@dataclasses.dataclass(frozen=True, slots=True, eq=False)  # a write under way: equal only to itself
class MemoryDraft:
    """A memory to store: the record as its request made it, and what its write needs besides."""

    record: MemoryRecord
    """The memory as it will be stored, but for what its write gives it (:meth:`written`): its id, its
    sequence number and its write time, which hold ``""``, ``0`` and ``0.0`` until then."""
    warnings: tuple[WriteWarning, ...]
    # The associative layer's declaration made with the store (its entities become the record's mentions).
    declared: Declaration | None = None
    # The caller's vector (read-only, the numbers sent), its dimension not yet checked (the engine knows
    # the index's), and the request field that named it, for the 400 (``records[3].embedding`` in a batch).
    embedding: npt.NDArray[np.float64] | None = None
    embedding_field: str = "embedding"

    def written(self, record_id: str, seq: int, now: float) -> MemoryRecord:
        """The record as the write stores it: given its id, its number, and ``now`` as its write time
        (when it was made, updated, last accessed and last decayed)."""
        return dataclasses.replace(
            self.record,
            id=record_id,
            seq=seq,
            fidelity=dataclasses.replace(self.record.fidelity, last_accessed_at=now, last_decay_tick=now),
            created_at=now,
            updated_at=now,
        )


@dataclasses.dataclass(frozen=True, slots=True)
class EpisodeDraft:
    scope: Scope
    summary: str
    keywords: tuple[str, ...]
    start_time: float | None
    end_time: float | None
    resolved: bool


@dataclasses.dataclass(frozen=True, slots=True)
class RawDraft:
    scope: Scope
    session_id: str
    source: RawSource
    speaker: RawSpeaker
    visibility: RawVisibility
    secrecy_level: SecrecyLevel
    content: str
    turn_id: str | None
    topic_id: str | None
    metadata: Mapping[str, Any]
    meta: MetaMemory
