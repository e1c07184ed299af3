"""``cpersona timeline``, run for real in a subprocess against the session's Redis, and its remote
service over HTTP (which answers as the in-process one does)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import orjson
import pytest

import cpersona
from cpersona import InvalidRequest, Settings, TimelineResult
from cpersona.edges.cli.service import LocalService, RemoteService
from cpersona.edges.cli.timeline import render_timeline
from cpersona.edges.http.app import create_app
from serving import environment_without_settings

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractAsyncContextManager

    import httpx
    from starlette.applications import Starlette

    from cpersona.stores.redis.connection import RedisClient

AGENT = "cli-timeline"
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


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    command = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "cpersona"]
    return subprocess.run(
        [*command, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_timeline_renders_buckets_and_json_parses(env: dict[str, str]) -> None:
    for text, ts in (
        ("Eve launched the boat", "2026-03-16T09:00:00Z"),
        ("Eve painted the hull red", "2026-03-16T17:30:00Z"),
        ("Eve sold the boat", "2026-03-18T08:15:00Z"),
    ):
        assert run(env, "remember", text, "--agent", AGENT, "--timestamp", ts).returncode == 0
    window = ("--start", "2026-03-16T00:00:00Z", "--end", "2026-03-19T23:59:59Z")
    done = run(env, "timeline", "--agent", AGENT, *window, "--granularity", "day")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "3 memory(ies) in 2 day bucket(s)"
    assert lines[1] == "2026-03-16 UTC (2)"
    assert re.fullmatch(
        r"  09:00:00  mem:[0-9a-f-]{36}  fidelity \d\.\d\d  Eve launched the boat", lines[2]
    ), lines
    assert lines[3].endswith("Eve painted the hull red")
    assert lines[4] == "2026-03-18 UTC (1)"
    assert lines[5].endswith("Eve sold the boat")
    weekly = run(env, "timeline", "--agent", AGENT, *window, "--granularity", "week", "--limit", "2")
    assert weekly.stdout.splitlines()[:2] == [
        "2 memory(ies) in 1 week bucket(s); more matched (3 in range): narrow the range or raise --limit",
        "week of 2026-03-16 UTC (2)",
    ]
    as_json = run(env, "timeline", "--agent", AGENT, *window, "--json")
    assert as_json.returncode == 0, as_json.stderr
    parsed = TimelineResult.model_validate(orjson.loads(as_json.stdout))
    assert [b.count for b in parsed.buckets] == [1, 1, 1]  # by the hour, the default
    bad = run(env, "timeline", "--agent", AGENT, "--start", "2026-03-20", "--end", "2026-03-19")
    assert bad.returncode == 2
    assert bad.stderr.startswith("error: range:")


async def test_the_remote_timeline_answers_as_in_process(
    settings: Settings,
    redis: object,
    serve_asgi: Callable[[Starlette], AbstractAsyncContextManager[httpx.AsyncClient]],
) -> None:
    here = settings.with_(qdrant_url=":memory:", embedding_mode="none")
    body = {"agent_id": "cli-h", "range": {"start": 0, "end": 2_000}, "granularity": "minute"}
    async with serve_asgi(create_app(here, background=False)) as client:
        remote = RemoteService(here, "http://test", client)
        await remote.store({"content": "Eve builds boats", "agent_id": "cli-h", "timestamp": 1_000})
        over = await remote.timeline(body)
        assert render_timeline(over)[1] == "1970-01-01 00:16 UTC (1)"
        async with cpersona.open(here, background=False) as engine:
            local = await LocalService(engine).timeline(body)
        # The fidelity is read at each call's own moment; all else is the same.
        for answer in (over, local):
            for bucket in answer["buckets"]:
                for memory in bucket["memories"]:
                    memory["relevance_score"] = memory["record"]["fidelity"] = None
        # As JSON: in process the record's meta keeps its tuples, which JSON writes as arrays.
        assert over == orjson.loads(orjson.dumps(local))
        with pytest.raises(InvalidRequest) as err:
            await remote.timeline({**body, "granularity": "year"})
        assert err.value.field == "granularity"
