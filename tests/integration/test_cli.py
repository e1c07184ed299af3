"""The ``cpersona`` command, run for real in a subprocess against the session's Redis.

Settings travel the way a user sets them, in ``CPERSONA_*`` variables. Each process has its own
in-memory Qdrant and no embedder, which is all these commands need.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import orjson
import pytest

import cpersona
from cpersona import InvalidRequest, ReconstructResult, Settings
from cpersona.edges.cli.reconstruct import render_reconstruct
from cpersona.edges.cli.service import LocalService, RemoteService
from cpersona.edges.http.app import create_app
from serving import environment_without_settings

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractAsyncContextManager

    from starlette.applications import Starlette

    from cpersona.stores.redis.connection import RedisClient

AGENT = "cli-agent"
_SCRIPT = Path(sys.executable).with_name("cpersona")


@pytest.fixture
def env(redis_url: str, key_prefix: str, tmp_path: Path, redis: RedisClient) -> dict[str, str]:
    # ``redis`` is requested so that this test's keys and indexes are dropped when it ends.
    base = environment_without_settings()
    return {
        **base,
        "CPERSONA_REDIS_URL": redis_url,
        "CPERSONA_KEY_PREFIX": key_prefix,
        "CPERSONA_DATA_DIR": str(tmp_path / "data"),
        "CPERSONA_QDRANT_URL": ":memory:",
        "CPERSONA_EMBEDDING_MODE": "none",
    }


def run(env: dict[str, str], *args: str, module: bool = False) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "cpersona"] if module or not _SCRIPT.exists() else [str(_SCRIPT)]
    return subprocess.run(
        [*command, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def stats(env: dict[str, str], agent: str = AGENT) -> dict[str, object]:
    done = run(env, "stats", "--agent", agent, "--json")
    assert done.returncode == 0, done.stderr
    parsed: dict[str, object] = orjson.loads(done.stdout)
    return parsed


def test_remember_then_stats_and_get(env: dict[str, str]) -> None:
    done = run(
        env,
        "remember",
        "The deploy key rotates on Fridays",
        "--agent",
        AGENT,
        "--project",
        "ops",
        "--id",
        "m-1",
        "--metadata",
        '{"via": "cli"}',
    )
    assert done.returncode == 0, done.stderr
    match = re.fullmatch(r"stored (mem:[0-9a-f-]{36})\n", done.stdout)
    assert match, done.stdout
    ref = match.group(1)
    assert stats(env)["memories"] == 1

    again = run(env, "remember", "The deploy key rotates on Fridays", "--agent", AGENT, "--project", "ops")
    assert again.returncode == 0, again.stderr
    assert again.stdout == f"skipped {ref} (duplicate_content)\n"

    got = run(env, "get", ref, "--agent", AGENT, module=True)
    assert got.returncode == 0, got.stderr
    record = orjson.loads(got.stdout)
    assert (record["ref"], record["content"], record["project_id"]) == (
        ref,
        "The deploy key rotates on Fridays",
        "ops",
    )
    assert record["metadata"] == {"via": "cli"}

    plain = run(env, "stats")
    assert plain.returncode == 0, plain.stderr
    assert "memories         1" in plain.stdout.splitlines()


def test_stats_is_a_table_with_whole_counts(env: dict[str, str]) -> None:
    for text in ("the boiler is serviced in May", "the spare key is under the mat"):
        assert run(env, "remember", text, "--agent", AGENT).returncode == 0
    counts = stats(env)
    # Every count is an integer in the JSON, as the response model declares (a recall count was 0.0).
    for name in ("memories", "total_records", "total_associations", "total_recall_count", "vector_pending"):
        assert type(counts[name]) is int, (name, counts[name])
    assert counts["records_by_store"] == {"episodic": 2, "semantic": 0, "procedural": 0, "emotional": 0}
    done = run(env, "stats", "--agent", AGENT)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:7] == [
        "memories         2",
        "episodes         0",
        "raw entries      0",
        "vectors          - (no embedder)",
        "vectors pending  0",
        "associations     0",
        "recalls          0",
    ]
    assert re.fullmatch(r"mean fidelity    [01]\.\d{3}", lines[7]), lines
    assert re.fullmatch(r"oldest memory    \d{4}-\d\d-\d\dT[\d:.]+Z", lines[8]), lines
    assert re.fullmatch(r"store +memories +mean fidelity", lines[11]), lines
    assert re.fullmatch(r"episodic +2 +[01]\.\d{3}", lines[12]), lines
    assert re.fullmatch(r"semantic +0 +-", lines[13]), lines
    assert not any("{" in line for line in lines)  # no Python dict shown


def test_remember_reports_warnings_and_json(env: dict[str, str]) -> None:
    done = run(
        env, "remember", "from the future", "--agent", AGENT, "--timestamp", "2999-01-01T00:00:00Z", "--json"
    )
    assert done.returncode == 0, done.stderr
    result = orjson.loads(done.stdout)
    assert result["result"] == "stored"
    assert result["warnings"] == ["timestamp_ahead_of_clock"]
    epoch = run(env, "remember", "epoch seconds", "--agent", AGENT, "--timestamp", "1700000000")
    assert epoch.returncode == 0, epoch.stderr


def test_bad_input_exits_2_with_a_one_line_error(env: dict[str, str]) -> None:
    bad_metadata = run(env, "remember", "x", "--agent", AGENT, "--metadata", "{not json")
    assert bad_metadata.returncode == 2
    assert bad_metadata.stderr.startswith("error: metadata: is not valid JSON")
    assert bad_metadata.stderr.count("\n") == 1

    blank = run(env, "remember", "   ", "--agent", AGENT)
    assert blank.returncode == 2
    assert blank.stderr == "error: content: must not be empty or only whitespace\n"

    bad_ref = run(env, "get", "mem:nope", "--agent", AGENT)
    assert bad_ref.returncode == 2
    assert bad_ref.stderr.startswith("error: ref: ")

    bad_setting = run({**env, "CPERSONA_PORT": "eighty"}, "stats")
    assert bad_setting.returncode == 2
    assert bad_setting.stderr.startswith("error: CPERSONA_PORT must be an integer")

    missing_flag = run(env, "remember", "x")
    assert missing_flag.returncode == 2
    assert "--agent" in missing_flag.stderr


def test_unknown_record_exits_1(env: dict[str, str]) -> None:
    done = run(env, "get", "mem:01900000-0000-7000-8000-000000000000", "--agent", AGENT)
    assert done.returncode == 1
    assert done.stderr == "error: record not found: mem:01900000-0000-7000-8000-000000000000\n"


def test_unavailable_redis_exits_3(env: dict[str, str]) -> None:
    dead = {**env, "CPERSONA_REDIS_URL": "redis://127.0.0.1:1/0", "CPERSONA_REDIS_TIMEOUT_SECS": "2"}
    done = run(dead, "stats")
    assert done.returncode == 3, done.stderr
    assert done.stderr.startswith("error: redis unavailable: ")
    assert done.stderr.count("\n") == 1


def test_delete_agent_needs_yes(env: dict[str, str]) -> None:
    assert run(env, "remember", "one", "--agent", AGENT).returncode == 0
    assert run(env, "remember", "two", "--agent", AGENT).returncode == 0
    assert run(env, "remember", "someone else's", "--agent", "other").returncode == 0
    refused = run(env, "delete-agent", "--agent", AGENT)
    assert refused.returncode == 2
    assert refused.stderr.startswith("error: --yes: is required")
    assert stats(env)["memories"] == 2
    done = run(env, "delete-agent", "--agent", AGENT, "--yes")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == f"deleted 2 record(s) of agent '{AGENT}'\n"
    assert stats(env)["memories"] == 0
    assert stats(env, "other")["memories"] == 1


def test_forget_is_the_old_name_of_delete_agent(env: dict[str, str]) -> None:
    assert run(env, "remember", "one", "--agent", AGENT).returncode == 0
    note = "note: 'cpersona forget' is deprecated: use 'cpersona delete-agent', the same command\n"
    refused = run(env, "forget", "--agent", AGENT)
    assert refused.returncode == 2
    assert refused.stderr.startswith(note + "error: --yes: is required")
    done = run(env, "forget", "--agent", AGENT, "--yes")
    assert (done.returncode, done.stderr) == (0, note)
    assert done.stdout == f"deleted 1 record(s) of agent '{AGENT}'\n"
    assert stats(env)["memories"] == 0
    helped = run(env, "--help")
    assert re.search(r"delete-agent\s+delete all data of one agent \(MCP delete_agent_data\)", helped.stdout)
    assert re.search(r"forget\s+deprecated: the old name of delete-agent", helped.stdout)


def _jsonl(tmp_path: Path) -> Path:
    lines = [
        '{"content": "first imported memory", "id": "i-1"}',
        '{"content": "second imported memory", "agent_id": "explicit-agent"}',
        "",
        '{"agent_id": "x"}',
        '{"content": "fourth imported memory", "timestamp": "2024-02-01T09:00:00Z"}',
        "not json at all",
        '{"content": "first imported memory", "id": "i-1b"}',
    ]
    path = tmp_path / "memories.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_import_stops_at_the_first_bad_line(env: dict[str, str], tmp_path: Path) -> None:
    done = run(env, "import", str(_jsonl(tmp_path)), "--agent", AGENT)
    assert done.returncode == 2
    assert "line 4: content: is required" in done.stderr
    assert "error: line 4: content: is required; stopped there" in done.stderr
    assert "line 6" not in done.stderr
    # The bar is drawn on stderr even when it is not a terminal.
    assert re.search(r"import: +\d+%\|", done.stderr), done.stderr
    assert re.search(r"\b4/7\b", done.stderr), done.stderr
    assert re.match(
        r"stored 2, skipped 0 \(duplicates\), failed 1 in [\d.]+ s \([\d.]+ records/s\)\n$", done.stdout
    )
    assert stats(env)["memories"] == 1
    assert stats(env, "explicit-agent")["memories"] == 1


def test_import_can_skip_bad_lines(env: dict[str, str], tmp_path: Path) -> None:
    done = run(
        env, "import", str(_jsonl(tmp_path)), "--agent", AGENT, "--on-error", "skip", "--batch-size", "2"
    )
    # The good lines are stored, but the failed ones still make the exit code say so.
    assert done.returncode == 2, done.stderr
    assert done.stderr.endswith("error: 2 line(s) failed and were skipped (named above)\n")
    assert "line 4: content: is required" in done.stderr
    assert "line 6: body: is not valid JSON" in done.stderr
    assert re.search(r"\b7/7\b", done.stderr), done.stderr
    assert done.stdout.startswith("stored 3, skipped 1 (duplicates), failed 2 in ")
    assert stats(env)["memories"] == 2

    # Importing again stores nothing new: every line is a duplicate by id or content.
    again = run(env, "import", str(_jsonl(tmp_path)), "--agent", AGENT, "--on-error", "skip", "--no-progress")
    assert again.returncode == 2, again.stderr
    assert again.stdout.startswith("stored 0, skipped 4 (duplicates), failed 2 in ")
    assert "%|" not in again.stderr


def test_import_without_agent_names_the_field(env: dict[str, str], tmp_path: Path) -> None:
    path = tmp_path / "one.jsonl"
    path.write_text('{"content": "no agent here"}\n')
    done = run(env, "import", str(path))
    assert done.returncode == 2
    assert "error: line 1: agent_id: is required" in done.stderr
    missing = run(env, "import", str(tmp_path / "absent.jsonl"))
    assert missing.returncode == 2
    assert "no such file" in missing.stderr


def test_python_dash_m_and_help(env: dict[str, str]) -> None:
    done = run(env, "--help", module=True)
    assert done.returncode == 0
    for command in ("serve", "remember", "import", "stats", "get", "delete-agent", "reconstruct"):
        assert command in done.stdout


def test_serve_answers_and_shuts_down_on_sigint(env: dict[str, str], free_tcp_port: int) -> None:
    command = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "cpersona"]
    args = [*command, "serve", "--host", "127.0.0.1", "--port", str(free_tcp_port)]
    with subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as server:
        try:
            deadline = time.monotonic() + 60
            while True:
                assert server.poll() is None, server.communicate()[1]
                try:
                    response = httpx.get(f"http://127.0.0.1:{free_tcp_port}/health", timeout=2)
                    break
                except httpx.TransportError:
                    assert time.monotonic() < deadline, "the server did not come up"
                    time.sleep(0.2)
            assert response.status_code == 200
            assert {"search", "ReJSON"} <= set(response.json()["redis"]["modules"])
            stored = httpx.post(
                f"http://127.0.0.1:{free_tcp_port}/v1/encode",
                json={"content": "over the wire", "agent_id": AGENT},
            )
            assert stored.json()["result"] == "stored"
        finally:
            server.send_signal(signal.SIGINT)
            _, stderr = server.communicate(timeout=30)
    # uvicorn shuts down gracefully; whether it then re-raises SIGINT (exit 130) or returns (exit 0)
    # depends on how the process was started (a terminal or not), so both are a clean stop.
    assert server.returncode in (0, 130), stderr
    assert "Application shutdown complete" in stderr
    assert "Application startup complete" in stderr
    assert "Application shutdown complete" in stderr
    # Whether a request needs a key, and where the logs go (the Redis is not embedded: no file of its own).
    assert "\n  api keys  not required (CPERSONA_KEYS=auto; listening on loopback only)\n" in stderr
    assert "\n  logs      stderr, one line per request on stdout\n" in stderr
    assert stats(env)["memories"] == 1


def test_serve_exits_3_when_the_engine_cannot_start(env: dict[str, str], free_tcp_port: int) -> None:
    dead = {**env, "CPERSONA_REDIS_URL": "redis://127.0.0.1:1/0", "CPERSONA_REDIS_TIMEOUT_SECS": "2"}
    done = run(dead, "serve", "--port", str(free_tcp_port))
    assert done.returncode == 3
    assert "redis unavailable" in done.stderr.lower() or "cannot use Redis" in done.stderr
    assert done.stderr.rstrip().endswith("error: the server did not start (the log above says why)")


def test_reconstruct_renders_items_and_json_parses(env: dict[str, str]) -> None:
    for text, ts in (("Eve builds boats in the harbour", "1000"), ("Eve sold the red boat", "1010")):
        assert run(env, "remember", text, "--agent", AGENT, "--timestamp", ts).returncode == 0
    done = run(env, "reconstruct", "", "--agent", AGENT)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("1 item(s), 1 of 10")
    assert re.fullmatch(r"1\. mem:[0-9a-f-]{36}  \[cluster:adjacent\]", lines[1]), lines
    assert lines[2] == '   "Eve sold the red boat"'  # the newest of the burst is the head
    assert lines[3] == "   claims:"
    assert re.fullmatch(r"     mem:\S+  1970-01-01T00:16:50(\.0+)?Z?\S*", lines[4]), lines
    assert "via cluster:adjacent" in lines[5]
    as_json = run(env, "reconstruct", "boats", "--agent", AGENT, "--mode", "lite", "--json")
    assert as_json.returncode == 0, as_json.stderr
    parsed = ReconstructResult.model_validate(orjson.loads(as_json.stdout))
    assert (parsed.mode, parsed.cap) == ("lite", 3_000)
    assert "mode pro, " in run(env, "reconstruct", "", "--agent", AGENT, "--mode", "pro").stdout
    bad = run(env, "reconstruct", "", "--agent", AGENT, "--count", "-1")
    assert bad.returncode == 2
    assert bad.stderr.startswith("error: count:")
    tight = run(
        {**env, "CPERSONA_RECONSTRUCT_LITE_CAP": "5"}, "reconstruct", "", "--agent", AGENT, "--mode", "lite"
    )
    assert tight.returncode == 2
    assert "cap_below_minimum" in tight.stderr


async def test_reconstruct_over_http_answers_as_in_process(
    settings: Settings,
    redis: object,
    serve_asgi: Callable[[Starlette], AbstractAsyncContextManager[httpx.AsyncClient]],
) -> None:
    here = settings.with_(qdrant_url=":memory:", embedding_mode="none", reconstruct_lite_cap=5)
    async with serve_asgi(create_app(here, background=False)) as client:
        remote = RemoteService(here, "http://test", client)
        await remote.store({"content": "Eve builds boats", "agent_id": "cli-h"})
        over = await remote.reconstruct({"query": "", "agent_id": "cli-h"})
        async with cpersona.open(here, background=False) as engine:
            local = await LocalService(engine).reconstruct({"query": "", "agent_id": "cli-h"})
        assert over == local
        assert render_reconstruct(over)[1].startswith("1. mem:")
        with pytest.raises(InvalidRequest) as err:
            await remote.reconstruct({"query": "", "agent_id": "cli-h", "mode": "lite"})
        assert err.value.field == "mode"
