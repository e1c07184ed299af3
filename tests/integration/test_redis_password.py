"""The embedded Redis's password: made once per data dir, kept in a file only its owner can read, and
required of every connection; the engine, ``trace tail`` and the CLI find it through the URL the server
publishes in ``redis/redis.url``."""

from __future__ import annotations

import stat
import urllib.parse
from typing import TYPE_CHECKING

import pytest

from cpersona.errors import RedisUnavailable
from cpersona.settings import Settings
from cpersona.stores.attach import running_redis_url
from cpersona.stores.redis.connection import close_redis, connect_redis, redact_url
from cpersona.stores.redis.server import EmbeddedRedis

if TYPE_CHECKING:
    from pathlib import Path


def _settings(data_dir: Path) -> Settings:
    return Settings(data_dir=data_dir, redis_timeout_secs=5.0, redis_startup_timeout_secs=30.0)


def _without_password(url: str) -> str:
    # Spelled out: urlunsplit writes a socket URL with an empty host as "unix:/path", which redis-py
    # 8.2 refuses as no URL at all (it asks for "unix://").
    parts = urllib.parse.urlsplit(url)
    query = f"?{parts.query}" if parts.query else ""
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}{query}"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("long_dir", [False, True], ids=["unix-socket", "tcp"])
async def test_a_connection_without_the_password_is_refused(tmp_path: Path, long_dir: bool) -> None:
    # A data dir too long for a socket path serves on a loopback TCP port, which any local process
    # can reach: the password is what keeps it out.
    data_dir = tmp_path / ("d" * 100 if long_dir else "data")
    settings = _settings(data_dir)
    async with EmbeddedRedis(settings) as server:
        password = (data_dir / "redis" / "redis.password").read_text().strip()
        assert len(password) == 64
        assert f":{password}@" in server.url
        with pytest.raises(RedisUnavailable, match=r"(?i)auth"):
            await connect_redis(settings, _without_password(server.url))
        wrong = server.url.replace(password, "0" * 64)
        with pytest.raises(RedisUnavailable):
            await connect_redis(settings, wrong)
        client = await connect_redis(settings, server.url)
        try:
            assert await client.ping()
        finally:
            await close_redis(client)


async def test_the_password_files_are_the_owners_alone(tmp_path: Path) -> None:
    redis_dir = tmp_path / "redis"
    async with EmbeddedRedis(_settings(tmp_path)):
        for name in ("redis.password", "redis.conf", "redis.url"):
            assert _mode(redis_dir / name) == 0o600, name
        assert _mode(redis_dir) == 0o700


async def test_the_password_is_made_once_per_data_dir(tmp_path: Path) -> None:
    async with EmbeddedRedis(_settings(tmp_path)) as first:
        first_url = first.url
    async with EmbeddedRedis(_settings(tmp_path)) as second:
        assert second.url == first_url
    async with EmbeddedRedis(_settings(tmp_path / "other")) as other:
        assert _password(other.url) != _password(first_url)


def _password(url: str) -> str | None:
    return urllib.parse.urlsplit(url).password


async def test_trace_tail_reaches_the_server_through_its_url_file(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    async with EmbeddedRedis(settings) as server:
        found = await running_redis_url(settings)
        assert found == server.url
        client = await connect_redis(settings, found, writes=False)
        try:
            assert await client.ping()
        finally:
            await close_redis(client)


def test_messages_never_show_the_password() -> None:
    assert redact_url("unix://:secret@/tmp/d/redis/redis.sock") == "unix://:***@/tmp/d/redis/redis.sock"
    assert "secret" not in redact_url("redis://:secret@127.0.0.1:6379")
