"""The fleet benchmark (``benchmarks/fleet_speed.py``, issue 17 targets 3 and 4).

The properties pin what the figures rest on: each agent's sample is deterministic and distinct, the
batches cover the fleet exactly once in agent order whatever their size, and the cost-growth table reads
only the one-caller rows of the committed results. The quick run builds a tiny fleet on the real embedded
engines and checks the shape of what it measured and wrote; no time is compared with a threshold here.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import numpy as np
import pytest
from benchmarks import fleet_probe, fleet_report, fleet_speed, fleet_tenancy
from hypothesis import given, settings
from hypothesis import strategies as st

if TYPE_CHECKING:
    from pathlib import Path

_POOL = [f"Speaker {n}: turn number {n}" for n in range(300)]


@given(memories=st.integers(1, 300), n=st.integers(0, 10_000))
def test_an_agents_sample_is_its_own_deterministic_and_distinct(memories: int, n: int) -> None:
    sample = fleet_speed.agent_memories(_POOL, memories, n)
    assert sample == fleet_speed.agent_memories(_POOL, memories, n)
    assert len(sample) == len(set(sample)) == memories
    assert set(sample) <= set(_POOL)


def _fleet(agents: int, memories: int) -> fleet_speed.Fleet:
    texts = tuple(tuple(fleet_speed.agent_memories(_POOL, memories, n)) for n in range(agents))
    distinct = fleet_speed.distinct_texts(texts)
    vectors = np.arange(len(distinct) * 3, dtype=np.float32).reshape(len(distinct), 3)
    return fleet_speed.Fleet.of(agents, memories, texts, vectors)


@settings(max_examples=60, deadline=None)
@given(agents=st.integers(1, 6), memories=st.integers(1, 40), size=st.integers(1, 100))
def test_batches_cover_the_fleet_once_in_agent_order(agents: int, memories: int, size: int) -> None:
    fleet = _fleet(agents, memories)
    order = list(range(agents))
    records = [r for first in range(0, agents * memories, size) for r in fleet.batch(order, first, size)]
    expected = [(fleet_speed.agent_id(n), text) for n in order for text in fleet.texts[n]]
    assert [(r["agent_id"], r["content"]) for r in records] == expected
    if fleet_speed.CALLER_VECTORS:
        for r in records:
            assert r["embedding"] == fleet.vectors[fleet.row[r["content"]]].tolist()
    else:
        assert all("embedding" not in r for r in records)


def test_the_lone_agent_gets_the_same_memories_as_in_the_fleet() -> None:
    fleet = _fleet(5, 20)
    lone = fleet.batch([fleet.measured], 0, 1_000)
    assert [r["content"] for r in lone] == list(fleet.texts[fleet.measured])
    assert {r["agent_id"] for r in lone} == {fleet_speed.agent_id(fleet.measured)}


def test_growth_reads_only_the_one_caller_rows(tmp_path: Path) -> None:
    ours = tmp_path / "recall_speed.md"
    ours.write_text(
        "| memories | callers | recalls | p50 ms | p95 ms | p99 ms |\n|---|---|---|---|---|---|\n"
        "| 10,000 | 1 | 300 | 26.4 | 32.4 | 34.7 |\n| 10,000 | 8 | 800 | 181.3 | 218.3 | 268.3 |\n"
    )
    peers = tmp_path / "speed_peers.md"
    peers.write_text(
        "| 1,000 | 1 | 200 | 22.8 / 28.4 / 31.3 | 28.4 / 33.4 / 38.7 | 26.8 | **1.25** |\n"
        "| 1,000 | 8 | 400 | 148.1 / 185.8 / 210.5 | 169.7 / 221.1 / 245.5 | 152.0 | **1.15** |\n"
    )
    raw = tmp_path / "absent.json"
    found = fleet_report._recall_speed_points(raw, ours)
    assert {n: (p.p50_ms, p.p95_ms) for n, p in found.items()} == {10_000: (26.4, 32.4)}
    theirs = fleet_report._peer_points(peers)
    assert {n: (p.p50_ms, p.p95_ms) for n, p in theirs.items()} == {1_000: (28.4, 33.4)}
    # The committed table wins over the local raw file; the raw file fills only sizes the table lacks.
    level = {"callers": 1, "p50_ms": 8.0, "p95_ms": 9.0}
    raw.write_text(json.dumps({str(n): {"build": {}, "levels": [level]} for n in (10_000, 100_000)}))
    both = fleet_report._recall_speed_points(raw, ours)
    assert (both[10_000].p50_ms, both[10_000].source) == (26.4, "recall_speed.md")
    assert both[100_000].p50_ms == 8.0


def test_command_delta_keeps_only_the_commands_called_in_between() -> None:
    before = {"get": (5, 50), "json.set": (1, 10)}
    after = {"get": (5, 50), "json.set": (4, 70), "zadd": (2, 6)}
    assert fleet_probe.command_delta(before, after) == {
        "json.set": {"calls": 3, "usec": 60},
        "zadd": {"calls": 2, "usec": 6},
    }


@pytest.mark.parametrize(
    "argv",
    [["--agents", "1"], ["--agents", "0"], ["--batch", "0"], ["--writers", "0"], ["--tenant-agents", "9"]],
)
def test_a_size_out_of_range_is_refused_not_replaced(argv: list[str]) -> None:
    args = fleet_speed.build_parser().parse_args(["--quick", *argv])
    with pytest.raises(SystemExit):
        fleet_speed.settle(args, argv)


@pytest.mark.slow
def test_quick_run_measures_every_part(tmp_path: Path) -> None:
    out = tmp_path / "fleet_speed.md"
    result = fleet_speed.main(
        ["--quick", "--agents", "3", "--memories", "12", "--pairs", "4", "--out", str(out)]
    )
    records = 3 * 12
    assert result["fleet"]["ingest"]["stored"] == records
    assert result["lone"]["ingest"]["stored"] == 12
    # each grid cell stores whole agents on a scratch store: --quick gives it two agents' worth
    assert [cell["stored"] for cell in result["grid"]] == [2 * 12] * len(result["grid"])
    assert (result["chosen"]["batch"], result["chosen"]["writers"]) in {
        (c["batch"], c["writers"]) for c in result["grid"]
    }
    parts = result["fleet"]["ingest"]["parts_secs"]
    assert parts["document write (Redis transaction, durable)"] > 0
    assert parts["vector upsert (qdrant-edge)"] > 0
    assert (parts.get("embedding", 0.0) == 0.0) is fleet_speed.CALLER_VECTORS
    # Redis's own account of the store: a batch's documents go in one JSON.MSET, so there are calls but
    # fewer than records (every document arrived: num_docs below)
    commands = {name.lower(): c for name, c in result["fleet"]["ingest"]["redis_commands"].items()}
    assert 1 <= commands["json.mset"]["calls"] < records
    # the build followed as it grew: rows that cover every record once, each with its own JSON.MSET time
    rows = result["fleet"]["ingest"]["timeline"]
    assert rows
    assert rows[-1]["upto"] == records
    assert sum(r["records"] for r in rows) == records
    assert all(r["records"] > 0 and r["mset_us"] > 0 for r in rows)
    full = result["fleet"]["full"]
    assert full["indexes"]["memory"]["num_docs"] == records
    assert full["redis_used_memory"] > result["fleet"]["empty"]["redis_used_memory"]
    assert full["engine_rss_kb"] > 0
    assert full["redis_rss_kb"] > 0
    measured = result["measure"]
    # no block worker ran in either store: every record's block event is still queued
    assert measured["blocks"] == [{"built": 0, "queued": records}, {"built": 0, "queued": 12}]
    for key in ("before", "after"):
        samples = measured[key]["samples_ms"]
        assert {name: len(ms) for name, ms in samples.items()} == dict.fromkeys(samples, 4)
    assert measured["shards"]["fleet"]["memories"]["points"] == records
    assert measured["shards"]["lone"]["memories"]["points"] == 12
    # the shard configurations, each on the same memories
    assert [r["config"] for r in result["tenancy"]] == list(fleet_tenancy.CONFIGS)
    assert {r["points"] for r in result["tenancy"]} == {records}
    text = out.read_text()
    for heading in (
        "## Store throughput",
        "## Bytes per record",
        "## Recall in one agent's scope",
        "## Cost growth",
        "The fleet's build by tenths",
    ):
        assert heading in text
    assert out.with_suffix(".png").is_file()
    assert (tmp_path / "cost_growth_quick.png").is_file()
    assert json.loads(out.with_suffix(".json").read_text())["agents"] == 3


def test_grid_only_run_reports_the_grid_and_builds_no_fleet(tmp_path: Path) -> None:
    out = tmp_path / "fleet_grid.md"
    result = fleet_speed.main(
        ["--quick", "--grid-only", "--agents", "3", "--memories", "12", "--out", str(out)]
    )
    assert "fleet" not in result
    assert "measure" not in result
    assert [cell["stored"] for cell in result["grid"]] == [2 * 12] * len(result["grid"])
    text = out.read_text()
    assert "## Store throughput" in text
    assert "Best cell:" in text
    assert "## Recall in one agent's scope" not in text
    best = max(cell["records_per_sec"] for cell in result["grid"])
    assert f"**{best:,.0f} records/s**" in text
    assert not (tmp_path / "cost_growth_quick.png").exists()
