"""API keys over HTTP: 401 without a live key, 403 for another agent's scope on every route, admin-only
routes, the one agent of a key as the scope of a request that names none, and revocation."""

from __future__ import annotations

import re
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from cpersona.edges.http.auth import OPEN_PATHS, keys_in_force
from cpersona.edges.http.reading import takes_agent
from cpersona.edges.http.routes import OPERATIONS
from cpersona.edges.http.trace_page import PAGE_PATH
from cpersona.edges.http.trace_stream import STREAM_PATH
from cpersona.keys import Keys
from cpersona.settings import Settings
from cpersona.stores.redis.api_keys import ApiKeyStore

if TYPE_CHECKING:
    import httpx

    from cpersona.edges.http.operation import Operation
    from cpersona.stores.redis.connection import RedisClient


# Routes that act for no agent: the probes, Cerememory's not-implemented stubs, and the key routes
# (admin only). A new route is in this list on purpose, or it names an agent and is proved below.
AGENTLESS = {
    ("GET", "/health"),
    ("GET", "/readiness"),
    ("POST", "/v1/lifecycle/dream-tick"),
    ("PUT", "/v1/lifecycle/mode"),
    ("GET", "/v1/introspect/evolution"),
    ("POST", "/v1/keys"),
    ("GET", "/v1/keys"),
    ("DELETE", "/v1/keys/{key_id}"),
    # The trace page's HTML: its agent_id only fills in the page's form; the data comes by its stream.
    ("GET", "/traces"),
    # The MCP transport: each tool checks the agents it names (tests/integration/test_keys_mcp.py).
    ("POST", "/mcp"),
}
ADMIN_ONLY = {("DELETE", "/v1/agents/{agent_id}"), ("POST", "/v1/keys"), ("GET", "/v1/keys")}


@pytest.fixture
def store(redis: RedisClient, key_prefix: str) -> ApiKeyStore:
    return ApiKeyStore(redis, Keys(key_prefix))


def _auth(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def _refused(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["ok"] is False
    assert body["code"] == body["error"]["code"] == code
    assert body["request_id"] == response.headers["x-request-id"]


def test_keys_are_in_force_beyond_loopback_by_default() -> None:
    assert not keys_in_force(Settings())
    assert keys_in_force(Settings(host="0.0.0.0"))
    assert keys_in_force(Settings(keys="on"))
    assert not keys_in_force(Settings(host="0.0.0.0", keys="off"))
    assert not keys_in_force(Settings(host="::1"))


async def test_no_key_or_a_bad_key_is_a_401(keyed: httpx.AsyncClient, store: ApiKeyStore) -> None:
    token, _ = await store.create(["a"], admin=False, name=None)
    for headers in (
        {},
        {"authorization": "Basic abc"},
        {"authorization": "Bearer"},
        _auth("cpk_000000000000_" + "x" * 43),
        _auth(token[:-1] + ("A" if token[-1] != "A" else "B")),
        _auth("not-a-key"),
    ):
        response = await keyed.get("/v1/records", params={"agent_id": "a"}, headers=headers)
        _refused(response, 401, "UNAUTHORIZED")
        assert response.headers["www-authenticate"] == "Bearer"
    assert (await keyed.get("/v1/records", params={"agent_id": "a"}, headers=_auth(token))).status_code == 200


async def test_the_probes_need_no_key(keyed: httpx.AsyncClient) -> None:
    for path in sorted(OPEN_PATHS):
        assert (await keyed.get(path)).status_code == 200, path
    _refused(await keyed.get("/v1/introspect/evolution"), 401, "UNAUTHORIZED")
    _refused(await keyed.post("/mcp", json={}), 401, "UNAUTHORIZED")


async def test_a_key_writes_and_reads_its_agent_only(keyed: httpx.AsyncClient, store: ApiKeyStore) -> None:
    token, _ = await store.create(["ann"], admin=False, name="ann's")
    auth = _auth(token)
    stored = await keyed.post(
        "/v1/encode", json={"content": "the deploy key", "agent_id": "ann"}, headers=auth
    )
    assert stored.status_code == 200, stored.text
    # The key's one agent is the scope of a request that names none (no header, no default agent).
    ref = stored.json()["ref"]
    got = await keyed.get(f"/v1/records/{ref}", headers=auth)
    assert got.status_code == 200, got.text
    assert got.json()["record"]["agent_id"] == "ann"
    bob = await keyed.post("/v1/encode", json={"content": "x", "agent_id": "bob"}, headers=auth)
    _refused(bob, 403, "FORBIDDEN")
    # A header naming another agent is refused as a body's agent_id is, never overridden by the key's.
    for body in ({"content": "x"}, {"content": "x", "agent_id": "ann"}):
        header = await keyed.post("/v1/encode", json=body, headers={**auth, "x-cpersona-agent": "bob"})
        _refused(header, 403, "FORBIDDEN")
        assert header.json()["error"]["field"] == "x-cpersona-agent"
        assert "x-cpersona-agent" in header.json()["error"]["message"]
    own = await keyed.post("/v1/encode", json={"content": "x"}, headers={**auth, "x-cpersona-agent": "ann"})
    assert own.status_code == 200, own.text
    listed = await keyed.get("/v1/records", headers=auth)
    assert sorted(r["ref"] for r in listed.json()["records"]) == sorted([ref, own.json()["ref"]])
    batch = {"records": [{"content": "y", "agent_id": "ann"}, {"content": "z", "agent_id": "bob"}]}
    _refused(await keyed.post("/v1/encode/batch", json=batch, headers=auth), 403, "FORBIDDEN")
    _refused(await keyed.get("/v1/profile/bob", headers=auth), 403, "FORBIDDEN")
    _refused(
        await keyed.get(f"/v1/records/{ref}", params={"agent_id": "bob"}, headers=auth), 403, "FORBIDDEN"
    )


async def test_a_key_of_several_agents_must_name_one(keyed: httpx.AsyncClient, store: ApiKeyStore) -> None:
    token, _ = await store.create(["ann", "cat"], admin=False, name=None)
    auth = _auth(token)
    # The stats of every agent would count others' records.
    _refused(await keyed.get("/v1/introspect/stats", headers=auth), 403, "FORBIDDEN")
    assert (
        await keyed.get("/v1/introspect/stats", params={"agent_id": "cat"}, headers=auth)
    ).status_code == 200
    missing = await keyed.post("/v1/encode", json={"content": "x"}, headers=auth)
    assert missing.status_code == 400
    assert missing.json()["error"]["field"] == "agent_id"


async def test_admin_routes_need_an_admin_key(keyed: httpx.AsyncClient, store: ApiKeyStore) -> None:
    ann, _ = await store.create(["ann"], admin=False, name=None)
    admin, _ = await store.create([], admin=True, name="root")
    gone = "/v1/agents/ann"
    _refused(await keyed.delete(gone, params={"confirm": "true"}, headers=_auth(ann)), 403, "FORBIDDEN")
    _refused(await keyed.post("/v1/keys", json={"agents": ["ann"]}, headers=_auth(ann)), 403, "FORBIDDEN")
    assert (await keyed.delete(gone, params={"confirm": "true"}, headers=_auth(admin))).status_code == 200
    made = await keyed.post("/v1/keys", json={"agents": ["dan"], "name": "d"}, headers=_auth(admin))
    assert made.status_code == 200, made.text
    new = made.json()
    assert re.fullmatch(r"cpk_[0-9a-f]{12}_[A-Za-z0-9_-]{43}", new["key"])
    assert new["info"]["agents"] == ["dan"]
    # A time on the wire is RFC 3339, as every other answer gives it.
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", new["info"]["created_at"])
    listed = (await keyed.get("/v1/keys", headers=_auth(admin))).json()["keys"]
    assert new["info"]["key_id"] in [k["key_id"] for k in listed]
    assert all("digest" not in k and "key" not in k for k in listed)
    dan = _auth(new["key"])
    assert (await keyed.get("/v1/records", headers=dan)).status_code == 200
    revoked = await keyed.delete(f"/v1/keys/{new['info']['key_id']}", headers=_auth(admin))
    assert revoked.json() == {"ok": True, "key_id": new["info"]["key_id"], "revoked": True}
    _refused(await keyed.get("/v1/records", headers=dan), 401, "UNAUTHORIZED")
    # A key that is gone, or never was, is not there to revoke: a 404 naming the id, never a 200.
    for key_id in (new["info"]["key_id"], "0" * 12):
        missing = await keyed.delete(f"/v1/keys/{key_id}", headers=_auth(admin))
        _refused(missing, 404, "KEY_NOT_FOUND")
        assert missing.json()["error"]["field"] == "key_id"
        assert key_id in missing.json()["error"]["message"]


async def test_a_bad_key_request_names_its_field(keyed: httpx.AsyncClient, store: ApiKeyStore) -> None:
    admin, _ = await store.create([], admin=True, name=None)
    bodies: list[dict[str, Any]] = [{"agents": []}, {"agents": ["a"], "admin": True}, {"agents": ["a", "a"]}]
    for body in bodies:
        response = await keyed.post("/v1/keys", json=body, headers=_auth(admin))
        assert response.status_code == 400, response.text
        assert response.json()["error"]["field"] == "agents"
    bad = await keyed.delete("/v1/keys/nothex", headers=_auth(admin))
    assert bad.status_code == 400
    assert bad.json()["error"]["field"] == "key_id"


def _request_for(op: Operation, agent: str) -> dict[str, Any]:
    """The smallest request of ``op`` that names ``agent`` wherever the route takes one."""
    path = op.path
    for name in op.path_params:
        value = {"agent_id": agent, "key_id": "0" * 12, "ref": f"mem:{uuid.uuid4()}"}.get(
            name, str(uuid.uuid4())
        )
        path = path.replace("{" + name + "}", value)
    request: dict[str, Any] = {"method": op.method, "url": path, "params": {}}
    if takes_agent(op.query):
        request["params"]["agent_id"] = agent
    if op.query.model_fields.get("confirm"):
        request["params"]["confirm"] = "true"
    if op.body is not None:
        fields = op.body.model_fields
        request["json"] = {"agent_id": agent} if "agent_id" in fields else {"records": [{"agent_id": agent}]}
    return request


def _names_an_agent(op: Operation) -> bool:
    return (
        "agent_id" in op.path_params
        or takes_agent(op.query)
        or (op.body is not None and takes_agent(op.body))
    )


async def test_every_route_refuses_another_agents_scope(keyed: httpx.AsyncClient, store: ApiKeyStore) -> None:
    token, _ = await store.create(["ann"], admin=False, name=None)
    for op in OPERATIONS:
        where = (op.method, op.path)
        if where in AGENTLESS:
            continue
        assert _names_an_agent(op), f"{where} acts for no agent: prove it refuses other agents, or list it"
        response = await keyed.request(**_request_for(op, "bob"), headers=_auth(token))
        _refused(response, 403, "FORBIDDEN")
        # Not the admin rule answering: the same route with the key's own agent gets past the key check.
        # (The trace stream never ends; the stream's own tests follow it for the key's agent.)
        if where not in ADMIN_ONLY and op.path != STREAM_PATH:
            own = await keyed.request(**_request_for(op, "ann"), headers=_auth(token))
            assert own.status_code != 403, (where, own.text)


async def test_the_trace_page_loads_without_a_key_and_its_stream_needs_one(
    keyed: httpx.AsyncClient, store: ApiKeyStore
) -> None:
    # A browser loads the page with no header to send; the page sends the key typed into it on the stream.
    assert PAGE_PATH in OPEN_PATHS
    page = await keyed.get(PAGE_PATH)
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    _refused(await keyed.get(STREAM_PATH, params={"agent_id": "ann"}), 401, "UNAUTHORIZED")
    token, _ = await store.create(["ann"], admin=False, name=None)
    other = await keyed.get(STREAM_PATH, params={"agent_id": "bob"}, headers=_auth(token))
    _refused(other, 403, "FORBIDDEN")
