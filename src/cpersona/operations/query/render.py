"""How a recalled memory's text is shown: ``perfect`` exactly, ``human`` with noise from its fidelity.

The reference (§5.1.7) masks every ``step``-th word once fidelity falls under 0.9, so the first word is
always the one lost and two records of the same fidelity lose the same positions. Here each word has
its own fixed draw ``u`` in [0, 1) — a hash of the record id and the word's position — and is shown as
``...`` when ``u < min(1 - fidelity, 0.8)``. So the render depends only on the record and its fidelity
(the same record at the same fidelity always renders the same), a lower fidelity masks a superset of
the words a higher one masks (memory fades, it does not reshuffle), about ``1 - fidelity`` of the words
go, never more than 80%, and none at or above 0.9. Whitespace between words is kept as it was.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cpersona.model.cue_query import RecallModeName

__all__ = ["CLEAR_FIDELITY", "MASK", "MAX_MASKED", "masked_share", "render_text"]

CLEAR_FIDELITY = 0.9
"""At or above this fidelity a memory is shown as stored."""
MAX_MASKED = 0.8
MASK = "..."
_WORD = re.compile(r"\S+")
_SCALE = float(1 << 64)


def masked_share(fidelity: float) -> float:
    """The chance that a word is masked at ``fidelity``."""
    if fidelity >= CLEAR_FIDELITY:
        return 0.0
    return min(1.0 - max(fidelity, 0.0), MAX_MASKED)


def _draw(record_id: str, position: int) -> float:
    digest = hashlib.blake2b(f"{record_id}\x00{position}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / _SCALE


def render_text(text: str, record_id: str, fidelity: float, mode: RecallModeName) -> str:
    """``text`` as a recall in ``mode`` shows it."""
    share = masked_share(fidelity) if mode == "human" else 0.0
    if share == 0.0:
        return text
    position = -1

    def one(match: re.Match[str]) -> str:
        nonlocal position
        position += 1
        return MASK if _draw(record_id, position) < share else match.group(0)

    return _WORD.sub(one, text)
