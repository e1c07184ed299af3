"""The isolation property across keys: with keys for agents A and B over the same store, nothing of B's
(its refs, its words, its agent id) ever reaches a request made with A's key, through any read route,
whether the request names A or nothing (A's key then names the scope); naming B is a 403."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpersona.keys import Keys
from cpersona.stores.redis.api_keys import ApiKeyStore

if TYPE_CHECKING:
    import httpx

    from cpersona.stores.redis.connection import RedisClient

# A small vocabulary, so that A's questions match B's memories word for word.
WORDS = ("deploy", "key", "friday", "rotate", "green", "build", "coffee", "meeting")
_memory = st.tuples(
    st.sampled_from(("a", "b")),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
    st.sampled_from((None, "p")),
)


_RAW = {"session_id": "s", "source": "conversation", "speaker": "user", "visibility": "normal",
        "secrecy_level": "public"}  # fmt: skip


def _reads(agent: dict[str, str], words: list[str], refs: list[str]) -> list[dict[str, Any]]:
    """Every read route, as requests naming the agent (or, with ``agent`` empty, naming none)."""
    question = " ".join(words)
    ids = [ref.removeprefix("mem:") for ref in refs]
    out: list[dict[str, Any]] = [
        {"method": "POST", "url": "/v1/recall/query", "json": {"query": question, "limit": 50, **agent}},
        {"method": "POST", "url": "/v1/recall/query", "json": {"cue": {"text": question}, **agent}},
        {"method": "POST", "url": "/v1/reconstruct", "json": {"query": question, **agent}},
        {"method": "POST", "url": "/v1/recall/raw", "json": {"query": words[0], **agent}},
        {"method": "GET", "url": "/v1/records", "params": {"limit": 1000, **agent}},
        {"method": "GET", "url": "/v1/records", "params": {"kind": "episode", **agent}},
        {"method": "GET", "url": "/v1/introspect/stats", "params": agent},
        {"method": "POST", "url": "/v1/traverse", "json": {"entity": words[0], **agent}},
        {"method": "POST", "url": "/v1/lifecycle/export", "json": {**agent}},
        {
            "method": "POST",
            "url": "/v1/introspect/decay-forecast",
            "json": {"record_ids": ids or [str(uuid.uuid4())], "forecast_at": 2_000_000_000, **agent},
        },
    ]
    for ref, bare in zip(refs, ids, strict=True):
        out += [
            {"method": "GET", "url": f"/v1/records/{ref}", "params": agent},
            {"method": "GET", "url": f"/v1/introspect/record/{bare}", "params": agent},
            {"method": "POST", "url": f"/v1/recall/associate/{bare}", "json": {**agent}},
        ]
    return out


async def _same_as_for_no_record(
    client: httpx.AsyncClient,
    request: dict[str, Any],
    response: httpx.Response,
    refs: list[str],
    auth: dict[str, str],
) -> None:
    asked = repr(request)
    bare = [ref.removeprefix("mem:") for ref in refs if ref.removeprefix("mem:") in asked]
    never = str(uuid.uuid4())
    other = orjson.loads(_swap(orjson.dumps(request).decode(), bare, never))
    twin = await client.request(**other, headers=auth)
    assert twin.status_code == 404
    assert _swap(response.json()["message"], bare, never) == twin.json()["message"]


def _swap(text: str, olds: list[str], new: str) -> str:
    for old in olds:
        text = text.replace(old, new)
    return text


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    memories=st.lists(_memory, min_size=1, max_size=8), question=st.lists(st.sampled_from(WORDS), min_size=1)
)
async def test_a_key_for_a_never_sees_anything_of_b(
    keyed: httpx.AsyncClient, redis: RedisClient, key_prefix: str, memories: list[Any], question: list[str]
) -> None:
    run = uuid.uuid4().hex[:8]
    agents = {"a": f"ann-{run}", "b": f"bob-{run}"}
    store = ApiKeyStore(redis, Keys(key_prefix))
    tokens = {
        side: (await store.create([agent], admin=False, name=None))[0] for side, agent in agents.items()
    }
    auth = {side: {"authorization": f"Bearer {token}"} for side, token in tokens.items()}
    b_refs: list[str] = []
    b_marks: list[str] = []
    for i, (side, words, project) in enumerate(memories):
        mark = f"mark{side}{run}{i}"
        body: dict[str, Any] = {"content": " ".join([*words, mark]), "agent_id": agents[side]}
        if project:
            body["project_id"] = project
        stored = await keyed.post("/v1/encode", json=body, headers=auth[side])
        assert stored.status_code == 200, stored.text
        raw = {"content": f"{' '.join(words)} {mark}", "agent_id": agents[side], **_RAW}
        assert (await keyed.post("/v1/encode/raw", json=raw, headers=auth[side])).status_code == 200
        if side == "b":
            b_refs.append(stored.json()["ref"])
            b_marks.append(mark)
    leaks = [*b_marks, agents["b"], *(ref.removeprefix("mem:") for ref in b_refs)]
    for named in ({"agent_id": agents["a"]}, {}):
        for request in _reads(named, question, b_refs):
            response = await keyed.request(**request, headers=auth["a"])
            assert response.status_code in (200, 404), (request, response.text)
            text = response.text
            if response.status_code == 404:
                # The same answer as for an id that never was: a record of B's is not even said to exist.
                await _same_as_for_no_record(keyed, request, response, b_refs, auth["a"])
            # A refusal may repeat the ids the request itself sent; nothing else of B's is said.
            asked = repr(request)
            assert not [leak for leak in leaks if leak in text and leak not in asked], (request, text)
    for request in _reads({"agent_id": agents["b"]}, question, b_refs):
        refused = await keyed.request(**request, headers=auth["a"])
        assert refused.status_code == 403, (request, refused.text)
