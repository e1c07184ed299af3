"""The fan-out of one recall: every arm, the profile and calibration reads, and the cue loop, in one task
group.

::

    one task group for the request:
       ├─ memory keyword ─┐                          (each arm under its own deadline; a failed or
       ├─ episode full text┤                           late arm contributes nothing and is reported)
       ├─ embed query ‖ scope stats ─► near ‖ far
       │     └─► block (as soon as the query vector exists; it feeds the held seats only)
       ├─ profile, calibrated gate
       └─ with a time cue: the cue loop (see ``cue_loop``), waiting for the query vector

The tasks hand each other values through :class:`~cpersona.recall.arm_runner.Later` cells; what the group
produced is returned as one frozen :class:`FanOut` once every task has finished.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from typing import TYPE_CHECKING, Final

import anyio

from cpersona.embedding_models import UNSCALED
from cpersona.errors import CpersonaError
from cpersona.recall.arm_runner import Later
from cpersona.recall.arms.block import block_arm
from cpersona.recall.arms.vector import vector_far, vector_near
from cpersona.recall.cue_loop import CueSources, run_cue_loop
from cpersona.recall.plan import VectorBar

if TYPE_CHECKING:
    from collections.abc import Mapping

    from anyio.abc import TaskGroup

    from cpersona.model.candidates import ArmName, ArmResult
    from cpersona.recall.arm_runner import ArmCall, ArmRunner
    from cpersona.recall.arms.vector import ScopeStats, ScopeStatsCache
    from cpersona.recall.cue_loop import CueOutcome
    from cpersona.recall.plan import ArmContext, CuePlan
    from cpersona.stores.protocols import Embedder, RecallReads, StoredProfile, Vector, VectorStore

__all__ = ["Backends", "FanOut", "VectorSide", "fan_out"]

log = logging.getLogger("cpersona.recall")

_EMBED_HEAD_START_SECS: Final = 0.0005


@dataclasses.dataclass(frozen=True, slots=True)
class Backends:
    """The stores one recall reads, and the engine's scope statistics cache."""

    records: RecallReads
    vectors: VectorStore | None
    embedder: Embedder | None
    blocks: VectorStore | None
    stats: ScopeStatsCache


@dataclasses.dataclass(frozen=True, slots=True)
class VectorSide:
    """What the vector side settled: the scope's statistics, the query vector (``None`` for a blank query,
    no embedder or a failed embedding, then ``embed_error`` says why) and the bar the vector arms' floors
    were measured from (``None`` when no vector arm ran)."""

    stats: ScopeStats
    vector: Vector | None
    bar: VectorBar | None
    embed_error: str | None


@dataclasses.dataclass(frozen=True, slots=True)
class FanOut:
    """What the fan-out found: each arm's list in the order the arms finished (the cue arm's last list
    after them), the vector side, the profile, the calibrated gate and the cue loop's outcome."""

    arms: Mapping[ArmName, ArmResult]
    vector: VectorSide
    profile: StoredProfile | None
    calibrated: float | None
    cue: CueOutcome | None
    retrieved_at: float


async def fan_out(ctx: ArmContext, backends: Backends, runner: ArmRunner) -> FanOut:
    """Run the recall's task group to its end (a failed read other than an arm's fails the recall, raised
    as the first cpersona error among the failures)."""
    return await _Group(ctx, backends, runner).run()


class _Group:
    """The tasks of one fan-out and the cells they share (one instance per recall)."""

    def __init__(self, ctx: ArmContext, backends: Backends, runner: ArmRunner) -> None:
        self.ctx = ctx
        self.b = backends
        self.runner = runner
        self.arms: dict[ArmName, ArmResult] = {}
        # Set once the query vector exists or is known not to: the cue loop reuses it, never embeds again.
        self.query_vector: Later[Vector | None] = Later()
        # Set once the agent's calibration has been read: the gate, the vector floor and the cue arm's floor
        # all come from that one read.
        self.calibrated: Later[float | None] = Later()
        self.vector_side: Later[VectorSide] = Later()
        self.profile: Later[StoredProfile | None] = Later()
        self.cue: Later[CueOutcome] = Later()

    async def run(self) -> FanOut:
        ctx, b = self.ctx, self.b
        async with _PlainErrors(), anyio.create_task_group() as tg:
            # The vector side first: the query embedding heads the longest chain of the graph.
            tg.start_soon(self._vector_side, tg)
            if b.embedder is not None and not ctx.blank and not b.embedder.is_cached(ctx.query):
                # Its worker thread needs the interpreter to start, and the arms launched below would
                # keep it busy for a millisecond or more; a short sleep blocks the loop in its selector,
                # which frees the interpreter for that thread first. A cached query needs no thread.
                await anyio.sleep(_EMBED_HEAD_START_SECS)
            terms = ctx.req.lexical_terms
            keyword = functools.partial(b.records.memory_keyword, ctx.scope, ctx.query, ctx.fetch)
            if terms:
                keyword = functools.partial(keyword, extra_terms=terms)
            tg.start_soon(self._arm, "memory_keyword", keyword)
            # A blank query lists the newest memories only: episode full text has no term to match.
            if ctx.with_episodes and not ctx.blank:
                fts = functools.partial(b.records.episode_fts, ctx.scope, ctx.query, ctx.fetch)
                if terms:
                    fts = functools.partial(fts, extra_terms=terms)
                tg.start_soon(self._arm, "episode_fts", fts)
            tg.start_soon(self._profile)
            tg.start_soon(self._calibration)
            if ctx.cue is not None:
                tg.start_soon(self._cue, ctx.cue)
        retrieved_at = time.perf_counter()
        arms = dict(self.arms)
        cue = self.cue.get() if ctx.cue is not None else None
        if cue is not None and cue.result is not None:
            arms["cue"] = cue.result
        return FanOut(
            arms=arms,
            vector=self.vector_side.get(),
            profile=self.profile.get(),
            calibrated=self.calibrated.get(),
            cue=cue,
            retrieved_at=retrieved_at,
        )

    async def _arm(self, name: ArmName, call: ArmCall) -> None:
        self.arms[name] = await self.runner.run(name, call)

    async def _bar(self) -> VectorBar:
        scale = UNSCALED if self.b.embedder is None else self.b.embedder.gate_scale
        return VectorBar(await self.calibrated.wait(), self.ctx.policy.vector.min_similarity, scale)

    async def _vector_side(self, tg: TaskGroup) -> None:
        stats: Later[ScopeStats] = Later()
        bar: Later[VectorBar] = Later()
        async with anyio.create_task_group() as inner:
            inner.start_soon(self._stats, stats, bar)
            # Awaited here rather than started as a task: this task runs first in the request's group, so
            # the embedding is handed to its thread before the other arms take the event loop (as a task it
            # queued behind them, ~1.4 ms at 100k memories).
            embed_error = await self._embed(tg)
        vector = self.query_vector.get()
        if vector is None or self.b.vectors is None:
            self.vector_side.set(VectorSide(stats.get(), vector, None, embed_error))
            return
        self.vector_side.set(VectorSide(stats.get(), vector, bar.get(), embed_error))
        await self._vector_arms(self.b.vectors, vector, stats.get(), bar.get())

    async def _stats(self, stats: Later[ScopeStats], bar: Later[VectorBar]) -> None:
        ctx, b = self.ctx, self.b
        stats.set(await b.stats.get(b.records, ctx.scope, ctx.window, ctx.reach))
        # Read while the query embeds, so the near arm can search the moment the vector exists.
        if b.vectors is not None and b.embedder is not None and not ctx.blank:
            bar.set(await self._bar())

    async def _embed(self, tg: TaskGroup) -> str | None:
        """Embed the query and start the block arm once its vector exists; the embedding's error, if any."""
        vector: Vector | None = None
        error: str | None = None
        try:
            if self.b.embedder is not None and not self.ctx.blank:
                try:
                    vector = await self.b.embedder.embed_query(self.ctx.query)
                except Exception as exc:
                    log.warning("query embedding failed: %s", exc)
                    error = f"{type(exc).__name__}: {exc}"
                else:
                    self._start_block(tg, vector)
        finally:
            self.query_vector.set(vector)
        return error

    def _start_block(self, tg: TaskGroup, vector: Vector) -> None:
        """The block arm needs only the vector, so it starts now, in the request's task group, without
        waiting for the scope statistics the other vector arms need. Its rows fill seats after up to
        `limit` returned rows; a source filter or exclusions drop rows after the search, so then it looks
        deeper, like the other arms."""
        ctx, policy = self.ctx, self.ctx.policy
        if self.b.blocks is None or policy.seats.block <= 0:
            return
        wanted = ctx.req.limit + policy.seats.block
        wanted = wanted * 2 + 10 if ctx.filtering else wanted
        arm = functools.partial(
            block_arm, self.b.blocks, vector, ctx.scope, limit=wanted, max_hits=policy.blocks.search_hits
        )
        tg.start_soon(self._arm, "block", arm)

    async def _vector_arms(
        self, vectors: VectorStore, vector: Vector, stats: ScopeStats, bar: VectorBar
    ) -> None:
        ctx, rules = self.ctx, self.ctx.policy.vector
        floor = bar.floor() if ctx.mode == "cascade" else bar.floor(rules.rrf_threshold_factor)
        episodes = ctx.with_episodes
        async with anyio.create_task_group() as inner:
            near = functools.partial(vector_near, vectors, vector, ctx.scope, stats)
            near = functools.partial(near, fetch=ctx.fetch, floor=floor, with_episodes=episodes)
            inner.start_soon(self._arm, "vector_near", near)
            if ctx.reach > ctx.window:
                far_fetch = min(ctx.fetch, rules.far_limit or ctx.depth)
                far = functools.partial(vector_far, vectors, vector, ctx.scope, stats)
                far = functools.partial(far, fetch=far_fetch, floor=floor, with_episodes=episodes)
                inner.start_soon(self._arm, "vector_far", far)

    async def _profile(self) -> None:
        self.profile.set(await self.b.records.recall_profile(self.ctx.scope.agent_id))

    async def _calibration(self) -> None:
        value: float | None = None
        try:
            value = await self.b.records.calibrated_gate(self.ctx.scope.agent_id)
        finally:
            # A failed read fails the recall, so a waiter it wakes never shapes an answer.
            self.calibrated.set(value)

    async def _cue(self, plan: CuePlan) -> None:
        sources = CueSources(self.b.records, self.b.vectors, self.query_vector, self._bar)
        self.cue.set(await run_cue_loop(self.ctx, plan, sources, self.runner))


class _PlainErrors:
    """Re-raise a failed task group as the error a caller expects: the first cpersona error among its
    leaves (``RedisUnavailable`` when Redis goes away mid-recall), not an ``ExceptionGroup``."""

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        if not isinstance(exc, BaseExceptionGroup):
            return
        leaves = _leaves(exc)
        first: BaseException | None = next((e for e in leaves if isinstance(e, CpersonaError)), None)
        if first is None and len(leaves) == 1:
            first = leaves[0]
        if first is not None:
            raise first from None


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    out: list[BaseException] = []
    for exc in group.exceptions:
        out.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return out
