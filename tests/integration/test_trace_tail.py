"""``cpersona trace tail``, run for real in a subprocess against the session's Redis.

The tailer is started, the test waits for its ``listening on`` line (printed once the subscription is
confirmed, so nothing published after it is missed), then runs traced recalls on an in-process engine and
publishes them with ``drain_traces``; the tailer stops by itself after ``--count`` traces.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import orjson
import pytest

import cpersona
from cpersona.edges.cli.trace_render import read_trace
from cpersona.edges.cli.trace_tail import render_trace
from cpersona.model.trace import RecallTraceFailure
from serving import environment_without_settings
from traced import recall_trace, trace_json

if TYPE_CHECKING:
    from anyio.abc import Process

    from cpersona import Settings
    from cpersona.stores.redis.connection import RedisClient

AGENT = "tailed"
_SCRIPT = Path(sys.executable).with_name("cpersona")
_WAIT_SECS = 60.0


@pytest.fixture
def engine_settings(settings: Settings, redis: RedisClient) -> Settings:
    # ``redis`` is requested so that this test's keys and indexes are dropped when it ends.
    return settings.with_(embedding_mode="none")


def tail_env(settings: Settings, tmp_path: Path, **extra: str) -> dict[str, str]:
    env = environment_without_settings()
    env.update(
        CPERSONA_KEY_PREFIX=settings.key_prefix,
        CPERSONA_DATA_DIR=str(tmp_path / "tail-data"),
        CPERSONA_EMBEDDING_MODE="none",
    )
    if settings.redis_url is not None:
        env["CPERSONA_REDIS_URL"] = settings.redis_url
    env.update(extra)
    return env


# A test run started in the background (``nohup ... &``, some CI runners) inherits SIGINT as ignored,
# and a child keeps an ignored signal across exec: restore the default before exec so Ctrl-C is testable.
_WITH_SIGINT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)


# Looked up once at import: the tests that build a command run on the event loop.
_BASE = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "cpersona"]


def command(*args: str) -> list[str]:
    return [sys.executable, "-c", _WITH_SIGINT, *_BASE, "trace", "tail", *args]


async def wait_listening(process: Process) -> str:
    """The tailer's stderr up to and including its ``listening on`` line."""
    assert process.stderr is not None
    seen = b""
    with anyio.fail_after(_WAIT_SECS):
        while b"listening on" not in seen:
            chunk = await process.stderr.receive()
            seen += chunk
    return seen.decode()


async def finish(process: Process) -> tuple[int, str, str]:
    """Wait for the tailer to exit; its code, stdout and (remaining) stderr."""
    assert process.stdout is not None
    assert process.stderr is not None
    out, err = bytearray(), bytearray()

    async def read(stream: Any, into: bytearray) -> None:
        async for chunk in stream:
            into.extend(chunk)

    with anyio.fail_after(_WAIT_SECS):
        async with anyio.create_task_group() as tg:
            tg.start_soon(read, process.stdout, out)
            tg.start_soon(read, process.stderr, err)
            await process.wait()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def traced_recalls(settings: Settings, questions: list[tuple[str, str, str | None]]) -> list[Any]:
    """Run one traced recall per ``(question, agent, project)`` plus an untraced one, publish, return
    the traces in order."""
    traces = []
    async with cpersona.open(settings, background=False) as memory:
        await memory.store_batch(
            [
                {"content": "The deploy key rotates every Friday", "agent_id": AGENT, "project_id": "ops"},
                {"content": "Staging needs a green build", "agent_id": AGENT, "project_id": "ops"},
                {"content": "Deploys freeze in December", "agent_id": "someone-else"},
            ]
        )
        for question, agent, project in questions:
            await memory.recall(question, agent_id=agent)  # untraced: never published
            result = await memory.recall(question, agent_id=agent, trace=True, project_id=project)
            traces.append(trace_json(result))
        assert await memory.drain_traces() == len(questions)
    return traces


async def test_tail_json_prints_one_trace_per_line(engine_settings: Settings, tmp_path: Path) -> None:
    env = tail_env(engine_settings, tmp_path)
    async with await anyio.open_process(
        command("--count", "2", "--json", "--project", "ops"), env=env
    ) as proc:
        listening = await wait_listening(proc)
        assert f"{engine_settings.key_prefix}:trace:*" in listening
        traces = await traced_recalls(
            engine_settings,
            [
                ("deploy key", AGENT, "ops"),
                ("deploy", "someone-else", None),  # another project: filtered out
                ("green build", AGENT, "ops"),
            ],
        )
        code, out, err = await finish(proc)
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 2, out
    received = [orjson.loads(line) for line in lines]
    expected = [traces[0], traces[2]]
    assert received == expected


async def test_tail_renders_each_recall_readably(
    engine_settings: Settings, tmp_path: Path, redis_url: str
) -> None:
    # No CPERSONA_REDIS_URL: the tailer finds the running server through <data_dir>/redis/redis.url, as
    # it would on a machine where `cpersona serve` runs the embedded Redis.
    env = tail_env(engine_settings, tmp_path)
    del env["CPERSONA_REDIS_URL"]
    url_file = Path(env["CPERSONA_DATA_DIR"]) / "redis" / "redis.url"
    await anyio.Path(url_file.parent).mkdir(parents=True)
    await anyio.Path(url_file).write_text(redis_url + "\n")
    async with await anyio.open_process(command("--count", "2", "--agent", AGENT), env=env) as proc:
        listening = await wait_listening(proc)
        assert f"{engine_settings.key_prefix}:trace:{AGENT}" in listening
        traces = await traced_recalls(
            engine_settings,
            [
                ("deploy", "someone-else", None),  # another agent's channel: not subscribed
                ("deploy key", AGENT, "ops"),
                ("green build friday", AGENT, None),
            ],
        )
        code, out, err = await finish(proc)
    assert code == 0, err
    accounts = [block for block in out.split("── recall") if block.strip()]
    assert len(accounts) == 2, out
    for account, trace in zip(accounts, traces[1:], strict=True):
        assert f"agent {AGENT}" in account
        assert "policy single-pass-v2" in account
        for label in ("arms", "gate", "autocut", "count", "seats", "coverage", "timing"):
            assert f"   {label} " in account, (label, account)
        assert f"origin {trace['gate']['origin']}" in account
        assert f"pool {trace['gate']['pool']}" in account
        for arm, rows in trace["arms"].items():
            assert f"{arm} {len(rows)}" in account
            if rows:
                assert rows[0]["ref"] in account
    assert "project ops" in accounts[0]
    assert "project" not in accounts[1].splitlines()[0]


async def test_tail_without_a_running_server_says_so(engine_settings: Settings, tmp_path: Path) -> None:
    env = tail_env(engine_settings, tmp_path)
    del env["CPERSONA_REDIS_URL"]
    async with await anyio.open_process(command("--count", "1"), env=env) as proc:
        code, out, err = await finish(proc)
    assert code == 3
    assert "no cpersona Redis is running" in err
    assert out == ""
    # It started no Redis of its own in the data dir.
    assert not await anyio.Path(tmp_path / "tail-data" / "redis" / "redis.conf").exists()


async def test_tail_refuses_a_bad_count(engine_settings: Settings, tmp_path: Path) -> None:
    async with await anyio.open_process(
        command("--count", "0"), env=tail_env(engine_settings, tmp_path)
    ) as proc:
        code, _, err = await finish(proc)
    assert code == 2
    assert "--count" in err


async def test_tail_stops_on_ctrl_c_with_130(engine_settings: Settings, tmp_path: Path) -> None:
    async with await anyio.open_process(command(), env=tail_env(engine_settings, tmp_path)) as proc:
        await wait_listening(proc)
        proc.send_signal(signal.SIGINT)
        try:
            code, out, _ = await finish(proc)
        finally:
            if proc.returncode is None:
                proc.kill()  # never leave the test hanging on a tailer that ignored the signal
    assert code == 130
    assert out == ""


def test_render_tells_a_trace_that_could_not_be_built() -> None:
    text = render_trace(RecallTraceFailure(trace_version=1, error="KeyError"))
    assert text.splitlines() == [
        "── recall  (trace v1)",
        "   error    the trace could not be built (KeyError)",
    ]
    # What is not a trace this version reads is skipped, not shown with guesses.
    assert read_trace(b'{"scope": {"agent_id": "a"}, "arms": {}}') is None
    assert read_trace(b"not json") is None


def test_render_tells_what_the_cue_did() -> None:
    cue = {
        "cue": {
            "bound": 2,
            "confidence": "vague",
            "lifted": [{"row": "mem:x", "from": 3, "to": 1}],
            "seated": [],
        },
        "stages": [
            {
                "stage": 0,
                "searched": "all arms and the cue arm",
                "confidence": "likely",
                "period": None,
                "found": 0,
                "next": "widen to vague",
            },
            {
                "stage": 1,
                "searched": "the cue arm",
                "confidence": "vague",
                "period": ["2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z"],
                "found": 4,
                "next": None,
            },
        ],
    }
    text = render_trace(recall_trace(**cue, budget={"cue_time_limit_ms": 1000, "stop": None}))
    assert "time cue likely found 0 then vague found 4, moved 1 (at most 2) [mem:x], seated 0" in text
    stopped = render_trace(recall_trace(**cue, budget={"cue_time_limit_ms": 1000, "stop": "time_limit"}))
    assert "stopped: time limit" in stopped
    ignored = render_trace(recall_trace(cue_ignored={"reason": "recent_only", "period": None}))
    assert "time cue not used (recent_only)" in ignored
    assert "time cue" not in render_trace(recall_trace())


async def test_tail_tells_a_live_reconstruct(engine_settings: Settings, tmp_path: Path) -> None:
    env = tail_env(engine_settings, tmp_path)
    async with await anyio.open_process(command("--count", "2", "--agent", AGENT), env=env) as proc:
        await wait_listening(proc)
        async with cpersona.open(engine_settings, background=False) as memory:
            await memory.store_batch(
                [
                    {"content": "The deploy key rotates every Friday", "agent_id": AGENT, "timestamp": 1e9},
                    {"content": "The deploy key lives in the vault", "agent_id": AGENT, "timestamp": 1e9 + 5},
                ]
            )
            await memory.reconstruct("deploy key", agent_id=AGENT)  # untraced: never published
            traced = await memory.reconstruct("deploy key", agent_id=AGENT, trace=True)
            recalled = await memory.recall("deploy key", agent_id=AGENT, trace=True)
            assert await memory.drain_traces() == 2
        code, out, err = await finish(proc)
    assert code == 0, err
    assert traced.trace is not None
    assert recalled.trace is not None
    accounts = [block for block in out.split("── ") if block.strip()]
    assert [a.split()[0] for a in accounts] == ["reconstruct", "recall"], out
    told = accounts[0]
    assert f"agent {AGENT}" in told
    heads = [item.head_ref for item in traced.items]
    assert heads
    assert f"   items    {len(heads)} returned  [{heads[0]}" in told
    for label in ("clusters", "cues", "sequence", "coverage", "recall"):
        assert f"   {label} " in told, (label, told)
    assert "policy single-pass-v2; limit 20:" in told
