"""The request models refuse what the hand validators they replaced refused, naming the same field.

Each case is a body and what the write or recall path made of it before the models existed (the error
class and field; "ok" for a body that was accepted), recorded from the hand validators at the commit
before this change. Two answers differ on purpose, and say so: a misspelled alias is now named as sent.
"""

from __future__ import annotations

from typing import Any

import pytest

from cpersona.model.episode_request import EpisodeRequest
from cpersona.model.fields import validate
from cpersona.model.memory_request import StoreRequest
from cpersona.model.raw_request import RawRequest
from cpersona.recall.policy import load_policies
from cpersona.recall.request import recall_request
from cpersona.settings import Settings

SETTINGS = Settings()
POLICIES = load_policies()
A = "a"

STORE: list[tuple[dict[str, Any], str]] = [
    ({"content": "x"}, "InvalidRequest:agent_id"),
    ({"agent_id": A}, "InvalidRequest:content"),
    ({"content": 5, "agent_id": A}, "InvalidRequest:content"),
    ({"content": "", "agent_id": A}, "InvalidRequest:content"),
    ({"content": "  ", "agent_id": A}, "InvalidRequest:content"),
    ({"content": "x\x00", "agent_id": A}, "InvalidRequest:content"),
    ({"content": "x" * 16001, "agent_id": A}, "ContentTooLarge:content"),
    ({"content": "x", "agent_id": 3}, "InvalidRequest:agent_id"),
    ({"content": "x", "agent_id": ""}, "InvalidRequest:agent_id"),
    ({"content": "x", "agent_id": A, "project_id": None}, "InvalidRequest:project_id"),
    ({"content": "x", "agent_id": A, "project_id": 3}, "InvalidRequest:project_id"),
    ({"content": "x", "agent_id": A, "channel": "c" * 300}, "InvalidRequest:channel"),
    ({"content": "x", "agent_id": A, "source": "s"}, "InvalidRequest:source"),
    ({"content": "x", "agent_id": A, "source": {"kind": "x"}}, "InvalidRequest:source.kind"),
    ({"content": "x", "agent_id": A, "source": {"id": 3}}, "InvalidRequest:source.id"),
    ({"content": "x", "agent_id": A, "id": 3}, "InvalidRequest:id"),
    (
        {"content": "x", "agent_id": A, "msg_id": 3},
        "InvalidRequest:msg_id",
    ),  # was named by its alias (id, association_type)
    ({"content": "x", "agent_id": A, "timestamp": "nope"}, "InvalidRequest:timestamp"),
    ({"content": "x", "agent_id": A, "timestamp": True}, "InvalidRequest:timestamp"),
    ({"content": "x", "agent_id": A, "timestamp": -1}, "InvalidRequest:timestamp"),
    ({"content": "x", "agent_id": A, "timestamp": [1]}, "InvalidRequest:timestamp"),
    ({"content": "x", "agent_id": A, "metadata": {"k": "v" * 9000}}, "ContentTooLarge:metadata"),
    ({"content": "x", "agent_id": A, "context": "c"}, "InvalidRequest:context"),
    ({"content": "x", "agent_id": A, "store": "attic"}, "InvalidRequest:store"),
    ({"content": "x", "agent_id": A, "store": 1}, "InvalidRequest:store"),
    ({"content": "x", "agent_id": A, "emotion": "meh"}, "InvalidRequest:emotion"),
    ({"content": "x", "agent_id": A, "emotion": 3}, "InvalidRequest:emotion"),
    ({"content": "x", "agent_id": A, "emotion": {"joy": 2}}, "InvalidRequest:emotion.joy"),
    ({"content": "x", "agent_id": A, "emotion": {"valence": -2}}, "InvalidRequest:emotion.valence"),
    ({"content": "x", "agent_id": A, "emotion": {"glee": 1}}, "InvalidRequest:emotion.glee"),
    ({"content": "x", "agent_id": A, "emotion": {"joy": A}}, "InvalidRequest:emotion.joy"),
    ({"content": "x", "agent_id": A, "meta": "m"}, "InvalidRequest:meta"),
    ({"content": "x", "agent_id": A, "meta": {"x": 1}}, "InvalidRequest:meta.x"),
    ({"content": "x", "agent_id": A, "meta": {"intent": 3}}, "InvalidRequest:meta.intent"),
    ({"content": "x", "agent_id": A, "meta": {"tags": "t"}}, "InvalidRequest:meta.tags"),
    ({"content": "x", "agent_id": A, "meta": {"tags": [3]}}, "InvalidRequest:meta.tags[0]"),
    ({"content": "x", "agent_id": A, "meta": {"confidence": 2}}, "InvalidRequest:meta.confidence"),
    ({"content": "x", "agent_id": A, "meta": {"captured_at": "no"}}, "InvalidRequest:meta.captured_at"),
    ({"content": "x", "agent_id": A, "meta": {"evidence": "e"}}, "InvalidRequest:meta.evidence"),
    ({"content": "x", "agent_id": A, "meta": {"evidence": [3]}}, "InvalidRequest:meta.evidence[0]"),
    (
        {"content": "x", "agent_id": A, "meta": {"capture_status": "maybe"}},
        "InvalidRequest:meta.capture_status",
    ),
    ({"content": "x", "agent_id": A, "meta": {"intent": "i" * 9000}}, "ContentTooLarge:meta"),
    ({"content": "x", "agent_id": A, "associations": A}, "InvalidRequest:associations"),
    ({"content": "x", "agent_id": A, "associations": [3]}, "InvalidRequest:associations[0]"),
    (
        {"content": "x", "agent_id": A, "associations": [{"type": "causal"}]},
        "InvalidRequest:associations[0].target_id",
    ),
    (
        {"content": "x", "agent_id": A, "associations": [{"target_id": "t"}]},
        "InvalidRequest:associations[0].association_type",
    ),
    (
        {"content": "x", "agent_id": A, "associations": [{"target_id": "t", "type": "bogus"}]},
        "InvalidRequest:associations[0].type",
    ),  # was named by its alias (id, association_type)
    (
        {"content": "x", "agent_id": A, "associations": [{"target_id": "t", "type": "causal", "weight": 3}]},
        "InvalidRequest:associations[0].weight",
    ),
    ({"content": "x", "agent_id": A, "lock": "yes"}, "InvalidRequest:lock"),
    ({"content": "x", "agent_id": A, "colour": 1}, "InvalidRequest:colour"),
    ({"content": {"blocks": []}, "agent_id": A}, "InvalidRequest:content.blocks"),
    ({"content": {"blocks": "b"}, "agent_id": A}, "InvalidRequest:content.blocks"),
    ({"content": {"blocks": [3]}, "agent_id": A}, "InvalidRequest:content.blocks[0]"),
    (
        {"content": {"blocks": [{"modality": "image", "data": "x"}]}, "agent_id": A},
        "ModalityUnsupported:content.blocks[0].modality",
    ),
    (
        {"content": {"blocks": [{"modality": "text", "data": 3}]}, "agent_id": A},
        "InvalidRequest:content.blocks[0].data",
    ),
    (
        {"content": {"blocks": [{"modality": "text", "data": [255, 255]}]}, "agent_id": A},
        "InvalidRequest:content.blocks[0].data",
    ),
    ({"content": {"blocks": [{"modality": "text", "data": "  "}]}, "agent_id": A}, "InvalidRequest:content"),
    (
        {"content": {"blocks": [{"modality": "text", "data": "x"}], "x": 1}, "agent_id": A},
        "InvalidRequest:content.x",
    ),
    (
        {"content": {"blocks": [{"modality": "text", "data": "x"}], "summary": 3}, "agent_id": A},
        "InvalidRequest:content.summary",
    ),
]

RECALL: list[tuple[dict[str, Any], str]] = [
    ({"agent_id": A}, "InvalidRequest:query"),
    ({"query": "x"}, "InvalidRequest:agent_id"),
    ({"agent_id": A, "query": 3}, "InvalidRequest:query"),
    ({"agent_id": 3, "query": "x"}, "InvalidRequest:agent_id"),
    ({"agent_id": A, "query": "x" * 4001}, "InvalidRequest:query"),
    ({"agent_id": A, "query": "x", "limit": -1}, "InvalidRequest:limit"),
    ({"agent_id": A, "query": "x", "limit": 101}, "InvalidRequest:limit"),
    ({"agent_id": A, "query": "x", "limit": "5"}, "InvalidRequest:limit"),
    ({"agent_id": A, "query": "x", "limit": None}, "InvalidRequest:limit"),
    ({"agent_id": A, "query": "x", "limit": 1.5}, "InvalidRequest:limit"),
    ({"agent_id": A, "query": "x", "deep": 1}, "InvalidRequest:deep"),
    ({"agent_id": A, "query": "x", "mode": "best"}, "InvalidRequest:mode"),
    ({"agent_id": A, "query": "x", "mode": None}, "InvalidRequest:mode"),
    ({"agent_id": A, "query": "x", "order": "x"}, "InvalidRequest:order"),
    ({"agent_id": A, "query": "x", "policy": "nope"}, "InvalidRequest:policy"),
    ({"agent_id": A, "query": "x", "policy": None}, "InvalidRequest:policy"),
    ({"agent_id": A, "query": "x", "project_id": 3}, "InvalidRequest:project_id"),
    ({"agent_id": A, "query": "x", "source_id": None}, "InvalidRequest:source_id"),
    ({"agent_id": A, "query": "x", "exclude_contents": "e"}, "InvalidRequest:exclude_contents"),
    ({"agent_id": A, "query": "x", "exclude_contents": [3]}, "InvalidRequest:exclude_contents[0]"),
    # One more than the 256 exclusions a recall takes.
    ({"agent_id": A, "query": "x", "exclude_contents": ["e"] * 257}, "InvalidRequest:exclude_contents"),
    ({"agent_id": A, "query": "x", "full_content": "no"}, "InvalidRequest:full_content"),
    ({"agent_id": A, "query": "x", "trace": None}, "InvalidRequest:trace"),
    ({"agent_id": A, "query": "x", "time_cue": 3}, "InvalidRequest:time_cue"),
    ({"agent_id": A, "query": "x", "time_cue": {"confidence": "sure"}}, "InvalidRequest:time_cue"),
    ({"agent_id": A, "query": "x", "zz": 1}, "InvalidRequest:zz"),
    (
        {
            "agent_id": A,
            "query": "x",
            "time_cue": {"confidence": "sure", "ago": "long_ago"},
            "policy": "single-pass-v0",
        },
        "InvalidRequest:time_cue",
    ),
]

RAW: list[tuple[dict[str, Any], str]] = [
    ({"content": "x", "agent_id": A}, "InvalidRequest:session_id"),
    (
        {
            "content": "x",
            "agent_id": A,
            "session_id": "s",
            "source": "conversation",
            "speaker": "user",
            "visibility": "normal",
        },
        "InvalidRequest:secrecy_level",
    ),
    (
        {
            "content": "x",
            "agent_id": A,
            "session_id": "",
            "source": "conversation",
            "speaker": "user",
            "visibility": "normal",
            "secrecy_level": "public",
        },
        "InvalidRequest:session_id",
    ),
    (
        {
            "content": "x",
            "agent_id": A,
            "session_id": "s",
            "source": "nope",
            "speaker": "user",
            "visibility": "normal",
            "secrecy_level": "public",
        },
        "InvalidRequest:source",
    ),
    (
        {
            "content": "x",
            "agent_id": A,
            "session_id": "s",
            "source": "conversation",
            "speaker": "user",
            "visibility": "normal",
            "secrecy_level": "public",
            "turn_id": 3,
        },
        "InvalidRequest:turn_id",
    ),
    (
        {
            "content": "x",
            "agent_id": A,
            "session_id": "s",
            "source": "conversation",
            "speaker": "user",
            "visibility": "normal",
            "secrecy_level": "public",
            "context": {},
        },
        "InvalidRequest:context",
    ),
]

EPISODE: list[tuple[dict[str, Any], str]] = [
    ({"agent_id": A}, "InvalidRequest:summary"),
    ({"summary": "s"}, "InvalidRequest:agent_id"),
    ({"summary": 3, "agent_id": A}, "InvalidRequest:summary"),
    ({"summary": "s", "agent_id": A, "keywords": 3}, "InvalidRequest:keywords"),
    ({"summary": "s", "agent_id": A, "keywords": [3]}, "InvalidRequest:keywords[0]"),
    ({"summary": "s", "agent_id": A, "history": "h"}, "InvalidRequest:history"),
    (
        {"summary": "s", "agent_id": A, "history": [{"timestamp": "no"}]},
        "InvalidRequest:history[0].timestamp",
    ),
    ({"summary": "s", "agent_id": A, "start_time": "no"}, "InvalidRequest:start_time"),
    (
        {"summary": "s", "agent_id": A, "start_time": "2024-01-02", "end_time": "2024-01-01"},
        "InvalidRequest:end_time",
    ),
    ({"summary": "s", "agent_id": A, "resolved": 1}, "InvalidRequest:resolved"),
    ({"summary": "s", "agent_id": A, "x": 1}, "InvalidRequest:x"),
]


def outcome(call: Any) -> str:
    try:
        call()
    except Exception as exc:
        return f"{type(exc).__name__}:{getattr(exc, 'field', '?')}"
    return "ok"


@pytest.mark.parametrize(("body", "expected"), STORE)
def test_a_memory_write(body: dict[str, Any], expected: str) -> None:
    assert outcome(lambda: validate(StoreRequest, body, SETTINGS).draft(SETTINGS)) == expected


@pytest.mark.parametrize(("body", "expected"), RECALL)
def test_a_recall(body: dict[str, Any], expected: str) -> None:
    assert outcome(lambda: recall_request(body, SETTINGS, POLICIES, max_limit=100)) == expected


@pytest.mark.parametrize(("body", "expected"), RAW)
def test_a_raw_entry(body: dict[str, Any], expected: str) -> None:
    assert outcome(lambda: validate(RawRequest, body, SETTINGS).draft(SETTINGS)) == expected


@pytest.mark.parametrize(("body", "expected"), EPISODE)
def test_an_episode(body: dict[str, Any], expected: str) -> None:
    assert outcome(lambda: validate(EpisodeRequest, body, SETTINGS).draft(SETTINGS)) == expected
