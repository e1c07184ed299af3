"""The typed traces: every kind the engine makes reads back from its published JSON and renders with no
``?`` placeholder, and the OpenAPI document describes the ``trace`` of each answer that carries one."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pytest

import cpersona
from cpersona import Settings
from cpersona.edges.cli.trace_render import read_trace, render_trace
from cpersona.edges.http.app import openapi_document
from cpersona.model.trace import CueQueryTrace, RecallTrace, ReconstructTrace
from cpersona.recall.trace.publisher import encode_trace

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from cpersona.model.trace import AnyTrace

CORPUS = orjson.loads((Path(__file__).parents[1] / "golden" / "corpus.json").read_bytes())
AGENT = CORPUS["agent_id"]
# Cues over the corpus's days (one holding a single note, so a row is lifted), and one for today, which
# the cued policies ignore (recent_only).
TODAY = datetime.datetime.now(datetime.UTC).date().isoformat()
CUES: list[dict[str, str] | None] = [
    None,
    {"after": "2026-01-05", "before": "2026-01-05", "confidence": "sure"},
    {"after": "2026-02-01", "before": "2026-02-20", "confidence": "likely"},
    {"ago": "long_ago", "confidence": "vague"},
    {"after": TODAY, "confidence": "sure"},
]


@pytest.fixture
async def memory(vector_settings: Settings) -> AsyncIterator[cpersona.Engine]:
    settings = vector_settings
    async with cpersona.open(settings, background=False) as engine:
        await engine.store_batch([{**m, "agent_id": AGENT} for m in CORPUS["memories"]])
        for episode in CORPUS["episodes"]:
            await engine.archive_episode(agent_id=AGENT, **episode)
        await engine.update_profile(AGENT, CORPUS["profile"])
        await engine.drain_blocks()
        yield engine


async def _traces(memory: cpersona.Engine) -> list[AnyTrace]:
    """The traces the golden questions make: recalls under each policy with and without a cue,
    reconstructs in each mode, and cue queries with activation."""
    out: list[AnyTrace] = []
    for question in CORPUS["questions"]:
        query = question["query"]
        fields = {k: v for k, v in question.items() if k != "query"}
        for policy in (None, "single-pass-v0", "cued-v0"):
            for cue in CUES:
                if cue is not None and policy == "single-pass-v0":
                    continue  # a plain policy takes no cue
                extra: dict[str, Any] = {} if cue is None else {"time_cue": cue}
                recalled = await memory.recall(
                    query, agent_id=AGENT, policy=policy, trace=True, **fields, **extra
                )
                assert recalled.trace is not None
                out.append(recalled.trace)
        for mode in (None, "lite", "pro"):
            for cue in CUES[:2]:
                extra = {} if cue is None else {"time_cue": cue}
                made = await memory.reconstruct(query, agent_id=AGENT, trace=True, mode=mode, **extra)
                assert made.trace is not None
                out.append(made.trace)
        if query.strip():
            asked = await memory.query(
                {"text": query}, agent_id=AGENT, trace=True, reconsolidate=False, activation_depth=2
            )
            assert asked.trace is not None
            out.append(asked.trace)
    return out


def _kind(trace: AnyTrace) -> str:
    if isinstance(trace, ReconstructTrace):
        return "reconstruct"
    if isinstance(trace, CueQueryTrace):
        return "cue query"
    assert isinstance(trace, RecallTrace), trace
    if trace.cue_ignored is not None:
        return "recall, cue ignored"
    if trace.cue is not None:
        return "recall, cue lifted" if trace.cue.lifted else "recall, cue"
    return "recall"


async def test_every_trace_reads_back_and_renders_without_a_placeholder(memory: cpersona.Engine) -> None:
    kinds: set[str] = set()
    for trace in await _traces(memory):
        kinds.add(_kind(trace))
        text = render_trace(trace)
        assert "?" not in text, text
        # What the channel carries reads back into the same model (the models forbid unknown keys).
        published = read_trace(encode_trace(trace))
        assert published == trace
        assert published is not None
        assert render_trace(published) == text
    assert kinds == {
        "recall",
        "recall, cue",
        "recall, cue lifted",
        "recall, cue ignored",
        "reconstruct",
        "cue query",
    }


async def test_a_lifted_row_is_named_in_the_account(memory: cpersona.Engine) -> None:
    # The bounded move names a row as `row`, not `ref`: the account shows it.
    lifted = [t for t in await _traces(memory) if isinstance(t, RecallTrace) and t.cue and t.cue.lifted]
    assert lifted
    for trace in lifted:
        assert trace.cue is not None
        assert all(f"{lift.row}" in render_trace(trace) for lift in trace.cue.lifted[:3])


def _resolve(schemas: dict[str, Any], node: dict[str, Any]) -> list[str]:
    """The component names a property's schema refers to (through ``anyOf``)."""
    options = node.get("anyOf", [node])
    return [o["$ref"].rsplit("/", 1)[1] for o in options if "$ref" in o]


@pytest.mark.parametrize(
    ("response", "traces"),
    [
        ("RecallResult", {"RecallTrace", "RecallTraceFailure"}),
        ("ReconstructResult", {"ReconstructTrace"}),
        ("RecallCueResult", {"CueQueryTrace"}),
    ],
)
def test_the_openapi_document_carries_each_trace_schema(response: str, traces: set[str]) -> None:
    schemas = openapi_document()["components"]["schemas"]
    assert set(_resolve(schemas, schemas[response]["properties"]["trace"])) == traces
    for name in traces:
        assert schemas[name]["additionalProperties"] is False
    recall = schemas["RecallTrace"]["properties"]
    for section in ("arms", "fusion", "gate", "autocut", "order", "reservation", "stages", "coverage", "cue"):
        assert section in recall
    # The lift's position before the move is spelled as the JSON spells it.
    assert "from" in schemas["CueLift"]["properties"]
    assert "row" in schemas["CueLift"]["properties"]
    assert schemas["ReconstructTrace"]["properties"]["kind"]["const"] == "reconstruct"
