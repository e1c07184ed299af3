"""The multimodal ``recall.query`` request: a body with a ``cue`` (the recall-operations seed's
``RecallQueryRequest``), beside the CPersona recall (a body with ``query``, :mod:`.recall_query`) on the
same route.

Every field the seed lists is read and acts; none is accepted and ignored. What this engine cannot read
is refused by name: an image, audio, spatial or semantic cue is ``MODALITY_UNSUPPORTED`` (no model here
reads them) unless a caller ``embedding`` stands for the image or audio; an emotion with none of the
eight Plutchik axes above zero has no direction to rank by; a cue that asks for nothing is refused
rather than answered with nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import ConfigDict, Field, JsonValue, field_validator, model_validator

from cpersona.errors import InvalidRequest, ModalityUnsupported
from cpersona.model.epoch_time import EpochTime
from cpersona.model.fields import Header, KeyText, RequestModel, Unit01, refusal
from cpersona.model.memory_parts import Emotion, emotion_vector
from cpersona.model.records import EmotionVector, StoreKind

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "CUE_QUERY_MAX_LIMIT",
    "CallerEmbedding",
    "MAX_ACTIVATION_DEPTH",
    "PLUTCHIK_AXES",
    "CueQueryRequest",
    "ModalityUnsupported",
    "RecallCue",
    "RecallModeName",
    "TemporalRange",
    "checked_cue",
    "EMOTION_INDEX_DIM",
    "cue_emotion_vector",
    "emotion_axes",
    "stored_emotion_axes",
]

CUE_QUERY_MAX_LIMIT = 100
"""The most memories one cue query returns (the seed's cap on a request's rows)."""
MAX_ACTIVATION_DEPTH = 8
"""The deepest spreading activation (the seed caps ``recall.associate`` here; the query shares it)."""
_MAX_TEXT = 4_000
_MAX_DIM = 4_096

PLUTCHIK_AXES = ("joy", "trust", "fear", "surprise", "sadness", "disgust", "anger", "anticipation")
"""The axes the emotion arm compares, in this order (intensity and valence are no direction)."""

RecallModeName = Literal["human", "perfect"]

_Finite = Annotated[float, Field(allow_inf_nan=False)]
CallerEmbedding = Annotated[list[_Finite], Field(min_length=1, max_length=_MAX_DIM)]
"""A vector a caller sends (a cue's, a store's): finite numbers; its dimension is checked by the engine,
which knows the index's (:func:`~cpersona.stores.vector_values.caller_vector`)."""


def emotion_axes(emotion: EmotionVector) -> tuple[float, ...]:
    """The eight Plutchik axes of ``emotion``, the vector the emotion arm and its index compare."""
    return tuple(float(getattr(emotion, axis)) for axis in PLUTCHIK_AXES)


EMOTION_INDEX_DIM = len(PLUTCHIK_AXES) + 1
"""The emotion index's vectors: the eight axes, then a ninth that is 1 only for a memory with no axis
set. The search engine's filtered KNN scores an all-zero vector as NaN, which breaks its ranking of the
rest, so no stored vector is all zeros; a cue's ninth is 0, so such a memory's cosine is 0 (never a
neighbour) and the cosines of the others are those of the eight axes."""


def stored_emotion_axes(emotion: Mapping[str, Any]) -> list[float]:
    """The emotion index's vector of a stored emotion document (see :data:`EMOTION_INDEX_DIM`)."""
    axes = [float(emotion.get(axis, 0.0)) for axis in PLUTCHIK_AXES]
    return [*axes, 0.0 if any(v > 0 for v in axes) else 1.0]


def cue_emotion_vector(emotion: EmotionVector) -> list[float]:
    """The emotion index's query vector of a cue's emotion (its ninth component 0)."""
    return [*emotion_axes(emotion), 0.0]


class TemporalRange(RequestModel):
    """Inclusive bounds on a memory's own time (``timestamp``)."""

    model_config = ConfigDict(title="CueTemporalRange")

    start: EpochTime
    end: EpochTime

    @model_validator(mode="after")
    def _ordered(self) -> TemporalRange:
        if self.end < self.start:
            raise refusal("range_order", "end is before start")
        return self


class RecallCue(RequestModel):
    """What to recall by: any mix of text, a caller vector, an emotion and a time range."""

    text: Annotated[str, Field(max_length=_MAX_TEXT)] | None = Field(
        default=None, description="Searched by BM25 and, embedded, by the vector index; blank is absent"
    )
    embedding: CallerEmbedding | None = Field(
        default=None,
        description="A query vector of the index's dimension; it takes precedence over embedding the text",
    )
    emotion: Emotion | None = Field(
        default=None, description="Ranked by cosine over the eight Plutchik axes as its own arm"
    )
    temporal: TemporalRange | None = Field(
        default=None, description="A hard filter on the memory's timestamp and a source of candidates"
    )
    image: JsonValue = Field(default=None, description="Refused (MODALITY_UNSUPPORTED) without `embedding`")
    audio: JsonValue = Field(default=None, description="Refused (MODALITY_UNSUPPORTED) without `embedding`")
    spatial: JsonValue = Field(default=None, description="Refused (MODALITY_UNSUPPORTED) unless null")
    semantic: JsonValue = Field(default=None, description="Refused (MODALITY_UNSUPPORTED) unless null")

    @property
    def query_text(self) -> str | None:
        """The text cue, trimmed; ``None`` when blank."""
        text = (self.text or "").strip()
        return text or None

    @property
    def emotion_vector(self) -> EmotionVector | None:
        return None if self.emotion is None else emotion_vector(self.emotion)


class CueQueryRequest(RequestModel):
    """A multimodal recall: what to recall by (``cue``), where, how many, and what to do after."""

    model_config = ConfigDict(title="RecallCueRequest")

    agent_id: KeyText = Field(description="The agent whose memory is searched (exact)")
    project_id: KeyText | None = Field(
        default=None, description="Project X sees X and the global pool ''; '' sees only the pool"
    )
    channel: KeyText | None = Field(default=None, description="Channel X sees X and the global pool ''")
    cue: RecallCue
    stores: Annotated[list[StoreKind], Field(min_length=1, max_length=4)] | None = Field(
        default=None, description="Only memories of these stores (default: all four)"
    )
    limit: Annotated[int, Field(ge=1, le=CUE_QUERY_MAX_LIMIT)] = 10
    min_fidelity: Unit01 | None = Field(default=None, description="Leave out memories below this fidelity")
    include_decayed: bool = Field(
        default=False, description="Keep memories whose fidelity fell below the prune threshold (0.01)"
    )
    reconsolidate: bool = Field(
        default=True,
        description="Strengthen the returned memories (written after the answer, once per request id)",
    )
    activation_depth: Annotated[int, Field(ge=0, le=MAX_ACTIVATION_DEPTH)] = Field(
        default=2, description="Hops of spreading activation from the fused leaders (0: none)"
    )
    recall_mode: RecallModeName = Field(
        default="human", description="human: rendered with noise from fidelity; perfect: exact"
    )
    trace: bool = Field(default=False, description="Return the query's trace (refs, ranks, scores; no text)")
    header: Header = None

    @field_validator("stores")
    @classmethod
    def _distinct(cls, value: list[StoreKind] | None) -> list[StoreKind] | None:
        if value is not None and len(set(value)) != len(value):
            raise refusal("duplicate_store", "names a store twice")
        return value

    @property
    def store_kinds(self) -> tuple[StoreKind, ...]:
        return tuple(self.stores) if self.stores else ("episodic", "semantic", "procedural", "emotional")


def checked_cue(cue: RecallCue, prefix: str = "cue") -> RecallCue:
    """``cue`` once it asks for something this engine reads, else the refusal naming the field."""
    if cue.embedding is None:
        for name in ("image", "audio"):
            if getattr(cue, name) is not None:
                raise ModalityUnsupported(
                    f"{prefix}.{name}", f"no model here reads {name}; send its `embedding` with it instead"
                )
    for name in ("spatial", "semantic"):
        if getattr(cue, name) is not None:
            raise ModalityUnsupported(f"{prefix}.{name}", f"no model here reads a {name} cue")
    emotion = cue.emotion_vector
    if emotion is not None and not any(v > 0 for v in emotion_axes(emotion)):
        raise InvalidRequest(
            f"{prefix}.emotion", "needs one of the eight Plutchik axes above zero to rank by"
        )
    if cue.query_text is None and cue.embedding is None and emotion is None and cue.temporal is None:
        raise InvalidRequest(prefix, "asks for nothing: give text, embedding, emotion or temporal")
    return cue
