"""The data model: one set of record types for both seeds.

A *memory* is what an agent learned (CPersona's ``memories`` row and Cerememory's ``MemoryRecord`` in
one shape), an *episode* is a session summary, a *raw entry* is the verbatim journal, and the *profile* is
at most one text per agent. Every record carries its scope (agent, project, channel, source), its own
time (``timestamp``), and — for memories and episodes — an insertion sequence number that the recall scan
window orders by.

These are frozen value types, each kind declared here once. They are built by the write path from
validated input; nothing mutates them, an update makes a new one. Everything else a record becomes is
derived from these declarations through pydantic (:data:`MEMORY`, :data:`EPISODE`, :data:`RAW`,
:data:`PROFILE`): the Redis document (the record's JSON form, renamed and given its index fields in
:mod:`~cpersona.stores.redis.documents`), the HTTP/MCP/CLI record shape, the archive line and the
Cerememory record. A time field is typed :data:`Moment`, so each of them can show it as RFC 3339 text
(:data:`TIMES_AS_TEXT`) without a list of names that must be kept in step.
"""

from __future__ import annotations

import dataclasses
import os
import time
import uuid
from collections.abc import Mapping  # noqa: TC003 - the schemas read the annotations at run time
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    WrapSerializer,
)

from cpersona.model.fields import Unit01
from cpersona.model.time_cue import MAX_TS, MIN_TS

__all__ = [
    "EPISODE",
    "MEMORY",
    "META",
    "PROFILE",
    "RAW",
    "TIMES_AS_TEXT",
    "Association",
    "EmotionVector",
    "EpisodeRecord",
    "Fidelity",
    "MemoryRecord",
    "MetaEdge",
    "MetaMemory",
    "Moment",
    "NO_EMOTION",
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


def format_time(epoch: float) -> str:
    """RFC 3339 in UTC with a ``Z`` and microseconds, the one time format on the wire.

    Writes refuse a time outside the years 1 to 9999, but a record stored before that rule may hold
    one; it is shown at the nearest end of the range rather than failing every read of its agent.
    """
    moment = datetime.fromtimestamp(min(max(epoch, MIN_TS), MAX_TS), UTC)
    # isoformat, not strftime: strftime's %Y does not pad years before 1000 to four digits.
    return moment.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


TIMES_AS_TEXT = {"times": "text"}
"""The serialisation context that shows every :data:`Moment` as RFC 3339 text (:func:`format_time`)."""


def _moment_in(value: object) -> object:
    # A time shown as text (an archive line) reads back as epoch seconds; numbers go to pydantic.
    if isinstance(value, str):
        return datetime.fromisoformat(value.removesuffix("Z")).replace(tzinfo=UTC).timestamp()
    return value


def _moment_out(value: float, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> object:
    if info.context is not None and info.context.get("times") == "text":
        return format_time(value)
    return handler(value)


Moment = Annotated[float, BeforeValidator(_moment_in), WrapSerializer(_moment_out)]
"""A record's point in time: epoch seconds, stored as a number, shown as RFC 3339 text where the
serialisation context asks for it (:data:`TIMES_AS_TEXT`); text reads back as epoch seconds."""


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


Valence = Annotated[float, Field(ge=-1.0, le=1.0, allow_inf_nan=False)]


class EmotionVector(BaseModel):
    """Plutchik's eight axes and intensity (0..1), and valence (-1..1).

    Each field is declared here with its limit, once: the request body of an emotion
    (:class:`~cpersona.model.memory_parts.EmotionBody`) is this model under the rules of a request. A
    pydantic model, where the other parts of a record are dataclasses, so that the body can inherit it.
    """

    model_config = ConfigDict(frozen=True)

    joy: Unit01 = 0.0
    trust: Unit01 = 0.0
    fear: Unit01 = 0.0
    surprise: Unit01 = 0.0
    sadness: Unit01 = 0.0
    disgust: Unit01 = 0.0
    anger: Unit01 = 0.0
    anticipation: Unit01 = 0.0
    intensity: Unit01 = 0.0
    valence: Valence = 0.0


NO_EMOTION = EmotionVector()
"""The emotion of a memory that names none: one frozen instance, not one built per record."""


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
    last_accessed_at: Moment = 0.0
    last_decay_tick: Moment = 0.0


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
    created_at: Moment | None = None

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
    captured_at: Moment | None = None
    context_edges: tuple[MetaEdge, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class Association:
    """A typed, weighted outbound edge to another record."""

    target_id: str
    type: AssociationType
    weight: float
    created_at: Moment


@dataclasses.dataclass(frozen=True, slots=True)
class MemoryRecord:
    """One stored memory."""

    id: str
    scope: Scope
    source: Source
    content: str
    timestamp: Moment
    seq: int
    msg_id: str = ""
    metadata: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    store: StoreKind = "episodic"
    emotion: EmotionVector = NO_EMOTION
    fidelity: Fidelity = Fidelity()
    meta: MetaMemory = MetaMemory()
    associations: tuple[Association, ...] = ()
    created_at: Moment = 0.0
    updated_at: Moment = 0.0
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
    start_time: Moment | None = None
    end_time: Moment | None = None
    resolved: bool = False
    created_at: Moment = 0.0
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
    created_at: Moment
    turn_id: str | None = None
    topic_id: str | None = None
    metadata: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    meta: MetaMemory = MetaMemory()
    suppressed: bool = False

    @property
    def ref(self) -> str:
        return f"raw:{self.id}"


class ProfileRecord(BaseModel):
    """The agent's profile text (at most one per agent).

    A pydantic model, where the other kinds are dataclasses: its Redis document is redis-om's JSON model
    of it (:class:`~cpersona.stores.redis.documents.ProfileDocument`), which a dataclass cannot be.
    """

    model_config = ConfigDict(frozen=True)

    agent_id: str
    content: str
    updated_at: Moment


# Each record kind's schema, derived from its declaration above: ``dump_python(rec, mode="json")`` is
# the record as JSON data (the base of its document, its HTTP shape and its archive line) and
# ``validate_python`` reads such data back into the record (extra keys, such as a document's index
# fields, are ignored).
MEMORY: TypeAdapter[MemoryRecord] = TypeAdapter(MemoryRecord)
META: TypeAdapter[MetaMemory] = TypeAdapter(MetaMemory)
EPISODE: TypeAdapter[EpisodeRecord] = TypeAdapter(EpisodeRecord)
RAW: TypeAdapter[RawRecord] = TypeAdapter(RawRecord)
PROFILE: TypeAdapter[ProfileRecord] = TypeAdapter(ProfileRecord)
