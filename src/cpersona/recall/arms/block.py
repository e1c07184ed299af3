"""Blocks: clause-sized spans of a record, each with its own vector, and the arm that searches them.

A long memory embeds into one vector that averages everything it says, so a question about one of its
paragraphs may miss it. Blocks give every sentence-or-so of a record a vector of its own, in a second
vector collection (``"blocks"``, binary quantised, rescored with the original vectors). The block arm
finds the best blocks for the query, collapses them to their record, and its rows enter a recall only
through the held block seats.

This module holds the three parts:

:func:`split_blocks`
    Cuts a text into spans, deterministically, at structural boundaries only.
:class:`BlockBuilder`
    Builds block vectors off the write path. A store appends ``{key: <record key>}`` to a Redis stream
    in the same transaction as the document, so an acknowledged record always has its event. A consumer
    group hands batches of events to workers, which split, embed (one call per batch), upsert and then
    acknowledge. Rebuilding a record rewrites the same point ids, so any event may be processed twice.
:func:`block_arm`
    The recall arm over the block collection.

Block point ids are UUIDv5 of ``"<parent id>/<block index>"`` under a namespace per parent kind (one
for memories, one for episodes). A search hit carries the parent id and block index in its payload, so
recomputing the id under each namespace tells whether the parent is a memory or an episode without a
payload field the record collection has no use for, and without a Redis round trip on the recall path.
A hit whose id matches neither namespace was not written here and is ignored.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import re
import socket
import time
import uuid
from typing import TYPE_CHECKING, Any, Literal

import anyio
import redis.exceptions

from cpersona.errors import BackendUnavailable
from cpersona.model.candidates import ArmResult, ArmRow
from cpersona.stores.protocols import VectorFilter, VectorPoint, scope_filter
from cpersona.stores.redis.connection import command, json_ops, redis_errors
from cpersona.stores.vectors.common import open_tail_start

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from anyio.abc import TaskStatus

    from cpersona.keys import Keys
    from cpersona.model.scope import ReadScope
    from cpersona.stores.protocols import Embedder, Vector, VectorHit, VectorStore
    from cpersona.stores.redis.connection import RedisClient

__all__ = [
    "MAX_BLOCK_CHARS",
    "BlockBuilder",
    "ParentKind",
    "block_arm",
    "block_filter",
    "block_id",
    "block_ids",
    "parent_kind_of",
    "split_blocks",
]

log = logging.getLogger("cpersona.blocks")

ParentKind = Literal["memory", "episode"]

MAX_BLOCK_CHARS = 739
"""The reference's block length cap; policies carry their own (``[blocks] max_chars``)."""

# ------------------------------------------------------------------------------------------ splitting

# 。 and the full-width period, exclamation mark and question mark end a sentence wherever they stand.
_WIDE_ENDS = frozenset("\u3002\uff0e\uff01\uff1f")
_ASCII_ENDS = frozenset(".!?")  # end a sentence only before whitespace or the end of the text
_PAIRS: Mapping[str, str] = {
    "(": ")", "[": "]", "{": "}", "「": "」", "『": "』",
    "\uff08": "\uff09",  # full-width parentheses
}  # fmt: skip
_CLOSERS: Mapping[str, str] = {close: open_ for open_, close in _PAIRS.items()}
_NEWLINES = frozenset("\n\r")
_COMMAS = frozenset(",、\uff0c")  # the last is the full-width comma
_FENCE = "```"

# Forced-cut preferences, strongest first: a blank line, a newline, a sentence end, a comma, a space.
_BLANK, _NEWLINE, _SENTENCE, _COMMA, _SPACE = range(5)


def split_blocks(text: str, *, max_chars: int = MAX_BLOCK_CHARS) -> list[tuple[int, int]]:
    """Cut ``text`` into ``(start, end)`` character spans that cover it in order, each ``<= max_chars``.

    Every structural boundary outside fenced code, brackets and quotes is a cut: a blank line, a
    newline, and a sentence end (``。`` and the full-width ``.!?`` anywhere; ``.!?`` before whitespace
    or the end; also a closing bracket or quote right after such a mark). Whitespace after a boundary
    stays with the span before it. A span still longer than ``max_chars`` has no allowed boundary, so
    it is forced apart near the limit at the strongest mark inside it (a blank line, a newline, a
    sentence end — these may sit inside code or quotes — then a comma, then a space), or hard at the
    limit; a fenced code block that fits in ``max_chars`` is never cut. A whitespace-only span folds
    into the span after it (or, at the end, before it) when the result fits.

    Brackets (``()[]{}「」『』`` and full-width parentheses) and ``"`` count only when matched, so a
    stray ``(`` or ``:)`` does not silence the rest of the text, and nothing is matched across a blank
    line: outside code, a paragraph break is always a cut. An unclosed fence runs to the end.
    """
    if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1:
        raise ValueError(f"max_chars must be a positive integer, got {max_chars!r}")
    n = len(text)
    if n == 0:
        return []
    fences = _fences(text)
    pairs = _matched_pairs(text, fences)
    # cut_blocked[c]: cutting at c (between text[c-1] and text[c]) would split a matched pair or a fence.
    depth = [0] * (n + 2)
    for open_at, close_at in pairs:
        depth[open_at + 1] += 1
        depth[close_at + 1] -= 1
    short = [0] * (n + 2)  # the same for fences that fit in max_chars, which even a forced cut respects
    for start, end in fences:
        depth[start + 1] += 1
        depth[end] -= 1
        if end - start <= max_chars:
            short[start + 1] += 1
            short[end] -= 1
    running = running_short = 0
    cut_blocked = [False] * (n + 1)
    short_blocked = [False] * (n + 1)
    for c in range(n + 1):
        running += depth[c]
        running_short += short[c]
        cut_blocked[c] = running > 0
        short_blocked[c] = running_short > 0
    closers = {close_at for _, close_at in pairs}

    cuts: list[int] = []
    for i, ch in enumerate(text):
        if cut_blocked[i + 1] or not _natural_boundary(text, i, ch, closers):
            continue
        c = i + 1
        while c < n and text[c].isspace():
            c += 1
        if 0 < c < n and (not cuts or cuts[-1] != c):
            cuts.append(c)

    spans: list[tuple[int, int]] = []
    start = 0
    for end in [*cuts, n]:
        pos = start
        while end - pos > max_chars:
            cut = _forced_cut(text, pos, max_chars, short_blocked, fences)
            spans.append((pos, cut))
            pos = cut
        spans.append((pos, end))
        start = end
    return _fold_blank(text, spans, max_chars)


def _fences(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each fenced code block: from an opening ```` ``` ```` to the end of the next."""
    fences = []
    pos = 0
    while (start := text.find(_FENCE, pos)) != -1:
        close = text.find(_FENCE, start + len(_FENCE))
        end = len(text) if close == -1 else close + len(_FENCE)
        fences.append((start, end))
        pos = end
    return fences


def _matched_pairs(text: str, fences: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Index pairs of matched brackets and quotes outside fences, never spanning a blank line."""
    pairs: list[tuple[int, int]] = []
    stack: list[tuple[str, int]] = []
    fence_at = {start: end for start, end in fences}
    i, n = 0, len(text)
    while i < n:
        if i in fence_at:
            i = fence_at[i]
            continue
        ch = text[i]
        if ch == "\n":
            j = i + 1
            while j < n and text[j] in " \t\r\f\v":
                j += 1
            if j < n and text[j] == "\n":
                stack.clear()  # a paragraph break ends whatever was left open
        elif ch == '"':
            if stack and stack[-1][0] == '"':
                pairs.append((stack.pop()[1], i))
            else:
                stack.append((ch, i))
        elif ch in _PAIRS:
            stack.append((ch, i))
        elif ch in _CLOSERS:
            opener = _CLOSERS[ch]
            for depth in range(len(stack) - 1, -1, -1):
                if stack[depth][0] == opener:
                    pairs.append((stack[depth][1], i))
                    del stack[depth:]  # openers left inside the pair were never closed
                    break
        i += 1
    return pairs


def _before_space_or_end(text: str, i: int) -> bool:
    return i + 1 >= len(text) or text[i + 1].isspace()


def _natural_boundary(text: str, i: int, ch: str, closers: set[int]) -> bool:
    if ch in _NEWLINES or ch in _WIDE_ENDS:
        return True
    if ch in _ASCII_ENDS:
        return _before_space_or_end(text, i)
    if i in closers and i > 0:
        before = text[i - 1]
        # '"Stop." Then' ends a sentence after the quote. A Japanese closing quote after 。 is often
        # followed by と ("…」と言った"), so a closer counts only before whitespace or the end.
        return (before in _WIDE_ENDS or before in _ASCII_ENDS) and _before_space_or_end(text, i)
    return False


def _forced_class(text: str, i: int) -> int | None:
    """How strong a cut right after ``text[i]`` would be, for a forced split (None: not a mark)."""
    ch = text[i]
    if ch == "\n":
        j = i - 1
        while j >= 0 and text[j] in " \t\r\f\v":
            j -= 1
        return _BLANK if j >= 0 and text[j] == "\n" else _NEWLINE
    if ch in _NEWLINES:
        return _NEWLINE
    if ch in _WIDE_ENDS or (ch in _ASCII_ENDS and _before_space_or_end(text, i)):
        return _SENTENCE
    if ch in _COMMAS:
        return _COMMA
    if ch.isspace():
        return _SPACE
    return None


def _forced_cut(
    text: str, pos: int, max_chars: int, short_blocked: Sequence[bool], fences: Sequence[tuple[int, int]]
) -> int:
    """Where to force a span starting at ``pos`` apart: the strongest mark in the second half of the
    window, else the last mark anywhere in it, else hard at the limit (before a short fence there)."""
    limit = pos + max_chars
    last: list[int | None] = [None] * 5
    for c in range(limit, pos, -1):
        if short_blocked[c]:
            continue
        kind = _forced_class(text, c - 1)
        if kind is not None and last[kind] is None:
            last[kind] = c
    half = pos + max_chars // 2
    for mark in last:
        if mark is not None and mark >= half:
            return mark
    found = [c for c in last if c is not None]
    if found:
        return max(found)
    if short_blocked[limit]:
        # The limit falls inside a fence that fits whole: cut before it (it starts after pos, since a
        # fence starting at pos would end within the limit).
        return max(start for start, end in fences if start < limit < end)
    return limit


def _fold_blank(text: str, spans: list[tuple[int, int]], max_chars: int) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    pending: tuple[int, int] | None = None
    for start, end in spans:
        if pending is not None:
            if end - pending[0] <= max_chars:
                start = pending[0]
            else:
                out.append(pending)
            pending = None
        if not text[start:end].strip():
            pending = (start, end)
            continue
        out.append((start, end))
    if pending is not None:
        if out and pending[1] - out[-1][0] <= max_chars:
            out[-1] = (out[-1][0], pending[1])
        else:
            out.append(pending)
    return out


# ------------------------------------------------------------------------------------------- point ids

_NAMESPACES: Mapping[ParentKind, uuid.UUID] = {
    "memory": uuid.UUID("da5a8d0d-fdf7-413d-b3d4-67ab8089e2bd"),
    "episode": uuid.UUID("9561d59e-8860-439f-b55a-ea6b1eeca48d"),
}


_NAMESPACE_BYTES: Mapping[ParentKind, bytes] = {kind: ns.bytes for kind, ns in _NAMESPACES.items()}
_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def block_id(kind: ParentKind, parent: str, index: int) -> str:
    """The point id of block ``index`` of the ``kind`` record ``parent`` (canonical UUID text)."""
    return str(uuid.uuid5(_NAMESPACES[kind], f"{uuid.UUID(parent)}/{index}"))


def block_ids(kind: ParentKind, parent: str, count: int) -> list[str]:
    """The ids of blocks ``0 .. count-1`` of one record (what a delete must remove)."""
    return [block_id(kind, parent, i) for i in range(count)]


def _uuid5_text(namespace: bytes, name: str) -> str:
    """``str(uuid.uuid5(namespace, name))``, computed on bytes.

    The block arm checks every hit it reads (hundreds per recall); building and formatting ``UUID``
    objects for that cost several milliseconds of a recall, hashing directly a fraction of it.
    """
    head = bytearray(hashlib.sha1(namespace + name.encode(), usedforsecurity=False).digest()[:16])
    head[6] = (head[6] & 0x0F) | 0x50  # version 5
    head[8] = (head[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = head.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def parent_kind_of(hit: VectorHit) -> ParentKind | None:
    """Whether a block hit belongs to a memory or an episode (None: not a block written here).

    The same test as comparing ``block_id(kind, hit.parent, hit.block_index)`` with the hit's id.
    """
    parent = hit.parent if _CANONICAL_UUID.fullmatch(hit.parent) else str(uuid.UUID(hit.parent))
    name = f"{parent}/{hit.block_index}"
    for kind in ("memory", "episode"):
        if _uuid5_text(_NAMESPACE_BYTES[kind], name) == hit.id:
            return kind
    return None


# ------------------------------------------------------------------------------------------- the arm

_REF_PREFIX: Mapping[ParentKind, str] = {"memory": "mem:", "episode": "ep:"}


async def block_arm(
    blocks: VectorStore, vector: Vector, scope: ReadScope, *, limit: int, max_hits: int
) -> ArmResult:
    """The records whose best block is nearest the query, best first, up to ``limit``.

    Looks at the ``max_hits`` nearest blocks in the scope (the policy's ``blocks.search_hits``), keeps
    each record's best block (scores of a record's blocks are never added up), and orders by (-cosine,
    kind, record id, block index). ``raw`` is that block's cosine and ``block_index`` its index. The
    source filter and exclusions are applied later, on the hydrated records, like for every arm.

    The search is restricted by scope alone, not also to ``kind == "block"``: the block collection holds
    block points only (the builder is its one writer), so that clause matched every point while costing
    a payload check at each graph node the search visits (measured on a single-agent shard, same
    answers, search time 0.89x at 26k blocks and 0.63x at 266k).
    """
    started = time.perf_counter()
    if limit <= 0 or max_hits <= 0:
        return ArmResult("block")
    flt = scope_filter(scope)
    # The hits past the cut below are never read, so the search may leave its last run of tied scores
    # open (no second fetch to complete it: 22% of searches needed one at 100k memories). Only when the
    # cut falls in that run, or is never reached, is the search repeated with the run completed.
    hits = await blocks.search(vector, flt, max_hits, open_tail=True)
    ranked, read = _best_blocks(hits, limit)
    if len(hits) == max_hits and read > open_tail_start(hits):
        ranked, _ = _best_blocks(await blocks.search(vector, flt, max_hits), limit)
    rows = tuple(
        ArmRow(ref, rank, score, block_index=index)
        for rank, (ref, (score, _, _, index)) in enumerate(ranked[:limit])
    )
    return ArmResult("block", rows, elapsed_ms=(time.perf_counter() - started) * 1000)


_Best = tuple[float, ParentKind, str, int]  # (cosine, parent kind, parent id, block index)


def _best_blocks(hits: Sequence[VectorHit], limit: int) -> tuple[list[tuple[str, _Best]], int]:
    """Each record's best block among ``hits`` (best first), ranked; and how many hits were read."""
    best: dict[str, _Best] = {}
    # Hits are read best first, so once `limit` records are held, a hit scoring below the last of them
    # can neither enter the first `limit` records nor change their best block: the rest is skipped
    # (telling a hit's parent kind is most of this loop's cost, and most hits fall past the cut).
    cutoff: float | None = None
    read = 0
    for hit in hits:
        if cutoff is not None and hit.score < cutoff:
            break
        read += 1
        kind = parent_kind_of(hit)
        if kind is None:
            continue
        ref = _REF_PREFIX[kind] + hit.parent
        entry = (hit.score, kind, hit.parent, hit.block_index)
        held = best.get(ref)
        if held is None:
            best[ref] = entry
            if len(best) == limit:
                cutoff = hit.score
        elif (-entry[0], entry[3]) < (-held[0], held[3]):
            best[ref] = entry
    ranked = sorted(best.items(), key=lambda item: (-item[1][0], item[1][1], item[1][2], item[1][3]))
    return ranked, read


# ------------------------------------------------------------------------------------------- building

_GROUP_EXISTS = "BUSYGROUP"
_NO_GROUP = "NOGROUP"
_CLAIM_BATCH = 100
_MAX_DELIVERIES = 10
"""An event delivered this many times without being acknowledged is dropped (and logged), so one record
that cannot be built never stalls the queue behind it. A claim and the read after it both count, so
this allows about five failed attempts."""


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def consumer_name() -> str:
    """A consumer name unique to this engine: host, process and a random part."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclasses.dataclass(frozen=True, slots=True)
class _Job:
    key: str
    kind: ParentKind
    record_id: str
    agent_id: str
    project_id: str
    channel: str
    timestamp: float
    seq: int
    digest: str
    pieces: tuple[tuple[int, str], ...]  # (block index, text to embed), blank blocks left out


class BlockBuilder:
    """Consumes the block stream for one engine. Every Redis and Qdrant call has the adapters' deadline.

    ``run`` is the long-running worker; ``drain`` processes what the stream holds now and returns.
    Both may run at once (and on many engines): an event processed twice rewrites the same points.
    """

    def __init__(
        self,
        *,
        redis: RedisClient,
        keys: Keys,
        blocks: VectorStore,
        embedder: Embedder,
        max_per_record: int,
        max_chars: int,
        redis_timeout_secs: float,
        consumer: str | None = None,
        batch: int = 16,
        claim_idle_secs: float = 60.0,
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.blocks = blocks
        self.embedder = embedder
        self.max_per_record = max_per_record
        self.max_chars = max_chars
        self.consumer = consumer or consumer_name()
        self.batch = batch
        self.claim_idle_ms = int(claim_idle_secs * 1000)
        self.claim_every = claim_idle_secs
        # A blocking read must return before the client's socket deadline fires.
        self.block_ms = max(1, int(min(2.0, redis_timeout_secs / 2) * 1000))
        self.stream = keys.block_stream
        self.group = keys.block_group

    async def ensure_group(self) -> None:
        """Create the consumer group (and the stream) if absent; from the stream's start, so events
        written before any worker existed are delivered too."""
        try:
            async with redis_errors("cannot create the block consumer group"):
                await self.redis.xgroup_create(self.stream, self.group, id="0", mkstream=True)
        except redis.exceptions.ResponseError as exc:
            if _GROUP_EXISTS not in str(exc):
                raise

    # ---------------------------------------------------------------------------------- entry points

    async def drain(self) -> int:
        """Build blocks for every event in the stream now, including those pending at other consumers
        (they may be dead); return how many events were processed. Errors propagate."""
        done = 0
        await self.ensure_group()
        last = await self._last_id()
        if last is None:
            return 0
        await self._claim(min_idle_ms=0)
        while True:
            entries = await self._read_pending()
            if not entries:
                entries = await self._read(">")
                if not entries:
                    return done
            done += await self._process(entries)
            if any(_id_key(entry_id) > last for entry_id, _ in entries):
                return done  # later writes are the running worker's business, not this call's

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Consume the stream until cancelled. Failures are logged and retried with a growing pause;
        an event stays pending until its blocks are written."""
        task_status.started()
        failures = 0
        next_claim = 0.0
        regroup = False
        while True:
            try:
                if regroup:
                    await self.ensure_group()
                    regroup = False
                if time.monotonic() >= next_claim:
                    await self._claim(min_idle_ms=self.claim_idle_ms)
                    next_claim = time.monotonic() + self.claim_every
                entries = await self._read_pending()
                if not entries:
                    entries = await self._read(">", block_ms=self.block_ms)
                if entries:
                    await self._process(entries)
                failures = 0
            except Exception as exc:
                failures += 1
                pause = min(30.0, 0.25 * 2**failures)
                if isinstance(exc, redis.exceptions.ResponseError) and _NO_GROUP in str(exc):
                    # The stream or its group was deleted under us (a flush, a key cleanup).
                    log.warning("block worker: %s; recreating the consumer group", exc)
                    regroup = True
                elif isinstance(exc, BackendUnavailable):
                    log.warning("block worker: %s; retrying in %.1f s", exc, pause)
                else:
                    log.exception("block worker failed; retrying in %.1f s", pause)
                await anyio.sleep(pause)

    async def release(self) -> None:
        """Leave the consumer group if nothing is pending here (a consumer with pending entries stays,
        so another worker can claim them). Bounded, shielded, and never raises."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(self.block_ms / 1000 + 1):
            try:
                async with redis_errors():
                    pending = await self.redis.xpending_range(
                        self.stream, self.group, min="-", max="+", count=1, consumername=self.consumer
                    )
                    if not pending:
                        await command(
                            self.redis, "XGROUP", "DELCONSUMER", self.stream, self.group, self.consumer
                        )
            except Exception as exc:
                log.warning("could not leave the block consumer group: %s", exc)

    # ------------------------------------------------------------------------------------- internals

    async def _last_id(self) -> tuple[int, int] | None:
        async with redis_errors():
            newest = await self.redis.xrevrange(self.stream, "+", "-", count=1)
        return _id_key(newest[0][0]) if newest else None

    async def _claim(self, *, min_idle_ms: int) -> int:
        """Move events idle for ``min_idle_ms`` at other consumers (dead ones) to this one; they are
        then read back as this consumer's pending events."""
        claimed = 0
        cursor: bytes | str = "0-0"
        while True:
            async with redis_errors():
                reply = await self.redis.xautoclaim(
                    self.stream, self.group, self.consumer, min_idle_ms, cursor, count=_CLAIM_BATCH
                )
            cursor, entries = reply[0], reply[1]
            claimed += len(entries)
            if _id_key(cursor) == (0, 0):
                return claimed

    async def _read(
        self, from_id: str, *, block_ms: int | None = None
    ) -> list[tuple[bytes, dict[bytes, bytes]]]:
        """Up to ``batch`` events: this consumer's pending ones (``"0"``) or new ones (``">"``)."""
        async with redis_errors():
            reply = await self.redis.xreadgroup(
                self.group, self.consumer, {self.stream: from_id}, count=self.batch, block=block_ms
            )
        entries: list[tuple[bytes, dict[bytes, bytes]]] = []
        for _, items in reply or ():
            for entry_id, fields in items:
                if entry_id is not None:
                    # An entry deleted from the stream while pending comes back without fields.
                    entries.append((entry_id, fields or {}))
        return entries

    async def _read_pending(self) -> list[tuple[bytes, dict[bytes, bytes]]]:
        """This consumer's pending events (claimed, or left by a failed attempt), minus those that have
        failed too often, which are dropped here."""
        while True:
            entries = await self._read("0")
            if not entries:
                return []
            kept = await self._drop_exhausted(entries)
            if kept:
                return kept

    async def _drop_exhausted(
        self, entries: list[tuple[bytes, dict[bytes, bytes]]]
    ) -> list[tuple[bytes, dict[bytes, bytes]]]:
        async with redis_errors():
            info = await self.redis.xpending_range(
                self.stream,
                self.group,
                min=entries[0][0],
                max=entries[-1][0],
                count=len(entries),
                consumername=self.consumer,
            )
        tries = {row["message_id"]: int(row["times_delivered"]) for row in info}
        exhausted = [eid for eid, _ in entries if tries.get(eid, 0) > _MAX_DELIVERIES]
        if not exhausted:
            return entries
        for eid, fields in entries:
            if eid in exhausted:
                log.error(
                    "giving up on the blocks of %s after %d attempts", fields.get(b"key"), _MAX_DELIVERIES
                )
        await self._finish(exhausted, requeue=())
        gone = set(exhausted)
        return [entry for entry in entries if entry[0] not in gone]

    async def _process(self, entries: Sequence[tuple[bytes, Mapping[bytes, bytes]]]) -> int:
        """Build the blocks of the records these events name, then acknowledge the events."""
        record_keys = list(
            dict.fromkeys(fields[b"key"].decode() for _, fields in entries if fields.get(b"key"))
        )
        jobs = await self._load(record_keys)
        texts = [text for job in jobs for _, text in job.pieces]
        vectors = await self.embedder.embed(texts) if texts else []
        points: list[VectorPoint] = []
        stale: list[str] = []
        it = iter(vectors)
        for job in jobs:
            kept = set()
            for index, _ in job.pieces:
                kept.add(index)
                points.append(
                    VectorPoint(
                        id=block_id(job.kind, job.record_id, index),
                        vector=next(it),
                        kind="block",
                        agent_id=job.agent_id,
                        project_id=job.project_id,
                        channel=job.channel,
                        timestamp=job.timestamp,
                        seq=job.seq,
                        parent=job.record_id,
                        block_index=index,
                    )
                )
            stale.extend(
                block_id(job.kind, job.record_id, i) for i in range(self.max_per_record) if i not in kept
            )
        if stale:
            await self.blocks.delete(stale)
        if points:
            await self.blocks.upsert(points)
        requeue = await self._settle(jobs)
        await self._finish([eid for eid, _ in entries], requeue=requeue)
        return len(entries)

    async def _load(self, record_keys: Sequence[str]) -> list[_Job]:
        if not record_keys:
            return []
        async with redis_errors():
            docs = await json_ops(self.redis).mget(list(record_keys), "$")
        jobs = []
        for key, found in zip(record_keys, docs, strict=True):
            if not found:
                continue  # deleted since; its delete removed the blocks
            try:
                jobs.append(self._job(key, found[0]))
            except (KeyError, TypeError, ValueError) as exc:
                log.warning("cannot build blocks for %s: %s", key, exc)
        return jobs

    def _job(self, key: str, doc: Mapping[str, Any]) -> _Job:
        kind = self._kind_of(key)
        if kind is None:
            raise ValueError("not a memory or episode key")
        text = str(doc["content"] if kind == "memory" else doc["summary"])
        spans = split_blocks(text, max_chars=self.max_chars)[: self.max_per_record]
        pieces = tuple((index, piece) for index, (s, e) in enumerate(spans) if (piece := text[s:e].strip()))
        return _Job(
            key=key,
            kind=kind,
            record_id=str(uuid.UUID(str(doc["pk"]))),
            agent_id=str(doc["agent_id"]),
            project_id=str(doc.get("project_id", "")),
            channel=str(doc.get("channel", "")),
            timestamp=float(doc["ts"]),
            seq=int(doc["seq"]),
            digest=_digest(text),
            pieces=pieces,
        )

    def _kind_of(self, key: str) -> ParentKind | None:
        if key.startswith(self.keys.memory_prefix):
            return "memory"
        if key.startswith(self.keys.episode_prefix):
            return "episode"
        return None

    async def _settle(self, jobs: Sequence[_Job]) -> list[str]:
        """Re-read the records just built. One deleted meanwhile loses the blocks just written (its
        delete may have run before the upsert); one whose text changed is queued again, so the last
        build always reflects the last text whichever worker finishes first."""
        if not jobs:
            return []
        now: dict[str, Any] = {}
        for kind, path in (("memory", "$.content"), ("episode", "$.summary")):
            group = [job.key for job in jobs if job.kind == kind]
            if group:
                async with redis_errors():
                    now.update(zip(group, await json_ops(self.redis).mget(group, path), strict=True))
        orphaned: list[str] = []
        requeue: list[str] = []
        for job in jobs:
            found = now.get(job.key)
            if not found:
                orphaned.extend(block_ids(job.kind, job.record_id, self.max_per_record))
            elif _digest(str(found[0])) != job.digest:
                requeue.append(job.key)
        if orphaned:
            await self.blocks.delete(orphaned)
        return requeue

    async def _finish(self, entry_ids: Sequence[bytes], *, requeue: Sequence[str]) -> None:
        async with redis_errors():
            pipe = self.redis.pipeline(transaction=True)
            for key in requeue:
                pipe.xadd(self.stream, {"key": key})
            pipe.xack(self.stream, self.group, *entry_ids)
            pipe.xdel(self.stream, *entry_ids)
            await pipe.execute()


def _id_key(entry_id: bytes | str) -> tuple[int, int]:
    text = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    ms, _, seq = text.partition("-")
    return int(ms), int(seq or 0)


def block_filter(agent_id: str) -> VectorFilter:
    """Every block point of one agent (for deleting an agent's data)."""
    return VectorFilter(agent_id=agent_id, kinds=("block",))
