"""How far a text's vector moves with its company and its session's threads, against the embedder's promise.

The promise (:mod:`cpersona.stores.embedding.embedders`): every element of a text's vector within
``VECTOR_TOLERANCE`` of the vector it gets alone, in any company and on any host. This embeds LoCoMo
turns, questions and texts long enough to be cut at 256 tokens alone, in store batches of 8 and 64 and
as coalesced query groups of 32, then the same texts alone in a second process whose session runs one
intra-op thread (onnxruntime splits a run's work by its thread count), and writes the largest difference
of each comparison to ``benchmarks/results/embedding_tolerance.md``::

    .venv/bin/python -m benchmarks embedding_tolerance
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import numpy as np

from benchmarks import harness
from benchmarks.corpus import LOCOMO, load_texts
from cpersona.settings import Settings
from cpersona.stores.embedding.embedders import TOLERANCE_MODEL, VECTOR_TOLERANCE, OnnxEmbedder

if TYPE_CHECKING:
    import numpy.typing as npt

RESULTS = Path(__file__).parent / "results" / "embedding_tolerance.md"
_COALESCED = 32


def texts(turns: int, questions: int, seed: int = 5) -> tuple[list[str], list[str]]:
    """Turns (with a few texts past 256 tokens made of them) and questions, sampled reproducibly."""
    found = load_texts(LOCOMO)
    rng = random.Random(seed)
    picked = rng.sample(list(found.turns or found.fragments), turns)
    long = [" ".join(picked[i : i + 12]) for i in range(0, min(96, turns), 12)]
    return picked + long, rng.sample(list(found.questions), min(questions, len(found.questions)))


async def alone(embedder: OnnxEmbedder, items: list[str]) -> npt.NDArray[np.float32]:
    return np.stack([(await embedder.embed([text]))[0] for text in items])


async def measure(items: list[str], asks: list[str], data_dir: Path) -> dict[str, npt.NDArray[np.float32]]:
    """The vectors of each way of embedding, by name."""
    settings = Settings(data_dir=data_dir, embedding_model=TOLERANCE_MODEL, embedding_cache_size=0)
    embedder = await OnnxEmbedder.open(settings)
    try:
        every = items + asks
        out = {"alone": await alone(embedder, every), "batch 64": np.stack(await embedder.embed(every))}
        eights = [v for i in range(0, len(every), 8) for v in await embedder.embed(every[i : i + 8])]
        out["batch 8"] = np.stack(eights)
        out["query alone"] = np.stack([(await embedder.embed_queries([q]))[0] for q in asks])
        groups = [
            v
            for i in range(0, len(asks), _COALESCED)
            for v in await embedder.embed_queries(asks[i : i + _COALESCED])
        ]
        out["query coalesced"] = np.stack(groups)
        out["again"] = await alone(embedder, every)
        return out
    finally:
        await embedder.aclose()


def one_thread(items: list[str], asks: list[str], work: Path) -> npt.NDArray[np.float32]:
    """The lone vectors from a second process whose session runs one intra-op thread."""
    (work / "texts.txt").write_text("\n\0".join(items + asks), encoding="utf-8")
    subprocess.run(
        [sys.executable, "-m", "benchmarks.embedding_tolerance", "--emit", str(work)], check=True, timeout=600
    )
    vectors: npt.NDArray[np.float32] = np.load(work / "alone.npy")
    return vectors


async def emit(work: Path) -> None:
    every = (work / "texts.txt").read_text(encoding="utf-8").split("\n\0")
    settings = Settings(
        data_dir=work / "data", embedding_model=TOLERANCE_MODEL, embedding_cache_size=0, embedding_threads=1
    )
    embedder = await OnnxEmbedder.open(settings)
    try:
        np.save(work / "alone.npy", await alone(embedder, every))
    finally:
        await embedder.aclose()


def row(name: str, got: npt.NDArray[np.float32], want: npt.NDArray[np.float32]) -> str:
    gap = np.abs(got - want)
    differing = int((gap.max(axis=1) > 0).sum())
    verdict = "within" if gap.max() <= VECTOR_TOLERANCE else "**BEYOND**"
    return f"| {name} | {differing} of {len(got)} | {gap.max():.2e} | {verdict} |"


def main(argv: list[str] | None = None) -> Path | None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks embedding_tolerance", description=__doc__)
    parser.add_argument("--turns", type=int, default=300, help="LoCoMo turns sampled (default 300)")
    parser.add_argument("--questions", type=int, default=200, help="LoCoMo questions sampled (default 200)")
    parser.add_argument("--emit", type=Path, help=argparse.SUPPRESS)  # the second process's own mode
    args = parser.parse_args(argv)
    if args.emit is not None:
        anyio.run(emit, args.emit)
        return None
    load_start = harness.load()
    items, asks = texts(args.turns, args.questions)
    with tempfile.TemporaryDirectory(prefix="cpersona-tolerance-") as tmp:
        work = Path(tmp)
        here = anyio.run(measure, items, asks, work / "data")
        there = one_thread(items, asks, work)
    n = len(asks)
    lines = [
        "# A text's vector in any company and on any thread count, against the embedder's promise",
        "",
        *harness.header(harness.command("embedding_tolerance", argv), load_start=load_start),
        f"- texts: {len(items)} LoCoMo turns ({len(items) - args.turns} cut at 256 tokens), {n} questions",
        f"- sessions: here {Settings().embedding_threads} intra-op threads, the second process 1; "
        f"bound {VECTOR_TOLERANCE:g}",
        "",
        "| compared with the text alone, this session | not bit for bit | largest difference | promise |",
        "|---|---|---|---|",
        row(
            "the same text alone again (the same call: the same bits promised)", here["again"], here["alone"]
        ),
        row("in store batches of 64", here["batch 64"], here["alone"]),
        row("in store batches of 8", here["batch 8"], here["alone"]),
        row(f"questions coalesced {_COALESCED} at a time", here["query coalesced"], here["query alone"]),
        row("questions alone through the query path", here["query alone"], here["alone"][-n:]),
        row("alone in a second process on one thread", there, here["alone"]),
        "",
    ]
    RESULTS.write_text("\n".join(lines), encoding="utf-8")
    print(RESULTS.read_text(encoding="utf-8"))
    return RESULTS


if __name__ == "__main__":
    main()
