"""How well a memory is kept, as a function of the time since it was last recalled.

Cerememory's decay multiplies the *current* score on every tick, so a record's fidelity depends on how
often the tick ran. Here the stored ``score`` is the fidelity at the record's baseline — when it was
stored, or last recalled — and its fidelity at any later moment is computed from the time elapsed since
then with the same formula (``(1 + t/S)^-d``, modulated by emotional intensity). A tick only reports; it
never moves the baseline, so one tick over an hour and sixty ticks over the same hour agree.

**The time scale is a setting.** The reference counts ``t`` and the stability ``S`` in seconds with
``S = 1`` for a new memory: it reads .086 after an hour and falls below the prune threshold within weeks,
which its own notes call a probable bug. The stored ``S`` here is the reference's number (1 when stored,
grown the same way by each recall), but one unit of it lasts :attr:`FidelityCurve.stability_hours`
(``CPERSONA_FIDELITY_STABILITY_HOURS``, a day by default), and ``t`` is counted in that unit too: the
shape of the curve is the reference's, stretched in time. Changing the setting re-reads every memory on
the new scale; nothing stored changes.

Reconsolidation (a recall that strengthens what it returned) is the one event that moves the baseline:
the memory is read as fresh from the moment of the recall, at its anchored score, and its stability grows.
Re-anchoring at the faded value instead (the reference's effect, where the tick has already written it)
makes every recall start a new decay from there: a memory recalled every few months would fade far below
one nobody recalled, and be hidden within two years. Here a recall never leaves a memory fainter later.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

from cpersona.settings import FIDELITY_STABILITY_HOURS

if TYPE_CHECKING:
    from cpersona.model.records import EmotionVector, Fidelity, MemoryRecord
    from cpersona.settings import Settings

__all__ = [
    "INTERFERENCE_RATE",
    "FidelityCurve",
    "PRUNE_THRESHOLD",
    "RETRIEVAL_BOOST",
    "aged",
    "as_read",
    "current_fidelity",
    "current_noise",
    "emotional_modulation",
    "is_decayed",
    "reconsolidated",
]

RETRIEVAL_BOOST = 1.5
INTERFERENCE_RATE = 0.1
PRUNE_THRESHOLD = 0.01
"""Below this a record is *decayed*: hidden from the recall operations unless ``include_decayed``."""


@dataclasses.dataclass(frozen=True, slots=True)
class FidelityCurve:
    """The time scale of decay: how long one unit of a memory's stability lasts, in hours."""

    stability_hours: float = FIDELITY_STABILITY_HOURS

    @classmethod
    def of(cls, settings: Settings) -> FidelityCurve:
        return cls(settings.fidelity_stability_hours)

    @property
    def unit_secs(self) -> float:
        return self.stability_hours * 3600.0

    def units(self, seconds: float) -> float:
        """``seconds`` in units of stability."""
        return seconds / self.unit_secs


def _clamp01(value: float) -> float:
    return min(max(value, 0.0), 1.0)


def emotional_modulation(emotion: EmotionVector) -> float:
    """An intense memory keeps better: ``1 + 0.5·intensity`` (intensity read as 0..1)."""
    return 1.0 + 0.5 * _clamp01(emotion.intensity)


def _elapsed(fidelity: Fidelity, now: float, curve: FidelityCurve) -> float:
    """The time since the baseline, in units of stability."""
    return curve.units(max(0.0, now - fidelity.last_accessed_at))


def current_fidelity(
    fidelity: Fidelity, emotion: EmotionVector, now: float, *, curve: FidelityCurve
) -> float:
    """The fidelity at ``now``: the anchored score decayed over the time since the baseline."""
    t = _elapsed(fidelity, now, curve)
    stability = max(fidelity.stability, 1e-9)
    decayed = fidelity.score * math.pow(1.0 + t / stability, -fidelity.decay_rate)
    return _clamp01(decayed * emotional_modulation(emotion))


def current_noise(fidelity: Fidelity, emotion: EmotionVector, now: float, *, curve: FidelityCurve) -> float:
    """Interference gathered since the baseline; it grows with time (in units of stability, as the
    fidelity's) and with what was lost."""
    t = _elapsed(fidelity, now, curve)
    lost = 1.0 - current_fidelity(fidelity, emotion, now, curve=curve)
    return _clamp01(fidelity.noise_level + INTERFERENCE_RATE * math.sqrt(t) * lost)


def reconsolidated(
    fidelity: Fidelity, emotion: EmotionVector, now: float, *, curve: FidelityCurve
) -> Fidelity:
    """The fidelity after a recall at ``now``: its baseline moved there (the anchored score kept), more
    stable, counted."""
    stability = fidelity.stability
    return dataclasses.replace(
        fidelity,
        noise_level=current_noise(fidelity, emotion, now, curve=curve),
        emotional_anchor=emotional_modulation(emotion),
        stability=stability * (1.0 + RETRIEVAL_BOOST * math.pow(stability, -0.2)),
        reinforcement_count=fidelity.reinforcement_count + 1,
        access_count=fidelity.access_count + 1,
        last_accessed_at=now,
    )


def as_read(record: MemoryRecord, now: float, *, curve: FidelityCurve) -> MemoryRecord:
    """The record as a reader sees it at ``now``: ``score`` and ``noise_level`` are their values at that
    moment. Only the copy handed out changes; the stored anchor is never written by a read. Every route
    and method that returns a memory passes it through here, so all of them agree on one value.
    """
    fidelity, emotion = record.fidelity, record.emotion
    shown = dataclasses.replace(
        fidelity,
        score=current_fidelity(fidelity, emotion, now, curve=curve),
        noise_level=current_noise(fidelity, emotion, now, curve=curve),
    )
    return dataclasses.replace(record, fidelity=shown)


def is_decayed(record: MemoryRecord, now: float, *, curve: FidelityCurve) -> bool:
    """Whether the record has faded below :data:`PRUNE_THRESHOLD` at ``now`` (the recall operations hide
    it unless asked for ``include_decayed``)."""
    return current_fidelity(record.fidelity, record.emotion, now, curve=curve) < PRUNE_THRESHOLD


def aged(fidelity: Fidelity, seconds: float) -> Fidelity:
    """The fidelity ``seconds`` older than it is: its baseline moved that far back, so at any moment it
    reads as it would ``seconds`` later. Ageing twice by ``a`` and ``b`` is ageing once by ``a + b``."""
    return dataclasses.replace(fidelity, last_accessed_at=fidelity.last_accessed_at - seconds)
