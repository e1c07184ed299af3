"""The model a store's vectors were made with: recorded on the first open, checked on every later one.

Vectors of two models are not comparable (their cosines mean nothing across models, and their lengths may
differ), so an engine whose embedder is not the one the store records refuses to start
(:class:`~cpersona.EmbeddingModelMismatch`) instead of writing vectors of a second model beside the first.
The identity is the embedder's name (``onnx:<model>``, ``http:<url>``, ``api:<model>``) and its dimension:
the same model from other weights of it (float32 instead of the shipped int8) is the same model.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING

import orjson

from cpersona.errors import EmbeddingModelMismatch

if TYPE_CHECKING:
    from cpersona.stores.protocols import Embedder
    from cpersona.stores.store_admin import StoreAdmin

__all__ = ["VectorModel", "check_vector_model"]

log = logging.getLogger("cpersona.engine")


@dataclasses.dataclass(frozen=True, slots=True)
class VectorModel:
    name: str
    dim: int

    @classmethod
    def of(cls, embedder: Embedder) -> VectorModel:
        return cls(embedder.name, embedder.dim)

    @classmethod
    def decoded(cls, stored: str) -> VectorModel:
        data = orjson.loads(stored)
        return cls(str(data["name"]), int(data["dim"]))

    def encoded(self) -> str:
        return orjson.dumps({"name": self.name, "dim": self.dim}).decode()

    def __str__(self) -> str:
        return f"{self.name} ({self.dim}-d)"


async def check_vector_model(admin: StoreAdmin, embedder: Embedder) -> VectorModel:
    """Record the embedder's model as the store's on its first open; refuse one that is not the store's.

    A store from before the record existed is judged by its records, which each name the model that made
    their vector: none with a vector (a new store, or one kept without an embedder) takes the configured
    model; one whose records name the configured model records it; one whose records name another model
    is refused like any mismatch. Adopting the configured model without looking would have let the first
    start after a change of the default model mix the new model's vectors into a store of the old one.

    Raises :class:`~cpersona.EmbeddingModelMismatch` naming both models.
    """
    current = VectorModel.of(embedder)
    stored = await admin.vector_model()
    if stored is None:
        legacy = await admin.legacy_vector_model()
        if legacy is not None and legacy != current.name:
            raise EmbeddingModelMismatch(legacy, str(current), _settings_of(legacy))
        # Another engine on the same Redis may have recorded one since: then its record is the store's.
        stored = await admin.record_vector_model(current.encoded())
        if stored is None:
            log.info("the store's vectors are recorded as made by %s", current)
            return current
    recorded = VectorModel.decoded(stored)
    if recorded != current:
        raise EmbeddingModelMismatch(str(recorded), str(current), _settings_of(recorded.name))
    return current


def _settings_of(name: str) -> str:
    """The settings that configure the embedder named ``name`` (``mode:detail``)."""
    mode, _, detail = name.partition(":")
    variable = {
        "onnx": "CPERSONA_EMBEDDING_MODEL",
        "http": "CPERSONA_EMBEDDING_URL",
        "api": "CPERSONA_EMBEDDING_API_MODEL",
    }.get(mode)
    if variable is None:
        return "the embedding settings it was made with"
    return f"CPERSONA_EMBEDDING_MODE={mode} and {variable}={detail}"
