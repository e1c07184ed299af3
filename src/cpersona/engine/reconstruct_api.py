"""reconstruct as a method of :class:`~cpersona.Engine` (a base class of it, so the facade stays one
screenful per concept): its typed keywords become one request body, validated by
:class:`~cpersona.ReconstructRequest`, and run by :mod:`cpersona.operations.reconstruct` over the
engine's recaller. It reads only: no record or vector is written; with ``trace`` its trace is published
on the trace channel (the channel is no store), one message per call with the recall's trace inside."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Literal

from cpersona.model.fields import given, validate
from cpersona.model.reconstruct_request import MAX_TOP_K, ReconstructRequest
from cpersona.operations.reconstruct import reconstruct
from cpersona.operations.reconstruct.candidates import KEYWORD_SEAT, RecallAsks, RecalledRow, RecallView
from cpersona.recall.request import recall_request
from cpersona.recall.stages.chain import Retrieved
from cpersona.recall.trace.coverage import coverage

if TYPE_CHECKING:
    from collections.abc import Mapping

    from cpersona.engine.lifecycle import Lifecycle
    from cpersona.model.reconstruct_response import ReconstructResult
    from cpersona.model.time_cue_request import TimeCueBody
    from cpersona.recall.request import RecallResult

__all__ = ["ReconstructMethods"]


class ReconstructMethods:
    """Items that quote stored rows, bundled, ordered and given roles, over one recall."""

    _life: Lifecycle

    async def reconstruct(
        self,
        query: str,
        *,
        agent_id: str,
        count: int | None = None,
        top_k: int | None = None,
        max_hops: int | None = None,
        max_evidence: int | None = None,
        budget: int | None = None,
        deep: bool = False,
        project_id: str | None = None,
        channel: str | None = None,
        source_id: str | None = None,
        time_cue: Mapping[str, Any] | TimeCueBody | None = None,
        trace: bool = False,
        mode: Literal["lite", "pro"] | None = None,
        lite: bool = False,
    ) -> ReconstructResult:
        """Reconstruct what the memory holds about ``query`` (the fields of :class:`ReconstructRequest`):
        ``count`` items (default 10) from one recall of ``top_k`` rows (20), each quoting its head record,
        its claims newest first with their roles; ``budget`` characters of quoted text at most. ``mode``
        ``"lite"`` (or ``lite``) or ``"pro"`` holds the whole answer to a cl100k token cap."""
        body = given(
            query=query,
            agent_id=agent_id,
            count=count,
            top_k=top_k,
            max_hops=max_hops,
            max_evidence=max_evidence,
            budget=budget,
            deep=deep,
            project_id=project_id,
            channel=channel,
            source_id=source_id,
            time_cue=time_cue,
            trace=trace,
            mode=mode,
            lite=lite,
        )
        life = self._life
        req = validate(ReconstructRequest, body, life.settings)
        result = await reconstruct(_RecallPort(life), life.backends.records, life.settings, req, coverage)
        if result.trace is not None:
            # One message per reconstruct, its recall nested: a tailer sees the call whole, and a recall
            # it made is never mistaken for one a caller asked for.
            life.backends.trace_publisher.offer(req.agent_id, result.trace)
        return result


@dataclasses.dataclass(frozen=True, slots=True)
class _RecallPort:
    """reconstruct's one recall, on the engine's recaller (operations import nothing of recall)."""

    life: Lifecycle

    async def __call__(
        self, body: Mapping[str, Any], lexical_terms: tuple[str, ...], asks: RecallAsks = KEYWORD_SEAT
    ) -> RecallView:
        life = self.life
        req = recall_request(body, life.settings, life.policies, max_limit=MAX_TOP_K)
        # One keyword seat, as the reference's reconstruct asks of its recall (§3.10); pro asks for more.
        req = dataclasses.replace(
            req,
            lexical_terms=lexical_terms,
            keyword_seats=asks.keyword_seats,
            extra_block_seats=asks.extra_block_seats,
            depth_places=asks.depth_places,
        )
        result = await life.recaller.recall(req)
        return RecallView(
            rows=tuple(RecalledRow(r.ref, r.kind, r.seated, r.timestamp) for r in result.rows),
            trace=result.trace,
            time_cue=result.time_cue,
            best_blocks=_best_blocks(result),
            block_chars=life.policies[req.policy].blocks.max_chars,
        )


def _best_blocks(result: RecallResult) -> dict[str, int]:
    """The block the recall's block arm found nearest the query vector, per record."""
    data: object = result.final
    while not isinstance(data, Retrieved):
        data = getattr(data, "source", None)
        if data is None:
            return {}
    block = data.arms.get("block")
    if block is None:
        return {}
    return {row.ref: row.block_index for row in block.rows if row.block_index is not None}
