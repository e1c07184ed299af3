"""Sealed raw entries: encrypted at rest, invisible unless a raw query asks for them, and the raw query's
filters as a property over generated journals (private scratch, sealed, secrecy, session, agents)."""

from __future__ import annotations

import base64
import itertools
import os
import stat
import uuid
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cpersona
from cpersona import InvalidRequest, InvalidSetting, RecordNotFound
from cpersona.settings import Settings
from cpersona.stores.redis.sealing import KEY_FILE, Sealer, load_sealer, parse_key

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from cpersona.stores.redis.connection import RedisClient

AGENT = "sealer"
KEY = "11" * 32
OTHER_KEY = base64.b64encode(b"\x22" * 32).decode()


def entry(content: str, agent: str = AGENT, **fields: Any) -> dict[str, Any]:
    return {
        "content": content,
        "agent_id": agent,
        "session_id": "s1",
        "source": "conversation",
        "speaker": "user",
        "visibility": "normal",
        "secrecy_level": "public",
        **fields,
    }


@pytest.fixture
def sealed_settings(redis: object, redis_url: str, key_prefix: str, tmp_path: Path) -> Settings:
    return Settings(
        data_dir=tmp_path, redis_url=redis_url, key_prefix=key_prefix, embedding_mode="none", sealed_key=KEY
    )


@pytest.fixture
async def sealed_engine(sealed_settings: Settings) -> AsyncIterator[cpersona.Engine]:
    async with cpersona.open(sealed_settings, background=False) as memory:
        yield memory


def marker() -> str:
    return "zq" + uuid.uuid4().hex[:12]


async def test_a_sealed_entry_is_read_only_by_a_raw_query_that_asks(sealed_engine: cpersona.Engine) -> None:
    secret = marker()
    normal, sealed = (
        r.ref
        for r in (
            await sealed_engine.store_raw_batch(
                [
                    entry(f"the door code is {secret}"),
                    entry(f"the vault code is {secret}", visibility="sealed"),
                ]
            )
        ).results
    )
    plain = await sealed_engine.raw_query(secret, agent_id=AGENT)
    assert ([r.ref for r in plain.records], plain.total_candidates, plain.sealed_scanned) == (
        [normal],
        1,
        None,
    )
    assert (await sealed_engine.raw_query(agent_id=AGENT)).total_candidates == 1
    # Nor counted, listed or read by ref: nothing a caller can diff shows it exists.
    assert (await sealed_engine.stats(AGENT))["raw_entries"] == 1
    assert (await sealed_engine.stats(None))["raw_entries"] == 1
    assert [r.ref for r in await sealed_engine.list("raw", agent_id=AGENT)] == [normal]
    with pytest.raises(RecordNotFound):
        await sealed_engine.get(sealed, agent_id=AGENT)
    opened = await sealed_engine.raw_query(secret, agent_id=AGENT, include_sealed=True)
    assert [r.ref for r in opened.records] == [normal, sealed]
    assert (opened.total_candidates, opened.sealed_scanned) == (2, 1)
    assert opened.records[1].text == f"the vault code is {secret}"
    assert opened.records[1].visibility == "sealed"
    with pytest.raises(RecordNotFound):  # another agent cannot erase it either
        await sealed_engine.delete(sealed, agent_id="other")
    vault_only = await sealed_engine.raw_query("vault", agent_id=AGENT, include_sealed=True)
    assert [r.ref for r in vault_only.records] == [sealed]
    assert (await sealed_engine.raw_query("vault", agent_id=AGENT)).total_candidates == 0
    assert (
        await sealed_engine.raw_query("nowhere", agent_id=AGENT, include_sealed=True)
    ).total_candidates == 0
    # The sealed path keeps the other filters: another agent, session or secrecy level sees nothing.
    assert (await sealed_engine.raw_query(agent_id="other", include_sealed=True)).total_candidates == 0
    assert (
        await sealed_engine.raw_query(agent_id=AGENT, session_id="s2", include_sealed=True)
    ).total_candidates == 0
    only_secret = await sealed_engine.raw_query(
        agent_id=AGENT, include_sealed=True, secrecy_levels=["secret"]
    )
    assert only_secret.total_candidates == 0
    # Its agent erases it by its ref, like any record; then it is gone from the sealed path too.
    assert (await sealed_engine.delete(sealed, agent_id=AGENT)).deleted == 1
    assert [r.ref for r in (await sealed_engine.raw_query(agent_id=AGENT, include_sealed=True)).records] == [
        normal
    ]
    with pytest.raises(RecordNotFound):
        await sealed_engine.delete(sealed, agent_id=AGENT)
    await sealed_engine.store_raw("sealed again", **_fields(visibility="sealed"))
    await sealed_engine.delete_agent_data(AGENT)
    assert (await sealed_engine.raw_query(agent_id=AGENT, include_sealed=True)).sealed_scanned == 0


async def test_a_sealed_entrys_plaintext_is_in_no_redis_key(
    sealed_engine: cpersona.Engine, redis: RedisClient
) -> None:
    secret, clear = marker(), marker()
    await sealed_engine.store_raw(f"launch phrase {secret}", **_fields(visibility="sealed"))
    await sealed_engine.store_raw(f"a normal entry beside it {clear}", **_fields())
    # Every key's DUMP, and its value read by its type (a DUMP may compress a long string).
    seen = [await _everything(redis, key) async for key in redis.scan_iter(match="*", count=1000)]
    # The check can see text: the normal entry's is there, in the clear.
    assert any(clear.encode() in value for value in seen)
    assert not any(secret.encode() in value for value in seen)
    # Nor in the search index: its words were never given to it.
    index = sealed_engine.keys.raw_index
    for clause in (f"@content:{secret}", f"@stems:_{secret}", secret):
        reply = await redis.execute_command("FT.SEARCH", index, clause, "NOCONTENT")  # type: ignore[no-untyped-call]
        assert reply[0] == 0, clause
    reply = await redis.execute_command("FT.SEARCH", index, f"@stems:_{clear}", "NOCONTENT")  # type: ignore[no-untyped-call]
    assert reply[0] == 1


async def _everything(redis: RedisClient, key: bytes) -> bytes:
    untyped: Any = redis
    kind = (await untyped.type(key)).decode()
    readers: dict[str, Any] = {
        "ReJSON-RL": lambda: untyped.json().get(key),
        "string": lambda: redis.get(key),
        "hash": lambda: redis.hgetall(key),
        "set": lambda: redis.smembers(key),
        "zset": lambda: redis.zrange(key, 0, -1, withscores=True),
        "list": lambda: redis.lrange(key, 0, -1),
        "stream": lambda: redis.xrange(key),
    }
    value = await readers[kind]() if kind in readers else None
    return (await redis.dump(key) or b"") + repr(value).encode()


def _fields(**extra: str) -> dict[str, Any]:
    base = {"agent_id": AGENT, "session_id": "s1", "source": "conversation", "speaker": "user",
            "visibility": "normal", "secrecy_level": "public"}  # fmt: skip
    return {**base, **extra}


async def test_without_a_key_a_shared_redis_refuses_sealed_writes(
    redis: object, redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    keyless = Settings(data_dir=tmp_path, redis_url=redis_url, key_prefix=key_prefix, embedding_mode="none")
    async with cpersona.open(keyless, background=False) as memory:
        with pytest.raises(InvalidRequest) as err:
            await memory.store_raw_batch([entry("fine"), entry("hidden", visibility="sealed")])
        assert err.value.field == "visibility"
        assert "CPERSONA_SEALED_KEY" in err.value.problem
        assert (await memory.raw_query(agent_id=AGENT, include_sealed=True)).total_candidates == 0
        assert (await memory.stats(AGENT))["raw_entries"] == 0  # the batch was refused whole


async def test_another_key_does_not_open_a_sealed_entry(sealed_settings: Settings) -> None:
    async with cpersona.open(sealed_settings, background=False) as memory:
        await memory.store_raw("sealed with the first key", **_fields(visibility="sealed"))
    async with cpersona.open(sealed_settings.with_(sealed_key=OTHER_KEY), background=False) as memory:
        assert (await memory.raw_query(agent_id=AGENT)).total_candidates == 0
        with pytest.raises(InvalidSetting) as err:
            await memory.raw_query(agent_id=AGENT, include_sealed=True)
        assert err.value.name == "CPERSONA_SEALED_KEY"


def test_an_embedded_engine_makes_its_key_once_in_the_data_dir(tmp_path: Path) -> None:
    here = Settings(data_dir=tmp_path / "d")
    first = load_sealer(here)
    path = tmp_path / "d" / KEY_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    again = load_sealer(here)
    assert first is not None
    assert again is not None
    assert again.open("x", first.seal("x", "kept")) == "kept"
    assert load_sealer(Settings(data_dir=tmp_path / "d", redis_url="redis://h")) is None
    assert load_sealer(Settings(data_dir=tmp_path / "e", sealed_key=KEY)) is not None
    assert not (tmp_path / "e" / KEY_FILE).exists()


def test_a_ciphertext_opens_only_with_its_key_and_its_entry() -> None:
    sealer = Sealer(parse_key(KEY))
    blob = sealer.seal("id-1", "text")
    assert blob != sealer.seal("id-1", "text")  # a fresh nonce each time
    assert sealer.open("id-1", blob) == "text"
    with pytest.raises(InvalidSetting):
        sealer.open("id-2", blob)
    with pytest.raises(InvalidSetting):
        Sealer(parse_key(OTHER_KEY)).open("id-1", blob)
    with pytest.raises(InvalidSetting):
        sealer.open("id-1", "not base64 !")
    assert parse_key(base64.urlsafe_b64encode(b"\xfb" * 32).decode()) == b"\xfb" * 32
    for bad in ("", "00" * 31, "zz" * 32, base64.b64encode(b"x" * 31).decode()):
        with pytest.raises(InvalidSetting) as err:
            parse_key(bad)
        assert err.value.name == "CPERSONA_SEALED_KEY"
    with pytest.raises(InvalidSetting):
        Settings.from_env({"CPERSONA_SEALED_KEY": "00" * 32, "CPERSONA_SEALED_KEYS": "x"})


async def test_a_store_of_before_the_raw_query_is_brought_up_to_date(
    redis: RedisClient, sealed_settings: Settings
) -> None:
    prefix = sealed_settings.key_prefix
    secret = marker()
    tags = {
        "tag_agent": AGENT.encode().hex(),
        "tag_project": "x",
        "tag_channel": "x",
        "tag_session": b"s1".hex(),
    }
    old: dict[str, Any] = {
        "agent_id": AGENT, "project_id": "", "channel": "", "session_id": "s1", "turn_id": None,
        "topic_id": None, "source": "conversation", "speaker": "user", "secrecy_level": "public",
        "metadata": {}, "meta": {}, "suppressed": False, **tags,
    }  # fmt: skip
    ids = [str(uuid.uuid4()) for _ in range(2)]
    await redis.json().set(
        f"{prefix}:raw:{ids[0]}",
        "$",
        {**old, "pk": ids[0], "visibility": "normal", "content": "we deployed it", "ts": 1.0},
    )
    await redis.json().set(
        f"{prefix}:raw:{ids[1]}",
        "$",
        {**old, "pk": ids[1], "visibility": "sealed", "content": f"sealed {secret}", "ts": 2.0},
    )
    await redis.execute_command(  # type: ignore[no-untyped-call]
        "FT.CREATE",
        f"{prefix}:idx:raw",
        "ON",
        "JSON",
        "PREFIX",
        "1",
        f"{prefix}:raw:",
        "SCHEMA",
        "$.content",
        "AS",
        "content",
        "TEXT",
        "$.tag_agent",
        "AS",
        "agent",
        "TAG",
        "$.tag_project",
        "AS",
        "project",
        "TAG",
        "$.tag_channel",
        "AS",
        "channel",
        "TAG",
        "$.tag_session",
        "AS",
        "session",
        "TAG",
        "$.visibility",
        "AS",
        "visibility",
        "TAG",
        "$.secrecy_level",
        "AS",
        "secrecy",
        "TAG",
        "$.ts",
        "AS",
        "ts",
        "NUMERIC",
        "SORTABLE",
    )
    async with cpersona.open(sealed_settings, background=False) as memory:
        found = await memory.raw_query("deploy", agent_id=AGENT)
        assert [r.id for r in found.records] == ids[:1]
        opened = await memory.raw_query(secret, agent_id=AGENT, include_sealed=True)
        assert [(r.id, r.text) for r in opened.records] == [(ids[1], f"sealed {secret}")]
    doc = await redis.json().get(f"{prefix}:raw:{ids[1]}")
    assert (doc["content"], doc["stems"]) == ("", "")
    assert secret not in str(doc)


async def test_an_embedded_engine_seals_without_any_setting_and_its_files_hold_no_plaintext(
    tmp_path: Path,
) -> None:
    here = Settings(data_dir=tmp_path / "data", embedding_mode="none", min_free_mb=0)
    secret = marker()
    async with cpersona.open(here, background=False) as memory:
        ref = (await memory.store_raw(f"kept sealed {secret}", **_fields(visibility="sealed"))).ref
        opened = await memory.raw_query(secret, agent_id=AGENT, include_sealed=True)
        assert [r.ref for r in opened.records] == [ref]
    assert stat.S_IMODE((tmp_path / "data" / KEY_FILE).stat().st_mode) == 0o600
    files = [p for p in (tmp_path / "data").rglob("*") if p.is_file()]
    assert any("aof" in p.name or p.suffix == ".rdb" for p in files), files
    for path in files:
        assert secret.encode() not in path.read_bytes(), path
    async with cpersona.open(here, background=False) as memory:  # the same key, read back from its file
        assert [r.text for r in (await memory.raw_query(agent_id=AGENT, include_sealed=True)).records] == [
            f"kept sealed {secret}"
        ]


# ------------------------------------------------------------------------------------ the property

_VISIBILITY = st.sampled_from(["normal", "private_scratch", "sealed"])
_SECRECY = st.sampled_from(["public", "sensitive", "secret"])
_JOURNAL = st.lists(
    st.tuples(
        _VISIBILITY,
        _SECRECY,
        st.sampled_from(["s1", "s2"]),
        st.sampled_from(["mine", "theirs"]),
        st.sampled_from(["apple", "pear", "apple pear"]),
    ),
    min_size=1,
    max_size=8,
)
_ASK = st.fixed_dictionaries(
    {},
    optional={
        "include_private_scratch": st.booleans(),
        "include_sealed": st.booleans(),
        "secrecy_levels": st.lists(_SECRECY, min_size=1, max_size=3, unique=True),
        "session_id": st.sampled_from(["s1", "s2"]),
        "query": st.sampled_from(["apple", "pear", "apples pear"]),
        "limit": st.integers(1, 10),
    },
)
_RUNS = itertools.count()


def _expected(journal: list[tuple[str, str, str, str, str]], ask: dict[str, Any], me: str) -> list[int]:
    levels = ask.get("secrecy_levels", ["public", "sensitive"])
    words = set(ask["query"].replace("apples", "apple").split()) if "query" in ask else set()
    return [
        i
        for i, (visibility, secrecy, session, who, text) in enumerate(journal)
        if who == me
        and (visibility == "normal" or ask.get(f"include_{visibility}", False))
        and secrecy in levels
        and ask.get("session_id", session) == session
        and words <= set(text.split())
    ]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(journal=_JOURNAL, ask=_ASK)
async def test_a_raw_query_returns_exactly_what_its_filters_allow(
    sealed_engine: cpersona.Engine, journal: list[tuple[str, str, str, str, str]], ask: dict[str, Any]
) -> None:
    run = next(_RUNS)
    names = {"mine": f"me-{run}", "theirs": f"them-{run}"}
    written = await sealed_engine.store_raw_batch(
        [
            entry(text, names[who], visibility=visibility, secrecy_level=secrecy, session_id=session)
            for visibility, secrecy, session, who, text in journal
        ]
    )
    refs = [r.ref for r in written.results]
    found = await sealed_engine.raw_query(agent_id=names["mine"], **ask)
    expected = [refs[i] for i in _expected(journal, ask, "mine")]
    assert found.total_candidates == len(expected)
    assert [r.ref for r in found.records] == expected[: ask.get("limit", 10)]
    for record in found.records:
        assert record.agent_id == names["mine"]
        assert record.visibility == "normal" or ask.get(f"include_{record.visibility}")
    assert os.environ.get("CPERSONA_SEALED_KEY") is None  # the key is the fixture's, never the shell's
