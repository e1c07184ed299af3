"""The reconstruct benchmark (``benchmarks/quality/reconstruct_bench.py``): its scoring, one pass over a
tiny LoCoMo-shaped conversation, and the CPersona 2.6.14 worker's reconstruct and declare ops."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.peers.cpersona_ref import CPersonaRef  # noqa: E402
from benchmarks.quality.embed_cache import EmbeddingCache  # noqa: E402
from benchmarks.quality.locomo import load_locomo  # noqa: E402
from benchmarks.quality.reconstruct_bench import (  # noqa: E402
    MODES,
    Tally,
    anchor_speakers,
    cited_units,
    declare_speakers,
    latency_lines,
    measure,
    report,
)
from benchmarks.quality.systems import Cpersona  # noqa: E402

from peer_installs import install_peers, peer_installs  # noqa: E402
from test_peers import _tiny_locomo  # noqa: E402


def test_tally_counts_any_and_all_gold_cited() -> None:
    tally = Tally()
    tally.add(["D1:1", "D1:2"], ["D1:2", "D9:9"], 2)
    tally.add(["D1:1"], ["D1:1"], 1)
    tally.add(["D2:1"], [], 0)
    assert (tally.questions, tally.any_hit, tally.all_hit, tally.records) == (3, 2, 1, 3)
    assert tally.share(tally.all_hit) == pytest.approx(1 / 3)


def test_latency_lines_give_p50_and_p95_per_call() -> None:
    tally = Tally(millis=[float(ms) for ms in range(1, 101)])
    lines = latency_lines({"reconstruct default": tally, "recall, limit 20": Tally(millis=[5.0])})
    assert lines[2] == "| reconstruct default | 100 | 51.0 | 95.0 |"
    assert lines[3] == "| recall, limit 20 | 1 | 5.0 | 5.0 |"


def test_cited_units_reads_heads_claims_and_excerpts_once() -> None:
    claim = types.SimpleNamespace
    items = [
        claim(head_ref="mem:a", claims=[claim(ref="mem:a"), claim(ref="mem:b")], excerpts=None),
        claim(head_ref="mem:c", claims=[claim(ref="mem:c")], excerpts=[claim(ref="mem:b")]),
    ]
    units = {"mem:a": ["D1:1", "D2:5"], "mem:b": ["D1:2"], "mem:c": ["D1:1"]}
    assert cited_units(items, units.__getitem__) == (["D1:1", "D2:5", "D1:2"], 3)


@pytest.mark.slow
async def test_one_pass_over_a_tiny_conversation(tmp_path: Path) -> None:
    data_file = tmp_path / "tiny.json"
    _tiny_locomo(data_file)
    data = load_locomo(data_file)
    [conv] = data.conversations
    system = Cpersona()
    try:
        await system.preload([(conv.conv_id, conv.turns)])
        before = await measure(data, system, None)
        assert await declare_speakers(data, system, None) == (2, 0)
        after = await measure(data, system, None)
        # 15 turns, one repeated ("Thanks!" twice): 14 records, each mentioning its speaker once.
        assert await anchor_speakers(data, system, None) == (14, 0)
    finally:
        await system.aclose()
    for table in (before, after):
        for mode in MODES:
            column = table[f"reconstruct {mode or 'default'}"]
            assert column.questions == len(data.recall_questions()) == 4
            # The locker code is said once, in so many words: every mode must cite that turn.
            assert column.any_hit >= 1
            assert len(column.millis) == 4
    lines = report({"empty graph": before})
    assert lines[0] == "## empty graph"
    assert any(line.startswith("| recall@10 | 4 |") for line in lines)


@pytest.mark.slow
@peer_installs
async def test_peer_reconstruct_cites_units_and_declares_entities(tmp_path: Path) -> None:
    await install_peers(CPersonaRef)
    data_file = tmp_path / "tiny.json"
    _tiny_locomo(data_file)
    [conv] = load_locomo(data_file).conversations
    cache = EmbeddingCache(progress=False)
    try:
        await cache.ensure([t.content for t in conv.turns] + [q.question for q in conv.questions])
        peer = CPersonaRef(lambda texts: cache.embed(texts, desc="peer"))
        try:
            await peer.index(conv.conv_id, conv.turns)
            for mode in MODES:
                reply = await peer.reconstruct(conv.conv_id, "What is Ann's locker code?", mode)
                cited = [unit for item in reply["items"] for unit in item["units"]]
                assert "D1:7" in cited
            assert await peer.declare_entities(conv.conv_id, ["Ann", "Bo"]) == 2
            [(ref, _)] = [(r, u) for r, u in peer._refs[conv.conv_id].items() if u == ["D1:7"]]
            assert await peer.declare_entities(conv.conv_id, ["Ann"], anchor=ref) == 1
        finally:
            await peer.aclose()
    finally:
        await cache.aclose()
