"""The values that cross the :class:`~cpersona.stores.protocols.RecordStore` protocol.

Kept apart from the protocols so the protocol module holds the interfaces alone; it re-exports every
name here, so callers import them from either.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Literal, NamedTuple

from cpersona.model.cmp_stats import MemoryState
from cpersona.model.records import Source

if TYPE_CHECKING:
    from cpersona.model.associations import Declaration
    from cpersona.model.records import MemoryRecord

__all__ = [
    "BlockParent",
    "ClaimHolder",
    "HydratedRecord",
    "InFlightWrite",
    "MemoryState",
    "MemoryWrite",
    "Period",
    "RecordCounts",
    "RecordKind",
    "SearchedKind",
    "SeqAt",
    "StoredProfile",
]

RecordKind = Literal["memory", "episode", "raw"]
SearchedKind = Literal["memory", "episode"]
Period = tuple[float, float]


@dataclasses.dataclass(frozen=True, slots=True)
class SeqAt:
    """How many records of a kind a scope holds, and the ``seq`` at one rank from the newest (``None``
    when the scope holds fewer)."""

    total: int
    seq: int | None


@dataclasses.dataclass(frozen=True, slots=True)
class RecordCounts:
    memories: int
    episodes: int
    raw_entries: int
    vector_pending: int


@dataclasses.dataclass(frozen=True, slots=True)
class ClaimHolder:
    """A dedup claim held by a record that still exists."""

    claim: str
    record_id: str


@dataclasses.dataclass(frozen=True, slots=True)
class InFlightWrite:
    """A memory or episode whose write has begun: its dedup claims are taken, its vector may exist, its
    document is not written yet."""

    kind: SearchedKind
    record_id: str
    claims: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class MemoryWrite:
    """One memory to write, with the dedup claims it takes (key names from :class:`~cpersona.keys.Keys`)
    and the associations declared with it (written in the same transaction)."""

    record: MemoryRecord
    claims: tuple[str, ...] = ()
    declared: Declaration | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class BlockParent:
    """What the block builder needs of a memory or an episode: its scope, time and searchable text."""

    kind: SearchedKind
    record_id: str
    agent_id: str
    project_id: str
    channel: str
    timestamp: float
    seq: int
    text: str
    vector_model: str = ""
    """The ``embedding_model`` of the record's vector when the record collection holds it for this text
    (embedded, not pending); ``""`` when it does not."""


class HydratedRecord(NamedTuple):
    """The fields of one memory or episode that a recall reads.

    ``text`` is the memory's content or the episode's summary (``None`` when the stored record has no such
    field); the ``source_*`` fields are a memory's source (an episode has none); ``ts`` is ``None`` when
    the record has no time. A named tuple: a recall hydrates every row its arms found, and a frozen
    dataclass per row measurably slowed it.
    """

    ref: str
    text: str | None
    source_type: str
    source_id: str
    source_name: str
    msg_id: str
    ts: float | None
    created_at: float
    embedded: bool

    @property
    def is_memory(self) -> bool:
        return self.ref.startswith("mem:")

    @property
    def source(self) -> Source | None:
        """A memory's source; ``None`` for an episode."""
        return Source(self.source_type, self.source_id, self.source_name) if self.is_memory else None

    def full_text(self) -> str:
        """The stored text, which a returned row must have."""
        if self.text is None:
            raise KeyError("content" if self.is_memory else "summary")
        return self.text


@dataclasses.dataclass(frozen=True, slots=True)
class StoredProfile:
    """The agent's profile, as a recall renders it."""

    content: str
