"""``cpersona trace tail`` against a real ``cpersona serve`` with API keys on: it follows the server's
``GET /v1/traces/stream`` with ``CPERSONA_API_KEY``, so a key bound to one agent sees that agent's traces
and never another's, and naming another agent is refused (exit 2, one line).

The server is found as every command finds it (``server.url`` in the data dir); the keys are made with
``cpersona keys create`` on the server's Redis, the recalls made over HTTP with each agent's own key.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from typing import TYPE_CHECKING

import anyio
import httpx
import orjson
import pytest

from serving import environment_without_settings, free_port, stop_serve, wait_healthy
from test_trace_tail import command, finish, wait_listening

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from anyio.abc import Process

ANN, BOB = "ann", "bob"


def _env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = environment_without_settings()
    env |= {"CPERSONA_DATA_DIR": str(data_dir), "CPERSONA_EMBEDDING_MODE": "none"}
    return env | extra


async def _key(data_dir: Path, *args: str) -> str:
    done = await anyio.run_process(
        [sys.executable, "-m", "cpersona", "keys", "create", "--json", *args], env=_env(data_dir), check=True
    )
    token: str = orjson.loads(done.stdout)["key"]
    return token


@contextlib.asynccontextmanager
async def _tailing(args: list[str], env: dict[str, str]) -> AsyncIterator[Process]:
    """The tail, killed if a failed assertion leaves it running (closing only waits for it)."""
    async with await anyio.open_process(args, env=env) as proc:
        try:
            yield proc
        finally:
            if proc.returncode is None:
                proc.kill()


class _Server:
    def __init__(self, data_dir: Path, url: str, keys: dict[str, str]) -> None:
        self.data_dir, self.url, self.keys = data_dir, url, keys

    async def recall(self, agent: str, question: str) -> None:
        headers = {"authorization": f"Bearer {self.keys[agent]}"}
        async with httpx.AsyncClient(base_url=self.url, headers=headers, timeout=60) as client:
            answer = await client.post(
                "/v1/recall/query", json={"query": question, "agent_id": agent, "trace": True}
            )
        assert answer.status_code == 200, answer.text


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[_Server]:
    port = free_port()
    log = tmp_path / "serve.log"
    env = _env(tmp_path, CPERSONA_PORT=str(port), CPERSONA_KEYS="on")
    with log.open("ab") as out:
        proc = subprocess.Popen(  # noqa: ASYNC220 - started once, polled by wait_healthy
            [sys.executable, "-m", "cpersona", "serve"], env=env, stdout=out, stderr=out
        )
    try:
        url = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(base_url=url) as client:
            await wait_healthy(client, proc, log)
        keys = {ANN: await _key(tmp_path, "--agent", ANN), BOB: await _key(tmp_path, "--agent", BOB)}
        for agent, words in ((ANN, "the deploy key rotates every Friday"), (BOB, "bob's deploy key is 4711")):
            headers = {"authorization": f"Bearer {keys[agent]}"}
            async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as client:
                stored = await client.post("/v1/encode", json={"content": words, "agent_id": agent})
            assert stored.status_code in (200, 201), stored.text
        yield _Server(tmp_path, url, keys)
    finally:
        stop_serve(proc)


async def test_a_key_tails_its_own_agent_and_never_another(server: _Server) -> None:
    env = _env(server.data_dir, CPERSONA_API_KEY=server.keys[ANN])
    async with _tailing(command("--json", "--count", "2"), env=env) as proc:
        listening = await wait_listening(proc)
        assert "/v1/traces/stream" in listening
        # A key bound to one agent names the scope: the server follows that agent's channel.
        assert f"(agent {ANN})" in listening
        # Bob's recalls come first each time: a tail that let them through would print one of them.
        for question in ("deploy key", "friday"):
            await server.recall(BOB, question)
            await server.recall(ANN, question)
        code, out, err = await finish(proc)
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 2, out
    assert [orjson.loads(line)["scope"]["agent_id"] for line in lines] == [ANN, ANN]
    assert BOB not in out


async def test_the_tail_renders_a_server_trace_as_the_redis_tail_does(server: _Server) -> None:
    env = _env(server.data_dir, CPERSONA_API_KEY=server.keys[ANN])
    async with _tailing(command("--agent", ANN, "--count", "1"), env=env) as proc:
        listening = await wait_listening(proc)
        assert f"(agent {ANN})" in listening
        await server.recall(ANN, "deploy key")
        code, out, err = await finish(proc)
    assert code == 0, err
    assert out.startswith("── recall "), out
    assert f"  agent {ANN}  " in out.splitlines()[0], out
    for label in ("arms", "gate", "autocut", "count", "seats", "timing"):
        assert f"   {label} " in out, (label, out)


async def test_naming_another_agent_is_refused(server: _Server) -> None:
    env = _env(server.data_dir, CPERSONA_API_KEY=server.keys[ANN])
    async with _tailing(command("--agent", BOB, "--count", "1"), env=env) as proc:
        code, out, err = await finish(proc)
    assert code == 2
    assert out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith("error: --agent:")
    assert BOB in line


async def test_no_key_or_an_unknown_one_is_refused_naming_the_variable(server: _Server) -> None:
    for extra in ({}, {"CPERSONA_API_KEY": "cpk_000000000000_" + "x" * 43}):
        env = _env(server.data_dir, **extra)
        async with _tailing(command("--count", "1"), env=env) as proc:
            code, out, err = await finish(proc)
        assert code == 2, err
        assert out == ""
        (line,) = err.strip().splitlines()
        assert line.startswith("error: CPERSONA_API_KEY was refused by the server"), line


async def test_cpersona_url_makes_the_server_the_target(server: _Server, tmp_path: Path) -> None:
    # Another data dir, with no server and no Redis of its own: the URL alone names the target.
    env = _env(tmp_path / "elsewhere", CPERSONA_URL=server.url, CPERSONA_API_KEY=server.keys[BOB])
    async with _tailing(command("--json", "--count", "1"), env=env) as proc:
        listening = await wait_listening(proc)
        assert f"{server.url}/v1/traces/stream (agent {BOB})" in listening
        await server.recall(ANN, "deploy key")
        await server.recall(BOB, "deploy key")
        code, out, err = await finish(proc)
    assert code == 0, err
    assert orjson.loads(out)["scope"]["agent_id"] == BOB


async def test_a_key_revoked_while_tailing_ends_the_tail_naming_the_variable(server: _Server) -> None:
    admin = await _key(server.data_dir, "--admin")
    env = _env(server.data_dir, CPERSONA_API_KEY=server.keys[ANN])
    async with _tailing(command("--json"), env=env) as proc:
        await wait_listening(proc)
        key_id = server.keys[ANN].split("_")[1]
        async with httpx.AsyncClient(
            base_url=server.url, headers={"authorization": f"Bearer {admin}"}
        ) as client:
            assert (await client.delete(f"/v1/keys/{key_id}")).status_code == 200
        # No trace needed: the stream notices the revocation by itself and says so.
        code, out, err = await finish(proc)
    assert code == 2, err
    assert out == ""
    (line,) = err.strip().splitlines()
    assert line == "error: CPERSONA_API_KEY ended the trace stream: key revoked", line
