"""POST /v1/recall/query serves both shapes: `query` (the recall, unchanged) and `cue` (the multimodal
query); both at once or an unreadable cue is a 400 naming the field; the answer parses into the
Cerememory SDK's model; the OpenAPI document shows both shapes; the request id keys reconsolidation."""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx
import pytest
from benchmarks.in_process import running

from cpersona.edges.http.app import create_app, openapi_document

if TYPE_CHECKING:
    from cpersona.settings import Settings

AGENT = "cq-http"
PREFIX = "#/components/schemas/"


async def _store(client: httpx.AsyncClient, content: str, **extra: object) -> str:
    answer = await client.post("/v1/encode", json={"content": content, "agent_id": AGENT, **extra})
    assert answer.status_code == 200, answer.text
    return str(answer.json()["ref"])


async def test_both_shapes_on_one_route(client: httpx.AsyncClient) -> None:
    await _store(client, "the kettle is broken", emotion="sadness")
    recall = await client.post("/v1/recall/query", json={"agent_id": AGENT, "query": "kettle"})
    assert recall.status_code == 200
    assert "rows" in recall.json()
    cue = await client.post("/v1/recall/query", json={"agent_id": AGENT, "cue": {"text": "kettle"}})
    assert cue.status_code == 200
    assert [m["relevance_score"] for m in cue.json()["memories"]] == [1.0]
    both = await client.post("/v1/recall/query", json={"agent_id": AGENT, "query": "k", "cue": {"text": "k"}})
    assert both.status_code == 400
    assert both.json()["error"]["field"] == "cue"
    neither = await client.post("/v1/recall/query", json={"agent_id": AGENT})
    assert neither.status_code == 400
    assert neither.json()["error"]["field"] == "query"


@pytest.mark.parametrize(
    ("body", "field", "code"),
    [
        ({"cue": {"image": [1, 2, 3]}}, "cue.image", "MODALITY_UNSUPPORTED"),
        ({"cue": {"text": "x"}, "stores": ["working"]}, "stores[0]", "VALIDATION_ERROR"),
        ({"cue": {"text": "x"}, "limit": 500}, "limit", "VALIDATION_ERROR"),
        ({"cue": {"text": "x"}, "bogus": True}, "bogus", "VALIDATION_ERROR"),
        ({"cue": "kettle"}, "cue", "VALIDATION_ERROR"),
    ],
)
async def test_refusals_name_the_field(
    client: httpx.AsyncClient, body: dict[str, object], field: str, code: str
) -> None:
    answer = await client.post("/v1/recall/query", json={"agent_id": AGENT, **body})
    assert answer.status_code == 400
    assert (answer.json()["error"]["field"], answer.json()["error"]["code"]) == (field, code)


async def test_the_answer_parses_into_the_sdk_model(client: httpx.AsyncClient) -> None:
    types = pytest.importorskip("cerememory.types")
    target = await _store(client, "the reason: budgets", emotion="trust")
    await _store(
        client,
        "we chose postgres",
        emotion="joy",
        associations=[{"target_id": target, "type": "causal", "weight": 0.9}],
    )
    body = {"agent_id": AGENT, "cue": {"text": "postgres", "emotion": {"joy": 0.5}}, "trace": True}
    answer = await client.post("/v1/recall/query", json=body)
    parsed = types.RecallQueryResponse.model_validate(answer.json())
    assert [bytes(m.rendered_content.blocks[0].data).decode() for m in parsed.memories] == [
        "we chose postgres",
        "the reason: budgets",
    ]
    assert [str(p) for p in parsed.memories[1].activation_path] == [
        str(parsed.memories[0].record.id),
        target[4:],
    ]
    assert parsed.activation_trace is not None
    assert parsed.activation_trace.activations[0].edge_type.value == "causal"
    assert parsed.query_metadata is not None


def test_the_document_shows_both_shapes() -> None:
    post = openapi_document()["paths"]["/v1/recall/query"]["post"]
    body = post["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"oneOf": [{"$ref": PREFIX + "RecallRequest"}, {"$ref": PREFIX + "RecallCueRequest"}]}
    ok = post["responses"]["200"]["content"]["application/json"]["schema"]
    assert ok == {"oneOf": [{"$ref": PREFIX + "RecallResult"}, {"$ref": PREFIX + "RecallCueResult"}]}
    schemas = openapi_document()["components"]["schemas"]
    assert {"text", "embedding", "emotion", "temporal", "image", "audio"} <= set(
        schemas["RecallCue"]["properties"]
    )


async def test_the_request_id_keys_reconsolidation(settings: Settings, redis: object) -> None:
    app = create_app(settings.with_(qdrant_url=":memory:", embedding_mode="none"), background=False)
    async with running(app) as (asgi, state):
        engine = state["engine"]
        transport = httpx.ASGITransport(app=asgi)
        async with httpx.AsyncClient(transport=transport, base_url="http://cpersona.test") as client:
            ref = await _store(client, "a rainy tuesday")
            body = {"agent_id": AGENT, "cue": {"text": "rainy"}}
            for request_id in ("retry-me", "retry-me", "another"):
                answer = await client.post(
                    "/v1/recall/query", json=body, headers={"x-request-id": request_id}
                )
                assert answer.status_code == 200
            assert await engine.drain_reconsolidations() == 3
            found = await engine.backends.stores.cues.stored_fidelity(ref[4:])
            assert found is not None
            assert found["reinforcement_count"] == 2  # the retry counted once


def test_two_models_of_one_title_are_refused_not_merged(monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic import BaseModel, ConfigDict

    from cpersona.edges.http import openapi

    class One(BaseModel):
        model_config = ConfigDict(title="Same")
        a: int

    class Two(BaseModel):
        model_config = ConfigDict(title="Same")
        b: str

    monkeypatch.setattr(openapi, "_models", lambda: [(One, "validation"), (Two, "validation")])
    with pytest.raises(RuntimeError, match="Same"):
        openapi.openapi_document()
