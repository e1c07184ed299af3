"""From the fan-out to the first stage set: hydrate every row the arms found once, apply the source filter
and the exclusions, and gather what fusion and scoring need to know (:class:`Retrieved`)."""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING

from cpersona.recall.stages.chain import Retrieved

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from cpersona.model.candidates import ArmResult, ArmRow
    from cpersona.model.scope import ReadScope
    from cpersona.recall.fanout import FanOut
    from cpersona.recall.plan import ArmContext
    from cpersona.stores.protocols import HydratedRecord, RecallReads

__all__ = ["retrieve"]


async def retrieve(
    ctx: ArmContext, fan: FanOut, records: RecallReads
) -> tuple[Retrieved, dict[str, HydratedRecord]]:
    """The first stage set, and the hydrated records by ref (the rows, the trace and its ledger read them)."""
    docs = await records.hydrate(row.ref for res in fan.arms.values() for row in res.rows)
    arms: dict[str, ArmResult] = {name: _filter(res, docs, ctx) for name, res in fan.arms.items()}
    cue_found = None
    if fan.cue is not None and "cue" in arms:
        cue_list = arms.pop("cue")
        # The cue's own depth applies after the filters (it looked deeper when rows could be dropped).
        cue_found = fan.cue.found(cue_list.rows[: fan.cue.plan.policy.depth or ctx.depth])
    rules = ctx.policy.score_adjust
    boundary = await records.newest_episode_time(ctx.scope) if rules.episode_penalty else None
    anchor = time.time()
    if rules.prior_age_rate > 0 and rules.prior_age_anchor == "newest":
        anchor = await records.newest_memory_time(ctx.scope) or anchor
    retrieved = Retrieved(
        arms=arms,
        profile_ref=f"profile:{ctx.scope.agent_id}" if fan.profile is not None else None,
        single_arm_refs=_single_arm_refs(arms, docs, has_vector=fan.vector.vector is not None),
        created_at={ref: d.created_at for ref, d in docs.items()},
        timestamps={ref: d.ts for ref, d in docs.items() if d.ts is not None},
        episode_boundary=boundary,
        prior_anchor=anchor,
        cue=cue_found,
    )
    return retrieved, docs


def _filter(result: ArmResult, docs: Mapping[str, HydratedRecord], ctx: ArmContext) -> ArmResult:
    """Drop rows deleted since, outside the source filter, or excluded; re-rank; cut to the depth. The block
    and cue arms' lists are kept at their own length (they feed seats and the cue, not fusion)."""
    excludes = [e.strip().lower() for e in ctx.req.exclude_contents]
    prefix_min = ctx.policy.exclude.prefix_min_chars
    scope = ctx.scope
    keep: list[ArmRow] = []
    cap = ctx.depth if result.arm not in ("block", "cue") else len(result.rows)
    for row in result.rows:
        doc = docs.get(row.ref)
        if doc is None or not _visible(doc, scope):
            continue
        if excludes and _excluded(_match_text(doc), excludes, prefix_min):
            continue
        keep.append(dataclasses.replace(row, rank=len(keep)))
        if len(keep) >= cap:
            break
    return dataclasses.replace(result, rows=tuple(keep))


def _visible(doc: HydratedRecord, scope: ReadScope) -> bool:
    if not scope.source_id:
        return True
    if not doc.is_memory:
        return bool(scope.channel)  # episodes have no source: seen only when a channel is set
    return scope.sees_source(str(doc.source_id))


def _match_text(doc: HydratedRecord) -> str:
    """The text an exclusion is compared with (a record without one matches as the old reads did)."""
    if doc.is_memory:
        return str(doc.text)
    return "" if doc.text is None else doc.text


def _excluded(text: str, excludes: Sequence[str], prefix_min: int) -> bool:
    norm = text.strip().lower()
    for entry in excludes:
        if len(entry) >= prefix_min:
            if norm.startswith(entry) or entry.startswith(norm):
                return True
        elif norm == entry:
            return True
    return False


def _single_arm_refs(
    arms: Mapping[str, ArmResult], docs: Mapping[str, HydratedRecord], *, has_vector: bool
) -> frozenset[str]:
    lexical = [arms[n] for n in ("episode_fts", "memory_keyword") if n in arms]
    if not has_vector:
        return frozenset(row.ref for res in lexical for row in res.rows)
    return frozenset(res.rows[0].ref for res in lexical if res.rows and not _embedded(docs, res.rows[0].ref))


def _embedded(docs: Mapping[str, HydratedRecord], ref: str) -> bool:
    doc = docs.get(ref)
    return doc is not None and doc.embedded
