"""The gate on small stores: LoCoMo (or JSQuAD) questions, each asked of a store of its own (10 to 25
turns of its conversation, or paragraphs: its evidence and others drawn at random), under several recall
policies in one run.

On a full LoCoMo conversation (400+ turns) the gate's threshold is at its floor and hardly refuses
anything; on a store of a few dozen memories it sits near .37-.42 in cosine and refuses rows a question is
about. This measures what each policy returns there: recall@1/@10 and NDCG@10 of the evidence, the rows
returned, answers shorter than the store could fill, evidence the gate refused (read from the trace) and
rows admitted as literal matches.

    python -m benchmarks.gate_small_stores --policies single-pass-v1,single-pass-v2 --questions 300
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from benchmarks.quality.embed_cache import DEFAULT_CACHE_DIR, EmbeddingCache
from benchmarks.quality.locomo import DEFAULT_DATA, load_locomo
from benchmarks.quality.metrics import ndcg_at, recall_at
from cpersona.embedding_models import DEFAULT_EMBEDDING_MODEL, EMBEDDING_MODELS

LIMIT = 10


@dataclasses.dataclass
class Tally:
    r1: float = 0.0
    r10: float = 0.0
    ndcg: float = 0.0
    rows: int = 0
    short: int = 0
    refused: int = 0
    evidence: int = 0
    top10: int = 0
    top10_refused: int = 0
    literal: int = 0
    questions: int = 0

    def add(
        self,
        ranked: list[str],
        gold: set[str],
        *,
        short: bool,
        refused: set[str],
        top10: set[str],
        literal: int,
    ) -> None:
        self.r1 += recall_at(ranked, gold, 1)
        self.r10 += recall_at(ranked, gold, 10)
        self.ndcg += ndcg_at(ranked, gold, 10)
        self.rows += len(ranked)
        self.short += short
        self.refused += len(refused)
        self.evidence += len(gold)
        self.top10 += len(gold & top10)
        self.top10_refused += len(refused & top10)
        self.literal += literal
        self.questions += 1


@dataclasses.dataclass(frozen=True)
class Case:
    """One question, its evidence, and the texts (by id, with a time) its store is drawn from."""

    question: str
    evidence: tuple[str, ...]
    pool: dict[str, tuple[str, float]]


def locomo_cases(path: Path) -> list[Case]:
    data = load_locomo(path)
    turns = {c.conv_id: {t.unit_id: (t.content, t.timestamp) for t in c.turns} for c in data.conversations}
    return [Case(q.question, q.evidence, turns[q.conv_id]) for q in data.recall_questions() if q.evidence]


def jsquad_cases(path: Path) -> list[Case]:
    """JSQuAD (JGLUE, Japanese Wikipedia): each question's evidence is its paragraph; a store draws its
    other paragraphs from the whole set."""
    raw = json.loads(path.read_bytes())
    pool: dict[str, tuple[str, float]] = {}
    cases: list[tuple[str, str]] = []
    for article in raw["data"]:
        for paragraph in article["paragraphs"]:
            pid = f"p{len(pool)}"
            pool[pid] = (paragraph["context"], float(len(pool)))
            cases.extend((qa["question"], pid) for qa in paragraph["qas"])
    return [Case(question, (pid,), pool) for question, pid in cases]


async def run(args: argparse.Namespace) -> str:
    import cpersona
    from cpersona import Settings
    from cpersona.model.trace import RecallTrace

    cases = jsquad_cases(args.data) if args.dataset == "jsquad" else locomo_cases(args.data)
    rng = random.Random(args.seed)
    chosen: list[Case] = rng.sample(cases, min(args.questions, len(cases)))
    tallies = {policy: Tally() for policy in args.policies}
    sizes: list[int] = []
    started = time.time()
    vectors = EmbeddingCache(args.cache, model=args.embedding_model, progress=False)
    with tempfile.TemporaryDirectory(prefix="gate-small-") as home:
        async with (
            vectors,
            cpersona.open(
                Settings(data_dir=Path(home), embedding_model=args.embedding_model), background=False
            ) as memory,
        ):
            for n, question in enumerate(chosen):
                pool = question.pool
                size = max(len(question.evidence), rng.randint(10, 25))
                others = [u for u in pool if u not in question.evidence]
                picked = list(question.evidence) + rng.sample(others, size - len(question.evidence))
                picked.sort(key=lambda u: pool[u][1])
                agent = f"small-{n}"
                batch = await memory.store_batch(
                    [{"content": pool[u][0], "agent_id": agent, "timestamp": pool[u][1]} for u in picked]
                )
                unit_of = {result.ref: u for result, u in zip(batch.results, picked, strict=True)}
                await memory.drain_blocks()
                sizes.append(len(set(unit_of)))
                gold = set(question.evidence)
                top10 = await _cosine_top(vectors, question, picked)
                for policy in args.policies:
                    result = await memory.recall(
                        question.question, agent_id=agent, limit=LIMIT, policy=policy, trace=True
                    )
                    ranked = [unit_of[row.ref] for row in result.rows if row.ref in unit_of]
                    trace = result.trace
                    decisions = trace.gate.decisions if isinstance(trace, RecallTrace) else []
                    refused = {
                        unit_of[d.ref] for d in decisions if not d.passed and unit_of.get(d.ref) in gold
                    }
                    literal = sum(1 for d in decisions if d.reason == "literal_match")
                    ranked_rows = [r for r in result.rows if not r.seated]
                    short = len(ranked_rows) < min(LIMIT, len(set(unit_of)))
                    tallies[policy].add(
                        ranked, gold, short=short, refused=refused, top10=top10, literal=literal
                    )
                await memory.delete_agent_data(agent)
    return _report(args, tallies, sizes, time.time() - started)


async def _cosine_top(vectors: EmbeddingCache, case: Case, picked: list[str]) -> set[str]:
    """The units plain cosine ranking puts in the top ``LIMIT`` of this store."""
    asked = await vectors.embed([case.question], queries=True)
    stored = await vectors.embed([case.pool[u][0] for u in picked])
    order = (stored @ asked[0]).argsort()[::-1][:LIMIT]
    return {picked[int(i)] for i in order}


def _report(args: argparse.Namespace, tallies: dict[str, Tally], sizes: list[int], seconds: float) -> str:
    lines = [
        "| policy | questions | recall@1 | recall@10 | NDCG@10 | rows per answer | short answers "
        "| evidence refused by the gate | of it in the cosine top 10 | literal-match admissions |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for policy, t in tallies.items():
        q = max(t.questions, 1)
        lines.append(
            f"| `{policy}` | {t.questions} | {t.r1 / q:.3f} | {t.r10 / q:.3f} | {t.ndcg / q:.3f} "
            f"| {t.rows / q:.2f} | {t.short / q:.3f} | {t.refused} of {t.evidence} "
            f"| {t.top10_refused} of {t.top10} | {t.literal} |"
        )
    head = [
        f"- data: {args.dataset} ({args.data.name}); stores: {len(sizes)}, "
        f"{min(sizes, default=0)}-{max(sizes, default=0)} memories "
        f"(mean {sum(sizes) / max(len(sizes), 1):.1f}); limit {LIMIT}; seed {args.seed}; "
        f"embedder {args.embedding_model}",
        f"- machine: {platform.platform()}, {platform.machine()}, python {platform.python_version()}; "
        f"run took {seconds:.0f} s",
    ]
    return "\n".join([*head, "", *lines]) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--policies", type=lambda s: [p.strip() for p in s.split(",") if p.strip()])
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--seed", type=int, default=32)
    parser.add_argument("--dataset", choices=("locomo", "jsquad"), default="locomo")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="locomo10.json or valid-v1.3.json")
    parser.add_argument("--embedding-model", choices=tuple(EMBEDDING_MODELS), default=DEFAULT_EMBEDDING_MODEL)
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE_DIR, help="the embedding cache's folder")
    args = parser.parse_args()
    if not args.policies:
        parser.error("--policies: name at least one policy")
    out: Any = anyio.run(run, args)
    print(out)


if __name__ == "__main__":
    main()
