"""``cpersona keys``: made, listed and revoked straight in Redis, with the embedded server started for
the moment, or on the Redis of a running engine found through ``redis/redis.url`` (and its password)."""

from __future__ import annotations

import os
import re
import sys
from typing import TYPE_CHECKING

import anyio
import orjson

import cpersona
from cpersona.settings import Settings

if TYPE_CHECKING:
    from pathlib import Path

_TOKEN = re.compile(r"cpk_([0-9a-f]{12})_[A-Za-z0-9_-]{43}")


async def _cli(data_dir: Path, *args: str) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CPERSONA_")}
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
    code, out, err = await _cli(tmp_path, "list", "--json")
    assert code == 0, err
    (listed,) = orjson.loads(out)["keys"]
    assert listed["key_id"] == key_id
    assert listed["agents"] == ["ann", "bob"]
    assert listed["name"] == "fleet"
    assert token.group(0) not in out
    assert (await _cli(tmp_path, "revoke", key_id))[0] == 0
    code, out, _ = await _cli(tmp_path, "revoke", key_id)
    assert code != 0
    assert "no key" in out


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
