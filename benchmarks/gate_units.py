"""Where each embedder's query-to-passage cosines sit, per language: the measurement behind a model's gate
scale (``EmbeddingModel.gate_scale``).

The recall gate's heuristic thresholds (``[gate] start``/``span`` of a policy, .5 on an empty store down
to .2 at 500 memories) were written in all-MiniLM-L6-v2's cosines on English. Another model's cosines
live elsewhere: multilingual-e5-small gives unrelated texts .7-.8. This embeds questions (as queries)
and stored texts (as passages) with each model and reads two distributions per model and language:

* **gold**: a question against the text that answers it (LoCoMo: its evidence turns; JSQuAD: its
  paragraph);
* **other**: the same question against texts of the same store that do not answer it (LoCoMo: other
  turns of its conversation; JSQuAD: other paragraphs), ``--others`` drawn at random per question.

The scale that carries a MiniLM threshold ``t`` to a model's cosine is the line through two anchors,
both on the *other* distribution: the model's cosine at the share of MiniLM's English other-pairs that
fall under .2 (the gate's floor) and under .5 (its ceiling). A threshold so carried refuses the same
share of unrelated rows as MiniLM's does on English, which is what the gate is for; the gold columns
then say what the carried gate costs in answers, per language.

    python -m benchmarks gate_units --locomo ../shared/data/locomo/locomo10.json \
        --jsquad ../shared/data/jsquad/valid-v1.3.json
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import numpy as np
import numpy.typing as npt

from benchmarks import harness
from benchmarks.quality.embed_cache import DEFAULT_CACHE_DIR, EmbeddingCache
from benchmarks.quality.jsquad import DEFAULT_JSQUAD, load_jsquad
from benchmarks.quality.locomo import DEFAULT_DATA, load_locomo
from cpersona.embedding_models import EMBEDDING_MODELS, embedding_model

if TYPE_CHECKING:
    from collections.abc import Sequence

Floats = npt.NDArray[np.float64]
REFERENCE = ("all-MiniLM-L6-v2", "en")
"""The model and language the policies' thresholds were written in."""
FLOOR, CEILING = 0.2, 0.5
"""The heuristic's range (``start`` .5, ``start - span`` .2 in every shipped policy)."""
PROBES = (0.2, 0.3, 0.37, 0.42, 0.5)
"""Heuristic thresholds reported: the floor, 100 memories, 25, 10, an empty store."""


@dataclasses.dataclass(frozen=True)
class Pairs:
    """One question set: each question, the texts that answer it, and the other texts of its store."""

    language: str
    questions: tuple[str, ...]
    gold: tuple[tuple[str, ...], ...]
    others: tuple[tuple[str, ...], ...]


@dataclasses.dataclass(frozen=True)
class Cosines:
    gold: Floats
    other: Floats


def locomo_pairs(path: Path, *, questions: int, others: int, rng: random.Random) -> Pairs:
    data = load_locomo(path)
    turns = {c.conv_id: {t.unit_id: t.content for t in c.turns} for c in data.conversations}
    asked = [q for q in data.recall_questions() if q.evidence]
    chosen = rng.sample(asked, min(questions, len(asked)))
    rest = []
    for q in chosen:
        pool = [u for u in turns[q.conv_id] if u not in q.evidence]
        rest.append(tuple(turns[q.conv_id][u] for u in rng.sample(pool, min(others, len(pool)))))
    return Pairs(
        "en",
        tuple(q.question for q in chosen),
        tuple(tuple(turns[q.conv_id][u] for u in q.evidence) for q in chosen),
        tuple(rest),
    )


def jsquad_pairs(path: Path, *, questions: int, others: int, rng: random.Random) -> Pairs:
    data = load_jsquad(path)
    text = {p.unit_id: p.content for p in data.paragraphs}
    chosen = rng.sample(data.questions, min(questions, len(data.questions)))
    units = list(text)
    rest = []
    for q in chosen:
        drawn = rng.sample([u for u in units if u != q.gold], others)
        rest.append(tuple(text[u] for u in drawn))
    return Pairs("ja", tuple(q.question for q in chosen), tuple((text[q.gold],) for q in chosen), tuple(rest))


async def cosines(cache: EmbeddingCache, pairs: Pairs) -> Cosines:
    asked = await cache.embed(pairs.questions, desc=f"{pairs.language} questions", queries=True)
    passages = sorted({t for group in (*pairs.gold, *pairs.others) for t in group})
    stored = await cache.embed(passages, desc=f"{pairs.language} passages")
    row = {t: i for i, t in enumerate(passages)}

    def against(q: int, texts: Sequence[str]) -> list[float]:
        vectors = stored[[row[t] for t in texts]]
        return [float(v) for v in vectors @ asked[q]]

    gold = [c for q, texts in enumerate(pairs.gold) for c in against(q, texts)]
    other = [c for q, texts in enumerate(pairs.others) for c in against(q, texts)]
    return Cosines(np.asarray(gold), np.asarray(other))


def scale_for(reference: Cosines, model: Cosines) -> tuple[float, float]:
    """``(zero, one)``: the line through the model's other-pair cosines at the quantiles where the
    reference's other pairs cross the heuristic's floor and ceiling."""
    low_share = float(np.mean(reference.other < FLOOR))
    high_share = float(np.mean(reference.other < CEILING))
    low, high = (float(np.quantile(model.other, s)) for s in (low_share, high_share))
    slope = (high - low) / (CEILING - FLOOR)
    zero = low - slope * FLOOR
    return round(zero, 3), round(zero + slope, 3)


def _rates(c: Cosines, zero: float, one: float) -> str:
    cells = []
    for t in PROBES:
        threshold = zero + (one - zero) * t
        cells.append(f"{np.mean(c.gold >= threshold):.3f} / {np.mean(c.other >= threshold):.3f}")
    return " | ".join(cells)


def _quantiles(values: Floats) -> str:
    q = np.quantile(values, (0.1, 0.5, 0.9))
    return " / ".join(f"{v:.3f}" for v in q)


def report(args: argparse.Namespace, measured: dict[tuple[str, str], Cosines], load0: float) -> str:
    reference = measured[REFERENCE]
    shipped = {name: embedding_model(name).gate_scale for name in args.models}
    lines = [
        f"# Gate scales: query-to-passage cosines per model and language (seed {args.seed})",
        "",
        *harness.header(harness.command("gate_units"), load_start=load0),
        f"- pairs: LoCoMo (en) and JSQuAD (ja), {args.questions} questions each, drawn at random; gold = "
        f"the texts that answer a question, other = {args.others} texts of its store that do not",
        "",
        "## Distributions (p10 / p50 / p90)",
        "",
        "| model | language | gold pairs | gold cosine | other pairs | other cosine "
        "| scale from this language |",
        "|---|---|---:|---|---:|---|---|",
    ]
    for (model, language), c in measured.items():
        zero, one = scale_for(reference, c)
        lines.append(
            f"| {model} | {language} | {c.gold.size} | {_quantiles(c.gold)} | {c.other.size} "
            f"| {_quantiles(c.other)} | ({zero}, {one}) |"
        )
    probes = " | ".join(f"t = {t}" for t in PROBES)
    lines += [
        "",
        "## What the shipped scale passes: gold / other share at or above each heuristic threshold",
        "",
        f"| model (zero, one) | language | {probes} |",
        "|---|---|" + "---|" * len(PROBES),
    ]
    for (model, language), c in measured.items():
        zero, one = shipped[model]
        lines.append(f"| {model} ({zero}, {one}) | {language} | {_rates(c, zero, one)} |")
    return "\n".join(lines) + "\n"


async def run(args: argparse.Namespace) -> str:
    load0 = harness.load()
    sets = [
        locomo_pairs(args.locomo, questions=args.questions, others=args.others, rng=random.Random(args.seed)),
        jsquad_pairs(args.jsquad, questions=args.questions, others=args.others, rng=random.Random(args.seed)),
    ]
    measured: dict[tuple[str, str], Cosines] = {}
    for model in args.models:
        async with EmbeddingCache(args.cache, model=model, progress=not args.no_progress) as cache:
            for pairs in sets:
                measured[(model, pairs.language)] = await cosines(cache, pairs)
    return report(args, measured, load0)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", default=",".join(EMBEDDING_MODELS), type=lambda s: s.split(","))
    parser.add_argument("--locomo", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--jsquad", type=Path, default=DEFAULT_JSQUAD)
    parser.add_argument("--questions", type=int, default=400, help="questions per language")
    parser.add_argument("--others", type=int, default=20, help="non-answering texts per question")
    parser.add_argument("--seed", type=int, default=32)
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE_DIR)
    parser.add_argument("--out", type=Path, help="also write the report here")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    unknown = [name for name in args.models if name not in EMBEDDING_MODELS]
    if unknown:
        choices = ", ".join(EMBEDDING_MODELS)
        parser.error(f"--models: no such model {', '.join(unknown)}; choose from {choices}")
    if REFERENCE[0] not in args.models:
        parser.error(f"--models must include {REFERENCE[0]}, the model the thresholds are written in")
    text = anyio.run(run, args)
    if args.out:
        args.out.write_text(text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
