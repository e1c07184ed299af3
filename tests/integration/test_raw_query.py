"""The forensic raw query (``Engine.raw_query``, ``POST /v1/recall/raw``, ``cpersona raw``): what it
matches, in which order, what it filters, what it refuses, and that its answer is the Cerememory SDK's
``RecallRawQueryResponse``. Sealing is tests/integration/test_raw_sealing.py's."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cpersona
from cpersona import InvalidRequest, RawQueryResult
from cpersona.edges.cli.raw import render_raw
from cpersona.model.fields import validate
from cpersona.model.raw_query import RawQueryRequest
from cpersona.model.records import RawRecord, Scope, new_id
from serving import environment_without_settings

if TYPE_CHECKING:
    import httpx

    from cpersona.stores.redis.connection import RedisClient

AGENT = "forensic"
SDK = Path("/work/cmp-sdk/src")


def entry(content: str, **fields: Any) -> dict[str, Any]:
    return {
        "content": content,
        "agent_id": AGENT,
        "session_id": "s1",
        "source": "conversation",
        "speaker": "user",
        "visibility": "normal",
        "secrecy_level": "public",
        **fields,
    }


async def write(memory: cpersona.Engine, *entries: dict[str, Any]) -> list[str]:
    result = await memory.store_raw_batch(list(entries))
    return [r.ref for r in result.results]


def refs(result: RawQueryResult) -> list[str]:
    return [r.ref for r in result.records]


async def test_every_word_must_occur_by_its_stem_oldest_first(engine: cpersona.Engine) -> None:
    written = await write(
        engine,
        entry("we deployed the billing service on Friday"),
        entry("the deploy of billing failed"),
        entry("billing is fine"),
        entry("deploying search tomorrow"),
    )
    found = await engine.raw_query("deploy billing", agent_id=AGENT)
    assert refs(found) == written[:2]
    assert found.total_candidates == 2
    assert found.records[0].text == "we deployed the billing service on Friday"
    everything = await engine.raw_query(agent_id=AGENT)
    assert (refs(everything), everything.total_candidates) == (written, 4)
    first = await engine.raw_query(agent_id=AGENT, limit=1)
    assert (refs(first), first.total_candidates) == ([written[0]], 4)
    # Order and punctuation do not matter; stopwords are left out.
    assert refs(await engine.raw_query("BILLING, (deploys)!", agent_id=AGENT)) == written[:2]


async def test_cjk_runs_match_as_substrings(engine: cpersona.Engine) -> None:
    written = await write(engine, entry("東京タワーに行った"), entry("京都に行った"), entry("東の空"))
    assert refs(await engine.raw_query("東京タワー", agent_id=AGENT)) == written[:1]
    assert refs(await engine.raw_query("京", agent_id=AGENT)) == written[:2]
    assert refs(await engine.raw_query("東", agent_id=AGENT)) == [written[0], written[2]]


async def test_session_and_temporal_filter_together(engine: cpersona.Engine) -> None:
    early = await write(
        engine, entry("the editor is vim", session_id="a"), entry("the editor is vim", session_id="b")
    )
    after = await engine.raw_query(agent_id=AGENT, session_id="a")
    cut = after.records[0].created_at
    late = await write(engine, entry("the editor is emacs", session_id="a"))
    assert refs(await engine.raw_query("editor", agent_id=AGENT, session_id="a")) == [early[0], late[0]]
    # The reference engine drops temporal when a session is given; here it always applies, both ends in.
    window = {"start": cut, "end": cut}
    found = await engine.raw_query("editor", agent_id=AGENT, session_id="a", temporal=window)
    assert (refs(found), found.total_candidates) == ([early[0]], 1)
    assert refs(await engine.raw_query(agent_id=AGENT, temporal=window)) == early
    assert refs(await engine.raw_query(agent_id=AGENT, session_id="b")) == early[1:]


async def test_private_scratch_and_secrecy_come_back_only_when_asked(engine: cpersona.Engine) -> None:
    normal, scratch, secret, sensitive = await write(
        engine,
        entry("token one"),
        entry("token two", visibility="private_scratch"),
        entry("token three", secrecy_level="secret"),
        entry("token four", secrecy_level="sensitive"),
    )
    default = await engine.raw_query("token", agent_id=AGENT)
    assert (refs(default), default.total_candidates) == ([normal, sensitive], 2)
    with_scratch = await engine.raw_query("token", agent_id=AGENT, include_private_scratch=True)
    assert refs(with_scratch) == [normal, scratch, sensitive]
    assert refs(await engine.raw_query("token", agent_id=AGENT, secrecy_levels=["secret"])) == [secret]
    every = await engine.raw_query(
        agent_id=AGENT, include_private_scratch=True, secrecy_levels=["public", "sensitive", "secret"]
    )
    assert refs(every) == [normal, scratch, secret, sensitive]


async def test_another_agents_and_other_projects_entries_never_appear(engine: cpersona.Engine) -> None:
    mine = await write(engine, entry("shared word"), entry("shared word", project_id="p"))
    await write(engine, entry("shared word", agent_id="other"), entry("shared word", agent_id=AGENT + " "))
    assert refs(await engine.raw_query("shared", agent_id=AGENT)) == mine
    assert refs(await engine.raw_query("shared", agent_id=AGENT, project_id="")) == mine[:1]
    assert refs(await engine.raw_query("shared", agent_id=AGENT, project_id="p")) == mine
    assert (await engine.raw_query("shared", agent_id="nobody")).total_candidates == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 1001}, "limit"),
        ({"limit": 2.5}, "limit"),
        ({"query": ""}, "query"),
        ({"query": "   "}, "query"),
        ({"query": "the of and"}, "query"),
        ({"query": "!!! ... ???"}, "query"),
        ({"secrecy_levels": []}, "secrecy_levels"),
        ({"secrecy_levels": ["top"]}, "secrecy_levels[0]"),
        ({"temporal": {"start": "2026-03-02T00:00:00Z", "end": "2026-03-01T00:00:00Z"}}, "temporal.end"),
        ({"temporal": {"start": "2026-03-02T00:00:00Z"}}, "temporal.end"),
        ({"temporal": {"start": "soon", "end": "later"}}, "temporal.start"),
        ({"include_sealed": "yes"}, "include_sealed"),
        ({"stores": ["working"]}, "stores"),
    ],
)
async def test_bad_requests_name_their_field(
    engine: cpersona.Engine, body: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidRequest) as err:
        await query_body(engine, body)
    assert err.value.field == field


async def query_body(engine: cpersona.Engine, body: dict[str, Any]) -> RawQueryResult:
    """The service over a body validated as the HTTP edge validates it (JSON values, no typed keywords)."""
    request = validate(RawQueryRequest, {"agent_id": AGENT, **body}, engine.settings)
    return await engine.services.recall.raw_query(request)


# Text that is RediSearch syntax in every way a caller could write it: it is searched as words.
_SYNTAX = st.text(
    alphabet=st.sampled_from(list("@{}[]()|-~*%$:;\"'\\/<>=!?,.^&#+ \t\naAbZ09_é東")), max_size=40
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=_SYNTAX)
async def test_no_query_text_is_a_server_error(engine: cpersona.Engine, query: str) -> None:
    try:
        await query_body(engine, {"query": query})
    except InvalidRequest as exc:
        refused = exc.field
    else:
        refused = "query"
    assert refused == "query"


async def test_the_http_answer_parses_as_the_sdks_response(client: httpx.AsyncClient) -> None:
    written = await client.post(
        "/v1/encode/raw/batch",
        json={"records": [entry("user mentioned their favorite editor", turn_id="t1"), entry("other")]},
    )
    assert written.status_code == 200, written.text
    answer = await client.post(
        "/v1/recall/raw", json={"agent_id": AGENT, "query": "favorite editor", "session_id": "s1"}
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["total_candidates"] == 1
    record = body["records"][0]
    assert bytes(record["content"]["blocks"][0]["data"]).decode() == "user mentioned their favorite editor"
    assert (record["derived_memory_ids"], record["suppressed"], record["turn_id"]) == ([], False, "t1")
    assert record["id"] == record["ref"].removeprefix("raw:")
    RawQueryResult.model_validate(body)
    if not (SDK / "cerememory").is_dir():
        pytest.skip("the Cerememory SDK is not unpacked here")
    check = (
        "import json, sys; from cerememory.types import RecallRawQueryResponse as R; "
        "r = R.model_validate(json.loads(sys.stdin.read())); "
        "print(r.records[0].content.blocks[0].data.decode(), r.records[0].visibility.value)"
    )
    done = subprocess.run(  # noqa: ASYNC221 - a short check in the SDK's own interpreter path
        [sys.executable, "-c", check],
        input=answer.text,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(SDK)},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "user mentioned their favorite editor normal"
    refused = await client.post("/v1/recall/raw", json={"agent_id": AGENT, "query": "@{", "limit": 5})
    assert refused.status_code == 400
    assert refused.json()["error"]["field"] == "query"


def test_the_cli_renders_entries_and_json_parses(
    redis_url: str, key_prefix: str, tmp_path: Path, redis: RedisClient
) -> None:
    env = environment_without_settings()
    env.update(
        CPERSONA_REDIS_URL=redis_url,
        CPERSONA_KEY_PREFIX=key_prefix,
        CPERSONA_DATA_DIR=str(tmp_path),
        CPERSONA_QDRANT_URL=":memory:",
        CPERSONA_EMBEDDING_MODE="none",
    )
    script = [sys.executable, "-m", "cpersona"]

    async def fill() -> None:
        settings_ = cpersona.Settings.from_env(env)
        async with cpersona.open(settings_, background=False) as memory:
            await write(
                memory,
                entry("line one\nline two", turn_id="t9"),
                entry("scratch", visibility="private_scratch"),
            )

    anyio.run(fill)
    done = subprocess.run(
        [*script, "raw", "line", "--agent", AGENT, "--session", "s1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "1 of 1 matching entries, oldest first"
    assert lines[2].endswith("  s1 / t9  user (conversation)")
    assert lines[3].startswith("    raw:")
    assert lines[4:] == ["    line one", "    line two"]
    as_json = subprocess.run(
        [
            *script,
            "raw",
            "--agent",
            AGENT,
            "--include-private-scratch",
            "--json",
            "--start",
            "2000-01-01T00:00:00Z",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert as_json.returncode == 0, as_json.stderr
    parsed = RawQueryResult.model_validate(orjson.loads(as_json.stdout))
    assert [r.text for r in parsed.records] == ["line one\nline two", "scratch"]
    assert render_raw(orjson.loads(as_json.stdout))[7].endswith("user (conversation)  [private_scratch]")
    bad = subprocess.run(
        [*script, "raw", "--agent", AGENT, "--limit", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (bad.returncode, bad.stderr.startswith("error: limit:")) == (2, True)


async def test_a_suppressed_entry_never_comes_back(engine: cpersona.Engine) -> None:
    # No API suppresses an entry (Cerememory's import can): written to the store as one.
    kept = RawRecord(
        new_id(), Scope(AGENT), "s1", "conversation", "user", "normal", "public", "kept word", 5.0
    )
    hidden = dataclasses.replace(kept, id=new_id(), content="hidden word", suppressed=True)
    await engine.backends.records.put_raw([kept, hidden])
    for ask in (
        {},
        {"query": "word"},
        {"query": "hidden"},
        {"include_private_scratch": True, "include_sealed": True},
    ):
        found = await engine.raw_query(agent_id=AGENT, **ask)
        assert hidden.ref not in refs(found)
        assert found.total_candidates == (0 if ask.get("query") == "hidden" else 1)
