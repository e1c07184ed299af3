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

Run: ``python -m benchmarks quality.reconstruct_bench --quick`` (the first conversation) or without
``--quick`` for all ten; ``--no-peer`` leaves CPersona 2.6.14 out.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import functools
import shutil
import tempfile
import time
import types
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio

from benchmarks import harness
from benchmarks.harness import percentile
from benchmarks.quality.embed_cache import DEFAULT_CACHE_DIR, EmbeddingCache
from benchmarks.quality.locomo import DEFAULT_DATA, load_locomo

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from benchmarks.peers.cpersona_ref import CPersonaRef
    from benchmarks.quality.locomo import Conversation, LoCoMo, Question
    from benchmarks.quality.systems import Cpersona

__all__ = ["MODES", "Tally", "cited_units", "latency", "latency_lines", "main", "measure", "report"]

MODES: Final[tuple[str | None, ...]] = (None, "lite", "pro")
FIXED_LIMIT: Final = 10
LATENCY_SIZE: Final = 10_000
LATENCY_WARMUP: Final = 20
AGENT: Final = "bench-agent"
"""recall_speed's agent, the one its cached stores hold."""
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


async def declare_speakers(data: LoCoMo, system: Cpersona, peer: CPersonaRef | None) -> tuple[int, int]:
    """Each conversation's two speaker names as entities of its scope, in both systems; how many
    entities each system says it recorded (ours, the peer's)."""
    memory = await system.engine()
    ours = theirs = 0
    for conv in data.conversations:
        names = [name for name in conv.speakers if name]
        said = await memory.declare_associations(conv.conv_id, {"entities": [{"name": n} for n in names]})
        ours += said.entities
        if peer is not None:
            theirs += await peer.declare_entities(conv.conv_id, names)
    return ours, theirs


async def anchor_speakers(data: LoCoMo, system: Cpersona, peer: CPersonaRef | None) -> tuple[int, int]:
    """Each stored turn's record declared as mentioning its speaker (one anchored declaration per
    record, in both systems); how many mentions each system says it recorded (ours, the peer's)."""
    memory = await system.engine()
    ours = theirs = 0
    for conv in data.conversations:
        speaker = {turn.dia_id: turn.speaker for turn in conv.turns}
        for ref, units in system._refs.get(conv.conv_id, {}).items():
            body = {"entities": [{"name": speaker[units[0]]}]}
            ours += (await memory.declare_associations(conv.conv_id, body, anchor_ref=ref)).mentions
        if peer is not None:
            for ref, units in peer._refs.get(conv.conv_id, {}).items():
                theirs += await peer.declare_entities(conv.conv_id, [speaker[units[0]]], anchor=ref)
    return ours, theirs


def latency_lines(table: dict[str, Tally]) -> list[str]:
    """One row per call: how many timed, p50 and p95 in milliseconds."""
    lines = ["| call | timed | p50 ms | p95 ms |", "|---|---:|---:|---:|"]
    for name, tally in table.items():
        p50, p95 = percentile(tally.millis, 0.5), percentile(tally.millis, 0.95)
        lines.append(f"| {name} | {len(tally.millis)} | {p50:.1f} | {p95:.1f} |")
    return [*lines, ""]


def report(passes: dict[str, dict[str, Tally]]) -> list[str]:
    """The tables, one per pass: column, any, all, mean records, p50/p95 ms where timed."""
    lines: list[str] = []
    for title, table in passes.items():
        lines += [
            f"## {title}",
            "",
            "| column | questions | any gold cited | all gold cited | mean records | p50 ms | p95 ms |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for name, tally in table.items():
            timed = tally.millis
            p50 = f"{percentile(timed, 0.5):.0f}" if timed else "-"
            p95 = f"{percentile(timed, 0.95):.0f}" if timed else "-"
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
        ours, theirs = await declare_speakers(data, system, peer)
        title = f"the two speaker names declared as entities (recorded: {ours} here, {theirs} in 2.6.14)"
        passes[title] = await measure(data, system, peer)
        if args.anchored:
            ours, theirs = await anchor_speakers(data, system, peer)
            title = f"each turn's record anchored to its speaker (mentions: {ours} here, {theirs} in 2.6.14)"
            passes[title] = await measure(data, system, peer)
        return passes
    finally:
        if peer is not None:
            await peer.aclose()
        await system.aclose()


async def latency(recalls: int) -> dict[str, Tally]:
    """reconstruct (each mode) and plain recall at ``limit`` 20 (the ``top_k`` reconstruct's one recall
    asks), paired question by question on a copy of recall_speed's cached 10k store, one caller."""
    import cpersona
    from benchmarks import store_cache
    from benchmarks.corpus import LOCOMO, build_corpus, load_texts

    texts = load_texts(LOCOMO)
    corpus = build_corpus(texts, LATENCY_SIZE)
    home, build = await store_cache.cached_store(corpus, [], texts.questions, False)
    table = {name: Tally() for name in (*(f"reconstruct {_label(m)}" for m in MODES), "recall, limit 20")}
    with tempfile.TemporaryDirectory(prefix="cpersona-rspeed-") as tmp:
        data_dir = Path(tmp) / "data"
        await anyio.to_thread.run_sync(shutil.copytree, home / "data", data_dir)
        if await anyio.to_thread.run_sync(store_cache.collections, data_dir) != build["collections"]:
            raise RuntimeError("the cached 10k store has other collections than the engine opens: rebuild it")
        async with cpersona.open(store_cache.settings_for(data_dir)) as memory:
            await store_cache.wait_indexed(memory, LATENCY_SIZE)
            for question in texts.questions[:LATENCY_WARMUP]:
                await memory.reconstruct(question, agent_id=AGENT)
            for index in range(recalls):
                await _paired(memory, texts.questions[index % len(texts.questions)], index, table)
    return table


async def _paired(memory: Any, question: str, index: int, table: dict[str, Tally]) -> None:
    # The order turns with each question, so neither call always finds the caches the other warmed.
    calls: list[tuple[str, Any]] = [
        (f"reconstruct {_label(m)}", functools.partial(memory.reconstruct, question, agent_id=AGENT, mode=m))
        for m in MODES
    ]
    calls.append(("recall, limit 20", functools.partial(memory.recall, question, agent_id=AGENT, limit=20)))
    shift = index % len(calls)
    for name, call in calls[shift:] + calls[:shift]:
        began = time.perf_counter()
        await call()
        table[name].millis.append((time.perf_counter() - began) * 1000.0)


def _header(command: str, scope: str, began: str, load_start: float) -> list[str]:
    return [
        *harness.header(command, load_start=load_start),
        f"- began: {began} (other engineers' work shares the machine; it moves only the times)",
        f"- data: {scope}",
        "",
    ]


def main(argv: Sequence[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(prog="python -m benchmarks quality.reconstruct_bench")
    parser.add_argument("--quick", action="store_true", help="the first conversation only")
    parser.add_argument("--no-peer", action="store_true", help="leave CPersona 2.6.14 out")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE_DIR)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--anchored", action="store_true", help="a third pass: each turn mentions its speaker"
    )
    parser.add_argument("--latency", type=int, metavar="N", help="time N paired questions at 10k instead")
    args = parser.parse_args(argv)
    began = f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M}"
    load_start = harness.load()
    command = harness.command("quality.reconstruct_bench", [])
    if args.latency:
        table = anyio.run(latency, args.latency)
        out = args.out or RESULTS / "quality_reconstruct_latency.md"
        title = f"# reconstruct vs recall: latency at {LATENCY_SIZE:,} memories, one caller"
        scope = (
            f"recall_speed's cached {LATENCY_SIZE:,}-memory store (LoCoMo turns + generated), its questions"
        )
        head = _header(f"{command} --latency {args.latency}", scope, began, load_start)
        lines = [title, "", *head, *latency_lines(table)]
    else:
        passes = anyio.run(_run, args)
        out = args.out or RESULTS / f"quality_reconstruct{'_quick' if args.quick else ''}.md"
        flags = f"{' --quick' if args.quick else ''}{' --no-peer' if args.no_peer else ''}"
        flags += " --anchored" if args.anchored else ""
        scope = "LoCoMo, " + ("conv-26 only (--quick)" if args.quick else "all ten conversations")
        scope += "; non-adversarial questions with resolvable evidence"
        title = "# reconstruct on LoCoMo: gold turns cited, beside recall and CPersona 2.6.14"
        lines = [title, "", *_header(command + flags, scope, began, load_start), *report(passes)]
    out.write_text("\n".join(lines), encoding="utf-8")
    print(out.read_text(encoding="utf-8"))
    return out


if __name__ == "__main__":
    main()
