"""A timeline's ``RecalledMemory``: a memory as Cerememory's ``MemoryRecord`` (the one shape of
:mod:`cpersona.model.cmp_record`, read at the moment of the answer), scored by its fidelity then, its
content as stored (no noise, no reconsolidation), no activation path."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from pydantic import ConfigDict, Field

from cpersona.model.cmp_record import cmp_record, read_now
from cpersona.model.records import parse_ref
from cpersona.model.result_model import ResultModel

if TYPE_CHECKING:
    from cpersona.model.fidelity import FidelityCurve
    from cpersona.model.records import MemoryRecord

__all__ = ["RecalledMemoryBody", "bare_id", "recalled", "recalled_json"]


class RecalledMemoryBody(ResultModel):
    """A memory and its relevance: for a timeline, the relevance is the record's fidelity now."""

    model_config = ConfigDict(title="TimelineMemory")

    record: dict[str, Any] = Field(description="The memory as Cerememory's MemoryRecord (CmpMemoryRecord)")
    relevance_score: float
    activation_path: list[str] | None = None
    rendered_content: dict[str, Any] = Field(description="The content as stored (no noise)")


def bare_id(target: str) -> str | None:
    """The UUID a ref or a bare UUID names (``mem:<uuid>`` → ``<uuid>``); ``None`` for other text."""
    ref = parse_ref(target)
    if ref is not None:
        return ref.id
    try:
        return str(uuid.UUID(target))
    except ValueError:
        return None


def recalled_json(record: MemoryRecord, now: float, curve: FidelityCurve) -> dict[str, Any]:
    """``record`` read at ``now`` as a timeline's ``RecalledMemory``."""
    body = cmp_record(read_now(record, now, curve))
    return {
        "record": body,
        "relevance_score": body["fidelity"]["score"],
        "activation_path": None,
        "rendered_content": body["content"],
    }


def recalled(record: MemoryRecord, now: float, curve: FidelityCurve) -> RecalledMemoryBody:
    """:func:`recalled_json` as its model, built without validating again what was built here."""
    return RecalledMemoryBody.model_construct(**recalled_json(record, now, curve))
