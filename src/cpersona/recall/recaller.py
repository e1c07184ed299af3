"""One recall as an async task graph.

::

    validate ─► resolve scope, policy, depth
       │  one task group for the request:
       ├─ memory keyword ─┐                          (each arm under its own deadline; a failed or
       ├─ episode full text┤                           late arm contributes nothing and is reported)
       ├─ embed query ‖ scope stats ─► near ‖ far
       │     └─► block (as soon as the query vector exists; it feeds the held seats only)
       ├─ profile, calibrated gate
       └─ with a time cue: scope span ‖ (wait for the query vector) ─► cue arm over the period
             └─► if it found nothing: widen one confidence step and run only the cue arm again,
                 unless CPERSONA_RECALL_CUE_TIME_LIMIT_MS has passed since the recall started
       ▼
    hydrate the rows once (JSON.MGET) → source and exclusion filters → stage chain
       (fuse → score → gate → autocut → count → cue move → seats) → rows, best first

The cue loop runs inside the same task group as the ordinary arms, so its first search overlaps them and a
revision never re-runs them. Its whole loop is bounded by the cue time limit, measured from the start of
the recall: a cue arm still searching at the limit is cancelled and the stop is recorded.

The stage chain is pure and type-checked (see ``_stages``); this module does the I/O around it.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import anyio
import orjson

from cpersona.errors import CpersonaError
from cpersona.model.candidates import ArmName, ArmResult, ArmRow
from cpersona.model.records import Source
from cpersona.model.scope import ReadScope
from cpersona.model.time_cue import (
    Period,
    TimeCue,
    cue_period,
    own_period,
    recent_only,
    wider,
)
from cpersona.recall.arms.block import block_arm
from cpersona.recall.arms.cue import cue_arm, scope_span
from cpersona.recall.arms.vector import ScopeStats, ScopeStatsCache, vector_far, vector_near
from cpersona.recall.request import Degraded, RecallRequest, RecallResult, RecallRow
from cpersona.recall.stages.chain import Chain, CueFound, RecallPlan, Retrieved, Seated, default_chain
from cpersona.recall.stages.gate import gate_config
from cpersona.recall.trace.assemble import TRACE_VERSION, build_trace
from cpersona.stores.redis.connection import command, json_ops, redis_errors
from cpersona.stores.redis.scope import scope_query

if TYPE_CHECKING:
    from cpersona.keys import Keys
    from cpersona.model.time_cue import Confidence
    from cpersona.recall.policy import CuePolicy, Policy
    from cpersona.recall.stages.fusion import Candidate
    from cpersona.settings import Settings
    from cpersona.stores.protocols import Embedder, RecordStore, Vector, VectorStore
    from cpersona.stores.redis.connection import RedisClient

__all__ = ["Recaller"]

log = logging.getLogger("cpersona.recall")

ArmCall = Callable[[], Awaitable[ArmResult]]


class Recaller:
    """Runs recalls for one engine. Holds the backends and per-engine caches, nothing global."""

    def __init__(
        self,
        *,
        settings: Settings,
        policies: Mapping[str, Policy],
        redis: RedisClient,
        records: RecordStore,
        keys: Keys,
        vectors: VectorStore | None,
        embedder: Embedder | None,
        chain: Chain | None = None,
        blocks: VectorStore | None = None,
    ) -> None:
        self.settings = settings
        self.policies = policies
        self.redis = redis
        self.records = records
        self.keys = keys
        self.vectors = vectors
        self.embedder = embedder
        self.blocks = blocks
        self.chain = chain or default_chain()
        self.stats = ScopeStatsCache()
        # Tests and benchmarks wrap arms (e.g. to switch one off or slow it down); production leaves it.
        self.arm_wrapper: Callable[[ArmName, ArmCall], ArmCall] | None = None

    async def recall(self, req: RecallRequest, *, want_trace: bool | None = None) -> RecallResult:
        """Run one recall. A trace is built when ``want_trace`` is true (default: when the request asks
        for one); it goes into the response only if the request asked. ``want_trace=False`` builds none,
        and a request that asked then gets ``trace: null``."""
        started = time.perf_counter()
        policy = self.policies[req.policy]
        blank = req.blank
        depth = req.limit
        if req.mode != "cascade" and not blank:
            floor = self.settings.recall_depth_floor
            depth = min(policy.depth.max, max(req.limit, policy.depth.floor if floor is None else floor))
        filtering = bool(req.scope.source_id or req.exclude_contents)
        fetch = depth * 2 + 10 if filtering else depth
        window = self.settings.max_memories or policy.vector.scan_window
        reach = policy.vector.reach
        with_episodes = not req.scope.source_id or bool(req.scope.channel)

        results: dict[str, ArmResult] = {}
        side: dict[str, Any] = {}
        # Set once the query vector exists or is known not to: the cue arm reuses it, never embeds again.
        embedded = anyio.Event()
        # Set once the agent's calibration has been read: the gate, the vector floor and the cue arm's floor
        # all come from that one read.
        calibrated = anyio.Event()

        async def vector_threshold() -> float:
            await calibrated.wait()
            gate = side.get("calibrated")
            return gate if gate is not None else policy.vector.min_similarity

        cue_run = None
        if req.time_cue is not None and policy.cue is not None:
            cue_run = _CueRun(req.time_cue, policy.cue, self.settings.recall_cue_time_limit_ms)

        async def run_arm(name: ArmName, call: ArmCall) -> None:
            wrapped = call if self.arm_wrapper is None else self.arm_wrapper(name, call)
            t0 = time.perf_counter()
            result: ArmResult
            with anyio.move_on_after(self.settings.recall_arm_timeout_ms / 1000) as scope:
                try:
                    result = await wrapped()
                except Exception as exc:
                    log.warning("recall arm %s failed: %s", name, exc)
                    result = ArmResult(name, status="error", detail=f"{type(exc).__name__}: {exc}")
            if scope.cancelled_caught:
                result = ArmResult(
                    name,
                    status="timeout",
                    detail=f"no answer within {self.settings.recall_arm_timeout_ms:g} ms",
                )
            results[name] = dataclasses.replace(result, elapsed_ms=(time.perf_counter() - t0) * 1000)

        async def vector_side() -> None:
            vector: Vector | None = None
            stats_box: list[ScopeStats] = []
            threshold_box: list[float] = []

            async def embed() -> None:
                try:
                    await embed_query()
                finally:
                    side["query_vector"] = vector
                    embedded.set()

            async def embed_query() -> None:
                nonlocal vector
                if self.embedder is None or blank:
                    return
                try:
                    vector = await self.embedder.embed_query(req.query)
                except Exception as exc:
                    log.warning("query embedding failed: %s", exc)
                    side["embed_error"] = f"{type(exc).__name__}: {exc}"
                    return
                if self.blocks is not None and policy.seats.block > 0:
                    # The block arm needs only the vector, so it starts now, in the request's task group,
                    # without waiting for the scope statistics the other vector arms need. Its rows fill
                    # seats after up to `limit` returned rows; a source filter or exclusions drop rows
                    # after the search, so then it looks deeper, like the other arms.
                    wanted = req.limit + policy.seats.block
                    wanted = wanted * 2 + 10 if filtering else wanted
                    arm = functools.partial(
                        block_arm, self.blocks, vector, req.scope, limit=wanted,
                        max_hits=policy.blocks.search_hits,
                    )  # fmt: skip
                    tg.start_soon(run_arm, "block", arm)

            async def stats() -> None:
                stats_box.append(await self.stats.get(self.records, req.scope, window, reach))
                # Read while the query embeds, so the near arm can search the moment the vector exists.
                if self.vectors is not None and self.embedder is not None and not blank:
                    threshold_box.append(await vector_threshold())

            async with anyio.create_task_group() as inner:
                inner.start_soon(stats)
                # Awaited here rather than started as a task: this task runs first in the request's group,
                # so the embedding is handed to its thread before the other arms take the event loop (as a
                # task it queued behind them, ~1.4 ms at 100k memories).
                await embed()
            side["stats"] = stats_box[0]
            side["vector"] = vector
            if vector is None or self.vectors is None:
                return
            threshold = side["threshold"] = threshold_box[0]
            floor = threshold if req.mode == "cascade" else threshold * policy.vector.rrf_threshold_factor
            vectors, st = self.vectors, stats_box[0]
            async with anyio.create_task_group() as inner:
                near = functools.partial(vector_near, vectors, vector, req.scope, st)
                near = functools.partial(near, fetch=fetch, floor=floor, with_episodes=with_episodes)
                inner.start_soon(run_arm, "vector_near", near)
                if reach > window:
                    far_fetch = min(fetch, policy.vector.far_limit or depth)
                    far = functools.partial(vector_far, vectors, vector, req.scope, st)
                    far = functools.partial(far, fetch=far_fetch, floor=floor, with_episodes=with_episodes)
                    inner.start_soon(run_arm, "vector_far", far)

        async def profile() -> None:
            async with redis_errors():
                side["profile"] = await json_ops(self.redis).get(self.keys.profile(req.scope.agent_id))

        async def calibration() -> None:
            try:
                side["calibrated"] = await self._calibrated_gate(req.scope.agent_id)
            finally:
                # A failed read fails the recall, so a waiter it wakes never shapes an answer.
                calibrated.set()

        async def cue_side(run: _CueRun) -> None:
            try:
                await cue_loop(run)
            except Exception as exc:
                # Like any arm: a failed cue loop is reported as degraded and never fails the recall.
                log.warning("recall arm cue failed: %s", exc)
                run.result = ArmResult("cue", status="error", detail=f"{type(exc).__name__}: {exc}")

        async def cue_loop(run: _CueRun) -> None:
            span = await scope_span(self.records, req.scope)
            now = time.time()
            if recent_only(run.cue, span, now, run.policy.recent_only_hours):
                run.recent_only = True
                run.ignored = own_period(run.cue, span, now)
                return
            threshold = await vector_threshold()
            await embedded.wait()
            vector: Vector | None = side.get("query_vector")
            cue_depth = run.policy.depth or depth
            search = functools.partial(
                cue_arm,
                records=self.records,
                vectors=self.vectors,
                vector=vector,
                scope=req.scope,
                query=req.query,
                depth=cue_depth * 2 + 10 if filtering else cue_depth,
                floor=threshold * run.policy.vector_floor_factor,
                search_episodes=run.policy.search_episodes and with_episodes,
                merge_k=run.policy.merge_k,
            )
            limit_s = self.settings.recall_cue_time_limit_ms / 1000
            confidence: Confidence | None = run.cue.confidence
            for stage in range(run.policy.revisions + 1):
                assert confidence is not None
                period = cue_period(run.cue, confidence, span, now, run.policy.margins)
                entry: dict[str, Any] = {
                    "stage": stage,
                    "searched": "all arms and the cue arm" if stage == 0 else "the cue arm",
                    "confidence": confidence,
                    "period": None if period is None else period.to_json(),
                }
                run.stages.append(entry)
                run.confidence, run.period = confidence, period
                result = await self._search_period(search, period, started, limit_s)
                run.result = result
                entry["found"] = len(result.rows)
                entry["next"] = None
                if result.status == "timeout" and result.detail == _CUE_LIMIT_DETAIL:
                    entry["next"] = "stop: time limit"
                    run.stop = "time_limit"
                    break
                if result.rows or result.status != "ok":
                    break
                suspected = {
                    "stage": stage, "code": "CANDIDATE_MISS", "reason": "the cue period holds no candidate",
                }  # fmt: skip
                run.suspected.append(suspected)
                step = wider(confidence) if stage < run.policy.revisions else None
                if step is None:
                    why = "no wider step" if wider(confidence) is None else "no revision left"
                    entry["next"] = suspected["action"] = f"stop: {why}"
                    run.stop = why.replace(" ", "_")
                    break
                if time.perf_counter() - started >= limit_s:
                    entry["next"] = suspected["action"] = "stop: time limit"
                    run.stop = "time_limit"
                    break
                entry["next"] = suspected["action"] = f"widen to {step}"
                confidence = step
                run.revised = True

        async with _PlainErrors(), anyio.create_task_group() as tg:
            # The vector side first: the query embedding heads the longest chain of the graph.
            tg.start_soon(vector_side)
            tg.start_soon(
                run_arm, "memory_keyword",
                lambda: self.records.memory_keyword(req.scope, req.query, fetch),
            )  # fmt: skip
            # A blank query lists the newest memories only: episode full text has no term to match.
            if with_episodes and not blank:
                tg.start_soon(
                    run_arm,
                    "episode_fts",
                    lambda: self.records.episode_fts(req.scope, req.query, fetch),
                )
            tg.start_soon(profile)
            tg.start_soon(calibration)
            if cue_run is not None:
                tg.start_soon(cue_side, cue_run)
        retrieved_at = time.perf_counter()
        if cue_run is not None and cue_run.result is not None:
            results["cue"] = cue_run.result

        docs = await self._hydrate(results)
        arms = {name: self._filter(res, docs, req, depth, policy) for name, res in results.items()}
        cue_found = None
        if cue_run is not None and "cue" in arms:
            cue_list = arms.pop("cue")
            # The cue's own depth applies after the filters (it looked deeper when rows could be dropped).
            cue_found = cue_run.found(cue_list.rows[: cue_run.policy.depth or depth])
        vector: Vector | None = side.get("vector")
        single = self._single_arm_refs(arms, docs, has_vector=vector is not None)
        stats: ScopeStats = side["stats"]
        threshold = side.get("threshold", policy.vector.min_similarity)
        profile_doc = side.get("profile")
        profile_ref = f"profile:{req.scope.agent_id}" if profile_doc else None
        rules = policy.score_adjust
        boundary = await self._episode_boundary(req.scope) if rules.episode_penalty else None
        anchor = time.time()
        if rules.prior_age_rate > 0 and rules.prior_age_anchor == "newest":
            anchor = await self._newest_memory_time(req.scope) or anchor
        retrieved = Retrieved(
            arms=arms,
            profile_ref=profile_ref,
            single_arm_refs=single,
            created_at={ref: float(d.get("created_at", 0.0)) for ref, d in docs.items()},
            timestamps={ref: float(d["ts"]) for ref, d in docs.items() if "ts" in d},
            episode_boundary=boundary,
            prior_anchor=anchor,
            cue=cue_found,
        )
        plan = RecallPlan(
            policy=policy,
            mode=req.mode,
            limit=req.limit,
            depth=depth,
            gate=gate_config(
                stats.pool,
                policy.gate,
                deep=req.deep,
                calibrated=side.get("calibrated"),
                rrf_k=policy.fusion.rrf_k,
                blank_query=blank,
            ),
            blank_query=blank,
            vector_threshold=threshold,
        )
        final, stage_ms = self.chain.run(retrieved, plan)
        rows = self._render(final, docs, profile_doc, req, policy)
        degraded = tuple(Degraded(r.arm, r.status, r.detail) for r in results.values() if r.status != "ok")
        time_cue, cue_log = (None, None) if cue_run is None else cue_run.report(final, req.policy)
        if "embed_error" in side:
            degraded = (Degraded("embedding", "error", side["embed_error"]), *degraded)
        done = time.perf_counter()
        timing = {
            "retrieve": (retrieved_at - started) * 1000,
            **stage_ms,
            "total": (done - started) * 1000,
        }
        result = RecallResult(
            rows=rows,
            policy={"scoring": policy.scoring, "process": policy.name},
            limit=req.limit,
            depth=depth,
            mode=req.mode,
            order=req.order,
            degraded=degraded,
            final=final,
            timing_ms=timing,
            trace_requested=req.trace,
            time_cue=time_cue,
            cue_log=cue_log,
        )
        if not (req.trace if want_trace is None else want_trace):
            return result
        trace = self._trace(req, result, policy, plan, window, docs, profile_doc)
        # The trace's own cost joins the recall's times; ``total`` stays the recall without it.
        cost = trace.get("timing_ms", {})
        timing = {**timing, **{k: cost[k] for k in ("trace", "coverage") if k in cost}}
        return dataclasses.replace(result, trace=trace, timing_ms=timing)

    # ------------------------------------------------------------------------------------------ helpers

    async def _search_period(
        self,
        search: Callable[..., Awaitable[ArmResult]],
        period: Period | None,
        started: float,
        limit_s: float,
    ) -> ArmResult:
        """One stage of the cue loop: the cue arm over ``period``, under whichever comes first of the arm
        deadline and the cue time limit (counted from the start of the recall)."""
        if period is None:
            # No period to search (an empty scope, or long_ago over a scope with no span).
            return ArmResult("cue")
        remaining = limit_s - (time.perf_counter() - started)
        arm_s = self.settings.recall_arm_timeout_ms / 1000
        if remaining <= 0:
            return ArmResult("cue", status="timeout", detail=_CUE_LIMIT_DETAIL)
        call: ArmCall = functools.partial(search, period=(period.start, period.end))
        wrapped = call if self.arm_wrapper is None else self.arm_wrapper("cue", call)
        t0 = time.perf_counter()
        result = ArmResult("cue")
        with anyio.move_on_after(min(remaining, arm_s)) as scope:
            try:
                result = await wrapped()
            except Exception as exc:
                log.warning("recall arm cue failed: %s", exc)
                result = ArmResult("cue", status="error", detail=f"{type(exc).__name__}: {exc}")
        if scope.cancelled_caught:
            at_limit = remaining <= arm_s
            detail = (
                _CUE_LIMIT_DETAIL
                if at_limit
                else f"no answer within {self.settings.recall_arm_timeout_ms:g} ms"
            )
            result = ArmResult("cue", status="timeout", detail=detail)
        return dataclasses.replace(result, elapsed_ms=(time.perf_counter() - t0) * 1000)

    def _trace(
        self,
        req: RecallRequest,
        result: RecallResult,
        policy: Policy,
        plan: RecallPlan,
        window: int,
        docs: Mapping[str, Mapping[str, Any]],
        profile_doc: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        """The trace of a finished recall. A failure to build it never fails the recall: the trace
        then names the error instead (the rows are already final)."""
        try:
            return build_trace(
                req,
                result,
                policy=policy,
                gate=plan.gate,
                settings=self.settings,
                scan_window=window,
                embedding_model=None if self.embedder is None else self.embedder.name,
                docs=docs,
                profile_doc=profile_doc,
            )
        except Exception as exc:
            log.exception("building the recall trace failed")
            return {"trace_version": TRACE_VERSION, "error": type(exc).__name__}

    async def _calibrated_gate(self, agent_id: str) -> float | None:
        async with redis_errors():
            doc = await json_ops(self.redis).get(self.keys.calibration(agent_id))
        if not doc or not doc.get("selected"):
            return None
        value = doc.get("threshold")
        return float(value) if isinstance(value, int | float) else None

    async def _hydrate(self, results: Mapping[str, ArmResult]) -> dict[str, dict[str, Any]]:
        """The fields of each row's record that the stages, the rows and the trace read, by ref.

        Only those fields are read (:data:`_HYDRATED`): a stored record carries far more (emotion,
        fidelity, meta, stems...), and reading whole records cost most of the hydration at 100k memories.
        """
        refs = list(dict.fromkeys(row.ref for res in results.values() for row in res.rows))
        docs: dict[str, dict[str, Any]] = {}
        for prefix, key_of in (("mem:", self.keys.memory), ("ep:", self.keys.episode)):
            wanted = [ref for ref in refs if ref.startswith(prefix)]
            if wanted:
                docs.update(
                    await self._read_fields(wanted, [key_of(r[len(prefix) :]) for r in wanted], prefix)
                )
        return docs

    async def _read_fields(
        self, refs: Sequence[str], keys: Sequence[str], prefix: str
    ) -> dict[str, dict[str, Any]]:
        fields = _HYDRATED[prefix]
        async with redis_errors():
            replies = await json_ops(self.redis).mget(keys, _union_path(fields))
        docs: dict[str, dict[str, Any]] = {}
        partial: list[int] = []
        for i, (ref, values) in enumerate(zip(refs, replies, strict=True)):
            if values is None:
                continue  # deleted since the arm found it
            # A union path returns the fields it found, in the asked order, and skips absent ones: a
            # record missing one (written by an older engine) is read whole instead.
            if len(values) == len(fields):
                docs[ref] = dict(zip(fields, values, strict=True))
            else:
                partial.append(i)
        if partial:
            async with redis_errors():
                whole = await json_ops(self.redis).mget([keys[i] for i in partial], "$")
            docs.update((refs[i], doc[0]) for i, doc in zip(partial, whole, strict=True) if doc)
        return docs

    def _filter(
        self,
        result: ArmResult,
        docs: Mapping[str, Mapping[str, Any]],
        req: RecallRequest,
        depth: int,
        policy: Policy,
    ) -> ArmResult:
        """Drop rows deleted since, outside the source filter, or excluded; re-rank; cut to the depth.
        The block arm's list is kept at its own length (it feeds seats, not fusion)."""
        excludes = [e.strip().lower() for e in req.exclude_contents]
        keep: list[ArmRow] = []
        cap = depth if result.arm not in ("block", "cue") else len(result.rows)
        for row in result.rows:
            doc = docs.get(row.ref)
            if doc is None or not self._visible(row.ref, doc, req.scope):
                continue
            if excludes and _excluded(_text_of(row.ref, doc), excludes, policy.exclude.prefix_min_chars):
                continue
            keep.append(dataclasses.replace(row, rank=len(keep)))
            if len(keep) >= cap:
                break
        return dataclasses.replace(result, rows=tuple(keep))

    @staticmethod
    def _visible(ref: str, doc: Mapping[str, Any], scope: ReadScope) -> bool:
        if not scope.source_id:
            return True
        if ref.startswith("ep:"):
            return bool(scope.channel)  # episodes have no source: seen only when a channel is set
        src = doc.get("source") or {}
        return scope.sees_source(str(src.get("id", "")))

    @staticmethod
    def _single_arm_refs(
        arms: Mapping[str, ArmResult], docs: Mapping[str, Mapping[str, Any]], *, has_vector: bool
    ) -> frozenset[str]:
        lexical = [arms[n] for n in ("episode_fts", "memory_keyword") if n in arms]
        if not has_vector:
            return frozenset(row.ref for res in lexical for row in res.rows)
        return frozenset(
            res.rows[0].ref
            for res in lexical
            if res.rows and not docs.get(res.rows[0].ref, {}).get("embedded", False)
        )

    async def _episode_boundary(self, scope: ReadScope) -> float | None:
        query = scope_query(ReadScope(scope.agent_id, scope.project_id, scope.channel), with_source=False)
        async with redis_errors():
            reply = await command(
                self.redis, "FT.SEARCH", self.keys.episode_index, query, "SORTBY", "seq", "DESC",
                "LIMIT", 0, 1, "DIALECT", 2,
            )  # fmt: skip
        if int(reply[0]) == 0:
            return None
        doc = _reply_doc(reply)
        return None if doc is None else float(doc.get("created_at", 0.0))

    async def _newest_memory_time(self, scope: ReadScope) -> float | None:
        query = scope_query(ReadScope(scope.agent_id, scope.project_id, scope.channel), with_source=False)
        async with redis_errors():
            reply = await command(
                self.redis, "FT.SEARCH", self.keys.memory_index, query, "SORTBY", "ts", "DESC",
                "LIMIT", 0, 1, "RETURN", 1, "ts", "DIALECT", 2,
            )  # fmt: skip
        if int(reply[0]) == 0 or len(reply) < 3:
            return None
        fields = reply[2]
        pairs = dict(zip(fields[::2], fields[1::2], strict=True))
        value = pairs.get(b"ts")
        return None if value is None else float(value)

    def _render(
        self,
        final: Seated,
        docs: Mapping[str, Mapping[str, Any]],
        profile_doc: Mapping[str, Any] | None,
        req: RecallRequest,
        policy: Policy,
    ) -> tuple[RecallRow, ...]:
        preview = None if req.full_content else policy.render.preview_chars
        cue = final.source.source.source.source.cue
        cue_ranks = {} if cue is None else cue.ranks
        rows: list[RecallRow] = []
        for cand in final.rows:
            if cand.kind == "profile":
                if profile_doc is not None:
                    rows.append(_profile_row(profile_doc, preview))
                continue
            doc = docs.get(cand.ref)
            if doc is None:
                continue
            reason = _match_reason(cand)
            if cand.ref in cue_ranks:
                reason = {**(reason or {}), "cue_rank": cue_ranks[cand.ref]}
            rows.append(_row(cand.ref, doc, preview, reason, cand.fused))
        for seat in final.seats:
            doc = docs.get(seat.ref)
            if doc is None:
                continue
            if seat.kind == "cue":
                reason = {"signal": "cue", "admission": "reservation", "cue_rank": seat.row.rank}
            else:
                reason = {
                    "signal": "block", "admission": "reservation", "order": "vector",
                    "block": seat.row.block_index, "cosine": seat.row.raw,
                }  # fmt: skip
                if seat.ref in cue_ranks:
                    reason["cue_rank"] = cue_ranks[seat.ref]
            rows.append(_row(seat.ref, doc, preview, reason, None))
        if req.order == "best_last":
            rows.reverse()
        return tuple(rows)


_HYDRATED: dict[str, tuple[str, ...]] = {
    "mem:": ("content", "source", "msg_id", "ts", "created_at", "embedded"),
    "ep:": ("summary", "ts", "created_at", "embedded"),
}
"""The record fields a recall reads, by ref prefix: text, source and message id for the row, times for
scoring, ``embedded`` for the single-arm rule."""


def _union_path(fields: Sequence[str]) -> str:
    return "$[" + ",".join(f"'{name}'" for name in fields) + "]"


_CUE_LIMIT_DETAIL = "stopped at the cue time limit (CPERSONA_RECALL_CUE_TIME_LIMIT_MS)"


class _CueRun:
    """The cue loop of one recall: what it searched, stage by stage, and what it found (mutable while the
    loop runs inside the request's task group; read once the group has finished)."""

    def __init__(self, cue: TimeCue, policy: CuePolicy, limit_ms: float) -> None:
        self.cue = cue
        self.policy = policy
        self.limit_ms = limit_ms
        self.recent_only = False
        self.confidence: Confidence = cue.confidence
        self.period: Period | None = None
        self.result: ArmResult | None = None
        self.ignored: Period | None = None
        self.revised = False
        self.stop: str | None = None
        self.stages: list[dict[str, Any]] = []
        self.suspected: list[dict[str, Any]] = []

    def found(self, rows: Sequence[ArmRow]) -> CueFound:
        step = self.confidence
        return CueFound(
            rows=tuple(rows),
            confidence=step,
            period=self.period,
            lift=self.policy.lift[step],
            seats=self.policy.seats[step],
            move=self.policy.move,
            seat_cut_rows=self.policy.seat_cut_rows,
        )

    def report(self, final: Seated, policy_name: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """The response's ``time_cue`` and the trace's account of the loop."""
        if self.recent_only:
            period = None if self.ignored is None else self.ignored.to_json()
            ignored = {"reason": "recent_only", "period": period}
            return {"policy": policy_name, "ignored": "recent_only", "period": period}, {
                "cue_ignored": ignored
            }
        counted = final.source
        moves = counted.moves or counted.source.moves
        lifted = [m for m in moves if m.to < m.from_]
        seated = [seat.ref for seat in final.seats if seat.kind == "cue"]
        response = {
            "policy": policy_name,
            "period": None if self.period is None else self.period.to_json(),
            "confidence": self.confidence,
            "revised": self.revised,
            "moved": len(lifted),
            "seated": len(seated),
        }
        log_ = {
            "cue": {
                "bound": self.policy.lift[self.confidence],
                "confidence": self.confidence,
                "lifted": [m.to_json() for m in lifted],
                "seated": seated,
            },
            "stages": self.stages,
            "suspected": self.suspected,
            "budget": {
                "cue_time_limit_ms": self.limit_ms,
                "stop": self.stop,
            },
        }
        return response, log_


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


def _match_reason(cand: Candidate) -> dict[str, Any] | None:
    if cand.rsf is not None:
        reason: dict[str, Any] = {"signal": "rsf", "score": cand.rsf}
    elif cand.cosine is not None:
        reason = {"signal": "cosine", "score": cand.cosine}
    elif cand.rrf is not None:
        reason = {"signal": "rrf", "score": cand.rrf}
    else:
        return None
    if cand.cosine is not None:
        reason["cosine"] = cand.cosine
    if cand.rrf is not None:
        reason["rrf"] = cand.rrf
    if cand.rsf is not None:
        reason["rsf"] = cand.rsf
    return reason


def _text_of(ref: str, doc: Mapping[str, Any]) -> str:
    return str(doc.get("content") if ref.startswith("mem:") else doc.get("summary", ""))


def _excluded(text: str, excludes: Sequence[str], prefix_min: int) -> bool:
    norm = text.strip().lower()
    for entry in excludes:
        if len(entry) >= prefix_min:
            if norm.startswith(entry) or entry.startswith(norm):
                return True
        elif norm == entry:
            return True
    return False


def _cut(text: str, preview: int | None) -> tuple[str, bool]:
    if preview is None or len(text) <= preview:
        return text, False
    return text[:preview], True


def _row(
    ref: str,
    doc: Mapping[str, Any],
    preview: int | None,
    reason: Mapping[str, Any] | None,
    score: float | None,
) -> RecallRow:
    if ref.startswith("mem:"):
        text = str(doc["content"])
        src = doc.get("source") or {}
        source: Source | None = Source(src.get("type", "Agent"), src.get("id", ""), src.get("name", ""))
        kind: Literal["memory", "episode"] = "memory"
        msg_id = str(doc.get("msg_id", ""))
    else:
        text = "[Episode] " + str(doc["summary"])
        source, kind, msg_id = None, "episode", ""
    content, truncated = _cut(text, preview)
    return RecallRow(
        ref=ref, kind=kind, content=content, content_len=len(text), content_truncated=truncated,
        msg_id=msg_id, timestamp=float(doc["ts"]), source=source, match_reason=reason, score=score,
    )  # fmt: skip


def _profile_row(doc: Mapping[str, Any], preview: int | None) -> RecallRow:
    text = "[Profile] " + str(doc["content"])
    content, truncated = _cut(text, preview)
    return RecallRow(
        ref=None, kind="profile", content=content, content_len=len(text), content_truncated=truncated,
        msg_id="", timestamp=None, source=None, match_reason=None, score=None,
    )  # fmt: skip


def _reply_doc(reply: Sequence[Any]) -> dict[str, Any] | None:
    if len(reply) < 3:
        return None
    fields = reply[2]
    pairs = dict(zip(fields[::2], fields[1::2], strict=True))
    raw = pairs.get(b"$", pairs.get("$"))
    return None if raw is None else dict(orjson.loads(raw))
