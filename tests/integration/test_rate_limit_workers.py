"""A key's rate limit holds across the workers of ``cpersona serve --workers 2`` on one standalone Redis:
the burst spent half on each worker, the next request is a 429 on either, and another key is untouched
(real processes; :mod:`worker_pool` sends each request to the worker it names)."""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

import httpx
import orjson

from redis_nodes import redis_node
from serving import environment_without_settings, free_port
from worker_pool import COMMAND, REQUEST_SECS, only, running_serve, worker_pids

if TYPE_CHECKING:
    from pathlib import Path

AGENT = "fleet"
BURST = 4


def _env(tmp_path: Path, redis_url: str) -> dict[str, str]:
    base = environment_without_settings()
    return {
        **base,
        "CPERSONA_DATA_DIR": str(tmp_path / "data"),
        "CPERSONA_EMBEDDING_MODE": "none",
        "CPERSONA_KEY_PREFIX": "rl",
        "CPERSONA_REDIS_URL": redis_url,
        "CPERSONA_KEYS": "on",
        # Slow enough that nothing refills while the test runs.
        "CPERSONA_RATE_LIMIT_PER_SEC": "0.01",
        "CPERSONA_RATE_LIMIT_BURST": str(BURST),
    }


def _key(env: dict[str, str]) -> str:
    done = subprocess.run(
        [*COMMAND, "keys", "create", "--agent", AGENT, "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    key: str = orjson.loads(done.stdout)["key"]
    return key


def _get(url: str, key: str) -> httpx.Response:
    # A fresh connection per request, so it reaches the one worker left running.
    headers = {"Connection": "close", "authorization": f"Bearer {key}"}
    return httpx.get(f"{url}/v1/records", params={"agent_id": AGENT}, headers=headers, timeout=REQUEST_SECS)


def test_a_rate_limit_holds_across_two_workers(tmp_path: Path) -> None:
    with redis_node(tmp_path / "redis", free_port()) as redis_url:
        env = _env(tmp_path, redis_url)
        spent, spare = _key(env), _key(env)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        with running_serve(env, port, tmp_path / "serve.log", "--workers", "2") as supervisor:
            workers = worker_pids(supervisor)
            assert len(workers) == 2, workers
            for i in range(BURST):
                with only(workers[i % 2], workers):
                    assert _get(url, spent).status_code == 200, i
            for worker in workers:
                with only(worker, workers):
                    refused = _get(url, spent)
                    untouched = _get(url, spare)
                assert refused.status_code == 429, refused.text
                assert refused.json()["code"] == "RATE_LIMITED"
                assert int(refused.headers["retry-after"]) >= 1
                assert untouched.status_code == 200, untouched.text
