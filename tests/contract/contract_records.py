"""What the role contracts share: the bundle of roles an adapter gives, and records built here (not through
the engine), so each role is tested alone."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from cpersona.model.records import (
    NO_EMOTION,
    EmotionVector,
    EpisodeRecord,
    MemoryRecord,
    RawRecord,
    Scope,
    Source,
    StoreKind,
    new_id,
)
from cpersona.stores.record_values import MemoryWrite

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cpersona.stores.association_store import AssociationStore
    from cpersona.stores.fence_store import FenceStore
    from cpersona.stores.field_store import MemoryFieldStore
    from cpersona.stores.memory_reads import MemoryReadStore
    from cpersona.stores.raw_journal_store import RawJournalStore
    from cpersona.stores.recall_reads import RecallReads
    from cpersona.stores.record_reads import RecordReads
    from cpersona.stores.record_writes import RecordWrites
    from cpersona.stores.store_admin import StoreAdmin
    from cpersona.stores.write_journal import WriteJournal

BASE = 1_700_000_000.123456


class Roles(Protocol):
    """One adapter per role, all over the same records."""

    @property
    def recall_reads(self) -> RecallReads: ...
    @property
    def memory_reads(self) -> MemoryReadStore: ...
    @property
    def record_reads(self) -> RecordReads: ...
    @property
    def record_writes(self) -> RecordWrites: ...
    @property
    def write_journal(self) -> WriteJournal: ...
    @property
    def field_writes(self) -> MemoryFieldStore: ...
    @property
    def raw_journal(self) -> RawJournalStore: ...
    @property
    def associations(self) -> AssociationStore: ...
    @property
    def fences(self) -> FenceStore: ...
    @property
    def admin(self) -> StoreAdmin: ...


def memory(
    content: str,
    seq: int,
    *,
    agent: str = "a",
    project: str = "",
    channel: str = "",
    source: str = "",
    ts: float | None = None,
    pending: bool = False,
    store: StoreKind = "episodic",
    emotion: EmotionVector = NO_EMOTION,
) -> MemoryRecord:
    return MemoryRecord(
        id=new_id(),
        scope=Scope(agent, project, channel),
        source=Source("Agent", source, ""),
        content=content,
        timestamp=BASE + seq if ts is None else ts,
        seq=seq,
        vector_pending=pending,
        store=store,
        emotion=emotion,
    )


def episode(summary: str, seq: int, *, agent: str = "a", pending: bool = False) -> EpisodeRecord:
    return EpisodeRecord(
        id=new_id(),
        scope=Scope(agent),
        summary=summary,
        seq=seq,
        created_at=BASE + seq,
        vector_pending=pending,
    )


def raw(content: str, at: float, *, agent: str = "a", session: str = "s1") -> RawRecord:
    return RawRecord(new_id(), Scope(agent), session, "conversation", "user", "normal", "public", content, at)


async def put(writes: RecordWrites, *records: MemoryRecord, claims: Sequence[str] = ()) -> None:
    await writes.put_memories([MemoryWrite(r, tuple(claims)) for r in records], queue_blocks=False)


def refs(records: Sequence[MemoryRecord | EpisodeRecord | RawRecord]) -> list[str]:
    return [r.ref for r in records]
