"""The ``cpersona`` command beside a running ``cpersona serve`` (real processes, the embedded Redis).

The server holds the data dir (its embedded Redis lives there), so every other command must talk to it
over HTTP: found through ``<data_dir>/server.url``, or named by ``CPERSONA_URL``. Also here: what
``serve`` says when it starts, a second ``serve`` on the same dir, ``trace tail`` across a server
restart, ``--version``, and a closed output pipe.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import orjson

from cpersona.version import __version__
from serving import environment_without_settings, stop_serve

if TYPE_CHECKING:
    from collections.abc import Iterator

AGENT = "beside"
_SCRIPT = Path(sys.executable).with_name("cpersona")
_COMMAND = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "cpersona"]
_WAIT_SECS = 60.0


def _env(data_dir: Path, **extra: str) -> dict[str, str]:
    base = environment_without_settings()
    return {
        **base,
        "CPERSONA_DATA_DIR": str(data_dir),
        "CPERSONA_QDRANT_URL": ":memory:",
        "CPERSONA_EMBEDDING_MODE": "none",
        **extra,
    }


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*_COMMAND, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def _wait_for(log: Path, text: str, proc: subprocess.Popen[bytes]) -> str:
    deadline = time.monotonic() + _WAIT_SECS
    while True:
        seen = log.read_text() if log.exists() else ""
        if text in seen:
            return seen
        assert proc.poll() is None or text in log.read_text(), seen
        assert time.monotonic() < deadline, f"{text!r} never came: {seen}"
        time.sleep(0.1)


@contextlib.contextmanager
def serving(env: dict[str, str], port: int, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``cpersona serve`` on ``port``, up and recorded in the data dir; stopped with Ctrl-C after."""
    with log.open("ab") as sink:
        proc = subprocess.Popen(
            [*_COMMAND, "serve", "--port", str(port)], env=env, stdout=sink, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + _WAIT_SECS
        while True:
            assert proc.poll() is None, log.read_text()
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, f"the server did not come up: {log.read_text()}"
            time.sleep(0.1)
        yield proc
    finally:
        stop_serve(proc, timeout=30)


def test_version() -> None:
    done = run(_env(Path("/nonexistent")), "--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"cpersona {__version__}\n"


def test_every_command_talks_to_the_server_that_holds_the_data_dir(
    tmp_path: Path, free_tcp_port: int
) -> None:
    data = tmp_path / "data"
    env = _env(data)
    log = tmp_path / "serve.log"
    url = f"http://127.0.0.1:{free_tcp_port}"
    with serving(env, free_tcp_port, log) as proc:
        assert (data / "server.url").read_text() == url + "\n"

        stored = run(env, "remember", "The boiler is serviced in May", "--agent", AGENT)
        assert stored.returncode == 0, stored.stderr
        ref = stored.stdout.split()[1]
        again = run(env, "remember", "The boiler is serviced in May", "--agent", AGENT)
        assert again.stdout == f"skipped {ref} (duplicate_content)\n"
        got = run(env, "get", ref, "--agent", AGENT)
        assert got.returncode == 0, got.stderr
        assert orjson.loads(got.stdout)["content"] == "The boiler is serviced in May"
        recalled = run(env, "recall", "boiler", "--agent", AGENT)
        assert recalled.returncode == 0, recalled.stderr
        assert recalled.stdout.startswith("1 row(s), policy ")
        assert ref in recalled.stdout
        lines = tmp_path / "more.jsonl"
        lines.write_text('{"content": "one"}\n{"content": "two"}\n{"agent_id": "x"}\n')
        imported = run(env, "import", str(lines), "--agent", AGENT, "--on-error", "skip")
        assert imported.returncode == 2, imported.stderr
        assert imported.stdout.startswith("stored 2, skipped 0 (duplicates), failed 1 in ")
        assert json_stats(env)["memories"] == 3

        # Errors come back as the engine's: the same messages, the same exit codes.
        missing = run(env, "get", "mem:01900000-0000-7000-8000-000000000000", "--agent", AGENT)
        assert (missing.returncode, missing.stderr) == (
            1,
            "error: record not found: mem:01900000-0000-7000-8000-000000000000\n",
        )
        bad = run(env, "get", "mem:nope", "--agent", AGENT)
        assert bad.returncode == 2
        assert bad.stderr.startswith("error: ref: ")

        # CPERSONA_URL names the server from anywhere, whatever the data dir.
        elsewhere = _env(tmp_path / "elsewhere", CPERSONA_URL=url)
        assert json_stats(elsewhere)["memories"] == 3

        forgot = run(env, "delete-agent", "--agent", AGENT, "--yes")
        assert forgot.stdout == f"deleted 3 record(s) of agent '{AGENT}'\n"
        assert run(env, "remember", "kept after the stop", "--agent", AGENT).returncode == 0

        said = _wait_for(log, "  logs  ", proc)
        assert f"serving {url}" in said
        assert f"data dir  {data}" in said
        assert re.search(r"redis     \d+\.\d+\.\d+ at embedded ", said), said
        assert "vectors   none (no embedder, no vectors)" in said
        assert "embedder  none" in said
        assert "  api keys  not required (CPERSONA_KEYS=auto; listening on loopback only)\n" in said
        redis_log = data.resolve() / "redis" / "redis.log"
        assert f"  logs      stderr, one line per request on stdout; embedded Redis {redis_log}\n" in said
    assert "POST /v1/encode HTTP/1.1" in log.read_text()
    # Stopped: the record is gone and the commands open the data dir themselves again.
    assert not (data / "server.url").exists()
    assert json_stats(env)["memories"] == 1


def json_stats(env: dict[str, str]) -> dict[str, object]:
    done = run(env, "stats", "--agent", AGENT, "--json")
    assert done.returncode == 0, done.stderr
    parsed: dict[str, object] = orjson.loads(done.stdout)
    return parsed


def test_a_second_serve_on_the_same_dir_says_so_in_one_line(tmp_path: Path, free_tcp_port: int) -> None:
    env = _env(tmp_path / "data")
    with serving(env, free_tcp_port, tmp_path / "serve.log"):
        second = run(env, "serve", "--port", str(free_tcp_port + 1))
    assert second.returncode == 1
    assert second.stderr == (
        f"error: a cpersona server already serves the data dir {tmp_path / 'data'} at "
        f"http://127.0.0.1:{free_tcp_port}\n"
    )


def test_a_server_whose_engine_refuses_to_open_says_why_in_one_line(
    tmp_path: Path, free_tcp_port: int
) -> None:
    # Nothing listens on port 1: the engine refuses at startup, and the log says so without a traceback.
    env = _env(tmp_path / "data", CPERSONA_REDIS_URL="redis://127.0.0.1:1")
    done = run(env, "serve", "--port", str(free_tcp_port))
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr
    said = [line for line in done.stderr.splitlines() if "cannot use Redis at redis://127.0.0.1:1" in line]
    assert len(said) == 1, done.stderr
    assert said[0].startswith("ERROR:    redis unavailable:"), done.stderr
    assert done.stderr.rstrip().endswith("error: the server did not start (the log above says why)")


def test_a_server_killed_without_cleaning_up_is_not_used(tmp_path: Path, free_tcp_port: int) -> None:
    env = _env(tmp_path / "data")
    log = tmp_path / "serve.log"
    with serving(env, free_tcp_port, log) as proc:
        proc.kill()
        proc.wait()
        # Its embedded Redis may outlive it for a moment; the next engine retires it.
        assert (tmp_path / "data" / "server.url").exists()
        done = run(env, "stats", "--agent", AGENT, "--json")
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout)["memories"] == 0


def test_get_into_a_closed_pipe_prints_no_traceback(tmp_path: Path) -> None:
    env = _env(tmp_path / "data")
    stored = run(env, "remember", "x" * 5000, "--agent", AGENT)
    ref = stored.stdout.split()[1]
    proc = subprocess.Popen(
        [*_COMMAND, "get", ref, "--agent", AGENT], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None
    proc.stdout.close()  # the reader is gone before anything is written, as `| head -c0` would be
    _, err = proc.communicate(timeout=120)
    assert b"Traceback" not in err, err.decode()
    assert b"BrokenPipe" not in err, err.decode()
    assert proc.returncode == 141


def test_trace_tail_reconnects_when_the_server_restarts(tmp_path: Path, free_tcp_port: int) -> None:
    env = _env(tmp_path / "data")
    log = tmp_path / "serve.log"
    url = f"http://127.0.0.1:{free_tcp_port}"
    tail_log = tmp_path / "tail.log"
    with serving(env, free_tcp_port, log):
        httpx.post(f"{url}/v1/encode", json={"content": "the gate code is 4711", "agent_id": AGENT})
        with tail_log.open("wb") as sink:
            tail = subprocess.Popen(
                [*_COMMAND, "trace", "tail", "--json", "--count", "1"],
                env=env,
                stdout=subprocess.PIPE,
                stderr=sink,
            )
        try:
            _wait_for(tail_log, "listening on", tail)
        except BaseException:
            tail.kill()
            raise
    try:
        _wait_for(tail_log, "reconnecting in", tail)
        assert tail.poll() is None, tail_log.read_text()
        with serving(env, free_tcp_port, log):
            _wait_for(tail_log, "reconnected: listening on", tail)
            answer = httpx.post(
                f"{url}/v1/recall/query", json={"query": "gate code", "agent_id": AGENT, "trace": True}
            )
            assert answer.status_code == 200, answer.text
            out, _ = tail.communicate(timeout=_WAIT_SECS)
    finally:
        if tail.poll() is None:
            tail.kill()
            tail.wait()
    assert tail.returncode == 0, tail_log.read_text()
    assert orjson.loads(out)["scope"]["agent_id"] == AGENT


def test_a_url_that_is_not_http_is_refused_naming_the_variable(tmp_path: Path) -> None:
    done = run(_env(tmp_path / "data", CPERSONA_URL="localhost:8077"), "stats")
    assert done.returncode == 2
    assert done.stderr.startswith("error: CPERSONA_URL must be an http:// or https:// URL")
