"""reconstruct on LoCoMo: how often the items cite the gold turns, beside recall and CPersona 2.6.14.

One scope (agent) per conversation, turns stored as :mod:`.systems`' ``Cpersona`` stores them. For each
non-adversarial question and each reconstruct mode (the default, ``lite``, ``pro``):

* **cited** = every record an item names (its head, its claims, its excerpts), mapped to the turns
  (``dia_id``) it stands for; a question scores **any** when one gold turn is cited, **all** when every
  gold turn is;
* **recall, same rows** = ``Engine.recall`` with ``limit`` = the number of distinct records our
  reconstruct cited for that question at that mode (at least 1), scored the same way; **recall@10** is
  recall at a fixed ``limit`` 10;
* **CPersona 2.6.14** = its ``reconstruct.do_reconstruct`` at the same mode, on its own store of the same
  turns (built in the same run, fed the same MiniLM vectors).

Two passes over the same stores: first with nothing declared (the entity graph is empty, so reconstruct's
walk has nothing to follow), then after the conversation's two speaker names are declared as entities in
both systems (``declare_associations`` without an anchor, so no record is marked as mentioning them).

Run: ``python -m benchmarks.quality.reconstruct_bench --quick`` (the first conversation) or without
``--quick`` for all ten; ``--no-peer`` leaves CPersona 2.6.14 out.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import platform
import subprocess
import time
import types
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio

from benchmarks.quality.embed_cache import DEFAULT_CACHE_DIR, EmbeddingCache
from benchmarks.quality.locomo import DEFAULT_DATA, load_locomo

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from benchmarks.peers.cpersona_ref import CPersonaRef
    from benchmarks.quality.locomo import Conversation, LoCoMo, Question
    from benchmarks.quality.systems import Cpersona

__all__ = ["MODES", "Tally", "cited_units", "main", "measure", "report"]

MODES: Final[tuple[str | None, ...]] = (None, "lite", "pro")
FIXED_LIMIT: Final = 10
RESULTS: Final = Path(__file__).resolve().parents[1] / "results"


@dataclasses.dataclass(slots=True)
class Tally:
    """Questions scored for one column: how many had any / all of their gold turns cited."""

    questions: int = 0
    any_hit: int = 0
    all_hit: int = 0
    records: int = 0
    """Distinct records cited (or rows returned), summed over the questions."""
    millis: list[float] = dataclasses.field(default_factory=list)

    def add(self, gold: Iterable[str], units: Sequence[str], records: int) -> None:
        wanted = set(gold)
        found = wanted.intersection(units)
        self.questions += 1
        self.any_hit += bool(found)
        self.all_hit += found == wanted
        self.records += records

    def share(self, count: int) -> float:
        return count / self.questions if self.questions else float("nan")


def cited_units(items: Sequence[Any], unit_ids: Any) -> tuple[list[str], int]:
    """The turns our reconstruct's items cite, and how many distinct records cite them."""
    refs: list[str] = []
    for item in items:
        refs.append(item.head_ref)
        refs.extend(claim.ref for claim in item.claims)
        refs.extend(excerpt.ref for excerpt in item.excerpts or ())
    distinct = list(dict.fromkeys(refs))
    units = [unit for ref in distinct for unit in unit_ids(ref)]
    return list(dict.fromkeys(units)), len(distinct)


def _label(mode: str | None) -> str:
    return mode or "default"


async def _ours(
    memory: Any, system: Cpersona, conv: Conversation, q: Question, table: dict[str, Tally]
) -> None:
    def unit_ids(ref: str) -> list[str]:
        return system.unit_ids(conv.conv_id, types.SimpleNamespace(ref=ref, msg_id=""))

    for mode in MODES:
        began = time.perf_counter()
        result = await memory.reconstruct(q.question, agent_id=conv.conv_id, mode=mode)
        table[f"reconstruct {_label(mode)}"].millis.append((time.perf_counter() - began) * 1000.0)
        units, records = cited_units(result.items, unit_ids)
        table[f"reconstruct {_label(mode)}"].add(q.evidence, units, records)
        rows = await _recall_units(memory, system, conv, q, max(records, 1))
        table[f"recall, rows of {_label(mode)}"].add(q.evidence, rows[0], rows[1])
    rows = await _recall_units(memory, system, conv, q, FIXED_LIMIT)
    table[f"recall@{FIXED_LIMIT}"].add(q.evidence, rows[0], rows[1])


async def _recall_units(
    memory: Any, system: Cpersona, conv: Conversation, q: Question, limit: int
) -> tuple[list[str], int]:
    result = await memory.recall(q.question, agent_id=conv.conv_id, limit=limit)
    units = [unit for row in result.rows for unit in system.unit_ids(conv.conv_id, row)]
    return list(dict.fromkeys(units)), len(result.rows)


async def _peer(peer: CPersonaRef, conv: Conversation, q: Question, table: dict[str, Tally]) -> None:
    for mode in MODES:
        reply = await peer.reconstruct(conv.conv_id, q.question, mode)
        units = list(dict.fromkeys(unit for item in reply["items"] for unit in item["units"]))
        records = len({ref for item in reply["items"] for ref in item["refs"]})
        column = table[f"2.6.14 reconstruct {_label(mode)}"]
        column.add(q.evidence, units, records)
        column.millis.append(float(reply["elapsed_ms"]))


async def measure(data: LoCoMo, system: Cpersona, peer: CPersonaRef | None) -> dict[str, Tally]:
    """One pass over every scored question: our columns, then the peer's (see the module docstring)."""
    table: dict[str, Tally] = {}
    for mode in MODES:
        table[f"reconstruct {_label(mode)}"] = Tally()
        table[f"recall, rows of {_label(mode)}"] = Tally()
    table[f"recall@{FIXED_LIMIT}"] = Tally()
    if peer is not None:
        for mode in MODES:
            table[f"2.6.14 reconstruct {_label(mode)}"] = Tally()
    memory = await system.engine()
    by_conv = {conv.conv_id: conv for conv in data.conversations}
    for q in data.recall_questions():
        conv = by_conv[q.conv_id]
        await _ours(memory, system, conv, q, table)
        if peer is not None:
            await _peer(peer, conv, q, table)
    return table


async def declare_speakers(data: LoCoMo, system: Cpersona, peer: CPersonaRef | None) -> None:
    """Each conversation's two speaker names as entities of its scope, in both systems."""
    memory = await system.engine()
    for conv in data.conversations:
        names = [name for name in conv.speakers if name]
        await memory.declare_associations(conv.conv_id, {"entities": [{"name": name} for name in names]})
        if peer is not None:
            await peer.declare_entities(conv.conv_id, names)


def _percentile(values: Sequence[float], share: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def report(passes: dict[str, dict[str, Tally]]) -> list[str]:
    """The tables, one per pass: column, any, all, mean records, p50/p95 ms where timed."""
    lines: list[str] = []
    for title, table in passes.items():
        lines += [f"## {title}", "", "| column | questions | any gold cited | all gold cited | mean records "
                  "| p50 ms | p95 ms |", "|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
        for name, tally in table.items():
            timed = tally.millis
            p50 = f"{_percentile(timed, 0.5):.0f}" if timed else "-"
            p95 = f"{_percentile(timed, 0.95):.0f}" if timed else "-"
            mean = tally.records / tally.questions if tally.questions else float("nan")
            lines.append(
                f"| {name} | {tally.questions} | {tally.share(tally.any_hit):.3f} "
                f"| {tally.share(tally.all_hit):.3f} | {mean:.1f} | {p50} | {p95} |"
            )
        lines.append("")
    return lines


async def _run(args: argparse.Namespace) -> dict[str, dict[str, Tally]]:
    from benchmarks.peers import make_peer
    from benchmarks.quality.systems import Cpersona

    data = load_locomo(args.data)
    if args.quick:
        data = load_locomo(args.data, conversations=[data.conversations[0].conv_id])
    system = Cpersona(store_cache=DEFAULT_CACHE_DIR / "stores")
    peer: Any = None
    try:
        await system.preload([(conv.conv_id, conv.turns) for conv in data.conversations])
        if not args.no_peer:
            cache = EmbeddingCache(args.cache_dir)
            texts = [turn.content for conv in data.conversations for turn in conv.turns]
            await cache.ensure(texts + [q.question for q in data.recall_questions()], desc="embedding")
            peer = make_peer("cpersona-2.6.14", cache)
            for conv in data.conversations:
                await peer.index(conv.conv_id, conv.turns)
        passes = {"no declared entities (the graph is empty)": await measure(data, system, peer)}
        await declare_speakers(data, system, peer)
        passes["the two speaker names declared as entities"] = await measure(data, system, peer)
        return passes
    finally:
        if peer is not None:
            await peer.aclose()
        await system.aclose()


def _header(args: argparse.Namespace, began: str, load_start: float) -> list[str]:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    scope = "conv-26 only (--quick)" if args.quick else "all ten conversations"
    return [
        "# reconstruct on LoCoMo: gold turns cited, beside recall and CPersona 2.6.14",
        "",
        f"- command: `python -m benchmarks.quality.reconstruct_bench{' --quick' if args.quick else ''}"
        f"{' --no-peer' if args.no_peer else ''}`",
        f"- date: {began} to {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; commit `{commit}`",
        f"- machine: {platform.platform()}, {os.cpu_count()} CPUs; python {platform.python_version()}",
        f"- load (1-minute): {load_start:.2f} at the start, {os.getloadavg()[0]:.2f} at the end "
        "(other engineers' work shares the machine; it moves only the times)",
        f"- data: LoCoMo, {scope}; non-adversarial questions with resolvable evidence",
        "",
    ]


def main(argv: Sequence[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.quality.reconstruct_bench")
    parser.add_argument("--quick", action="store_true", help="the first conversation only")
    parser.add_argument("--no-peer", action="store_true", help="leave CPersona 2.6.14 out")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE_DIR)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    began = f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M}"
    load_start = os.getloadavg()[0]
    passes = anyio.run(_run, args)
    out = args.out or RESULTS / f"quality_reconstruct{'_quick' if args.quick else ''}.md"
    out.write_text("\n".join(_header(args, began, load_start) + report(passes)), encoding="utf-8")
    print(out.read_text(encoding="utf-8"))
    return out


if __name__ == "__main__":
    main()
