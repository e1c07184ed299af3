"""The parts of a memory write that are more than one value: content blocks, source, emotion, meta and
associations, each as its request model and the record value it becomes.

Both seeds' shapes are accepted for content: CPersona's plain text (``"content": "..."``) and
Cerememory's ``{"blocks": [{"modality": "text", "format": "text/plain", "data": [72, 105]}], "summary":
...}``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from cpersona.model.epoch_time import EpochTime
from cpersona.model.fields import (
    CLEAN,
    OWN,
    TAG,
    WHOLE,
    ContentSchema,
    ContentText,
    KeyText,
    Limit,
    RequestModel,
    Unit01,
    refusal,
    settings_of,
)
from cpersona.model.json_values import json_length
from cpersona.model.record_queries import UUID_PATTERN
from cpersona.model.records import (
    NO_EMOTION,
    Association,
    AssociationType,
    CaptureStatus,
    EmotionVector,
    MetaEdge,
    MetaMemory,
    MetaRelation,
    Source,
)
from cpersona.model.text_rules import WHITESPACE_CLASS
from cpersona.model.wording import pattern_in_words

__all__ = [
    "NO_RATIONALE",
    "AssociationBody",
    "Content",
    "ContentBlock",
    "Emotion",
    "EmotionBody",
    "MemoryContent",
    "MetaBody",
    "MetaEdgeBody",
    "SourceBody",
    "check_meta_size",
    "emotion_vector",
]

_EMOTION_LABELS: dict[str, tuple[str, float]] = {
    "joy": ("joy", 1.0), "happy": ("joy", 1.0), "happiness": ("joy", 1.0),
    "trust": ("trust", 0.7), "fear": ("fear", -0.8), "surprise": ("surprise", 0.0),
    "sadness": ("sadness", -1.0), "sad": ("sadness", -1.0), "disgust": ("disgust", -0.9),
    "anger": ("anger", -0.9), "angry": ("anger", -0.9),
    "anticipation": ("anticipation", 0.4), "anticipatory": ("anticipation", 0.4),
}  # fmt: skip
_MAX_ITEMS = 256
NO_RATIONALE = "no explicit meta-rationale provided at ingest"

_MetaText = Annotated[str, Limit("max_metadata_length")]
_Byte = Annotated[int, Field(ge=0, le=255), WHOLE]


def _data_branch(value: Any) -> str:
    return f"{TAG}text" if isinstance(value, str) else f"{TAG}bytes"


def _utf8(value: list[int]) -> list[int]:
    try:
        bytes(value).decode("utf-8")
    except UnicodeDecodeError:
        raise refusal("not_utf8", "is not valid UTF-8") from None
    return value


# What the schema can say of bytes that must decode to clean text: printable ASCII, tab and newlines,
# at least one of them visible. Other UTF-8 is read as well; a schema cannot spell UTF-8.
# Each as a list of values, not a range: a generator merging ranges may offer 33.0, which JSON Schema
# counts as an integer and the strict model does not.
_TEXT_BYTES_SCHEMA = {
    "type": "array",
    "items": {"enum": [9, 10, 13, *range(32, 127)]},
    "contains": {"enum": list(range(33, 127))},
}
_BlockData = Annotated[
    Annotated[str, ContentSchema(), Tag(f"{TAG}text")]
    | Annotated[list[_Byte], AfterValidator(_utf8), WithJsonSchema(_TEXT_BYTES_SCHEMA), Tag(f"{TAG}bytes")],
    Discriminator(_data_branch),
]


class ContentBlock(RequestModel):
    """One content block; only text is supported (another modality is ``MODALITY_UNSUPPORTED``), and
    the first block is the memory's text."""

    # Cerememory blocks may carry more than this engine reads (an embedding, a hash); they are ignored.
    model_config = ConfigDict(extra="ignore")

    modality: Literal["text"]
    format: str | None = Field(default=None, description="e.g. text/plain")
    data: _BlockData = Field(
        description="Text, or its UTF-8 bytes as integers 0-255; every block's text is "
        "checked as content (not blank, no control characters)"
    )

    # Before the type's own check, so that a caller sending an image hears why it is refused: a
    # MODALITY_UNSUPPORTED naming this block's modality (Cerememory's code, its SDK's
    # ModalityUnsupportedError). A text block beside it does not make it pass: the image would be
    # dropped without a word, and nothing of a write is ignored silently.
    @field_validator("modality", mode="before")
    @classmethod
    def _text_only(cls, value: Any) -> Any:
        if isinstance(value, str) and value != "text":
            raise refusal("modality_unsupported", f"only 'text' is supported by this engine, got {value!r}")
        return value

    def text(self) -> str:
        return self.data if isinstance(self.data, str) else bytes(self.data).decode("utf-8")


class MemoryContent(RequestModel):
    """Cerememory ``MemoryContent``: content blocks and an optional summary."""

    blocks: Annotated[list[ContentBlock], Field(min_length=1)]
    summary: Annotated[str, Limit("max_content_length")] | None = None

    @model_validator(mode="after")
    def _every_text_is_content(self, info: ValidationInfo) -> MemoryContent:
        # Only the first block is stored, but every block is text as the schema describes it; a refusal
        # names the content, as one of the stored text does.
        most = settings_of(info).max_content_length
        for block in self.blocks:
            text = block.text()
            CLEAN.check(text)
            if len(text) > most:
                raise refusal(
                    "too_large",
                    "is {size} characters; the limit is {most}",
                    {"size": len(text), "most": most},
                )
        return self

    def text(self) -> str:
        return self.blocks[0].text()


def _content_branch(value: Any) -> str | None:
    if isinstance(value, Mapping | MemoryContent):
        return f"{TAG}blocks"
    return f"{TAG}text" if isinstance(value, str) else None


Content = Annotated[
    Annotated[ContentText, Tag(f"{TAG}text")] | Annotated[MemoryContent, Tag(f"{TAG}blocks")],
    # Content of neither shape is told both it could have been, not just why it is no string.
    Discriminator(
        _content_branch,
        custom_error_type=OWN + "content_type",
        custom_error_message="must be a string or an object",
    ),
    Field(description="Plain text (CPersona) or Cerememory MemoryContent"),
]
"""A memory's content as a caller writes it; the text of blocks is checked when the draft is made."""


class SourceBody(RequestModel):
    """Who or what produced a memory; ``id`` defaults to the agent."""

    type: KeyText = "Agent"
    id: KeyText | None = None
    name: KeyText = ""

    def source(self, agent_id: str) -> Source:
        return Source(self.type, agent_id if self.id is None else self.id, self.name)


class EmotionBody(RequestModel, EmotionVector):
    """Plutchik's eight axes (joy, trust, fear, surprise, sadness, disgust, anger, anticipation) and
    intensity, each 0..1, and valence, -1..1."""

    # The record's fields and their limits (EmotionVector), checked as a request is: strict, closed.


def _emotion_branch(value: Any) -> str:
    return f"{TAG}label" if isinstance(value, str) else f"{TAG}axes"


def _any_case(word: str) -> str:
    return "".join(f"[{ch}{ch.upper()}]" for ch in word)


# The labels as the validator reads them (surrounding whitespace stripped, any case), for the schema.
_LABEL_PATTERN = (
    f"^[{WHITESPACE_CLASS}]*(?:{'|'.join(_any_case(label) for label in sorted(_EMOTION_LABELS))})"
    f"[{WHITESPACE_CLASS}]*$"
)


def _known_label(value: str) -> str:
    if value.strip().lower() not in _EMOTION_LABELS:
        raise refusal("unknown_emotion", f"unknown emotion label {value!r}")
    return value


Emotion = Annotated[
    Annotated[
        str,
        AfterValidator(_known_label),
        WithJsonSchema({"type": "string", "pattern": _LABEL_PATTERN}),
        Tag(f"{TAG}label"),
    ]
    | Annotated[EmotionBody, Tag(f"{TAG}axes")],
    Discriminator(_emotion_branch),
    Field(description="An emotion label (e.g. 'joy', 'anger') or an EmotionVector"),
]


def emotion_vector(value: str | EmotionBody | None) -> EmotionVector:
    if value is None:
        return NO_EMOTION
    if isinstance(value, str):
        axis, valence = _EMOTION_LABELS[value.strip().lower()]
        return EmotionVector(**{axis: 1.0, "intensity": 1.0, "valence": valence})
    return EmotionVector.model_validate(value.model_dump())


_NIL_UUID = "00000000-0000-0000-0000-000000000000"


def _edge_end(value: str) -> str:
    kind, sep, rest = value.lower().rpartition(":")
    if rest == _NIL_UUID:
        raise refusal("nil_id", "must not be the nil UUID")
    return f"{kind}:{rest}" if sep else f"mem:{rest}"


_EDGE_END = f"((mem|ep|raw):)?{UUID_PATTERN}"
_EdgeEnd = Annotated[
    str,
    Field(pattern=pattern_in_words(f"^{_EDGE_END}$", "a record id: a UUID, or mem:, ep: or raw: and a UUID")),
    AfterValidator(_edge_end),
    # The validator's regex engine has no look-ahead; the document's says "not the nil UUID" as well.
    WithJsonSchema(
        {
            "type": "string",
            "pattern": f"^(?!((mem|ep|raw):)?{_NIL_UUID}$){_EDGE_END}$",
            "description": "A record ref (mem:/ep:/raw:<uuid>), or a bare UUID, read as a memory's",
        }
    ),
]


class MetaEdgeBody(RequestModel):
    """A context-graph edge a caller declares: this record ``relation`` the target, and why."""

    target_id: _EdgeEnd
    relation: MetaRelation = "context_of"
    source_id: _EdgeEnd | None = Field(default=None, description="Default: the record that carries it")
    rationale: _MetaText | None = None
    evidence: Annotated[Sequence[dict[str, Any]], Field(max_length=_MAX_ITEMS)] = ()
    confidence: Unit01 | None = None
    created_at: EpochTime | None = Field(default=None, description="Default: when the meta was captured")

    def edge(self, now: float) -> MetaEdge:
        return MetaEdge(
            target_id=self.target_id,
            relation=self.relation,
            source_id=self.source_id,
            rationale=self.rationale,
            evidence=tuple(self.evidence),
            confidence=self.confidence,
            created_at=now if self.created_at is None else self.created_at,
        )


class MetaBody(RequestModel):
    """MetaMemory, the 'why' plane of a record."""

    # Unlike an emotion's (EmotionBody), these limits are not the record's: they are this deployment's
    # settings (CPERSONA_MAX_METADATA_LENGTH, _MAX_KEY_LENGTH) and the text rules of a request, while a
    # stored record must read back under any settings (one written under a larger limit, or imported).
    # The record (MetaMemory) declares the fields' types; this body declares what a request may send.

    capture_status: CaptureStatus = "provided"
    intent: _MetaText | None = None
    rationale: _MetaText | None = None
    trigger: _MetaText | None = None
    decision: _MetaText | None = None
    goals: Annotated[Sequence[KeyText], Field(max_length=_MAX_ITEMS)] = ()
    assumptions: Annotated[Sequence[KeyText], Field(max_length=_MAX_ITEMS)] = ()
    tags: Annotated[Sequence[KeyText], Field(max_length=_MAX_ITEMS)] = ()
    evidence: Sequence[dict[str, Any]] = ()
    alternatives: Sequence[dict[str, Any]] = ()
    confidence: Unit01 | None = None
    captured_at: EpochTime | None = None
    context_edges: Annotated[Sequence[MetaEdgeBody], Field(max_length=_MAX_ITEMS)] = ()
    schema_version: Any = Field(default=None, description="Accepted and ignored")

    def meta(self, trigger: str, now: float) -> MetaMemory:
        return MetaMemory(
            capture_status="provided" if self.capture_status == "legacy" else self.capture_status,
            intent=self.intent,
            rationale=self.rationale,
            trigger=self.trigger or trigger,
            decision=self.decision,
            goals=tuple(self.goals),
            assumptions=tuple(self.assumptions),
            tags=tuple(self.tags),
            evidence=tuple(self.evidence),
            alternatives=tuple(self.alternatives),
            confidence=self.confidence,
            captured_at=now if self.captured_at is None else self.captured_at,
            context_edges=tuple(e.edge(now) for e in self.context_edges),
        )

    @staticmethod
    def absent(trigger: str, now: float) -> MetaMemory:
        return MetaMemory(
            capture_status="unavailable",
            rationale=NO_RATIONALE,
            trigger=trigger,
            captured_at=now,
        )


def check_meta_size(value: Any, info: ValidationInfo) -> Any:
    """A field validator: the meta object as sent is at most ``CPERSONA_MAX_METADATA_LENGTH`` (else 413)."""
    if value is None:
        return value
    most = settings_of(info).max_metadata_length
    try:
        size = json_length(value)
    except TypeError:
        return value  # not JSON; the model names the part that is not
    except ValueError as exc:
        raise refusal("not_finite", str(exc)) from None
    if size > most:
        raise refusal(
            "too_large", "serialises to {size} characters; the limit is {most}", {"size": size, "most": most}
        )
    return value


def _typed_schema(schema: dict[str, Any]) -> None:
    # One of type and association_type must be given, not null (the model's _typed).
    names = ("type", "association_type")
    schema["anyOf"] = [{"required": [name], "properties": {name: {"type": "string"}}} for name in names]


class AssociationBody(RequestModel):
    """A typed, weighted edge to another record (``type`` is an alias of ``association_type``)."""

    model_config = ConfigDict(json_schema_extra=_typed_schema)

    target_id: Annotated[str, Field(min_length=1)]
    type: AssociationType | None = None
    association_type: AssociationType | None = Field(default=None, validate_default=True)
    weight: Unit01 = 1.0

    @field_validator("association_type")
    @classmethod
    def _typed(cls, value: AssociationType | None, info: ValidationInfo) -> AssociationType | None:
        if value is None and info.data.get("type") is None:
            raise refusal("no_type", "is required (or its alias type)")
        return value

    def association(self, now: float) -> Association:
        kind = self.association_type or self.type
        assert kind is not None
        return Association(self.target_id, kind, self.weight, now)
