"""The data model: one set of record types for both seeds.

A *memory* is what an agent learned (CPersona's ``memories`` row and Cerememory's ``MemoryRecord`` in
one shape), an *episode* is a session summary, a *raw entry* is the verbatim journal, and the *profile* is
at most one text per agent. Every record carries its scope (agent, project, channel, source), its own
time (``timestamp``), and — for memories and episodes — an insertion sequence number that the recall scan
window orders by.

These are frozen value types. They are built by the write path from validated input and by the record
store from Redis documents; nothing mutates them, an update makes a new one.
"""

from __future__ import annotations

import dataclasses
import os
import time
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from cpersona.model.time_cue import MAX_TS, MIN_TS

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "TIME_FIELDS",
    "Association",
    "EmotionVector",
    "EpisodeRecord",
    "Fidelity",
    "MemoryRecord",
    "MetaEdge",
    "MetaMemory",
    "ProfileRecord",
    "RawRecord",
    "Ref",
    "Scope",
    "Source",
    "StoreKind",
    "format_time",
    "new_id",
    "parse_ref",
]

StoreKind = Literal["episodic", "semantic", "procedural", "emotional"]

AssociationType = Literal[
    "temporal", "spatial", "semantic", "emotional", "causal", "sequential", "cross_modal", "user_defined"
]
CaptureStatus = Literal["provided", "inferred", "legacy", "unavailable"]
MetaRelation = Literal[
    "motivated_by",
    "caused_by",
    "derived_from",
    "supports",
    "contradicts",
    "chose_over",
    "explains",
    "context_of",
]

RawSource = Literal["conversation", "tool_io", "scratchpad", "summary", "imported"]
RawSpeaker = Literal["user", "assistant", "system", "tool"]
RawVisibility = Literal["normal", "private_scratch", "sealed"]
SecrecyLevel = Literal["public", "sensitive", "secret"]

RefKind = Literal["mem", "ep", "raw"]


def new_id() -> str:
    """A UUIDv7 string: time-ordered, so ids sort roughly by creation."""
    millis = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (millis & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76  # version
    value |= ((rand >> 62) & 0xFFF) << 64  # 12 random bits
    value |= 0b10 << 62  # variant
    value |= rand & ((1 << 62) - 1)
    return uuid_text(value)


def uuid_text(value: int) -> str:
    """A 128-bit value in the UUID's text form, as ``str(uuid.UUID(int=value))`` writes it, in half
    the time (a batch of 500 memories makes its 500 ids in one step of the event loop)."""
    digits = f"{value:032x}"
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


TIME_FIELDS = frozenset(
    {
        "timestamp",
        "created_at",
        "updated_at",
        "start_time",
        "end_time",
        "last_accessed_at",
        "last_decay_tick",
        "captured_at",
    }
)
"""The record fields holding epoch seconds, which leave the engine as RFC 3339 text (:func:`format_time`)."""


def format_time(epoch: float) -> str:
    """RFC 3339 in UTC with a ``Z`` and microseconds, the one time format on the wire.

    Writes refuse a time outside the years 1 to 9999, but a record stored before that rule may hold
    one; it is shown at the nearest end of the range rather than failing every read of its agent.
    """
    moment = datetime.fromtimestamp(min(max(epoch, MIN_TS), MAX_TS), UTC)
    # isoformat, not strftime: strftime's %Y does not pad years before 1000 to four digits.
    return moment.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


@dataclasses.dataclass(frozen=True, slots=True)
class Ref:
    """A record reference as callers see it: ``mem:<id>``, ``ep:<id>`` or ``raw:<id>``."""

    kind: RefKind
    id: str

    def __str__(self) -> str:
        return f"{self.kind}:{self.id}"


def parse_ref(text: str) -> Ref | None:
    """Read ``mem:<uuid>``/``ep:<uuid>``/``raw:<uuid>``; ``None`` if it is not one."""
    kind, sep, ident = text.partition(":")
    if not sep or kind not in ("mem", "ep", "raw"):
        return None
    try:
        canonical = str(uuid.UUID(ident))
    except ValueError:
        return None
    if canonical != ident.lower():
        return None
    return Ref(kind, canonical)  # type: ignore[arg-type]


@dataclasses.dataclass(frozen=True, slots=True)
class Source:
    """Who or what produced a memory: CPersona's ``{type, id, name}``."""

    type: str = "Agent"
    id: str = ""
    name: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class Scope:
    """Where a record lives. ``''`` for project or channel is the global pool."""

    agent_id: str
    project_id: str = ""
    channel: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class EmotionVector:
    """Plutchik's eight axes (nominally 0..1), intensity (0..1) and valence (-1..1)."""

    joy: float = 0.0
    trust: float = 0.0
    fear: float = 0.0
    surprise: float = 0.0
    sadness: float = 0.0
    disgust: float = 0.0
    anger: float = 0.0
    anticipation: float = 0.0
    intensity: float = 0.0
    valence: float = 0.0


@dataclasses.dataclass(frozen=True, slots=True)
class Fidelity:
    """How well a memory is kept: decay state and how often it was recalled."""

    score: float = 1.0
    noise_level: float = 0.0
    decay_rate: float = 0.3
    emotional_anchor: float = 1.0
    stability: float = 1.0
    reinforcement_count: int = 0
    access_count: int = 0
    last_accessed_at: float = 0.0
    last_decay_tick: float = 0.0


@dataclasses.dataclass(frozen=True, slots=True)
class MetaEdge:
    """A "why" edge of the context graph: this record ``relation`` the target (e.g. ``derived_from``).

    ``target_id`` and ``source_id`` are record refs (``mem:``, ``ep:``, ``raw:``); a bare UUID was read as
    a memory's. ``source_id`` ``None`` means the record that carries the edge.
    """

    target_id: str
    relation: MetaRelation = "context_of"
    source_id: str | None = None
    rationale: str | None = None
    evidence: tuple[Mapping[str, Any], ...] = ()
    confidence: float | None = None
    created_at: float | None = None

    def __post_init__(self) -> None:
        # Read back from JSON, the evidence is a list; the value keeps a tuple, as every other does.
        object.__setattr__(self, "evidence", tuple(self.evidence))


@dataclasses.dataclass(frozen=True, slots=True)
class MetaMemory:
    """The "why" plane: intent, rationale, evidence and decisions behind a record."""

    capture_status: CaptureStatus = "unavailable"
    intent: str | None = None
    rationale: str | None = None
    trigger: str | None = None
    decision: str | None = None
    goals: tuple[str, ...] = ()
    assumptions: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    evidence: tuple[Mapping[str, Any], ...] = ()
    alternatives: tuple[Mapping[str, Any], ...] = ()
    confidence: float | None = None
    captured_at: float | None = None
    context_edges: tuple[MetaEdge, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class Association:
    """A typed, weighted outbound edge to another record."""

    target_id: str
    type: AssociationType
    weight: float
    created_at: float


@dataclasses.dataclass(frozen=True, slots=True)
class MemoryRecord:
    """One stored memory."""

    id: str
    scope: Scope
    source: Source
    content: str
    timestamp: float
    seq: int
    msg_id: str = ""
    metadata: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    store: StoreKind = "episodic"
    emotion: EmotionVector = EmotionVector()
    fidelity: Fidelity = Fidelity()
    meta: MetaMemory = MetaMemory()
    associations: tuple[Association, ...] = ()
    created_at: float = 0.0
    updated_at: float = 0.0
    version: int = 1
    locked: bool = False
    embedded: bool = False
    embedding_model: str = ""
    vector_pending: bool = False

    @property
    def ref(self) -> str:
        return f"mem:{self.id}"


@dataclasses.dataclass(frozen=True, slots=True)
class EpisodeRecord:
    """A session summary that the agent computed; its time is ``start_time`` or else ``created_at``."""

    id: str
    scope: Scope
    summary: str
    seq: int
    keywords: tuple[str, ...] = ()
    start_time: float | None = None
    end_time: float | None = None
    resolved: bool = False
    created_at: float = 0.0
    embedded: bool = False
    embedding_model: str = ""
    vector_pending: bool = False

    @property
    def ref(self) -> str:
        return f"ep:{self.id}"

    @property
    def timestamp(self) -> float:
        return self.start_time if self.start_time is not None else self.created_at


@dataclasses.dataclass(frozen=True, slots=True)
class RawRecord:
    """One verbatim journal entry. Searched only by the forensic raw query, never by recall."""

    id: str
    scope: Scope
    session_id: str
    source: RawSource
    speaker: RawSpeaker
    visibility: RawVisibility
    secrecy_level: SecrecyLevel
    content: str
    created_at: float
    turn_id: str | None = None
    topic_id: str | None = None
    metadata: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    meta: MetaMemory = MetaMemory()
    suppressed: bool = False

    @property
    def ref(self) -> str:
        return f"raw:{self.id}"


@dataclasses.dataclass(frozen=True, slots=True)
class ProfileRecord:
    """The agent's profile text (at most one per agent)."""

    agent_id: str
    content: str
    updated_at: float
