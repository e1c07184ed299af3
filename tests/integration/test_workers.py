"""``cpersona serve --workers N`` over a shared Redis: real processes, a real standalone Redis.

The test starts its own ``redis-server`` (the embedded mode's binary and modules, :mod:`redis_nodes`), then
a two-worker server and a one-worker server on it, with the same key prefix. Any worker may take any
request, so to know which one answered, the test stops the other with SIGSTOP for the length of one
request (``worker_pool.only``): a stopped process does not call ``accept`` on the shared socket, so the
kernel hands every new connection to the one left running.

Vectors: no Qdrant server can be had on this machine (PyPI has only clients, and qdrant-client's local
mode, like the embedded qdrant-edge, is a store inside one process), so the workers run with the embedder
off (keyword recall only), which is what ``--workers`` allows without ``CPERSONA_QDRANT_URL``.

Hook for the rate-limit check (issue 16 item 3, the keys engineer's): :mod:`worker_pool` has the
pieces (``running_serve``, ``worker_pids``, ``only``), so a limit that holds across workers is a test of
the same shape as the two-worker one here: spend part of a key's budget on one worker, the rest on the
other, and expect the 429 there.
"""

from __future__ import annotations

import pickle
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cpersona
from cpersona.edges.cli.workers import AppFactory, workers_refusal
from cpersona.errors import InvalidRequest
from cpersona.settings import Settings
from redis_nodes import redis_node
from serving import environment_without_settings, free_port
from traced import trace_json
from worker_pool import COMMAND, REQUEST_SECS, only, running_serve, worker_pids

AGENT = "fleet"
PREFIX = "wk"
_WAIT_SECS = 120.0

FACTS = [
    "The boiler in the cellar is serviced every May by Hendrik",
    "Mara keeps the spare key to the allotment shed under the blue pot",
    "The gate code for the yard changed to 4711 after the break-in",
    "Hendrik prefers to be called after six in the evening",
    "The allotment water is turned off from November until March",
    "Mara's bicycle lock combination is written inside the shed door",
]
QUERIES = ["boiler service", "spare key shed", "gate code yard", "Hendrik evening", "allotment water"]


def _env(data_dir: Path, **extra: str) -> dict[str, str]:
    base = environment_without_settings()
    return {
        **base,
        "CPERSONA_DATA_DIR": str(data_dir),
        "CPERSONA_EMBEDDING_MODE": "none",
        "CPERSONA_KEY_PREFIX": PREFIX,
        **extra,
    }


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*COMMAND, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def _post(url: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    # A fresh connection per request, so the request goes to whichever worker accepts now.
    answer = httpx.post(f"{url}{path}", json=body, timeout=REQUEST_SECS, headers={"Connection": "close"})
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


def _recall(url: str, query: str, *, trace: bool = False) -> dict[str, Any]:
    return _post(url, "/v1/recall/query", {"query": query, "agent_id": AGENT, "limit": 5, "trace": trace})


def _rows(url: str, query: str) -> list[tuple[Any, ...]]:
    return [(row["ref"], row["score"], row["content"]) for row in _recall(url, query)["rows"]]


def _trace_key(trace: dict[str, Any]) -> bytes:
    # What each arm found and how it fused: the recall itself, without its timings.
    return orjson.dumps([trace["scope"], trace["arms"], trace["fusion"]])


def _wait_for(log: Path, text: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + _WAIT_SECS
    while text not in log.read_text():
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, f"{text!r} never came: {log.read_text()}"
        time.sleep(0.1)


def test_two_workers_answer_with_the_rows_of_one_and_trace_to_one_tail(tmp_path: Path) -> None:
    with redis_node(tmp_path / "redis", free_port()) as redis_url:
        two, one = free_port(), free_port()
        many = _env(tmp_path / "many", CPERSONA_REDIS_URL=redis_url)
        single = _env(tmp_path / "single", CPERSONA_REDIS_URL=redis_url)
        with (
            running_serve(many, two, tmp_path / "many.log", "--workers", "2") as supervisor,
            running_serve(single, one, tmp_path / "single.log"),
        ):
            workers = worker_pids(supervisor)
            assert len(workers) == 2, workers
            assert "  workers   2 processes sharing that Redis" in (tmp_path / "many.log").read_text()
            many_url, single_url = f"http://127.0.0.1:{two}", f"http://127.0.0.1:{one}"
            # Half the facts written through each worker: the store is one.
            for i, fact in enumerate(FACTS):
                with only(workers[i % 2], workers):
                    _post(many_url, "/v1/encode", {"content": fact, "agent_id": AGENT})
            expected = {query: _rows(single_url, query) for query in QUERIES}
            assert all(expected.values()), expected
            for worker in workers:
                for query in QUERIES:
                    with only(worker, workers):
                        assert _rows(many_url, query) == expected[query], (worker, query)

            tail_log = tmp_path / "tail.log"
            with tail_log.open("wb") as sink:
                tail = subprocess.Popen(
                    [*COMMAND, "trace", "tail", "--json", "--agent", AGENT, "--count", "2"],
                    env=many,
                    stdout=subprocess.PIPE,
                    stderr=sink,
                )
            try:
                _wait_for(tail_log, "listening on", tail)
                made = []
                for worker, query in zip(workers, ("boiler service", "gate code yard"), strict=True):
                    with only(worker, workers):
                        made.append(_recall(many_url, query, trace=True)["trace"])
                out, _ = tail.communicate(timeout=_WAIT_SECS)
            finally:
                if tail.poll() is None:
                    tail.kill()
                    tail.wait()
    assert tail.returncode == 0, tail_log.read_text()
    traces = [orjson.loads(line) for line in out.splitlines()]
    assert sorted(map(_trace_key, traces)) == sorted(map(_trace_key, made))


def test_sigterm_stops_every_worker_and_withdraws_the_record(tmp_path: Path) -> None:
    # What `docker compose stop` sends the container's first process.
    with redis_node(tmp_path / "redis", free_port()) as redis_url:
        env = _env(tmp_path / "data", CPERSONA_REDIS_URL=redis_url)
        port = free_port()
        with running_serve(env, port, tmp_path / "serve.log", "--workers", "2") as supervisor:
            workers = worker_pids(supervisor)
            assert (tmp_path / "data" / "server.url").read_text() == f"http://127.0.0.1:{port}\n"
            supervisor.send_signal(signal.SIGTERM)
            assert supervisor.wait(timeout=60) == 0, (tmp_path / "serve.log").read_text()
    assert not any(Path(f"/proc/{pid}").exists() for pid in workers)
    assert not (tmp_path / "data" / "server.url").exists()


def test_more_than_one_worker_on_the_embedded_engines_is_refused_naming_the_flag(tmp_path: Path) -> None:
    env = _env(tmp_path / "data")
    done = _run(env, "serve", "--workers", "2", "--port", str(free_port()))
    assert done.returncode == 2, done.stderr
    refused = "error: --workers 2 needs shared engines: set CPERSONA_REDIS_URL"
    assert done.stderr.startswith(refused), done.stderr
    assert "one engine per data dir" in done.stderr
    # Nothing was started: the data dir holds no Redis.
    assert not (tmp_path / "data" / "redis").exists()


def test_a_worker_that_cannot_open_its_engine_stops_them_all(tmp_path: Path) -> None:
    env = _env(tmp_path / "data", CPERSONA_REDIS_URL=f"redis://127.0.0.1:{free_port()}")
    env["CPERSONA_REDIS_STARTUP_TIMEOUT_SECS"] = "2"
    done = _run(env, "serve", "--workers", "2", "--port", str(free_port()))
    assert done.returncode == 3, done.stderr
    assert "error: the workers did not all start" in done.stderr
    # Each worker says why in the engine's one line, not a traceback.
    assert "Traceback" not in done.stderr, done.stderr
    assert "redis unavailable: cannot use Redis at redis://127.0.0.1:" in done.stderr, done.stderr
    assert not (tmp_path / "data" / "server.url").exists()


_URLS = st.sampled_from([None, "redis://redis:6379"])
_QDRANT = st.sampled_from([None, ":memory:", "http://qdrant:6333"])
_MODES = st.sampled_from(["onnx", "none"])


@given(workers=st.integers(1, 8), redis_url=_URLS, qdrant_url=_QDRANT, mode=_MODES)
def test_workers_are_refused_exactly_when_an_engine_would_be_embedded(
    workers: int, redis_url: str | None, qdrant_url: str | None, mode: str
) -> None:
    settings = Settings(
        workers=workers, redis_url=redis_url, qdrant_url=qdrant_url, embedding_mode=mode, data_dir=Path("/x")
    )
    # Shared means a server: qdrant-client's ':memory:' engine lives inside each process.
    vectors_alone = qdrant_url != "http://qdrant:6333" and mode != "none"
    refusal = workers_refusal(settings)
    assert (refusal is not None) == (workers > 1 and (redis_url is None or vectors_alone))
    if refusal is not None:
        assert refusal.startswith(f"--workers {workers} needs shared engines")
        assert ("CPERSONA_REDIS_URL" in refusal) == (redis_url is None)
        assert ("CPERSONA_QDRANT_URL" in refusal) == vectors_alone


async def test_a_gate_calibrated_through_one_engine_is_the_gate_of_another(vector_settings: Settings) -> None:
    # Two engines on one Redis, as two workers are: the calibration lives in Redis, not in the engine
    # that made it. (Each has its own in-process vectors here; calibration reads none.)
    settings = vector_settings
    base = 1_767_225_600.0
    rows = [
        {"agent_id": AGENT, "content": f"{fact} (note {n})", "timestamp": base + (n % 3) * 86_400 + n * 60}
        for n, fact in enumerate(FACTS * 2)
    ]
    async with (
        cpersona.open(settings, background=False) as first,
        cpersona.open(settings, background=False) as second,
    ):
        await first.store_batch(rows)
        with pytest.raises(InvalidRequest, match="no calibrated gate yet"):
            await second.select_gate(AGENT, "calibrated")
        made = await first.calibrate(AGENT)
        chosen = await second.select_gate(AGENT, "calibrated")
        assert chosen["calibration"]["threshold"] == made["threshold"]
        answer = await second.recall("boiler service", agent_id=AGENT, trace=True)
        assert answer.trace is not None
        assert trace_json(answer)["gate"]["calibrated"] == made["threshold"]


def test_a_worker_gets_the_settings_whole(tmp_path: Path) -> None:
    # Each worker is a fresh interpreter: its app factory travels pickled, the settings inside it.
    settings = Settings(
        data_dir=tmp_path, redis_url="redis://r:1", workers=3, sealed_key="ab" * 32, key_prefix="kp"
    )
    again = pickle.loads(pickle.dumps(AppFactory(settings)))
    assert again.settings == settings
    assert again.settings.sealed_key is not None
    assert again.settings.sealed_key.get_secret_value() == "ab" * 32


@pytest.mark.parametrize("value", ["0", "-1"])
def test_a_workers_count_below_one_is_refused(tmp_path: Path, value: str) -> None:
    done = _run(_env(tmp_path / "data"), "serve", "--workers", value)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: CPERSONA_WORKERS must be at least 1"), done.stderr
