"""The arms of a cue query, run at once in one task group, each under its own deadline.

::

    one task group for the query:
       ├─ lexical   cue.text → BM25 over the scope's memories (the recall's memory keyword search)
       ├─ vector    cue.embedding, or cue.text embedded → the vector index (memories of the scope)
       ├─ emotion   cue.emotion → the emotion index (cosine over the eight Plutchik axes)
       └─ temporal  cue.temporal → the scope's memories inside the range, newest first

A time range is pushed into every arm's search as well (a hard filter, not only a source). An arm that
fails or misses its deadline contributes nothing and is named in ``degraded``; the query still answers.
A caller's embedding of the wrong dimension is refused before any arm runs.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from typing import TYPE_CHECKING, Literal

import anyio

from cpersona.errors import InvalidRequest
from cpersona.model.cue_query import cue_emotion_vector
from cpersona.stores.vector_values import caller_vector, scope_filter

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from cpersona.model.cue_query import CueQueryRequest
    from cpersona.model.records import StoreKind
    from cpersona.model.scope import ReadScope
    from cpersona.stores.cue_store import CueStore
    from cpersona.stores.protocols import Embedder, RecallReads, Vector, VectorStore
    from cpersona.stores.record_values import Period

__all__ = ["ArmList", "CueArmName", "QueryPorts", "run_arms"]

log = logging.getLogger("cpersona.recall")

CueArmName = Literal["lexical", "vector", "emotion", "temporal"]


@dataclasses.dataclass(frozen=True, slots=True)
class QueryPorts:
    """What a cue query reads: the record store, the cue store, the vectors and the embedder."""

    records: RecallReads
    cues: CueStore
    vectors: VectorStore | None
    embedder: Embedder | None
    arm_timeout_s: float


@dataclasses.dataclass(frozen=True, slots=True)
class ArmList:
    """One arm's memory ids best first, with its native scores (BM25, cosine; ``None`` where the arm
    has none), and how it went."""

    arm: CueArmName
    ids: tuple[str, ...] = ()
    scores: tuple[float | None, ...] = ()
    status: Literal["ok", "timeout", "error"] = "ok"
    detail: str = ""
    elapsed_ms: float = 0.0


def query_vector(req: CueQueryRequest, ports: QueryPorts) -> Vector | None:
    """The caller's embedding, checked against the index's dimension; ``None`` without one."""
    given = req.cue.embedding
    if given is None:
        return None
    dim = None if ports.vectors is None or ports.embedder is None else ports.embedder.dim
    return caller_vector(given, dim, "cue.embedding")


def _period(req: CueQueryRequest) -> Period | None:
    t = req.cue.temporal
    return None if t is None else (t.start, t.end)


async def run_arms(req: CueQueryRequest, scope: ReadScope, ports: QueryPorts, fetch: int) -> list[ArmList]:
    """Every arm the cue asks for, concurrently; their lists in a fixed order (lexical, vector, emotion,
    temporal)."""
    vector = query_vector(req, ports)
    calls = _calls(req, scope, ports, fetch, vector)
    found: dict[CueArmName, ArmList] = {}

    async def one(name: CueArmName, call: Callable[[], Awaitable[ArmList]]) -> None:
        found[name] = await _timed(name, call, ports.arm_timeout_s)

    async with anyio.create_task_group() as tg:
        for name, call in calls:
            tg.start_soon(one, name, call)
    return [found[name] for name, _ in calls]


def _calls(
    req: CueQueryRequest, scope: ReadScope, ports: QueryPorts, fetch: int, vector: Vector | None
) -> list[tuple[CueArmName, Callable[[], Awaitable[ArmList]]]]:
    cue, period, stores = req.cue, _period(req), req.store_kinds
    text = cue.query_text
    out: list[tuple[CueArmName, Callable[[], Awaitable[ArmList]]]] = []
    if text is not None:
        out.append(("lexical", lambda: _lexical(ports, scope, text, fetch, period)))
    if vector is not None or (text is not None and ports.embedder is not None and ports.vectors):
        out.append(("vector", lambda: _vector(ports, scope, vector, text, fetch, period)))
    emotion = cue.emotion_vector
    if emotion is not None:
        axes = cue_emotion_vector(emotion)
        out.append(("emotion", lambda: _emotion(ports.cues, scope, axes, fetch, stores, period)))
    if period is not None:
        out.append(("temporal", lambda: _temporal(ports.cues, scope, period, fetch, stores)))
    return out


async def _timed(name: CueArmName, call: Callable[[], Awaitable[ArmList]], within_s: float) -> ArmList:
    t0 = time.perf_counter()
    result = ArmList(name, status="timeout", detail=f"no answer within {within_s * 1000:g} ms")
    with anyio.move_on_after(within_s):
        try:
            result = await call()
        except InvalidRequest:
            raise
        except Exception as exc:
            log.warning("cue query arm %s failed: %s", name, exc)
            result = ArmList(name, status="error", detail=f"{type(exc).__name__}: {exc}")
    return dataclasses.replace(result, elapsed_ms=(time.perf_counter() - t0) * 1000)


def _exclusive_end(period: Period) -> Period:
    # The searches below keep start <= ts < end; the cue's end is inclusive.
    return (period[0], math.nextafter(period[1], math.inf))


async def _lexical(
    ports: QueryPorts, scope: ReadScope, text: str, fetch: int, period: Period | None
) -> ArmList:
    window = None if period is None else _exclusive_end(period)
    found = await ports.records.memory_keyword(scope, text, fetch, period=window)
    rows = [row for row in found.rows if row.ref.startswith("mem:")]
    return ArmList("lexical", tuple(r.ref[4:] for r in rows), tuple(r.raw for r in rows))


async def _vector(
    ports: QueryPorts,
    scope: ReadScope,
    vector: Vector | None,
    text: str | None,
    fetch: int,
    period: Period | None,
) -> ArmList:
    assert ports.vectors is not None
    if vector is None:
        assert ports.embedder is not None
        assert text is not None
        vector = await ports.embedder.embed_query(text)
    flt = scope_filter(scope, ("memory",))
    if period is not None:
        start, end = _exclusive_end(period)
        flt = dataclasses.replace(flt, min_timestamp=start, max_timestamp=end)
    hits = [hit for hit in await ports.vectors.search(vector, flt, fetch) if hit.score > 0]
    return ArmList("vector", tuple(h.id for h in hits), tuple(h.score for h in hits))


async def _emotion(
    cues: CueStore,
    scope: ReadScope,
    axes: Sequence[float],
    fetch: int,
    stores: Sequence[StoreKind],
    period: Period | None,
) -> ArmList:
    hits = await cues.emotion_nearest(scope, axes, fetch, stores=stores, period=period)
    return ArmList("emotion", tuple(i for i, _ in hits), tuple(s for _, s in hits))


async def _temporal(
    cues: CueStore, scope: ReadScope, period: Period, fetch: int, stores: Sequence[StoreKind]
) -> ArmList:
    ids = await cues.in_period(scope, period, fetch, stores=stores)
    return ArmList("temporal", tuple(ids), (None,) * len(ids))
