"""The lifecycle routes over HTTP: the bodies Cerememory's SDK sends (plus the agent, which the edge will
take from a header or a default), answers our models and — when the SDK is installed — its models parse;
errors named by field and code."""

from __future__ import annotations

import base64
import hashlib
import json
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest

from cpersona.model.lifecycle_responses import (
    ConsolidateResult,
    DecayForecastResult,
    DecayTickResult,
    ExportResult,
    ForgetResult,
    ImportResult,
)

if TYPE_CHECKING:
    import httpx
    from pydantic import BaseModel

AGENT = {"agent_id": "http-agent"}


def _sdk(name: str) -> type[BaseModel] | None:
    try:
        import cerememory.types as sdk  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    found: type[BaseModel] = getattr(sdk, name)
    return found


def _parses(body: dict[str, Any], ours: type[BaseModel], theirs: str) -> None:
    ours.model_validate(body)
    model = _sdk(theirs)
    if model is not None:
        model.model_validate(body)


async def _store(client: httpx.AsyncClient, text: str, **extra: Any) -> str:
    answer = await client.post("/v1/encode", json={"content": text, **AGENT, **extra})
    assert answer.status_code == 200, answer.text
    return str(answer.json()["record_id"])


async def test_decay_tick_and_forecast(client: httpx.AsyncClient) -> None:
    record_id = await _store(client, "remember the milk")
    tick = await client.post("/v1/lifecycle/decay-tick", json={**AGENT, "tick_duration_seconds": 3600})
    assert tick.status_code == 200, tick.text
    _parses(tick.json(), DecayTickResult, "DecayTickResponse")
    assert tick.json()["records_updated"] == 1
    later = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    forecast = await client.post(
        "/v1/introspect/decay-forecast", json={**AGENT, "record_ids": [record_id], "forecast_at": later}
    )
    assert forecast.status_code == 200, forecast.text
    _parses(forecast.json(), DecayForecastResult, "DecayForecastResponse")
    (item,) = forecast.json()["forecasts"]
    assert item["record_id"] == record_id
    # An hour older at the default scale (a unit of stability is a day): (1 + 1/24)^-0.3; a day on, less.
    assert item["current_fidelity"] == pytest.approx((1 + 1 / 24) ** -0.3, abs=1e-3)
    assert item["forecasted_fidelity"] == pytest.approx((1 + 25 / 24) ** -0.3, abs=1e-3)
    record = await client.get(f"/v1/records/mem:{record_id}", params=AGENT)
    assert record.json()["record"]["fidelity"]["score"] == pytest.approx(item["current_fidelity"], abs=1e-3)
    missing = await client.post(
        "/v1/introspect/decay-forecast",
        json={**AGENT, "record_ids": ["0190a0b0-0000-7000-8000-000000000000"], "forecast_at": later},
    )
    assert (missing.status_code, missing.json()["error"]["field"]) == (404, "record_ids[0]")


async def test_forget_needs_confirm_and_answers_the_count(client: httpx.AsyncClient) -> None:
    record_id = await _store(client, "to be forgotten")
    refused = await client.request(
        "DELETE", "/v1/lifecycle/forget", json={**AGENT, "record_ids": [record_id], "confirm": False}
    )
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "FORGET_UNCONFIRMED"
    assert refused.json()["error"]["field"] == "confirm"
    working = await client.request(
        "DELETE", "/v1/lifecycle/forget", json={**AGENT, "store": "working", "confirm": True}
    )
    assert working.status_code == 400
    assert working.json()["error"]["field"] == "store"
    # Every optional field sent as an explicit null, as a generated client sends them (found by the fuzzer:
    # a null temporal_range was a 500).
    nulls = {"record_ids": None, "store": None, "temporal_range": None, "cascade": False}
    aged = await client.request(
        "DELETE", "/v1/lifecycle/forget", json={**AGENT, **nulls, "older_than_seconds": 1, "confirm": False}
    )
    assert aged.status_code == 400, aged.text
    assert aged.json()["error"]["code"] == "FORGET_UNCONFIRMED"
    done = await client.request(
        "DELETE", "/v1/lifecycle/forget", json={**AGENT, "record_ids": [record_id], "confirm": True}
    )
    assert done.status_code == 200, done.text
    _parses(done.json(), ForgetResult, "ForgetResponse")
    assert done.json()["records_deleted"] == 1


async def test_a_forget_that_accepts_ndjson_reports_each_page_then_its_result(
    client: httpx.AsyncClient,
) -> None:
    stream = {**AGENT, "agent_id": "streamed"}
    hour_ago = time.time() - 3600
    # More than one delete page (256), so the stream has a line per page before the result.
    records = [{**stream, "content": f"old note {n}", "timestamp": hour_ago} for n in range(300)]
    assert (await client.post("/v1/encode/batch", json={"records": records})).status_code == 200
    ndjson = {"accept": "application/x-ndjson"}
    refused = await client.request(
        "DELETE",
        "/v1/lifecycle/forget",
        json={**stream, "older_than_seconds": 60, "confirm": False},
        headers=ndjson,
    )
    # A refusal is a plain error before anything is deleted, as without the header.
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "FORGET_UNCONFIRMED"
    done = await client.request(
        "DELETE",
        "/v1/lifecycle/forget",
        json={**stream, "older_than_seconds": 60, "confirm": True},
        headers=ndjson,
    )
    assert done.status_code == 200, done.text
    assert done.headers["content-type"].startswith("application/x-ndjson")
    lines = [json.loads(line) for line in done.text.splitlines()]
    assert [line["records_deleted"] for line in lines] == [256, 300, 300]
    assert lines[-1] == {"ok": True, "records_deleted": 300}
    _parses(lines[-1], ForgetResult, "ForgetResponse")
    listed = await client.get("/v1/records", params={"agent_id": "streamed"})
    assert listed.status_code == 200, listed.text
    assert listed.json()["records"] == []


async def test_consolidate(client: httpx.AsyncClient) -> None:
    await _store(client, "an episode to consolidate")
    body = {**AGENT, "strategy": "incremental", "min_age_hours": 0, "min_access_count": 0, "dry_run": False}
    first = await client.post("/v1/lifecycle/consolidate", json=body)
    assert first.status_code == 200, first.text
    _parses(first.json(), ConsolidateResult, "ConsolidateResponse")
    assert first.json()["semantic_nodes_created"] == 1
    second = await client.post("/v1/lifecycle/consolidate", json=body)
    assert second.json()["semantic_nodes_created"] == 0


async def test_export_then_import_in_the_sdks_shapes(client: httpx.AsyncClient) -> None:
    await _store(client, "exported words")
    exported = await client.post(
        "/v1/lifecycle/export",
        json={**AGENT, "format": "cma", "include_raw_journal": False, "encrypt": False},
    )
    assert exported.status_code == 200, exported.text
    body = exported.json()
    _parses(body, ExportResult, "ExportArchiveResponse")
    data = bytes(body["archive_data"])
    assert len(data) == body["size_bytes"]
    # Into the same agent: merge keeps what it holds (the same record, not newer).
    for archive in (body["archive_data"], base64.b64encode(data).decode()):
        again = await client.post(
            "/v1/lifecycle/import",
            json={
                **AGENT,
                "archive_id": body["archive_id"],
                "strategy": "merge",
                "conflict_resolution": "keep_newer",
                "archive_data": archive,
            },
        )
        assert again.status_code == 200, again.text
        _parses(again.json(), ImportResult, "ImportResponse")
        assert again.json()["records_skipped"] == 1
    # Into another agent of this store: a copy under new ids (test_an_archive_is_copied_into_another_agent).
    foreign = await client.post(
        "/v1/lifecycle/import", json={"agent_id": "someone-else", "archive_data": body["archive_data"]}
    )
    assert foreign.status_code == 200, foreign.text
    _parses(foreign.json(), ImportResult, "ImportResponse")
    assert (foreign.json()["copied"], foreign.json()["records_imported"]) == (True, 1)
    damaged = list(data.replace(b"exported", b"EXPORTED"))
    bad = await client.post("/v1/lifecycle/import", json={**AGENT, "archive_data": damaged})
    assert bad.status_code == 400
    assert bad.json()["error"]["field"] == "checksum"
    keyless = await client.post("/v1/lifecycle/export", json={**AGENT, "encrypt": True})
    assert keyless.status_code == 400
    assert keyless.json()["error"]["field"] == "encryption_key"
    key = {"encrypt": True, "encryption_key": "a long key"}
    sealed = await client.post("/v1/lifecycle/export", json={**AGENT, **key})
    assert sealed.status_code == 200, sealed.text
    _parses(sealed.json(), ExportResult, "ExportArchiveResponse")
    opened = await client.post(
        "/v1/lifecycle/import",
        json={
            "agent_id": "another",
            "archive_data": sealed.json()["archive_data"],
            "decryption_key": "a long key",
        },
    )
    # It opened, and its record is held by the agent that exported it: a copy.
    assert opened.status_code == 200, opened.text
    assert opened.json()["copied"] is True


def test_the_sdks_request_bodies_validate_with_the_agent_added() -> None:
    t = pytest.importorskip("cerememory.types")
    endpoints = pytest.importorskip("cerememory._endpoints")
    import uuid

    from cpersona.model import lifecycle_requests as lifecycle
    from cpersona.model.fields import RequestModel, validate
    from cpersona.settings import Settings

    now = datetime.now(UTC)
    header = t.CMPHeader(request_id=uuid.uuid4(), timestamp=now)
    cases: list[tuple[type[RequestModel], Any]] = [
        (lifecycle.DecayTickRequest, t.DecayTickRequest(tick_duration_seconds=60, header=header)),
        (lifecycle.DecayForecastRequest, t.DecayForecastRequest(record_ids=[uuid.uuid4()], forecast_at=now)),
        (
            lifecycle.ForgetRequest,
            t.ForgetRequest(
                record_ids=[uuid.uuid4()],
                store=t.StoreType.EPISODIC,
                cascade=True,
                confirm=True,
                temporal_range=t.TemporalRange(start=now, end=now),
            ),
        ),
        (lifecycle.ConsolidateRequest, t.ConsolidateRequest(strategy=t.ConsolidationStrategy.FULL)),
        (lifecycle.ExportRequest, t.ExportRequest(stores=[t.StoreType.SEMANTIC], include_raw_journal=True)),
        (lifecycle.ImportRequest, t.ImportRequest(archive_id="x", archive_data=b"abc")),
    ]
    for model, request in cases:
        validate(model, {**endpoints.dump(request), **AGENT}, Settings())


async def test_an_archive_is_copied_into_another_agent(client: httpx.AsyncClient) -> None:
    """Export A, import into B of the same server: B holds a copy under new ids that recall finds, whose
    edges and graph name B's records only; A is as it was; the same archive again changes nothing."""
    a, b = {"agent_id": "copy-from"}, {"agent_id": "copy-to"}
    first = await _store(client, "the boiler is serviced each October", **a)
    second = await _store(
        client,
        "book the boiler engineer in September",
        **a,
        associations=[{"target_id": first, "association_type": "causal", "weight": 0.8}],
    )
    exported = (await client.post("/v1/lifecycle/export", json=a)).json()
    imported = await client.post("/v1/lifecycle/import", json={**b, "archive_data": exported["archive_data"]})
    assert imported.status_code == 200, imported.text
    assert imported.json() == {
        "ok": True,
        "records_imported": 2,
        "records_skipped": 0,
        "strategy": "merge",
        "copied": True,
    }
    listed = (await client.get("/v1/records", params=b)).json()["records"]
    copies = {r["content"]: r["ref"].removeprefix("mem:") for r in listed}
    assert set(copies) == {"the boiler is serviced each October", "book the boiler engineer in September"}
    assert not {first, second} & set(copies.values())
    recalled = await client.post("/v1/recall/query", json={**b, "query": "when is the boiler serviced?"})
    assert recalled.status_code == 200, recalled.text
    refs = [row["ref"] for row in recalled.json()["rows"]]
    assert f"mem:{copies['the boiler is serviced each October']}" in refs
    assert not any(first in ref or second in ref for ref in refs)
    center = copies["book the boiler engineer in September"]
    graph = await client.post("/v1/recall/graph", json={**b, "center_id": center})
    assert graph.status_code == 200, graph.text
    edges = [(e["source"], e["target"]) for e in graph.json()["edges"]]
    assert edges == [(center, copies["the boiler is serviced each October"])]
    assert {n["id"] for n in graph.json()["nodes"]} == set(copies.values())
    # A is untouched: its records, edge and archive as before.
    a_graph = (await client.post("/v1/recall/graph", json={**a, "center_id": second})).json()
    assert [(e["source"], e["target"]) for e in a_graph["edges"]] == [(second, first)]
    assert (await client.post("/v1/lifecycle/export", json=a)).json()["checksum"] == exported["checksum"]
    # Again: the same new ids, held already, so keep_newer keeps them and nothing is written.
    again = await client.post("/v1/lifecycle/import", json={**b, "archive_data": exported["archive_data"]})
    assert (again.json()["copied"], again.json()["records_imported"], again.json()["records_skipped"]) == (
        True,
        0,
        2,
    )
    assert (await client.get("/v1/records", params=b)).json()["count"] == 2


async def test_an_import_conflict_says_nothing_of_who_holds_the_id(client: httpx.AsyncClient) -> None:
    # Ids are unique in the store. A copy takes new ids; when even its new id is another agent's (an
    # archive made by hand to name it), nothing can be written, and the answer is the same whichever
    # agent and record it is, and names neither (issue 31, item 8).
    from cpersona.operations.lifecycle.archive import encode_line, footer_line
    from cpersona.operations.lifecycle.copying import copied_id

    def archive(header: bytes, line: dict[str, Any]) -> list[int]:
        body = encode_line(line)
        digest = hashlib.sha256(header + body).hexdigest()
        return list(header + body + footer_line(1, digest))

    answers = []
    for owner, text in (("owner-one", "the spare key is in the tin"), ("owner-two", "the ferry is at 7")):
        record_id = await _store(client, text, agent_id=owner)
        exported = await client.post("/v1/lifecycle/export", json={"agent_id": owner})
        header, line, _ = bytes(exported.json()["archive_data"]).splitlines(keepends=True)
        squat = json.loads(line)
        squat["data"] = {**squat["data"], "id": copied_id("intruder", record_id), "content": f"{text}!"}
        planted = await client.post(
            "/v1/lifecycle/import",
            json={"agent_id": f"squat-{owner}", "archive_data": archive(header, squat)},
        )
        assert planted.json()["copied"] is False, planted.text
        refused = await client.post(
            "/v1/lifecycle/import",
            json={"agent_id": "intruder", "archive_data": exported.json()["archive_data"]},
        )
        assert refused.status_code == 409, refused.text
        error = refused.json()["error"]
        assert error["code"] == "IMPORT_CONFLICT"
        for told in (owner, record_id, "another agent", "held by", "squat"):
            assert told not in error["message"]
        answers.append(error)
    assert answers[0] == answers[1]
    listed = await client.get("/v1/records", params={"agent_id": "intruder"})
    assert listed.json()["count"] == 0
