"""One schema for every edge: the OpenAPI document is generated from the route table and the models,
and every route refuses an unknown field or a wrong type with a 400 naming the field.

Every route is exercised: a valid request answers 200 with a body its response model accepts (so the
document cannot drift from what is sent), an unknown field and a wrong type answer 400 naming it.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from cpersona.edges.http.app import openapi_document
from cpersona.edges.http.openapi import ROUTES
from cpersona.operations.lifecycle.archive import footer_line, header_line
from cpersona.settings import Settings
from cpersona.version import __version__

if TYPE_CHECKING:
    import httpx


AGENT = "schema-agent"
_HEADER = header_line(include_raw_journal=False, stores=None)
EMPTY_ARCHIVE = _HEADER + footer_line(0, hashlib.sha256(_HEADER).hexdigest())
PREFIX = "#/components/schemas/"

# For each route: a valid body or query, and a field set to a wrong type with the field the error must
# name (None where every parameter is text, so no value of it has a wrong type).
RAW = {
    "content": "user: hi",
    "agent_id": AGENT,
    "session_id": "s1",
    "source": "conversation",
    "speaker": "user",
    "visibility": "normal",
    "secrecy_level": "public",
}
CASES: dict[tuple[str, str], tuple[dict[str, Any], tuple[str, object, str] | None]] = {
    ("GET", "/health"): ({}, None),
    ("GET", "/openapi.json"): ({}, None),
    ("POST", "/v1/encode"): ({"content": "the key rotates", "agent_id": AGENT}, ("lock", "yes", "lock")),
    ("POST", "/v1/encode/batch"): (
        {"records": [{"content": "batch one", "agent_id": AGENT}]},
        ("records", [{"content": 5, "agent_id": AGENT}], "records[0].content"),
    ),
    ("POST", "/v1/encode/raw"): (RAW, ("turn_id", 7, "turn_id")),
    ("POST", "/v1/encode/raw/batch"): ({"records": [RAW]}, ("records", "all of them", "records")),
    ("PATCH", "/v1/encode/{ref}"): (
        {"agent_id": AGENT, "content": "changed"},
        ("timestamp", True, "timestamp"),
    ),
    ("POST", "/v1/episodes"): ({"summary": "a session", "agent_id": AGENT}, ("resolved", 1, "resolved")),
    ("PUT", "/v1/profile/{agent_id}"): ({"profile": "Terse."}, ("profile", ["Terse."], "profile")),
    ("GET", "/v1/profile/{agent_id}"): ({}, None),
    ("GET", "/v1/records"): ({"agent_id": AGENT}, ("limit", "ten", "limit")),
    ("GET", "/v1/records/{ref}"): ({"agent_id": AGENT}, None),
    ("DELETE", "/v1/records/{ref}"): ({"agent_id": AGENT}, None),
    ("DELETE", "/v1/agents/{agent_id}"): ({"confirm": "true"}, None),
    ("GET", "/v1/introspect/stats"): ({"agent_id": AGENT}, None),
    ("POST", "/v1/recall/query"): ({"agent_id": AGENT, "query": "key"}, ("deep", "yes", "deep")),
    ("POST", "/v1/recall/calibrate"): ({"agent_id": AGENT}, ("precision", 3, "precision")),
    ("PUT", "/v1/recall/gate"): ({"agent_id": AGENT, "gate": "heuristic"}, ("gate", True, "gate")),
    ("POST", "/v1/associations"): (
        {"agent_id": AGENT, "associations": {"entities": [{"name": "Ann"}]}},
        ("retract", "yes", "retract"),
    ),
    ("POST", "/v1/traverse"): ({"agent_id": AGENT, "entity": "Ann"}, ("max_hops", "2", "max_hops")),
    ("POST", "/v1/reconstruct"): ({"agent_id": AGENT, "query": "key"}, ("count", "2", "count")),
    ("POST", "/v1/recall/timeline"): (
        {"agent_id": AGENT, "range": {"start": 0, "end": "2100-01-01"}},
        ("limit", "2", "limit"),
    ),
    ("POST", "/v1/recall/graph"): ({"agent_id": AGENT, "include_meta": True}, ("depth", "2", "depth")),
    ("POST", "/v1/lifecycle/decay-tick"): (
        {"agent_id": AGENT, "tick_duration_seconds": 60},
        ("tick_duration_seconds", "60", "tick_duration_seconds"),
    ),
    ("POST", "/v1/introspect/decay-forecast"): (
        {"agent_id": AGENT, "record_ids": [str(uuid.uuid4())], "forecast_at": "2030-01-01T00:00:00Z"},
        ("record_ids", "all", "record_ids"),
    ),
    ("DELETE", "/v1/lifecycle/forget"): (
        {"agent_id": AGENT, "record_ids": [str(uuid.uuid4())], "confirm": True},
        ("cascade", "yes", "cascade"),
    ),
    ("POST", "/v1/lifecycle/consolidate"): ({"agent_id": AGENT, "dry_run": True}, ("dry_run", 1, "dry_run")),
    ("POST", "/v1/lifecycle/export"): (
        {"agent_id": AGENT},
        ("include_raw_journal", 1, "include_raw_journal"),
    ),
    ("POST", "/v1/lifecycle/import"): (
        {"agent_id": AGENT, "archive_data": list(EMPTY_ARCHIVE)},
        ("strategy", 3, "strategy"),
    ),
    ("POST", "/v1/recall/raw"): (
        {"agent_id": AGENT, "query": "hi"},
        ("include_sealed", "yes", "include_sealed"),
    ),
    ("GET", "/readiness"): ({}, None),
    ("GET", "/v1/introspect/record/{record_id}"): ({"agent_id": AGENT}, None),
    ("POST", "/v1/lifecycle/dream-tick"): ({}, None),
    ("PUT", "/v1/lifecycle/mode"): ({}, None),
    ("GET", "/v1/introspect/evolution"): ({}, None),
    ("POST", "/v1/recall/associate/{record_id}"): ({"agent_id": AGENT}, ("depth", "2", "depth")),
    ("GET", "/traces"): ({"agent_id": AGENT}, None),
    ("GET", "/v1/traces/stream"): ({"agent_id": AGENT}, None),
    ("POST", "/mcp"): ({}, None),
    ("POST", "/v1/keys"): ({"agents": [AGENT], "name": "n"}, ("admin", "yes", "admin")),
    ("GET", "/v1/keys"): ({}, None),
    ("DELETE", "/v1/keys/{key_id}"): ({}, None),
}
# MCP's transport speaks JSON-RPC, not the envelope; its tools' arguments (each a route's model) are
# refused by name in tests/integration/test_mcp.py.
NOT_REST = {("POST", "/mcp")}
# Calibration needs an embedder and data, which this fast app has not; its answer is checked in
# tests/integration/test_calibrate.py, its refusals here. The Cerememory operations this engine does not
# offer answer 501 (tests/integration/test_cmp_sdk.py). The forecast's success needs the id of a stored
# memory; it is checked in tests/integration/test_lifecycle_http.py. The trace stream's success never ends
# (it is read as it comes in tests/integration/test_trace_page_stream.py). A revoke needs the id of a key
# that exists (tests/integration/test_keys_http.py).
NO_SUCCESS = {
    ("DELETE", "/v1/keys/{key_id}"),
    ("GET", "/v1/traces/stream"),
    ("POST", "/v1/recall/calibrate"),
    ("POST", "/v1/introspect/decay-forecast"),
    ("POST", "/v1/lifecycle/dream-tick"),
    ("PUT", "/v1/lifecycle/mode"),
    ("GET", "/v1/introspect/evolution"),
}


def test_every_route_has_a_case() -> None:
    assert set(CASES) == {(op.method, op.path) for op in ROUTES}


def test_every_route_is_documented_with_its_request_and_response_schemas() -> None:
    document = openapi_document()
    schemas = document["components"]["schemas"]
    for op in ROUTES:
        documented = document["paths"][op.path][op.method.lower()]
        ok = documented["responses"]["200"]["content"][op.media_type]["schema"]
        # A route serving two request shapes (recall.query: query or cue) shows each, and each answer.
        shapes = [(op.body, op.response), *([op.alternative] if op.alternative is not None else [])]
        oks = ok["oneOf"] if op.alternative is not None else [ok]
        for (_, response), answer in zip(shapes, oks, strict=True):
            if response is not None:
                assert answer["$ref"].removeprefix(PREFIX) in schemas, op.path
                assert schemas[answer["$ref"].removeprefix(PREFIX)]["properties"], op.path
        if op.body is not None:
            body = documented["requestBody"]["content"]["application/json"]["schema"]
            bodies = body["oneOf"] if op.alternative is not None else [body]
            for (model, _), one in zip(shapes, bodies, strict=True):
                assert model is not None
                schema = schemas[one["$ref"].removeprefix(PREFIX)]
                # Every field of the model is in the schema, and nothing else is accepted.
                assert set(schema["properties"]) == set(model.model_fields), op.path
                assert schema["additionalProperties"] is False, op.path
        else:
            assert "requestBody" not in documented, op.path
        query = {p["name"] for p in documented["parameters"] if p["in"] == "query"}
        assert query == set(op.query.model_fields), op.path
        for status in (*op.errors, 500):
            error = documented["responses"][str(status)]["content"]["application/json"]["schema"]
            assert error == {"$ref": PREFIX + "Error"}


def test_the_document_shows_the_settings_limits_policies_and_version() -> None:
    settings = Settings(max_key_length=17, max_content_length=99, batch_max=5, recall_policy="cued-v0.2")
    document = openapi_document(settings)
    schemas = document["components"]["schemas"]
    assert document["info"]["version"] == __version__
    assert schemas["EncodeRequest"]["properties"]["project_id"]["maxLength"] == 17
    assert schemas["EncodeBatchRequest"]["properties"]["records"]["maxItems"] == 5
    assert schemas["RawBatchRequest"]["properties"]["records"]["maxItems"] == 5
    assert "'maxLength': 99" in str(schemas["EncodeRequest"]["properties"]["content"])
    recall = document["paths"]["/v1/recall/query"]["post"]["description"]
    assert "single-pass-v0" in recall
    assert "the default is cued-v0.2" in recall
    # Nothing of a limit is left written by hand in the prose either.
    assert "16,000" not in str(document)
    assert "16000" not in str(openapi_document(settings))


def _url(path: str, ref: str) -> str:
    out = path.replace("{ref}", ref).replace("{agent_id}", AGENT).replace("{record_id}", ref)
    return out.replace("{key_id}", "0" * 12)


async def _send(
    client: httpx.AsyncClient, method: str, path: str, ref: str, payload: dict[str, Any], *, body: bool
) -> httpx.Response:
    if body:
        return await client.request(method, _url(path, ref), json=payload)
    return await client.request(method, _url(path, ref), params=payload)


def _assert_400(response: httpx.Response, field: str) -> None:
    assert response.status_code == 400, response.text
    assert response.json()["error"] == {
        "code": "VALIDATION_ERROR",
        "message": response.json()["error"]["message"],
        "field": field,
    }


async def test_every_route_answers_per_its_models_and_refuses_unknown_and_mistyped_fields(
    client: httpx.AsyncClient,
) -> None:
    stored = await client.post("/v1/encode", json={"content": "the first memory", "agent_id": AGENT})
    ref = stored.json()["ref"]
    # The deletes go last, so the other routes find what they address.
    ordered = sorted(ROUTES, key=lambda op: op.method == "DELETE")
    for op in ordered:
        if (op.method, op.path) in NOT_REST:
            continue
        valid, wrong = CASES[(op.method, op.path)]
        has_body = op.body is not None
        unknown = await _send(client, op.method, op.path, ref, {**valid, "bogus": 1}, body=has_body)
        _assert_400(unknown, "bogus")
        if wrong is not None:
            name, value, field = wrong
            mistyped = await _send(client, op.method, op.path, ref, {**valid, name: value}, body=has_body)
            _assert_400(mistyped, field)
        if (op.method, op.path) in NO_SUCCESS:
            continue
        answer = await _send(client, op.method, op.path, ref, valid, body=has_body)
        assert answer.status_code == 200, (op.path, answer.text)
        if op.response is not None:
            op.response.model_validate(answer.json())


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"content": 7, "agent_id": AGENT}, "content"),
        (
            {"content": {"blocks": [{"modality": "image", "data": "x"}]}, "agent_id": AGENT},
            "content.blocks[0].modality",
        ),
        (
            {"content": {"blocks": [{"modality": "text", "data": [300]}]}, "agent_id": AGENT},
            "content.blocks[0].data[0]",
        ),
        ({"content": "x", "agent_id": AGENT, "emotion": {"joy": "high"}}, "emotion.joy"),
        ({"content": "x", "agent_id": AGENT, "~odd": 1}, "~odd"),
        ({"records": [{"content": "x", "agent_id": AGENT}, {"content": "x"}]}, "records[1].agent_id"),
    ],
)
def test_a_field_path_names_what_the_caller_sent(body: dict[str, Any], field: str) -> None:
    from cpersona import InvalidRequest
    from cpersona.model.fields import validate
    from cpersona.model.memory_request import BatchRequest, StoreRequest

    model = BatchRequest if "records" in body else StoreRequest
    with pytest.raises(InvalidRequest) as err:
        validate(model, body, Settings())
    assert err.value.field == field
