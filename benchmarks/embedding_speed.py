"""How fast the default embedder (all-MiniLM-L6-v2 in numpy) is, beside the onnxruntime graph it replaced.

Both run in one process on the same weights, alternating call by call (paired), so load on the shared
machine hits both alike; the 1-minute load average is read before and after. Written, with the machine and the
exact command, to ``benchmarks/results/embedding_speed.md``:

* query latency: one short query per call, query cache off, through the worker thread as recall does;
* batch throughput: 1,000 LoCoMo turns, sorted by length and cut into the engine's batches of 64, as
  ``OnnxEmbedder.embed`` does; each round times the whole corpus once per embedder;
* tokenising the 1,000 turns: Hugging Face ``tokenizers`` against the pure-Python WordPiece;
* the largest difference between the two embedders' vectors over the corpus.

The reference needs the ``test`` extra (onnx, onnxruntime, tokenizers). Run it from the repository root::

    .venv/bin/python -m benchmarks embedding_speed
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import numpy as np

from benchmarks import harness
from benchmarks.harness import percentile
from benchmarks.quality.locomo import load_locomo
from cpersona.settings import Settings
from cpersona.stores.embedding.base import DEFAULT_BATCH_SIZE, chunks
from cpersona.stores.embedding.embedders import ONNX_MAX_TOKENS, OnnxEmbedder
from cpersona.stores.embedding.model_files import ModelFiles
from cpersona.stores.embedding.onnx_graph import OrtReference
from cpersona.stores.embedding.wordpiece import WordPieceTokenizer

if TYPE_CHECKING:
    from collections.abc import Sequence

RESULTS = Path(__file__).parent / "results" / "embedding_speed.md"

_QUERIES = [
    "when is the dentist appointment?",
    "what did Alice say about the budget?",
    "flight to Osaka",
    "who approved the migration",
    "lease renewal date",
    "birthday dinner plans",
]


def locomo_turns(count: int) -> list[str]:
    """The first ``count`` LoCoMo turns, as the engine stores them (speaker, text, caption)."""
    turns = [turn.content for conversation in load_locomo().conversations for turn in conversation.turns]
    return turns[:count]


def _ort_embed_sorted(reference: OrtReference, texts: Sequence[str]) -> np.ndarray[Any, Any]:
    """What the pre-issue-13 ``OnnxEmbedder.embed`` did: by length, in batches of 64, order restored."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    vectors = np.concatenate(
        [reference.embed(chunk) for chunk in chunks([texts[i] for i in order], DEFAULT_BATCH_SIZE)]
    )
    out = np.empty_like(vectors)
    out[order] = vectors
    return out


async def measure(
    data_dir: Path, threads: int, queries: int, rounds: int, turns: list[str]
) -> dict[str, Any]:
    settings = Settings(data_dir=data_dir, embedding_threads=threads, embedding_cache_size=0)
    started = time.perf_counter()
    embedder = await OnnxEmbedder.open(settings)
    open_secs = time.perf_counter() - started
    reference = OrtReference(ModelFiles.default(), data_dir / "reference", threads=threads)
    figures: dict[str, Any] = {"open_secs": open_secs, "load_before": harness.load()}
    try:
        for query in _QUERIES:  # warm-up: the first runs allocate and plan
            await embedder.embed_query(query)
            reference.embed([query])
        numpy_ms: list[float] = []
        ort_ms: list[float] = []
        for index in range(queries):
            query = _QUERIES[index % len(_QUERIES)]
            start = time.perf_counter()
            await embedder.embed_query(query)
            numpy_ms.append((time.perf_counter() - start) * 1000.0)
            start = time.perf_counter()
            await anyio.to_thread.run_sync(reference.embed, [query])
            ort_ms.append((time.perf_counter() - start) * 1000.0)
        figures["query"] = {"numpy": numpy_ms, "ort": ort_ms}

        numpy_batch: list[float] = []
        ort_batch: list[float] = []
        ours = theirs = np.zeros(0)
        for _ in range(rounds):
            start = time.perf_counter()
            ours = np.stack(await embedder.embed(turns))
            numpy_batch.append(time.perf_counter() - start)
            start = time.perf_counter()
            theirs = await anyio.to_thread.run_sync(_ort_embed_sorted, reference, turns)
            ort_batch.append(time.perf_counter() - start)
        figures["batch"] = {"numpy": numpy_batch, "ort": ort_batch}
        figures["max_abs"] = float(np.abs(ours - theirs).max())
        figures["min_cosine"] = float((ours * theirs).sum(axis=1).min())
        figures["tokenize"] = _tokenize_times(reference, turns, rounds)
    finally:
        await embedder.aclose()
    return figures


def _tokenize_times(reference: OrtReference, turns: list[str], rounds: int) -> dict[str, list[float]]:
    """Seconds to tokenise all turns, per round: tokenizers, and WordPiece from a cold and a warm cache."""
    times: dict[str, list[float]] = {"tokenizers": [], "wordpiece cold": [], "wordpiece warm": []}
    path = ModelFiles.default().tokenizer
    for _ in range(rounds):
        start = time.perf_counter()
        for text in turns:
            reference.token_ids(text)
        times["tokenizers"].append(time.perf_counter() - start)
        ours = WordPieceTokenizer.from_file(path, ONNX_MAX_TOKENS)
        for label in ("wordpiece cold", "wordpiece warm"):
            start = time.perf_counter()
            for text in turns:
                ours.encode(text)
            times[label].append(time.perf_counter() - start)
    return times


def _report(args: argparse.Namespace, figures: dict[str, Any], turns: list[str]) -> str:
    command = harness.command("embedding_speed")
    q, b, t = figures["query"], figures["batch"], figures["tokenize"]
    count = len(turns)

    def ms(samples: list[float], scale: float = 1.0) -> str:
        return f"{percentile(samples, 0.5) * scale:.2f} / {min(samples) * scale:.2f}"

    rows = [
        (f"query latency, 1 short text, ms (p50 / min of {args.queries})", ms(q["numpy"]), ms(q["ort"])),
        (
            "query latency p95, ms",
            f"{percentile(q['numpy'], 0.95):.2f}",
            f"{percentile(q['ort'], 0.95):.2f}",
        ),
        (
            f"{count} LoCoMo turns in batches of {DEFAULT_BATCH_SIZE}, s (p50 / min of {args.rounds})",
            ms(b["numpy"]),
            ms(b["ort"]),
        ),
        (
            "throughput at the p50, texts/s",
            f"{count / percentile(b['numpy'], 0.5):.0f}",
            f"{count / percentile(b['ort'], 0.5):.0f}",
        ),
        (
            f"tokenising the {count} turns, ms (p50 / min; pure Python: cold / warm word cache)",
            f"{ms(t['wordpiece cold'], 1000)} · {ms(t['wordpiece warm'], 1000)}",
            ms(t["tokenizers"], 1000),
        ),
    ]
    words = statistics.mean(len(text.split()) for text in turns)
    lines = [
        "# Embedding speed: all-MiniLM-L6-v2 in numpy, beside the onnxruntime graph it replaced",
        "",
        *harness.header(command, load_start=figures["load_before"], packages=("numpy", "onnxruntime")),
        f"- embedding_threads={args.threads} (numpy: threads over the parts of a batch, one BLAS thread "
        "each; onnxruntime: intra-op threads, no spinning)",
        f"- paired: each query and each round runs numpy then onnxruntime, in one process; the turns average "
        f"{words:.0f} words",
        f"- vectors over the {count} turns: max abs difference {figures['max_abs']:.2e}, "
        f"min cosine {figures['min_cosine']:.7f}",
        f"- open (read the int8 weights, lay them out, load the tokenizer): {figures['open_secs']:.2f} s",
        "",
        "| measure | numpy + WordPiece (now) | onnxruntime + tokenizers (before) |",
        "|---|---|---|",
        *(f"| {name} | {ours} | {theirs} |" for name, ours, theirs in rows),
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description="Measure the numpy embedder beside the onnxruntime graph.")
    parser.add_argument("--threads", type=int, default=Settings().embedding_threads, help="embedding_threads")
    parser.add_argument("--queries", type=int, default=300, help="timed single-query calls per embedder")
    parser.add_argument("--rounds", type=int, default=5, help="timed passes over the turns per embedder")
    parser.add_argument("--turns", type=int, default=1000, help="LoCoMo turns per pass")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    turns = locomo_turns(args.turns)
    with tempfile.TemporaryDirectory(prefix="cpersona-bench-") as tmp:
        figures = anyio.run(measure, Path(tmp), args.threads, args.queries, args.rounds, turns)
    report = _report(args, figures, turns)
    print(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report, encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
