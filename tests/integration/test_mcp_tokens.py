"""What ``tools/list`` costs an agent: every tool's listing, as ``/mcp`` answers it, within 8,000
cl100k_base tokens (the engine's own tokenizer), short descriptions, and schemas that are valid JSON
Schema, share their repeated parts and still take the calls they describe.

The figures before and after are in benchmarks/results/mcp_tokens.md (``benchmarks/mcp_tokens.py``).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

import jsonschema
import pytest

from cpersona.edges.mcp.schema import compact
from cpersona.edges.mcp.server import TOOLS
from cpersona.operations.reconstruct.tokens import count_tokens, load_vocabulary
from test_mcp import app_http

if TYPE_CHECKING:
    from cpersona.settings import Settings
    from cpersona.stores.redis.connection import RedisClient

BUDGET = 8_000
"""cl100k_base tokens of the whole ``tools/list`` result (33,297 before the schemas were compacted)."""
_ACCEPT = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25"}
_SENTENCE = re.compile(r"[.!?](?:\s|$)")


async def _listed(settings: Settings) -> tuple[str, list[dict[str, Any]]]:
    """The ``result`` of ``tools/list`` as the server writes it, and its tools."""
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    await load_vocabulary()  # its file is read in a worker thread, not on the loop
    async with app_http(settings) as (http, _):
        answer = await http.post("/mcp", json=message, headers=_ACCEPT)
    assert answer.status_code == 200, answer.text
    result = answer.json()["result"]
    return json.dumps(result, separators=(",", ":"), ensure_ascii=False), result["tools"]


async def test_the_tool_list_fits_the_budget(settings: Settings, redis: RedisClient) -> None:
    text, tools = await _listed(settings)
    assert len(tools) == len(TOOLS)
    assert count_tokens(text) <= BUDGET
    # No one tool takes a large share of it (store, the largest, is some 850).
    for tool in tools:
        assert count_tokens(json.dumps(tool)) <= 1_200, tool["name"]


async def test_each_description_says_what_the_tool_is_for_in_two_sentences(
    settings: Settings, redis: RedisClient
) -> None:
    _, tools = await _listed(settings)
    for tool in tools:
        sentences = _SENTENCE.findall(tool["description"].replace("e.g.", "eg"))
        assert 1 <= len(sentences) <= 2, tool["name"]


async def test_schemas_are_json_schema_and_declare_a_shared_part_once(
    settings: Settings, redis: RedisClient
) -> None:
    _, tools = await _listed(settings)
    for tool in tools:
        schema = tool["inputSchema"]
        jsonschema.Draft202012Validator.check_schema(schema)
        text = json.dumps(schema)
        # The shapes the request models repeat: a time, an id's text rule, a record ref's pattern.
        assert text.count('"date-time"') <= 1, tool["name"]
        assert "\\\\u0000" not in text, tool["name"]
        assert "[0-9a-fA-F]{8}" not in text, tool["name"]
        assert '"title"' not in text, tool["name"]
        for name in schema.get("$defs", {}):
            assert text.count(f'"#/$defs/{name}"') >= 2, (tool["name"], name)


async def test_a_call_the_listing_describes_is_one_its_schema_takes(
    settings: Settings, redis: RedisClient
) -> None:
    _, tools = await _listed(settings)
    schemas = {tool["name"]: tool["inputSchema"] for tool in tools}
    calls = {
        "store": {"agent_id": "a", "content": "tea at five", "timestamp": "2026-01-02T03:04:05Z"},
        "forget": {
            "agent_id": "a",
            "temporal_range": {"start": 0, "end": "2026-01-02T00:00:00Z"},
            "confirm": True,
        },
        "delete_agent_data": {"agent_id": "a", "confirm": True},
        "update_memory": {"agent_id": "a", "ref": "mem:0190c3d6-1f2e-7a4b-9c8d-0123456789ab", "store": None},
        "query": {"agent_id": "a", "cue": {"text": "tea", "temporal": {"start": 0, "end": 1e9}}},
    }
    for name, arguments in calls.items():
        jsonschema.validate(arguments, schemas[name])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"agent_id": "a", "confirm": "true"}, schemas["delete_agent_data"])


def test_a_repeated_subschema_is_declared_once_and_a_single_use_put_back() -> None:
    time = {
        "type": "string",
        "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$",
        "description": "A day of the calendar",
    }
    schema = {
        "title": "Request",
        "description": "The model's docstring, which the tool's description replaces.",
        "type": "object",
        "properties": {
            "start": {**time, "title": "Start"},
            "end": {**time, "title": "End"},
            "inner": {"$ref": "#/$defs/Inner"},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None, "title": "Note"},
        },
        "$defs": {"Inner": {"title": "Inner", "type": "object", "properties": {"n": {"type": "integer"}}}},
    }
    compacted = compact(schema, key_length=256)
    assert compacted["properties"]["start"] == compacted["properties"]["end"] == {"$ref": "#/$defs/text"}
    assert compacted["$defs"] == {"text": time}
    assert compacted["properties"]["inner"] == {"type": "object", "properties": {"n": {"type": "integer"}}}
    assert compacted["properties"]["note"] == {"type": "string"}
    assert "description" not in compacted
    assert "title" not in json.dumps(compacted)
    kept = compact(schema, key_length=256, nulls=True)
    assert kept["properties"]["note"] == {"type": ["string", "null"]}
