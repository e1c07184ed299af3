"""``cpersona keys``: made, listed and revoked straight in Redis, with the embedded server started for
the moment, or on the Redis of a running engine found through ``redis/redis.url`` (and its password)."""

from __future__ import annotations

import re
import subprocess
import sys
from typing import TYPE_CHECKING

import anyio
import httpx
import orjson

import cpersona
from cpersona.settings import Settings
from serving import environment_without_settings, free_port, stop_serve, wait_healthy

if TYPE_CHECKING:
    from pathlib import Path

_TOKEN = re.compile(r"cpk_([0-9a-f]{12})_[A-Za-z0-9_-]{43}")
_RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


async def _cli(data_dir: Path, *args: str) -> tuple[int, str, str]:
    env = environment_without_settings()
    env["CPERSONA_DATA_DIR"] = str(data_dir)
    done = await anyio.run_process([sys.executable, "-m", "cpersona", "keys", *args], env=env, check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def test_keys_without_a_running_engine(tmp_path: Path) -> None:
    code, out, err = await _cli(tmp_path, "create", "--agent", "ann", "--agent", "bob", "--name", "fleet")
    assert code == 0, err
    token = _TOKEN.search(out)
    assert token is not None
    assert out.count(token.group(0)) == 1
    key_id = token.group(1)
    # Nothing else on stderr: no warning of a coroutine redis-om left unawaited.
    assert err == ""
    code, out, err = await _cli(tmp_path, "list", "--json")
    assert (code, err) == (0, "")
    (listed,) = orjson.loads(out)["keys"]
    assert listed["key_id"] == key_id
    assert listed["agents"] == ["ann", "bob"]
    assert listed["name"] == "fleet"
    assert _RFC3339.fullmatch(listed["created_at"]), listed
    assert token.group(0) not in out
    code, out, err = await _cli(tmp_path, "create", "--admin", "--json")
    assert (code, err) == (0, "")
    assert _RFC3339.fullmatch(orjson.loads(out)["info"]["created_at"]), out
    assert (await _cli(tmp_path, "revoke", key_id))[0] == 0
    code, out, _ = await _cli(tmp_path, "revoke", key_id)
    assert code != 0
    assert "no key" in out


async def test_an_empty_key_list_says_so(tmp_path: Path) -> None:
    code, out, err = await _cli(tmp_path, "list")
    assert (code, out) == (0, "")
    assert err == "no API keys; make one with: cpersona keys create --agent AGENT (or --admin)\n"
    code, out, err = await _cli(tmp_path, "list", "--json")
    assert (code, err) == (0, "")
    assert orjson.loads(out) == {"ok": True, "keys": []}


async def test_bad_key_requests_name_the_field(tmp_path: Path) -> None:
    code, _, err = await _cli(tmp_path, "create")
    assert code != 0
    assert "agents" in err
    code, _, err = await _cli(tmp_path, "create", "--admin", "--agent", "ann")
    assert code != 0
    assert "agents" in err
    code, _, err = await _cli(tmp_path, "revoke", "nothex")
    assert code != 0
    assert "key_id" in err


async def test_keys_on_the_redis_of_a_running_engine(tmp_path: Path) -> None:
    # The engine holds the data dir (and its embedded Redis); the command reaches that Redis through
    # redis/redis.url, which carries the password, and the engine sees the key at once.
    settings = Settings(data_dir=tmp_path, embedding_mode="none", qdrant_url=":memory:")
    async with cpersona.open(settings, background=False) as engine:
        code, out, err = await _cli(tmp_path, "create", "--admin", "--json")
        assert code == 0, err
        made = orjson.loads(out)
        key = await engine.verify_key(made["key"])
        assert key is not None
        assert key.admin
        listed = await engine.list_keys()
        assert [k.key_id for k in listed.keys] == [made["info"]["key_id"]]
        revoked = await engine.revoke_key(made["info"]["key_id"])
        assert revoked.revoked
        assert await engine.verify_key(made["key"]) is None


async def test_the_cli_sends_its_key_to_a_server_that_asks_for_one(tmp_path: Path) -> None:
    # A server with keys in force (CPERSONA_KEYS=on); the other commands talk to it over HTTP and send
    # CPERSONA_API_KEY, and the keys command still works beside it, on its Redis.
    port = free_port()
    log = tmp_path / "serve.log"
    env = environment_without_settings()
    env |= {"CPERSONA_DATA_DIR": str(tmp_path), "CPERSONA_PORT": str(port), "CPERSONA_KEYS": "on"}
    env |= {"CPERSONA_EMBEDDING_MODE": "none"}
    with log.open("ab") as out:
        # A Popen, as tests/serving.py's wait_healthy polls it; started once, not on the loop's hot path.
        proc = subprocess.Popen(  # noqa: ASYNC220
            [sys.executable, "-m", "cpersona", "serve"], env=env, stdout=out, stderr=out
        )
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            await wait_healthy(client, proc, log)
        code, out_text, err = await _cli(tmp_path, "create", "--agent", "ann")
        assert code == 0, err
        token = out_text.split()[0]
        stats = [sys.executable, "-m", "cpersona", "stats", "--agent", "ann"]
        bare = {k: v for k, v in env.items() if k not in ("CPERSONA_PORT", "CPERSONA_KEYS")}
        refused = await anyio.run_process(stats, env=bare, check=False)
        assert refused.returncode != 0
        assert "CPERSONA_API_KEY" in refused.stderr.decode()
        done = await anyio.run_process(stats, env={**bare, "CPERSONA_API_KEY": token}, check=False)
        assert done.returncode == 0, done.stderr.decode()
        other = [sys.executable, "-m", "cpersona", "stats", "--agent", "bob"]
        forbidden = await anyio.run_process(other, env={**bare, "CPERSONA_API_KEY": token}, check=False)
        assert forbidden.returncode != 0
        assert "bob" in forbidden.stderr.decode()
        # What serve said when it started: that keys are asked for, and where it logs.
        said = await anyio.Path(log).read_text()
        assert "  api keys  required (CPERSONA_KEYS=on): send 'Authorization: Bearer <key>'" in said, said
        redis_log = await anyio.Path(tmp_path).resolve() / "redis" / "redis.log"
        assert f"  logs      stderr, one line per request on stdout; embedded Redis {redis_log}\n" in said
    finally:
        stop_serve(proc)
