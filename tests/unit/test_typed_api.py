"""The public Python API is typed: mypy refuses a misspelled keyword, and accepts the correct calls.

The test type-checks two small callers of the library with the project's own mypy (strict) and this
checkout's source, in one run: one that calls every public write and read method as documented, and
one that misspells a keyword of each. The correct caller must pass; each misspelling must be named.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

GOOD = """
from __future__ import annotations

import cpersona


async def use(memory: cpersona.Engine) -> None:
    await memory.store("the deploy key rotates on Fridays", agent_id="ops", project_id="p", id="m-1")
    await memory.store({"blocks": [{"modality": "text", "data": "hi"}]}, agent_id="ops", emotion="joy")
    await memory.store_batch([{"content": "x", "agent_id": "ops"}])
    await memory.store("a fleet's own vector", agent_id="ops", embedding=[0.6, 0.8])
    await memory.archive_episode("we rotated the key", agent_id="ops", keywords=["key"])
    await memory.store_raw(
        "user: hi", agent_id="ops", session_id="s", source="conversation", speaker="user",
        visibility="normal", secrecy_level="public",
    )
    stored = await memory.store("later", agent_id="ops", timestamp="2026-03-02")
    await memory.update(stored.ref, agent_id="ops", content="changed", store="semantic")
    result = await memory.recall(
        "when does the key rotate?", agent_id="ops", limit=5, mode="rrf", order="best_last",
        time_cue={"after": "2026-03-01", "confidence": "likely"},
    )
    rows: tuple[cpersona.RecallRow, ...] = result.rows
    print(rows)
    await memory.calibrate("ops", precision="strict")
    await memory.select_gate("ops", "heuristic")
    await memory.store(
        "Ann knows Ben", agent_id="ops", associations={"entities": [{"name": "Ann", "aliases": ["Annie"]}]}
    )
    declared: cpersona.DeclareResult = await memory.declare_associations(
        "ops", {"relations": [{"subject": "Ann", "predicate": "knows", "object": "Ben"}]}, project_id="p"
    )
    reached: cpersona.TraverseResult = await memory.traverse("ops", "Ann", max_hops=2, limit=10)
    print(declared.relations, [r.hops for r in reached.records])
    rebuilt: cpersona.ReconstructResult = await memory.reconstruct(
        "who rotates the key?", agent_id="ops", count=5, top_k=40, max_hops=1, max_evidence=10,
        budget=3000, project_id="p", time_cue={"after": "2026-03-01"}, trace=True,
    )
    print([item.head_ref for item in rebuilt.items], rebuilt.shortfall_reason)
    found: cpersona.RawQueryResult = await memory.raw_query(
        "hi", agent_id="ops", session_id="s", temporal={"start": "2026-03-01", "end": "2026-03-02"},
        limit=5, include_private_scratch=True, include_sealed=True, secrecy_levels=["public", "secret"],
    )
    entries: list[cpersona.RawEntry] = found.records
    print([entry.text for entry in entries], found.total_candidates)
    tick: cpersona.DecayTickResult = await memory.decay_tick("ops", tick_duration_seconds=3600)
    ahead: cpersona.DecayForecastResult = await memory.decay_forecast("ops", [stored.id], "2030-01-01")
    gone: cpersona.ForgetResult = await memory.forget(
        "ops", confirm=True, store="episodic", temporal_range={"start": 0, "end": 1}, older_than_seconds=60
    )
    merged: cpersona.ConsolidateResult = await memory.consolidate("ops", min_age_hours=1, dry_run=True)
    archive: cpersona.ExportResult = await memory.export("ops", stores=["semantic"], include_raw_journal=True)
    lines = [line async for line in memory.export_lines("ops")]
    back: cpersona.ImportResult = await memory.import_archive(
        "ops2", archive.archive_data, strategy="replace", conflict_resolution="keep_imported"
    )
    sealed = await memory.export("ops", encryption_key="a pass phrase")
    await memory.import_archive("ops3", sealed.archive_data, decryption_key="a pass phrase")
    print(tick.records_below_threshold, ahead.forecasts, gone.records_deleted, merged, lines, back)
    cued: cpersona.CueQueryResult = await memory.query(
        {"text": "key", "emotion": "trust", "temporal": {"start": "2026-03-01", "end": "2026-03-31"}},
        agent_id="ops", stores=["semantic"], limit=5, min_fidelity=0.1, include_decayed=False,
        reconsolidate=True, activation_depth=2, recall_mode="perfect", trace=True, request_id="r-1",
    )
    first: cpersona.RecalledMemory = cued.memories[0]
    near: cpersona.AssociateResult = await memory.associate(
        first.record.ref, agent_id="ops", association_types=["causal"], depth=3, min_weight=0.2, limit=20
    )
    print(near.total_candidates, first.activation_path)
    laid_out: cpersona.TimelineResult = await memory.timeline(
        "ops", range={"start": "2026-03-01", "end": "2026-03-19T23:59:59Z"}, granularity="day",
        min_fidelity=0.1, emotion_filter={"joy": 0.5}, limit=100, project_id="p",
    )
    print([bucket.count for bucket in laid_out.buckets], laid_out.truncated)
    drawn: cpersona.GraphResult = await memory.graph(
        "ops", center_id=stored.ref, depth=2, edge_types=["semantic", "causal"], include_meta=True,
        limit_nodes=50,
    )
    print([node.id for node in drawn.nodes], drawn.meta_edges)
    made = await memory.create_key(["ops", "ci"], name="fleet")
    root = await memory.create_key(admin=True)
    print(made.key, made.info.agents, (await memory.list_keys()).keys, root.info.scope)
    revoked = await memory.revoke_key(made.info.key_id)
    print(revoked.revoked, await memory.verify_key(made.key))
"""

# Each line misspells or mistypes one thing; mypy must report every one of them.
BAD = """
from __future__ import annotations

import cpersona


async def use(memory: cpersona.Engine) -> None:
    await memory.store("text", agnet_id="ops")
    await memory.recall("question", agent_id="ops", limt=5)
    await memory.archive_episode("summary", agent_id="ops", keyword=["x"])
    await memory.store_raw("x", agent_id="ops", session_id="s", source="conversation", speaker="user")
    await memory.update("mem:x", agent_id="ops", contents="new")
    await memory.recall("question", agent_id="ops", mode="fastest")
    await memory.traverse("ops", "Ann", max_hop=2)
    await memory.declare_associations("ops", {}, anchor="mem:x")
    await memory.reconstruct("question", agent_id="ops", max_hop=2)
    await memory.reconstruct("question", agent_id="ops", count="3")
    await memory.raw_query("words", agent_id="ops", include_seal=True)
    await memory.raw_query("words", agent_id="ops", secrecy_levels=["top"])
    await memory.decay_tick("ops", tick_seconds=5)
    await memory.forget("ops", record_ids=["x"])
    await memory.import_archive("ops", b"", strategy="overwrite")
    await memory.query({"text": "x"}, agent_id="ops", activation_dept=2)
    await memory.associate("mem:x", agent_id="ops", association_types=["friendly"])
    await memory.timeline("ops", range={"start": 0, "end": 1}, granularty="day")
    await memory.graph("ops", edge_types=["likes"])
    await memory.create_key(["ops"], admins=True)
"""

EXPECTED = (
    ("bad.py:8:", 'Unexpected keyword argument "agnet_id"'),
    ("bad.py:9:", 'Unexpected keyword argument "limt"'),
    ("bad.py:10:", 'Unexpected keyword argument "keyword"'),
    ("bad.py:11:", 'Missing named argument "visibility"'),
    ("bad.py:12:", 'Unexpected keyword argument "contents"'),
    ("bad.py:13:", '"mode"'),
    ("bad.py:14:", 'Unexpected keyword argument "max_hop"'),
    ("bad.py:15:", 'Unexpected keyword argument "anchor"'),
    ("bad.py:16:", 'Unexpected keyword argument "max_hop"'),
    ("bad.py:17:", '"count"'),
    ("bad.py:18:", 'Unexpected keyword argument "include_seal"'),
    ("bad.py:19:", "Literal['top']"),
    ("bad.py:20:", 'Unexpected keyword argument "tick_seconds"'),
    ("bad.py:21:", 'Missing named argument "confirm"'),
    ("bad.py:22:", '"strategy"'),
    ("bad.py:23:", 'Unexpected keyword argument "activation_dept"'),
    ("bad.py:24:", "List item 0"),
    ("bad.py:25:", 'Unexpected keyword argument "granularty"'),
    ("bad.py:26:", "List item 0 has incompatible type"),
    ("bad.py:27:", 'Unexpected keyword argument "admins"'),
)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_mypy_catches_a_wrong_keyword_and_passes_the_right_calls(tmp_path: Path) -> None:
    (tmp_path / "good.py").write_text(GOOD)
    (tmp_path / "bad.py").write_text(BAD)
    env = {**os.environ, "MYPYPATH": str(ROOT / "src")}
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--no-error-summary",
            "--show-absolute-path",
            str(tmp_path / "good.py"),
            str(tmp_path / "bad.py"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    lines = [line for line in run.stdout.splitlines() if ": error:" in line]
    assert not [line for line in lines if "good.py" in line], run.stdout
    for where, message in EXPECTED:
        assert any(where in line and message in line for line in lines), (where, message, run.stdout)
    assert run.returncode == 1, run.stdout + run.stderr
