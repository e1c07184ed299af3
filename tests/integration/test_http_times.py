"""Times outside what a read can render: refused on every write, and survivable when already stored.

A time is rendered as RFC 3339 text (years 0001 to 9999, in UTC), so a write whose time falls outside
that range would make every later read of its agent fail; the request is refused naming the field. A
record written before that rule (put into Redis here by hand) is still read: get, list and a blank recall.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import pytest

from cpersona.keys import Keys

if TYPE_CHECKING:
    import httpx

    from cpersona.settings import Settings
    from cpersona.stores.redis.connection import RedisClient

AGENT = "agent-times"

OUT_OF_RANGE: list[object] = [
    253402300800,  # 10000-01-01T00:00:00Z
    1e16,
    1e308,
    "0001-01-01T00:00:00+14:00",  # year 0 in UTC
    "9999-12-31T23:59:59-01:00",  # year 10000 in UTC
]


def _refused(response: httpx.Response, field: str) -> None:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("VALIDATION_ERROR", field), error


@pytest.mark.parametrize("when", OUT_OF_RANGE, ids=str)
async def test_a_memory_time_no_read_can_render_is_refused(client: httpx.AsyncClient, when: object) -> None:
    body = {"agent_id": AGENT, "content": "x", "timestamp": when}
    _refused(await client.post("/v1/encode", json=body), "timestamp")
    _refused(await client.post("/v1/encode/batch", json={"records": [body]}), "records[0].timestamp")


@pytest.mark.parametrize("when", OUT_OF_RANGE, ids=str)
async def test_an_episode_time_no_read_can_render_is_refused(client: httpx.AsyncClient, when: object) -> None:
    for field in ("start_time", "end_time"):
        body = {"agent_id": AGENT, "summary": "a session", field: when}
        _refused(await client.post("/v1/episodes", json=body), field)


async def test_the_edges_of_the_range_are_stored_and_read(client: httpx.AsyncClient) -> None:
    for when, shown in [
        ("1970-01-01T00:00:00Z", "1970-01-01T00:00:00.000000Z"),
        (253402300799, "9999-12-31T23:59:59.000000Z"),
    ]:
        body = {"agent_id": AGENT, "content": f"at {when}", "timestamp": when}
        stored = await client.post("/v1/encode", json=body)
        assert stored.status_code == 200, stored.text
        got = await client.get(f"/v1/records/{stored.json()['ref']}", params={"agent_id": AGENT})
        assert got.status_code == 200, got.text
        assert got.json()["record"]["timestamp"] == shown


@pytest.mark.parametrize("stored_ts", [253402300800.0, 1e16, 1e308, -1e308])
async def test_a_record_stored_with_such_a_time_is_still_readable(
    client: httpx.AsyncClient, redis: RedisClient, settings: Settings, stored_ts: float
) -> None:
    stored = await client.post("/v1/encode", json={"agent_id": AGENT, "content": "the old record"})
    assert stored.status_code == 200, stored.text
    ref = stored.json()["ref"]
    # As an older version stored it: the time written into the document as it came.
    key = Keys(settings.key_prefix).memory(ref.removeprefix("mem:"))
    await cast("Any", redis).execute_command("JSON.SET", key, "$.ts", repr(stored_ts))

    got = await client.get(f"/v1/records/{ref}", params={"agent_id": AGENT})
    assert got.status_code == 200, got.text
    assert got.json()["record"]["timestamp"]
    listed = await client.get("/v1/records", params={"agent_id": AGENT})
    assert listed.status_code == 200, listed.text
    assert [r["ref"] for r in listed.json()["records"]] == [ref]
    for query in ("", "the old record"):
        recalled = await client.post("/v1/recall/query", json={"agent_id": AGENT, "query": query})
        assert recalled.status_code == 200, recalled.text
        assert ref in [row["ref"] for row in recalled.json()["rows"]]


@pytest.mark.parametrize(
    ("cue", "field"),
    [
        ({"after": "0001-01-01"}, "time_cue.after"),
        ({"after": "1969-12-31T23:59:59Z"}, "time_cue.after"),
        ({"before": "1969-12-31"}, "time_cue.before"),
        ({"after": "1970-01-01T00:00:00+01:00"}, "time_cue.after"),  # 1969 in UTC
    ],
)
async def test_a_time_cue_before_1970_is_refused_as_any_time_before_1970_is(
    client: httpx.AsyncClient, cue: dict[str, str], field: str
) -> None:
    # The same words as a write's time before 1970 gets: one range for every time a caller names.
    write = await client.post("/v1/encode", json={"agent_id": AGENT, "content": "x", "timestamp": -1})
    _refused(write, "timestamp")
    said = write.json()["error"]["message"].removeprefix("timestamp: ").partition(", got")[0]
    for route, body in (
        ("/v1/recall/query", {"agent_id": AGENT, "query": "x"}),
        ("/v1/reconstruct", {"agent_id": AGENT, "query": "x"}),
    ):
        refused = await client.post(route, json={**body, "time_cue": {"confidence": "sure", **cue}})
        _refused(refused, field)
        assert said in refused.json()["error"]["message"]
    edge = await client.post(
        "/v1/recall/query",
        json={"agent_id": AGENT, "query": "x", "time_cue": {"confidence": "sure", "after": "1970-01-01"}},
    )
    assert edge.status_code == 200, edge.text
