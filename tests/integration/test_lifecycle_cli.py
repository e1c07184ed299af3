"""``cpersona export`` and ``cpersona import`` of an archive, run for real in subprocesses: the archive
imported into a fresh store under another agent exports as the same bytes, with a progress bar on
stderr; a damaged archive exits 2 naming the checksum."""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from typing import TYPE_CHECKING, Any, cast

import anyio
import orjson
import pytest

from serving import environment_without_settings

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    import cpersona
    from cpersona.stores.redis.connection import RedisClient


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cpersona", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def _env(redis_url: str, prefix: str, data: Path) -> dict[str, str]:
    base = environment_without_settings()
    return {
        **base,
        "CPERSONA_REDIS_URL": redis_url,
        "CPERSONA_KEY_PREFIX": prefix,
        "CPERSONA_DATA_DIR": str(data),
        "CPERSONA_QDRANT_URL": ":memory:",
        "CPERSONA_EMBEDDING_MODE": "none",
    }


@pytest.fixture
async def fresh_prefix(redis: RedisClient) -> AsyncIterator[str]:
    """A second key prefix (a fresh store) on the session's Redis, dropped when the test ends."""
    prefix = "t" + uuid.uuid4().hex[:8]
    yield prefix
    untyped = cast("Any", redis)
    for raw in await untyped.execute_command("FT._LIST") or ():
        name = raw.decode() if isinstance(raw, bytes) else str(raw)
        if name.startswith(prefix):
            await untyped.execute_command("FT.DROPINDEX", name)
    keys = [key async for key in redis.scan_iter(match=f"{prefix}:*", count=500)]
    if keys:
        await redis.delete(*keys)


def test_export_import_export_on_the_command_line(
    redis_url: str, key_prefix: str, fresh_prefix: str, tmp_path: Path
) -> None:
    here = _env(redis_url, key_prefix, tmp_path / "one")
    there = _env(redis_url, fresh_prefix, tmp_path / "two")
    for text in ("the boiler is serviced in May", "the spare key is under the mat"):
        assert _run(here, "remember", text, "--agent", "alice").returncode == 0
    first, second = tmp_path / "alice.jsonl", tmp_path / "bob.jsonl"
    exported = _run(here, "export", "--agent", "alice", "-o", str(first))
    assert exported.returncode == 0, exported.stderr
    assert "export" in exported.stderr  # the bar
    assert "exported 2 record(s)" in exported.stderr
    imported = _run(there, "import", str(first), "--agent", "bob")
    assert imported.returncode == 0, imported.stderr
    assert "imported 2 record(s) into agent 'bob'" in imported.stdout
    assert "import" in imported.stderr
    assert _run(there, "export", "--agent", "bob", "-o", str(second)).returncode == 0
    assert second.read_bytes() == first.read_bytes()
    to_stdout = _run(here, "export", "--agent", "alice", "--no-progress")
    assert to_stdout.stdout.encode() == first.read_bytes()
    no_agent = _run(there, "import", str(first))
    assert no_agent.returncode == 2
    assert "--agent" in no_agent.stderr
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_bytes(first.read_bytes().replace(b"boiler", b"BOILER"))
    refused = _run(there, "import", str(damaged), "--agent", "carol")
    assert refused.returncode == 2
    assert "checksum" in refused.stderr


def test_an_archive_imported_into_another_agent_of_its_store_is_a_copy(
    redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    # The same store both ways: the archive's ids are alice's, so bob's import is a copy under new ids.
    env = _env(redis_url, key_prefix, tmp_path / "one")
    assert _run(env, "remember", "the gate code is 4711", "--agent", "alice-cli").returncode == 0
    archive = tmp_path / "alice.jsonl"
    assert _run(env, "export", "--agent", "alice-cli", "-o", str(archive)).returncode == 0
    imported = _run(env, "import", str(archive), "--agent", "bob-cli")
    assert imported.returncode == 0, imported.stderr
    assert "imported 1 record(s) into agent 'bob-cli', as a copy under new ids" in imported.stdout
    again = _run(env, "import", str(archive), "--agent", "bob-cli")
    assert "imported 0 record(s) into agent 'bob-cli', as a copy under new ids, skipped 1" in again.stdout
    found = _run(env, "recall", "what is the gate code?", "--agent", "bob-cli", "--json")
    assert found.returncode == 0, found.stderr
    assert "4711" in found.stdout
    copy = tmp_path / "bob.jsonl"
    assert _run(env, "export", "--agent", "bob-cli", "-o", str(copy)).returncode == 0
    alice_id = next(line for line in archive.read_text().splitlines() if '"memory"' in line).split('"id":"')[
        1
    ][:36]
    assert alice_id not in copy.read_text()
    assert "4711" in copy.read_text()


async def test_export_says_the_count_its_footer_holds(
    engine: cpersona.Engine, redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    # An agent with an associative layer: its archive has an associations line, which is no record.
    anchor = await engine.store("Ada met the ops team", agent_id="graphed")
    await engine.store("the boiler is serviced in May", agent_id="graphed")
    await engine.declare_associations("graphed", {"entities": [{"name": "Ada"}]}, anchor_ref=anchor.ref)
    target = tmp_path / "graphed.jsonl"
    env = _env(redis_url, key_prefix, tmp_path / "data")
    done = await anyio.to_thread.run_sync(_run, env, "export", "--agent", "graphed", "-o", str(target))
    assert done.returncode == 0, done.stderr
    lines = [orjson.loads(line) for line in (await anyio.Path(target).read_bytes()).splitlines()]
    assert [line["kind"] for line in lines] == ["header", "memory", "memory", "associations", "footer"]
    assert lines[-1]["record_count"] == 2
    assert f"exported 2 record(s) of agent 'graphed' to {target}\n" in done.stderr
    assert re.search(r"\b2/2\b", done.stderr), done.stderr  # the bar counts the same lines
