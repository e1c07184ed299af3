"""Dedup claims: which stored memory already holds a caller id or an identical content.

A memory claims its ``msg_id`` within agent and project, and its content digest within agent, project and
channel (:class:`~cpersona.keys.Keys`). A store whose claim is held by a live record is skipped and names
that record; a claim of a deleted record is stale and ignored.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import TYPE_CHECKING

from cpersona.model.records import new_id
from cpersona.model.results import StoreResult

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cpersona.keys import Keys
    from cpersona.model.drafts import MemoryDraft
    from cpersona.model.records import MemoryRecord, Scope
    from cpersona.stores.protocols import RecordStore

__all__ = ["Fresh", "claim_keys", "content_claim", "dedup", "record_claims"]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def content_claim(keys: Keys, scope: Scope, content: str) -> str:
    return keys.content_claim(scope.agent_id, scope.project_id, scope.channel, _digest(content))


def claim_keys(keys: Keys, draft: MemoryDraft) -> list[str]:
    scope = draft.scope
    claims = []
    if draft.msg_id:
        claims.append(keys.msg_id_claim(scope.agent_id, scope.project_id, draft.msg_id))
    claims.append(content_claim(keys, scope, draft.content))
    return claims


def record_claims(keys: Keys, record: MemoryRecord) -> list[str]:
    """The claims a stored memory holds (released when it is deleted)."""
    scope = record.scope
    claims = [content_claim(keys, scope, record.content)]
    if record.msg_id:
        claims.append(keys.msg_id_claim(scope.agent_id, scope.project_id, record.msg_id))
    return claims


async def _existing_claim(records: RecordStore, claims: Sequence[str]) -> tuple[str, str] | None:
    """The record that already holds a claim, if it still exists (claims of deleted records are stale)."""
    holder = await records.live_claim(claims)
    if holder is None:
        return None
    reason = "duplicate_id" if ":dedup:msg:" in holder.claim else "duplicate_content"
    return holder.record_id, reason


@dataclasses.dataclass(frozen=True, slots=True)
class Fresh:
    """A draft no live record and no earlier draft of its batch claims: it gets a new record id."""

    index: int
    draft: MemoryDraft
    record_id: str
    claims: list[str]


async def dedup(
    records: RecordStore, keys: Keys, drafts: Sequence[MemoryDraft]
) -> tuple[list[StoreResult | None], list[Fresh]]:
    """The skipped drafts' results (``None`` where a draft is fresh) and the fresh drafts, in order."""
    results: list[StoreResult | None] = [None] * len(drafts)
    fresh: list[Fresh] = []
    seen_in_batch: dict[str, str] = {}
    for i, draft in enumerate(drafts):
        claims = claim_keys(keys, draft)
        existing = await _existing_claim(records, claims)
        if existing is None:
            for key in claims:
                if key in seen_in_batch:
                    existing = (seen_in_batch[key], "duplicate")
                    break
        if existing is not None:
            results[i] = StoreResult(
                "skipped", f"mem:{existing[0]}", draft.msg_id, skipped_reason=existing[1]
            )
            continue
        record_id = new_id()
        for key in claims:
            seen_in_batch[key] = record_id
        fresh.append(Fresh(i, draft, record_id, claims))
    return results, fresh
