"""What a server shows and risks by default: no keyless server beyond loopback unless asked for by name,
and ``/health`` that tells a caller without a key only that the server is up.

The start is tried as an operator runs it, ``cpersona serve`` in a subprocess, on the session's Redis.
"""

from __future__ import annotations

import re
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

import cpersona
from cpersona.keys import Keys
from cpersona.model.responses import HealthResponse
from cpersona.stores.redis.api_keys import ApiKeyStore
from serving import environment_without_settings, stop_serve

if TYPE_CHECKING:
    from collections.abc import Callable

    from cpersona.stores.redis.connection import RedisClient

_SCRIPT = Path(sys.executable).with_name("cpersona")
_COMMAND = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "cpersona"]
# A hang guard for a start, not a measurement.
_WAIT_SECS = 60.0


@pytest.fixture
def store(redis: RedisClient, key_prefix: str) -> ApiKeyStore:
    return ApiKeyStore(redis, Keys(key_prefix))


def _env(data_dir: Path, redis_url: str, key_prefix: str, **extra: str) -> dict[str, str]:
    return {
        **environment_without_settings(),
        "CPERSONA_DATA_DIR": str(data_dir),
        "CPERSONA_REDIS_URL": redis_url,
        "CPERSONA_KEY_PREFIX": key_prefix,
        "CPERSONA_QDRANT_URL": ":memory:",
        "CPERSONA_EMBEDDING_MODE": "none",
        **extra,
    }


def _wait_until(ready: Callable[[], bool], proc: subprocess.Popen[bytes], log: Path) -> None:
    """Poll until ``ready()``; fail with the server's log if it exits first or the wait runs out."""
    deadline = time.monotonic() + _WAIT_SECS
    while not ready():
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)


def test_keys_off_beyond_loopback_is_refused_in_one_line(
    tmp_path: Path, redis_url: str, key_prefix: str, free_tcp_port: int
) -> None:
    env = _env(tmp_path, redis_url, key_prefix, CPERSONA_HOST="0.0.0.0", CPERSONA_KEYS="off")
    done = subprocess.run(
        [*_COMMAND, "serve", "--port", str(free_tcp_port)],
        env=env,
        capture_output=True,
        text=True,
        timeout=_WAIT_SECS,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: CPERSONA_KEYS is off on a server bound beyond loopback"), line
    assert "CPERSONA_HOST=0.0.0.0" in line
    assert "CPERSONA_INSECURE_NO_KEYS=true" in line
    assert "--insecure-no-keys" in line
    assert not (tmp_path / "server.url").exists()


def test_insecure_no_keys_starts_it_and_says_so(
    tmp_path: Path, redis_url: str, key_prefix: str, free_tcp_port: int
) -> None:
    env = _env(tmp_path, redis_url, key_prefix, CPERSONA_HOST="0.0.0.0", CPERSONA_KEYS="off")
    log = tmp_path / "serve.log"
    with log.open("ab") as sink:
        proc = subprocess.Popen(
            [*_COMMAND, "serve", "--port", str(free_tcp_port), "--insecure-no-keys"],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        url = f"http://127.0.0.1:{free_tcp_port}"
        _wait_until(lambda: (tmp_path / "server.url").exists(), proc, log)
        # What it was told to do: no key asked of anyone.
        listed = httpx.get(f"{url}/v1/records", params={"agent_id": "w"}, timeout=10)
        assert listed.status_code == 200, listed.text
        warning = next(ln for ln in log.read_text().splitlines() if "INSECURE" in ln)
        assert warning.startswith("WARNING "), warning
        assert "CPERSONA_KEYS=off" in warning
        assert "0.0.0.0" in warning
    finally:
        stop_serve(proc, timeout=30)


# ----------------------------------------------------------------------------------------------- /health


async def test_health_without_a_key_is_the_status_only(keyed: httpx.AsyncClient, store: ApiKeyStore) -> None:
    bare = await keyed.get("/health")
    assert bare.status_code == 200, bare.text
    assert bare.json() == {"ok": True, "status": "ok"}
    HealthResponse.model_validate(bare.json())
    # Any live key (not only an admin's) sees what runs where.
    token, _ = await store.create(["ann"], admin=False, name=None)
    full = await keyed.get("/health", headers={"authorization": f"Bearer {token}"})
    assert full.status_code == 200, full.text
    body = HealthResponse.model_validate(full.json())
    assert body.redis is not None
    assert re.fullmatch(r"\d+\.\d+\.\d+", body.redis["version"])
    assert body.traces is not None
    assert {"embedder", "vector_engine"} <= set(full.json())
    # A key that is none is refused, as anywhere else, rather than quietly taken for no key.
    await store.revoke(token.split("_")[1])
    revoked = await keyed.get("/health", headers={"authorization": f"Bearer {token}"})
    assert revoked.status_code == 401, revoked.text


async def test_the_openapi_document_says_the_details_are_optional(keyed: httpx.AsyncClient) -> None:
    document = (await keyed.get("/openapi.json")).json()
    health = document["components"]["schemas"]["Health"]
    assert sorted(health["required"]) == ["ok", "status"]
    assert {"redis", "vector_engine", "embedder", "traces"} <= set(health["properties"])


def test_a_keyed_server_says_what_it_runs_but_its_health_tells_no_one_else(
    tmp_path: Path, redis_url: str, key_prefix: str, free_tcp_port: int
) -> None:
    # Bound beyond loopback, keys in force by default: the start lines still name Redis's version (the
    # server reads its own engine, holding no key), while /health without a key says only "ok".
    env = _env(tmp_path, redis_url, key_prefix, CPERSONA_HOST="0.0.0.0")
    log = tmp_path / "serve.log"
    with log.open("ab") as sink:
        proc = subprocess.Popen(
            [*_COMMAND, "serve", "--port", str(free_tcp_port)], env=env, stdout=sink, stderr=subprocess.STDOUT
        )
    try:
        _wait_until(lambda: "  embedder  " in log.read_text(), proc, log)
        redis_line = next(ln for ln in log.read_text().splitlines() if ln.startswith("  redis     "))
        assert re.match(r"  redis     \d+\.\d+\.\d+ at ", redis_line), redis_line
        bare = httpx.get(f"http://127.0.0.1:{free_tcp_port}/health", timeout=10)
        assert bare.json() == {"ok": True, "status": "ok"}
    finally:
        stop_serve(proc, timeout=30)


# ------------------------------------------------------------------------------------------- the data dir


def _open_to_others(root: Path) -> list[str]:
    found = [root, *root.rglob("*")]
    return sorted(f"{p} {stat.S_IMODE(p.lstat().st_mode):o}" for p in found if p.lstat().st_mode & 0o077)


async def test_everything_under_the_data_dir_is_its_owners_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The graph is built into the data dir too, as it is unless CPERSONA_MODELS_DIR says otherwise.
    monkeypatch.delenv("CPERSONA_MODELS_DIR", raising=False)
    # A dir made 0755 beforehand (by hand, or by an older version), with files others could read.
    data = tmp_path / "data"
    (data / "qdrant" / "records").mkdir(parents=True)
    for folder in (data, data / "qdrant", data / "qdrant" / "records"):
        folder.chmod(0o755)
    (data / "notes.txt").write_text("left here by hand")
    (data / "qdrant" / "records" / "stale.json").write_text("{}")
    for path in (data / "notes.txt", data / "qdrant" / "records" / "stale.json"):
        path.chmod(0o644)
    assert _open_to_others(data)
    # The embedded Redis and vector engine, each in processes of their own, writing as they always do.
    async with cpersona.open(data_dir=data, background=False) as engine:
        refs = [
            (await engine.store(f"the heat pump runs at {n} degrees", agent_id="own")).ref for n in range(5)
        ]
        batch = [{"content": f"line {n} of the log", "agent_id": "own"} for n in range(20)]
        await engine.store_batch(batch)
        await engine.drain_blocks()
        assert (await engine.stats("own"))["vectors"] == 25
        assert refs
        assert _open_to_others(data) == []
    assert any((data / "qdrant").rglob("*"))
    assert any((data / "redis").rglob("*.aof"))
    assert _open_to_others(data) == []
