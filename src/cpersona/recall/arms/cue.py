"""The cue arm: one more retrieval arm, restricted to the period a time cue points at.

A time cue is a prior, never a filter (seed §2.2): the ordinary arms still search the whole scope, and
this arm searches only the records whose time lies in the cue's period ``[start, end)``. Its ranked list
feeds the bounded move and the cue seats; none of its numbers reaches a fused score or autocut, and the gate
sees them only when a record the ordinary arms never reached asks for a seat (``stages.seats``).

Up to four lists are searched at once, each ``depth`` rows deep, and merged by reciprocal rank:

1. memory vector — memories of the scope whose ``timestamp`` payload lies in the period, nearest first,
   kept while the cosine is at or above ``floor``;
2. memory keyword — :meth:`~cpersona.stores.protocols.RecallReads.memory_keyword` with the period;
3. episode vector and 4. episode full text — the same for episodes, when the caller asks for them.

An episode's time is its start time, else the time it was recorded: that is what
``stores.redis.documents`` writes to the episode's ``ts`` and what the engine writes to its vector's
``timestamp``, so both halves agree.

**No scan window inside the period.** The ordinary near arm looks only at the newest ``scan_window``
records by insertion sequence, and CPersona's cue half likewise took the newest ``MAX_MEMORIES`` of the
period and searched the rest only through an optional coarse index. Here the period itself bounds the
search: Qdrant filters on the indexed ``timestamp`` payload and ranks every record of the period, so a
cue can reach a record however long ago it was inserted (which is what a cue for an old period is for),
and there is no unsearched remainder to report. A window by sequence inside a window by time would only
drop records the caller pointed at.

**Source filter.** The vector payload carries no source, so the memory vector half checks the
``source.id`` of its hits in the record store (one read) and looks ``2 * depth + 10`` rows deep to make up
for the rows it drops, the same margin the recall gives the ordinary arms under a source filter. The
keyword half filters in the index. Every row of the arm is therefore visible to the scope, source
included, so no foreign row takes a place in the merged list. Episodes carry no source: with a source
filter and no channel they are never searched, whatever ``search_episodes`` says (the rule
``episode_fts`` applies), so a caller's slip cannot widen what a scope sees.

**Blank query.** With a blank query the arm lists the period's newest records by record time (the
keyword halves' blank listing); a vector, if one is passed, is not consulted, since there is no question
for it to stand for.

**Merge.** ``vote(ref) = Σ 1/(merge_k + rank)`` over the lists, rank 0-based, lists visited in the fixed
order above. Each vote is summed with :func:`math.fsum`, so two refs with the same ranks tie exactly
whatever order their terms were added in, and a tie keeps first-seen order. The best ``depth`` rows are
kept, with the vote as ``ArmRow.raw`` and the cosine a vector half found the record at as
``ArmRow.cosine`` (``None`` for a record only the keyword halves found).

A half that fails fails the arm (the caller reports it as degraded); its error is raised as itself,
not inside an exception group. :func:`scope_span` gives the ``(oldest, newest)`` record time of the
memories in a scope, which periods like ``long_ago`` and an open-ended absolute cue are built from.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from typing import TYPE_CHECKING, Literal, TypeAlias

import anyio

from cpersona.errors import CpersonaError
from cpersona.model.candidates import ArmResult, ArmRow
from cpersona.recall.arms.vector import ranked_hits
from cpersona.stores.protocols import scope_filter

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from cpersona.model.scope import ReadScope
    from cpersona.stores.protocols import PointKind, RecallReads, Vector, VectorStore

__all__ = ["CUE_MERGE_K", "cue_arm", "merge_lists", "scope_span"]

CUE_MERGE_K = 61
"""The merge's constant: ``1/(61 + rank)`` with a 0-based rank, i.e. the usual k = 60 with rank + 1."""

ListName = Literal["memory_vector", "memory_keyword", "episode_vector", "episode_keyword"]
# The merge visits the lists in this order, so it decides who wins a tie.
_ORDER: tuple[ListName, ...] = ("memory_vector", "memory_keyword", "episode_vector", "episode_keyword")


async def scope_span(records: RecallReads, scope: ReadScope) -> tuple[float, float] | None:
    """``(oldest, newest)`` record time of the memories ``scope`` sees (source filter included), or
    ``None`` when it sees none. Both ends are read from one state of the store, exactly (see
    :meth:`~cpersona.stores.protocols.RecallReads.time_span`), so a period that starts at the oldest
    record holds it."""
    return await records.time_span(scope)


async def cue_arm(
    *,
    records: RecallReads,
    vectors: VectorStore | None,
    vector: Vector | None,
    scope: ReadScope,
    query: str,
    period: tuple[float, float],
    depth: int,
    floor: float,
    search_episodes: bool,
    merge_k: int = CUE_MERGE_K,
) -> ArmResult:
    """The cue arm's list for ``period`` (``[start, end)`` in epoch seconds), best first.

    ``vector`` is the query vector the ordinary arms already embedded (``None``, or no ``vectors``:
    keyword halves only); ``depth`` is the rows per half and the length of the merged list; ``floor`` is
    the cosine floor of the vector halves; ``search_episodes`` adds the episode halves. Each row's
    ``raw`` is its merged vote. An empty period (``end <= start``) or a depth of 0 searches nothing.
    No deadline of its own: the caller bounds the whole call, and cancellation passes through.
    """
    _check(period, depth, merge_k)
    began = time.perf_counter()
    if depth == 0 or not period[0] < period[1]:
        return ArmResult("cue", elapsed_ms=(time.perf_counter() - began) * 1000)
    halves = _halves(records, vectors, vector, scope, query, period, depth, floor, search_episodes)
    lists = await _run(halves)
    merged = merge_lists([lists[name] for name in _ORDER if name in lists], merge_k=merge_k, depth=depth)
    return ArmResult("cue", _with_cosines(merged, lists), elapsed_ms=(time.perf_counter() - began) * 1000)


def _with_cosines(merged: Sequence[ArmRow], lists: dict[ListName, tuple[ArmRow, ...]]) -> tuple[ArmRow, ...]:
    """The merged rows with the cosine a vector half found each at: the vote cannot be gated like an
    ordinary vector row, the cosine can (a cue seat must pass the gate's rule for that signal)."""
    cosines = {
        row.ref: row.raw
        for name in ("memory_vector", "episode_vector")
        for row in lists.get(name, ())
        if row.raw is not None
    }
    return tuple(dataclasses.replace(row, cosine=cosines.get(row.ref)) for row in merged)


Half: TypeAlias = "Callable[[], Awaitable[tuple[ArmRow, ...]]]"


def _check(period: tuple[float, float], depth: int, merge_k: int) -> None:
    if not (math.isfinite(period[0]) and math.isfinite(period[1])):
        raise ValueError(f"a cue period needs finite bounds, got {period!r}")
    if depth < 0:
        raise ValueError(f"the cue arm's depth must be at least 0, got {depth}")
    if merge_k < 1:
        raise ValueError(f"the cue arm's merge_k must be at least 1, got {merge_k}")


def _halves(
    records: RecallReads,
    vectors: VectorStore | None,
    vector: Vector | None,
    scope: ReadScope,
    query: str,
    period: tuple[float, float],
    depth: int,
    floor: float,
    search_episodes: bool,
) -> dict[ListName, Half]:
    """The lists to search, in the order their tasks start."""
    with_episodes = search_episodes and not (scope.source_id and not scope.channel)
    halves: dict[ListName, Half] = {}

    async def memory_words() -> tuple[ArmRow, ...]:
        return (await records.memory_keyword(scope, query, depth, period=period)).rows

    async def episode_words() -> tuple[ArmRow, ...]:
        return (await records.episode_fts(scope, query, depth, period=period)).rows

    if vectors is not None and vector is not None and query.strip():
        search = functools.partial(_vector_rows, vectors, vector, scope, period=period, floor=floor)
        if scope.source_id:
            halves["memory_vector"] = functools.partial(
                _memory_vector_in_source, search, records, scope, depth
            )
        else:
            halves["memory_vector"] = functools.partial(search, "memory", depth)
        if with_episodes:
            halves["episode_vector"] = functools.partial(search, "episode", depth)
    halves["memory_keyword"] = memory_words
    if with_episodes:
        halves["episode_keyword"] = episode_words
    return halves


async def _run(halves: dict[ListName, Half]) -> dict[ListName, tuple[ArmRow, ...]]:
    """Every half at once; a failure raised as itself, not inside an exception group."""
    lists: dict[ListName, tuple[ArmRow, ...]] = {}

    async def run(name: ListName) -> None:
        lists[name] = await halves[name]()

    try:
        async with anyio.create_task_group() as tg:
            for name in halves:
                tg.start_soon(run, name)
    except BaseExceptionGroup as group:
        failure = _one_failure(group)
        if failure is None:
            raise
        raise failure from failure.__cause__
    return lists


def merge_lists(lists: Sequence[Sequence[ArmRow]], *, merge_k: int, depth: int) -> tuple[ArmRow, ...]:
    """Merge ranked lists by reciprocal rank: ``vote += 1/(merge_k + rank)`` per list a ref is on
    (rank 0-based, by position), best ``depth`` by vote, ties in first-seen order."""
    terms: dict[str, list[float]] = {}
    for rows in lists:
        for rank, row in enumerate(rows):
            terms.setdefault(row.ref, []).append(1.0 / (merge_k + rank))
    votes = [(ref, math.fsum(parts)) for ref, parts in terms.items()]
    votes.sort(key=lambda item: -item[1])  # stable: equal votes stay in first-seen order
    return tuple(ArmRow(ref, rank, vote) for rank, (ref, vote) in enumerate(votes[:depth]))


async def _vector_rows(
    vectors: VectorStore,
    vector: Vector,
    scope: ReadScope,
    kind: PointKind,
    fetch: int,
    *,
    period: tuple[float, float],
    floor: float,
) -> tuple[ArmRow, ...]:
    # The filter's ranges are inclusive below and exclusive above, the period's own [start, end).
    flt = dataclasses.replace(scope_filter(scope, (kind,)), min_timestamp=period[0], max_timestamp=period[1])
    hits = await vectors.search(vector, flt, fetch)
    return ranked_hits("cue", hits, floor, fetch)


async def _memory_vector_in_source(
    search: Callable[[PointKind, int], Awaitable[tuple[ArmRow, ...]]],
    records: RecallReads,
    scope: ReadScope,
    depth: int,
) -> tuple[ArmRow, ...]:
    """The memory vector half under a source filter: a deeper search, then only the rows whose record
    passes the filter, re-ranked and cut to ``depth``. A record deleted since its vector was found has
    no source and is dropped too."""
    rows = await search("memory", depth * 2 + 10)
    if not rows:
        return rows
    found = await records.memory_sources([row.ref.removeprefix("mem:") for row in rows])
    kept = [
        row
        for row, source in zip(rows, found, strict=True)
        if source is not None and scope.sees_source(source)
    ]
    return tuple(dataclasses.replace(row, rank=rank) for rank, row in enumerate(kept[:depth]))


def _one_failure(group: BaseExceptionGroup[BaseException]) -> Exception | None:
    """The error to raise for a failed task group: its first cpersona error, else its first error.

    ``None`` when anything in the group is not an ordinary error (a cancellation, an interrupt): the
    group is then re-raised as it is, so cancellation is never turned into an error.
    """
    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        exc = pending.pop(0)
        if isinstance(exc, BaseExceptionGroup):
            pending[:0] = exc.exceptions
        else:
            leaves.append(exc)
    if not leaves or not all(isinstance(exc, Exception) for exc in leaves):
        return None
    errors = [exc for exc in leaves if isinstance(exc, Exception)]
    return next((exc for exc in errors if isinstance(exc, CpersonaError)), errors[0])
