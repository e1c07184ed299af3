"""Stages 2 and 3: the candidates of ONE recall (``limit = top_k``), best first, and the context each
needs for bundling (project, channel, source, msg_id, time; an episode's span), read from the records
themselves. A held seat's row (``admission: "reservation"``) is flagged ``reserved``."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from cpersona.model.fields import validate
from cpersona.model.policy import PolicyOverlay
from cpersona.model.recall_query import RecallQuery
from cpersona.model.records import EpisodeRecord, MemoryRecord, parse_ref

if TYPE_CHECKING:
    from collections.abc import Mapping

    from cpersona.model.reconstruct_request import ReconstructRequest
    from cpersona.model.trace import RecallTrace, RecallTraceFailure
    from cpersona.settings import Settings
    from cpersona.stores.protocols import RecordReads

__all__ = [
    "KEYWORD_SEAT",
    "Candidate",
    "RecallPort",
    "RecallView",
    "Recalled",
    "RecalledRow",
    "recall_candidates",
]

_READS = 16  # record reads in flight at once


@dataclasses.dataclass(frozen=True, slots=True)
class RecalledRow:
    """What reconstruct reads of one returned row."""

    ref: str
    kind: str
    seated: bool
    timestamp: float | None


@dataclasses.dataclass(frozen=True, slots=True)
class RecallView:
    """The one recall as reconstruct sees it. ``best_blocks`` is, per record, the block the recall's
    block arm found nearest the query vector (quoting reuses it, so nothing is embedded twice);
    ``block_chars`` the policy's block length, to split passages as the block builder did."""

    rows: tuple[RecalledRow, ...]
    trace: RecallTrace | RecallTraceFailure | None
    time_cue: Mapping[str, Any] | None
    best_blocks: Mapping[str, int]
    block_chars: int


KEYWORD_SEAT = PolicyOverlay(keyword_seats=1)
"""What reconstruct asks of its recall's policy (§4.2 stage 2): one held keyword seat, as the reference's
reconstruct asks of its recall (§3.10); pro asks for more (:mod:`.modes`)."""


class RecallPort(Protocol):
    """Runs the one recall: the engine's recaller, handed in, since operations sit beside recall and
    import nothing of it. ``lexical_terms`` go to the lexical arms; ``overlay`` is applied over the
    policy the recall runs under."""

    async def __call__(
        self, query: RecallQuery, lexical_terms: tuple[str, ...], overlay: PolicyOverlay
    ) -> RecallView: ...


@dataclasses.dataclass(frozen=True, slots=True)
class Candidate:
    """One row of the pool: its rank (0 = most relevant) and what bundling and quoting read of it."""

    ref: str
    rank: int
    reserved: bool
    is_memory: bool
    text: str
    msg_id: str
    ts: float | None
    project: str
    channel: str
    source: tuple[str, str] | None
    span: tuple[float, float] | None = None  # an episode's [start, end]


@dataclasses.dataclass(frozen=True, slots=True)
class Recalled:
    view: RecallView
    candidates: tuple[Candidate, ...]


def _recall_query(req: ReconstructRequest, top_k: int, settings: Settings) -> RecallQuery:
    body: dict[str, Any] = {"agent_id": req.agent_id, "query": req.query, "limit": top_k, "deep": req.deep}
    body.update(source_id=req.source_id, trace=req.trace)
    for name in ("project_id", "channel", "time_cue"):
        if getattr(req, name) is not None:
            body[name] = getattr(req, name)
    return validate(RecallQuery, body, settings)


async def recall_candidates(
    recall: RecallPort,
    records: RecordReads,
    settings: Settings,
    req: ReconstructRequest,
    top_k: int,
    lexical_terms: tuple[str, ...],
    overlay: PolicyOverlay = KEYWORD_SEAT,
) -> Recalled:
    """Run the one recall and read its rows' records (a row deleted since is left out)."""
    view = await recall(_recall_query(req, top_k, settings), lexical_terms, overlay)
    rows = [row for row in view.rows if row.kind != "profile"]
    found = await _read_all(records, [row.ref for row in rows])
    kept = [row for row in rows if row.ref in found]
    pool = tuple(_candidate(row, found[row.ref], rank) for rank, row in enumerate(kept))
    return Recalled(view, pool)


def _candidate(row: RecalledRow, record: MemoryRecord | EpisodeRecord, rank: int) -> Candidate:
    scope = record.scope
    if isinstance(record, MemoryRecord):
        return Candidate(
            row.ref,
            rank,
            row.seated,
            True,
            record.content,
            record.msg_id,
            record.timestamp,
            scope.project_id,
            scope.channel,
            (record.source.type, record.source.id),
        )
    span = None
    if record.start_time is not None and record.end_time is not None:
        span = (record.start_time, record.end_time)
    return Candidate(
        row.ref,
        rank,
        row.seated,
        False,
        record.summary,
        "",
        row.timestamp,
        scope.project_id,
        scope.channel,
        None,
        span,
    )


async def _read_all(records: RecordReads, refs: list[str]) -> dict[str, MemoryRecord | EpisodeRecord]:
    found: dict[str, MemoryRecord | EpisodeRecord] = {}
    limiter = anyio.CapacityLimiter(_READS)

    async def read(ref: str) -> None:
        parsed = parse_ref(ref)
        if parsed is None or parsed.kind == "raw":
            return
        async with limiter:
            record = await records.get("memory" if parsed.kind == "mem" else "episode", parsed.id)
        if isinstance(record, MemoryRecord | EpisodeRecord):
            found[ref] = record

    async with anyio.create_task_group() as tg:
        for ref in refs:
            tg.start_soon(read, ref)
    return found
