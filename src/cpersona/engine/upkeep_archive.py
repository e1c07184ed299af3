"""Export and import of one agent's memory as a JSON Lines archive (form: :mod:`cpersona.operations.
lifecycle.archive`).

Export yields the archive line by line, reading the store a batch at a time, so a large agent never sits
whole in memory on the way to a file. It writes each record as stored (a memory's fidelity anchor, not
its value at the moment of reading), so an import restores the same state. A sealed raw entry is never
exported: the record store reads it to no one but the raw query that asks for sealed entries, and an
archive is no such query.

Import reads the whole archive twice: once to check its header, every line, the footer's checksum and
who holds its ids (nothing is written from an archive that fails), once to write. Record ids are unique
in the store, not per agent, which gives three cases:

- **Into the agent it came from, or into a store that holds none of its ids** (a restore, a move to
  another store): records keep their ids.
- **Into another agent of the store it came from** (an id of it is held by another agent): the import is
  a copy (:mod:`~cpersona.operations.lifecycle.copying`). Every record takes the id derived from (this
  agent, its id) and every reference in the archive follows, so the copy is whole in itself and the
  source agent is untouched. ``copied`` in the answer says so.
- **The same archive copied into the same agent again**: the ids its copy would take are held by this
  agent already, so it is a copy again, under the same ids, and the conflict rule decides each of them as
  below (with ``keep_newer``, an unchanged archive writes nothing). This holds even once the source agent
  is gone.

``merge`` adds to what the agent holds; a record id the agent already holds is decided by
``conflict_resolution`` (``keep_newer`` compares ``updated_at`` — an episode's ``created_at``, a raw
entry's ``created_at`` — and keeps the held one on a tie). ``replace`` deletes all of the agent's data
first; unlike the reference it keeps no snapshot to roll back to, so an import that fails part way leaves
what it wrote so far (the archive was checked before the delete, so only a backend failure can do that).
An import never overwrites another scope: when even the id a copy would take is held by another agent
(an archive made by hand to name it), or another agent takes an id between the check and the write, the
answer is a 409 ``IMPORT_CONFLICT``, one fixed answer that names neither the record nor who holds it, as
a read of another agent's record answers as for one that never was. A memory whose content or caller id
duplicates one the agent already holds (under another id) is skipped, as a store is.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import TYPE_CHECKING

import anyio

from cpersona.engine.claims import record_claims, reservation_secs
from cpersona.engine.deletes import delete, delete_agent_data
from cpersona.engine.disk import check_free_space
from cpersona.engine.reads import agent_memories
from cpersona.engine.vector_writes import abandoned_on_failure, with_vectors
from cpersona.errors import ImportConflict, InvalidRequest
from cpersona.model.lifecycle_responses import ExportResult, ImportResult
from cpersona.model.records import EpisodeRecord, MemoryRecord, ProfileRecord, RawRecord
from cpersona.operations.lifecycle.archive import (
    ArchiveReader,
    Checksum,
    archive_id,
    archived_time,
    footer_line,
    graph_line,
    header_line,
    record_line,
)
from cpersona.operations.lifecycle.copying import copied, copied_id
from cpersona.operations.lifecycle.sealing import is_sealed, open_sealed, seal
from cpersona.stores.association_values import AssociationGraph
from cpersona.stores.protocols import InFlightWrite, MemoryWrite

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable

    from cpersona.engine.lifecycle import Lifecycle
    from cpersona.model.lifecycle_requests import ConflictRule, ExportRequest, ImportRequest
    from cpersona.operations.lifecycle.archive import ArchivedRecord
    from cpersona.stores.protocols import RecordKind

__all__ = ["export", "export_lines", "import_archive", "import_lines"]

_BATCH = 64


async def _others(
    life: Lifecycle, kind: RecordKind, agent_id: str
) -> AsyncIterator[EpisodeRecord | RawRecord]:
    records = life.backends.records
    for record_id in await records.record_ids(kind, agent_id):
        record = await records.get(kind, record_id)
        if isinstance(record, EpisodeRecord | RawRecord) and record.scope.agent_id == agent_id:
            yield record


async def _lines(life: Lifecycle, req: ExportRequest, total: Checksum) -> AsyncGenerator[bytes, None]:
    agent = req.agent_id
    stores = None if req.stores is None else sorted(set(req.stores))
    yield total.add(header_line(include_raw_journal=req.include_raw_journal, stores=stores), record=False)
    async for memory in agent_memories(life, agent):
        if stores is None or memory.store in stores:
            yield total.add(record_line(memory))
    kinds: tuple[RecordKind, ...] = ("episode", "raw") if req.include_raw_journal else ("episode",)
    for kind in kinds:
        async for other in _others(life, kind, agent):
            yield total.add(record_line(other))
    profile = await life.backends.records.profile(agent)
    if profile is not None:
        yield total.add(record_line(profile))
    # The associative layer only with every store: its mentions and relations name records of them all.
    if stores is None:
        for graph in await life.backends.records.association_graphs(agent):
            yield total.add(graph_line(graph), record=False)
    yield footer_line(total.records, total.hexdigest())


async def export_lines(life: Lifecycle, req: ExportRequest) -> AsyncGenerator[bytes, None]:
    """The archive of one agent, one line at a time: header, memories (insertion order), episodes, raw
    entries (with ``include_raw_journal``), the profile, the footer. Never encrypted: a stream is sealed
    whole or not at all (:func:`export` seals)."""
    if req.encrypt:
        raise InvalidRequest("encrypt", "a streamed export is not encrypted; export it whole to encrypt it")
    async with contextlib.aclosing(_lines(life, req, Checksum())) as lines:
        async for line in lines:
            yield line


async def export(life: Lifecycle, req: ExportRequest) -> ExportResult:
    """The archive whole, encrypted when asked (AES-256-GCM, :mod:`~cpersona.operations.lifecycle.sealing`);
    the checksum is of the plain archive's lines either way."""
    total = Checksum()
    data = b"".join([line async for line in _lines(life, req, total)])
    if req.encryption_key is not None:
        data = await anyio.to_thread.run_sync(seal, data, req.encryption_key)
    digest = total.hexdigest()
    return ExportResult(
        archive_id=archive_id(digest),
        size_bytes=len(data),
        record_count=total.records,
        checksum=digest,
        archive_data=data,
    )


def _kind(record: MemoryRecord | EpisodeRecord | RawRecord) -> RecordKind:
    if isinstance(record, MemoryRecord):
        return "memory"
    return "episode" if isinstance(record, EpisodeRecord) else "raw"


def _conflict(*, checked: bool = True) -> ImportConflict:
    """The one answer to an id held elsewhere, whichever record and whoever holds it: naming either would
    tell the caller of an id in another agent's scope. ``checked``: found before any write."""
    written = "nothing of the archive was written" if checked else "the import stopped there"
    return ImportConflict(
        "archive_data",
        f"holds a record id this agent cannot take, nor the id its copy would take (an id is unique in "
        f"the store); {written}",
    )


@dataclasses.dataclass
class _Held:
    """What the check found of the archive's ids in the store (read before any write)."""

    foreign: bool = False
    """An id of the archive is held by another agent: the import is a copy."""
    copied: bool = False
    """The id a record's copy would take is held by this agent: it was copied here before."""
    taken: bool = False
    """The id a record's copy would take is held by another agent: no copy can be written."""

    @property
    def copy(self) -> bool:
        return self.foreign or self.copied


async def _holders(life: Lifecycle, agent_id: str, batch: list[ArchivedRecord], held: _Held) -> None:
    """Who holds each record's id, and who the id its copy would take (all read concurrently)."""
    records = life.backends.records

    async def original(kind: RecordKind, record_id: str) -> None:
        found = await records.get(kind, record_id)
        if found is not None and found.scope.agent_id != agent_id:
            held.foreign = True

    async def copy(kind: RecordKind, record_id: str) -> None:
        found = await records.get(kind, copied_id(agent_id, record_id))
        if found is not None:
            if found.scope.agent_id == agent_id:
                held.copied = True
            else:
                held.taken = True

    async with anyio.create_task_group() as tg:
        for record in batch:
            if not isinstance(record, ProfileRecord):
                tg.start_soon(original, _kind(record), record.id)
                tg.start_soon(copy, _kind(record), record.id)


async def _check(life: Lifecycle, agent_id: str, lines: Iterable[bytes]) -> bool:
    """Every line, the footer's checksum, and whose ids the archive's are, before any write: whether
    the import is a copy (:mod:`~cpersona.operations.lifecycle.copying`)."""
    reader = ArchiveReader(agent_id)
    held = _Held()
    batch: list[ArchivedRecord] = []
    for line in lines:
        record = reader.read(line)
        if record is not None and not isinstance(record, AssociationGraph):
            batch.append(record)
        if len(batch) >= _BATCH:
            await _holders(life, agent_id, batch, held)
            batch = []
    reader.finish()
    await _holders(life, agent_id, batch, held)
    if held.copy and held.taken:
        raise _conflict()
    return held.copy


async def import_archive(
    life: Lifecycle, req: ImportRequest, progress: Callable[[int], None] | None = None
) -> ImportResult:
    """An archive's bytes, opened first when it is encrypted."""
    data = req.archive_data
    if is_sealed(data):
        if req.decryption_key is None:
            raise InvalidRequest("decryption_key", "is required: the archive is encrypted")
        data = await anyio.to_thread.run_sync(open_sealed, data, req.decryption_key)
    elif req.decryption_key is not None:
        raise InvalidRequest("decryption_key", "is given, but the archive is not encrypted")
    return await import_lines(life, req, lambda: data.splitlines(keepends=True), progress)


async def import_lines(
    life: Lifecycle,
    req: ImportRequest,
    lines: Callable[[], Iterable[bytes]],
    progress: Callable[[int], None] | None = None,
) -> ImportResult:
    """Import an archive whose lines ``lines()`` gives (it is called twice: check, then write), under
    ``req``'s agent, strategy and conflict rule."""
    copy = await _check(life, req.agent_id, lines())
    await check_free_space(life.settings)
    if req.strategy == "replace":
        await delete_agent_data(life, req.agent_id)
    writer = _Writer(life, req.agent_id, req.conflict_resolution)
    reader = ArchiveReader(req.agent_id)
    batch: list[ArchivedRecord] = []
    graphs: list[AssociationGraph] = []
    for line in lines():
        record = reader.read(line)
        if copy and record is not None:
            record = copied(req.agent_id, record)
        if isinstance(record, AssociationGraph):
            graphs.append(record)
        elif record is not None:
            batch.append(record)
        if len(batch) >= _BATCH:
            await writer.write(batch)
            if progress is not None:
                progress(len(batch))
            batch = []
    await writer.write(batch)
    if progress is not None and batch:
        progress(len(batch))
    # After the records its mentions and relations name; added to what the agent declared.
    await life.backends.records.restore_association_graphs(req.agent_id, graphs)
    return ImportResult(
        records_imported=writer.imported, records_skipped=writer.skipped, strategy=req.strategy, copied=copy
    )


def _stamp(record: ArchivedRecord) -> float:
    return record.updated_at if isinstance(record, MemoryRecord | ProfileRecord) else record.created_at


@dataclasses.dataclass
class _Writer:
    life: Lifecycle
    agent_id: str
    conflict: ConflictRule
    imported: int = 0
    skipped: int = 0

    def _wins(self, held: ArchivedRecord, imported: ArchivedRecord) -> bool:
        if self.conflict == "keep_imported":
            return True
        # Compared at the archive's precision: a record exported and imported again is not newer than itself.
        return self.conflict == "keep_newer" and _stamp(imported) > archived_time(_stamp(held))

    async def _admitted(self, record: ArchivedRecord) -> bool:
        """Whether the record is to be written: new, or winning over the one the agent holds (which goes)."""
        b = self.life.backends
        if isinstance(record, ProfileRecord):
            held_profile = await b.records.profile(self.agent_id)
            return held_profile is None or self._wins(held_profile, record)
        held = await b.records.get(_kind(record), record.id)
        if held is None:
            return True
        if held.scope.agent_id != self.agent_id:  # taken meanwhile: the check before the writes passed
            raise _conflict(checked=False)
        if not self._wins(held, record):
            return False
        await delete(self.life, record.ref, self.agent_id)
        return True

    async def write(self, batch: list[ArchivedRecord]) -> None:
        admitted = []
        for record in batch:
            if await self._admitted(record):
                admitted.append(record)
            else:
                self.skipped += 1
        memories = [r for r in admitted if isinstance(r, MemoryRecord)]
        await self._memories(memories)
        for record in admitted:
            if isinstance(record, EpisodeRecord):
                await self._episode(record)
            elif isinstance(record, RawRecord):
                await self.life.backends.records.put_raw([record])
            elif isinstance(record, ProfileRecord):
                await self.life.backends.records.put_profile(record)
        self.imported += len(admitted) - len(memories)

    async def _memories(self, memories: list[MemoryRecord]) -> None:
        if not memories:
            return
        b, keys = self.life.backends, self.life.keys
        first = await b.records.next_seq(len(memories))
        numbered = [dataclasses.replace(m, seq=first + n) for n, m in enumerate(memories)]
        writes = [InFlightWrite("memory", m.id, tuple(record_claims(keys, m))) for m in numbered]
        holders = await b.records.reserve_writes(writes, ttl_secs=reservation_secs(self.life.settings))
        taken = [(m, w) for m, w, h in zip(numbered, writes, holders, strict=True) if h is None]
        self.skipped += len(numbered) - len(taken)
        if not taken:
            return
        async with abandoned_on_failure(b, [w for _, w in taken]):
            records = await with_vectors(b, [m for m, _ in taken])
            puts = [MemoryWrite(r, w.claims) for r, (_, w) in zip(records, taken, strict=True)]
            await b.records.put_memories(puts, queue_blocks=b.builder is not None)
        self.imported += len(taken)

    async def _episode(self, record: EpisodeRecord) -> None:
        b = self.life.backends
        record = dataclasses.replace(record, seq=await b.records.next_seq())
        in_flight = [InFlightWrite("episode", record.id)]
        await b.records.reserve_writes(in_flight, ttl_secs=reservation_secs(self.life.settings))
        async with abandoned_on_failure(b, in_flight):
            (record,) = await with_vectors(b, [record])
            await b.records.put_episode(record, queue_blocks=b.builder is not None)
