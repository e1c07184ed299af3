"""Dedup claims: which stored memory already holds a caller id or an identical content.

A memory claims its ``msg_id`` within agent and project, and its content digest within agent, project and
channel (:class:`~cpersona.keys.Keys`). The claims are taken in one atomic step before the text is
embedded (:meth:`~cpersona.stores.protocols.WriteJournal.reserve_writes`), so of concurrent identical
stores one wins and the others are skipped with its ref. A claim held by a live record or by a store
still in flight counts; a claim of a deleted record is stale and ignored.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import TYPE_CHECKING

from cpersona.model.records import new_id
from cpersona.model.results import StoreResult
from cpersona.stores.protocols import InFlightWrite

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cpersona.keys import Keys
    from cpersona.model.drafts import MemoryDraft
    from cpersona.model.records import MemoryRecord, Scope
    from cpersona.model.results import SkipReason
    from cpersona.settings import Settings
    from cpersona.stores.protocols import WriteJournal

__all__ = [
    "Fresh",
    "claim_keys",
    "content_claim",
    "dedup",
    "follower_results",
    "record_claims",
    "reservation_secs",
]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def content_claim(keys: Keys, scope: Scope, content: str) -> str:
    return keys.content_claim(scope.agent_id, scope.project_id, scope.channel, _digest(content))


def claim_keys(keys: Keys, draft: MemoryDraft) -> list[str]:
    rec = draft.record
    claims = []
    if rec.msg_id:
        claims.append(keys.msg_id_claim(rec.scope.agent_id, rec.scope.project_id, rec.msg_id))
    claims.append(content_claim(keys, rec.scope, rec.content))
    return claims


def record_claims(keys: Keys, record: MemoryRecord) -> list[str]:
    """The claims a stored memory holds (released when it is deleted)."""
    scope = record.scope
    claims = [content_claim(keys, scope, record.content)]
    if record.msg_id:
        claims.append(keys.msg_id_claim(scope.agent_id, scope.project_id, record.msg_id))
    return claims


def reservation_secs(settings: Settings) -> float:
    """How long a store's claims stay taken before its document is written: well past the deadlines
    of every step between (embedding, the vector write, the Redis transaction), so only a store that
    died lets them lapse."""
    return 4 * (
        settings.embedding_timeout_secs + settings.qdrant_timeout_secs + 2 * settings.redis_timeout_secs
    )


def _reason(claim: str) -> SkipReason:
    return "duplicate_id" if ":dedup:msg:" in claim else "duplicate_content"


@dataclasses.dataclass(frozen=True, slots=True)
class Fresh:
    """A draft that won its claims: it gets a new record id, and is in flight until written."""

    index: int
    draft: MemoryDraft
    record_id: str
    claims: list[str]
    in_flight: InFlightWrite
    """Its in-flight mark, made once: the claims and a failed write's release both send it."""


def _batch_leaders(keys: Keys, drafts: Sequence[MemoryDraft]) -> tuple[list[Fresh], dict[int, int]]:
    """The drafts no earlier draft of the batch shares a claim with, and each other draft's leader."""
    leaders: list[Fresh] = []
    follows: dict[int, int] = {}
    seen: dict[str, int] = {}
    for i, draft in enumerate(drafts):
        claims = claim_keys(keys, draft)
        earlier = next((seen[key] for key in claims if key in seen), None)
        if earlier is not None:
            follows[i] = earlier
            continue
        seen.update(dict.fromkeys(claims, i))
        record_id = new_id()
        leaders.append(Fresh(i, draft, record_id, claims, InFlightWrite("memory", record_id, tuple(claims))))
    return leaders, follows


async def dedup(
    records: WriteJournal, keys: Keys, drafts: Sequence[MemoryDraft], ttl_secs: float
) -> tuple[list[StoreResult | None], list[Fresh], dict[int, int]]:
    """Claim the drafts' ids and contents, atomically, before anything else is written.

    Returns the skipped drafts' results (``None`` elsewhere), the fresh drafts in order (their claims
    taken and their writes in flight: written by ``put_memories`` or given up by ``release_writes``),
    and, for each draft that repeats an earlier one of its batch, that earlier draft's index. A
    concurrent store of the same id or content finds the claim taken and is skipped with this ref.
    """
    results: list[StoreResult | None] = [None] * len(drafts)
    leaders, follows = _batch_leaders(keys, drafts)
    holders = await records.reserve_writes([f.in_flight for f in leaders], ttl_secs=ttl_secs)
    fresh: list[Fresh] = []
    for leader, holder in zip(leaders, holders, strict=True):
        if holder is None:
            fresh.append(leader)
        else:
            results[leader.index] = StoreResult(
                result="skipped",
                ref=f"mem:{holder.record_id}",
                msg_id=leader.draft.record.msg_id,
                skipped_reason=_reason(holder.claim),
                # The store asked for, until the write path reads the holder's (writes._held_stores).
                store=leader.draft.record.store,
            )
    return results, fresh, follows


def follower_results(
    results: list[StoreResult | None], drafts: Sequence[MemoryDraft], follows: dict[int, int]
) -> list[StoreResult]:
    """Every result in order, once the leaders' are in: a repeat within a batch is skipped with its
    leader's ref (and its leader's reason, when the leader was itself skipped)."""
    for i, leader in sorted(follows.items()):
        first = results[leader]
        assert first is not None
        reason = first.skipped_reason if first.result == "skipped" else "duplicate"
        repeat = drafts[i].record
        results[i] = StoreResult(
            result="skipped",
            ref=first.ref,
            msg_id=repeat.msg_id,
            skipped_reason=reason,
            # The store of the record it names (its leader's), as a skipped leader's answer does.
            store=first.store,
        )
    return [r for r in results if r is not None]
