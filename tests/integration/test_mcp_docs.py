"""docs/guides/mcp.md says what the server does: its transcripts are replayed on ``/mcp`` (the app with
the default embedder, as the guide's server runs) and each result matches the one written, and its tool
table is the server's tool list.

A result matches when it has the same keys and the same values, except what differs from run to run:
a ref or UUID (the same one wherever the guide repeats it), a time, and a number written with a decimal
point (a score, a fidelity).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from cpersona.edges.mcp.server import TOOLS
from cpersona.embedding_models import DEFAULT_EMBEDDING_MODEL
from test_mcp import app_http

if TYPE_CHECKING:
    from cpersona.settings import Settings
    from cpersona.stores.redis.connection import RedisClient

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "mcp.md"
_BLOCK = re.compile(r'```json title="(request|result)"\n(.*?)\n```', re.DOTALL)
_ROW = re.compile(r"^\| `(\w+)` \| (.*) \| (reads|writes|writes, destructive) \|$", re.MULTILINE)
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")
_ACCEPT = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25"}


def transcripts() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The guide's (request, result) pairs, in order."""
    blocks = _BLOCK.findall(GUIDE.read_text(encoding="utf-8"))
    assert [kind for kind, _ in blocks] == ["request", "result"] * (len(blocks) // 2), "unpaired block"
    parsed = [json.loads(text) for _, text in blocks]
    return list(zip(parsed[::2], parsed[1::2], strict=True))


def matches(written: Any, got: Any, uuids: dict[str, str], where: str = "result") -> None:
    """Assert that ``got`` is the result ``written`` (see the module's docstring); ``uuids`` maps the
    guide's UUIDs to the run's."""
    if isinstance(written, dict):
        assert isinstance(got, dict), where
        assert sorted(got) == sorted(written), where
        for key, value in written.items():
            matches(value, got[key], uuids, f"{where}.{key}")
    elif isinstance(written, list):
        assert isinstance(got, list), where
        assert len(got) == len(written), where
        for n, (value, other) in enumerate(zip(written, got, strict=True)):
            matches(value, other, uuids, f"{where}[{n}]")
    elif isinstance(written, float):
        assert isinstance(got, int | float), where
        assert not isinstance(got, bool), where
    elif isinstance(written, str) and _TIME.match(written):
        assert isinstance(got, str), where
        assert _TIME.match(got), where
    elif isinstance(written, str):
        assert isinstance(got, str), where
        assert _UUID.sub("<uuid>", got) == _UUID.sub("<uuid>", written), where
        for mine, theirs in zip(_UUID.findall(written), _UUID.findall(got), strict=True):
            assert uuids.setdefault(mine, theirs) == theirs, f"{where}: not the ref seen before"
    else:
        assert got == written, where


async def test_the_guides_transcripts_replay(settings: Settings, redis: RedisClient, model_dir: Path) -> None:
    pairs = transcripts()
    assert len(pairs) >= 3
    uuids: dict[str, str] = {}
    default = settings.with_(data_dir=model_dir, embedding_model=DEFAULT_EMBEDDING_MODEL)
    async with app_http(default, lexical=False) as (http, _):
        for request, written in pairs:
            answer = await http.post("/mcp", json=request, headers=_ACCEPT)
            assert answer.status_code == 200, answer.text
            result = answer.json()["result"]
            name = request["params"]["name"]
            assert result["isError"] is (written["ok"] is False), name
            assert json.loads(result["content"][0]["text"]) == result["structuredContent"], name
            matches(written, result["structuredContent"], uuids, name)
    assert uuids, "the transcripts name a ref"


def test_the_guides_tool_table_is_the_tool_list() -> None:
    rows = _ROW.findall(GUIDE.read_text(encoding="utf-8"))
    listed = [
        (
            tool.name,
            tool.description,
            "reads" if tool.read_only else "writes, destructive" if tool.destructive else "writes",
        )
        for tool in TOOLS
    ]
    assert rows == listed


def _does(read_only: bool, destructive: bool) -> str:
    return "reads" if read_only else "writes, destructive" if destructive else "writes"


def test_a_mismatch_is_caught() -> None:
    # The check itself: a changed value, a missing key and another ref than the one seen before all fail.
    written = {"ok": True, "ref": "mem:01a2518e-872e-7eb8-b727-5f86ddd8351a", "score": 0.5, "count": 1}
    run = {"ok": True, "ref": "mem:01a25190-0000-7000-8000-000000000001", "score": 0.7, "count": 1}
    uuids: dict[str, str] = {}
    matches(written, run, uuids)
    other = {**run, "ref": "mem:01a25190-0000-7000-8000-000000000002"}
    for wrong in (
        {**run, "count": 2},
        {k: v for k, v in run.items() if k != "score"},
        {**run, "ref": "ep:x"},
        other,
    ):
        with pytest.raises(AssertionError):
            matches(written, wrong, uuids)
