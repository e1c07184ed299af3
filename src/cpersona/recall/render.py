"""The response rows of a recall: the seated set's rows best first, then its held seats, each with the
record's text (cut to the preview unless the full content was asked for) and why it was admitted.

Every row says why (``match_reason``), the rows no score admitted too: the profile row
(``signal: profile``, ref ``profile:<agent_id>``), a blank query's newest records (``signal: recency``)
and cascade's keyword rows (``signal: keyword``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from cpersona.model.records import Source
from cpersona.recall.request import RecallRow

if TYPE_CHECKING:
    from collections.abc import Mapping

    from cpersona.recall.policy import Policy
    from cpersona.recall.request import RecallRequest
    from cpersona.recall.stages.chain import CueFound, Seat, Seated
    from cpersona.recall.stages.fusion import Candidate
    from cpersona.stores.protocols import HydratedRecord, StoredProfile

__all__ = ["render"]


def render(
    final: Seated,
    docs: Mapping[str, HydratedRecord],
    profile: StoredProfile | None,
    cue: CueFound | None,
    req: RecallRequest,
    policy: Policy,
) -> tuple[RecallRow, ...]:
    """The rows in the order the request asked for; a record deleted since the arms found it is left out.
    ``cue`` is what the cue loop found (its ranks join the match reasons)."""
    preview = None if req.full_content else policy.render.preview_chars
    cue_ranks = {} if cue is None else cue.ranks
    rows: list[RecallRow] = []
    for cand in final.rows:
        if cand.kind == "profile":
            if profile is not None:
                rows.append(_profile_row(cand.ref, profile, preview))
            continue
        doc = docs.get(cand.ref)
        if doc is None:
            continue
        reason = _match_reason(cand, blank=req.blank)
        if cand.ref in cue_ranks:
            reason = {**reason, "cue_rank": cue_ranks[cand.ref]}
        rows.append(_row(doc, preview, reason, cand.fused))
    for seat in final.seats:
        doc = docs.get(seat.ref)
        if doc is not None:
            rows.append(_row(doc, preview, _seat_reason(seat, cue_ranks), None))
    if req.order == "best_last":
        rows.reverse()
    return tuple(rows)


def _seat_reason(seat: Seat, cue_ranks: Mapping[str, int]) -> dict[str, Any]:
    if seat.kind == "cue":
        return {"signal": "cue", "admission": "reservation", "cue_rank": seat.row.rank}
    if seat.kind == "keyword":
        word: dict[str, Any] = {"signal": "keyword", "admission": "reservation", "seat": seat.row.rank}
        return word if seat.row.raw is None else {**word, "rrf": seat.row.raw}
    reason: dict[str, Any] = {
        "signal": "block",
        "admission": "reservation",
        "order": "vector",
        "block": seat.row.block_index,
        "cosine": seat.row.raw,
    }
    if seat.ref in cue_ranks:
        reason["cue_rank"] = cue_ranks[seat.ref]
    return reason


def _match_reason(cand: Candidate, *, blank: bool) -> dict[str, Any]:
    # The signal is the score the gate compared (see its module): an informed row carries its relative
    # score and its rrf, and is gated as under rrf.
    if cand.rsf is not None and cand.rrf is None:
        reason: dict[str, Any] = {"signal": "rsf", "score": cand.rsf}
    elif cand.cosine is not None:
        reason = {"signal": "cosine", "score": cand.cosine}
    elif cand.rrf is not None:
        reason = {"signal": "rrf", "score": cand.rrf}
    elif blank:
        # A blank query asks for nothing in particular: its rows are the scope's newest records.
        return {"signal": "recency"}
    else:
        # Cascade's keyword rows carry no fused score, only the keyword arm's own (when it had one).
        return {"signal": "keyword"} if cand.bm25 is None else {"signal": "keyword", "bm25": cand.bm25}
    if cand.cosine is not None:
        reason["cosine"] = cand.cosine
    if cand.rrf is not None:
        reason["rrf"] = cand.rrf
    if cand.rsf is not None:
        reason["rsf"] = cand.rsf
    return reason


def _cut(text: str, preview: int | None) -> tuple[str, bool]:
    if preview is None or len(text) <= preview:
        return text, False
    return text[:preview], True


def _row(
    doc: HydratedRecord, preview: int | None, reason: Mapping[str, Any], score: float | None
) -> RecallRow:
    kind: Literal["memory", "episode"]
    if doc.is_memory:
        text, source, kind, msg_id = doc.full_text(), doc.source or Source(), "memory", doc.msg_id
    else:
        text, source, kind, msg_id = "[Episode] " + doc.full_text(), None, "episode", ""
    if doc.ts is None:
        raise KeyError("ts")  # every stored record has a time; one without it cannot be a row
    content, truncated = _cut(text, preview)
    return RecallRow(
        ref=doc.ref,
        kind=kind,
        content=content,
        content_len=len(text),
        content_truncated=truncated,
        msg_id=msg_id,
        timestamp=doc.ts,
        source=source,
        match_reason=dict(reason),
        score=score,
    )


def _profile_row(ref: str, profile: StoredProfile, preview: int | None) -> RecallRow:
    """The agent's profile, added to a recall whose scope is large enough (the gate's ``profile`` rule)."""
    text = "[Profile] " + profile.content
    content, truncated = _cut(text, preview)
    return RecallRow(
        ref=ref,
        kind="profile",
        content=content,
        content_len=len(text),
        content_truncated=truncated,
        msg_id="",
        timestamp=None,
        source=None,
        match_reason={"signal": "profile"},
        score=None,
    )
