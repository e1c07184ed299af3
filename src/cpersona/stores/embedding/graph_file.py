"""The built encoder graph as a file: the names it is run by, and the cache that builds it once.

The file is kept under a models folder, named by a hash of the weights, the config and
:data:`BUILDER_VERSION`, and written to a temporary file that is renamed into place, so a reader in another
process either finds the complete file or none. Everything here is blocking (hashing the weights, building,
writing): callers run it in a worker thread.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from cpersona.stores.embedding.model_files import ModelFiles

__all__ = [
    "BUILDER_VERSION",
    "INPUT_NAMES",
    "OPSET",
    "OUTPUT_NAME",
    "cache_key",
    "ensure_onnx_model",
    "write_atomically",
]

BUILDER_VERSION = "1"
"""Bump whenever the graph :mod:`.onnx_graph` writes changes, so cached files from older builders are not
reused."""

OPSET = 17
"""The lowest opset with ``LayerNormalization``; every onnxruntime release since 1.14 runs it."""

INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT_NAME = "sentence_embedding"


def cache_key(files: ModelFiles) -> str:
    """A hex digest of the weights file, the config and the builder version."""
    digest = hashlib.sha256()
    digest.update(f"cpersona-onnx-bert/{BUILDER_VERSION}/opset{OPSET}\n".encode())
    digest.update(files.config.read_bytes())
    with files.weights.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def ensure_onnx_model(files: ModelFiles, cache_dir: Path, build: Callable[[ModelFiles], bytes]) -> Path:
    """The path of the built ONNX file for the model in ``files``, calling ``build`` for its bytes and writing
    them into ``cache_dir`` first if no file for these exact weights and this builder version is there yet."""
    target = cache_dir / f"bert-{cache_key(files)[:24]}.onnx"
    if target.is_file():
        return target
    write_atomically(target, build(files))
    return target


def write_atomically(target: Path, payload: bytes) -> None:
    # In the data dir (its owner's alone, stores/owner_only.py) or CPERSONA_MODELS_DIR: mkstemp's 0600 stays.
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        # A concurrent builder may win the race; both wrote identical bytes, so replacing is harmless.
        os.replace(tmp_name, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
