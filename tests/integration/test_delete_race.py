"""An agent's delete racing that agent's writes, against the real embedded Redis and Qdrant's engine.

A write either loses to the delete (it is refused with ``AGENT_BEING_DELETED`` and leaves nothing) or
wins whole (its record and its vector); never a record acknowledged with no vector and no pending mark.
The races are held open deterministically by a thin wrapper around a method of the engine's own vector
store, which calls the real method and then waits (or waits and then calls it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import pytest

import cpersona
from cpersona import Settings
from cpersona.edges.http.app import create_app
from cpersona.engine.deletes import FENCE_SECS
from cpersona.keys import Keys

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence
    from contextlib import AbstractAsyncContextManager

    import httpx
    from starlette.applications import Starlette

    from cpersona.stores.protocols import VectorFilter, VectorPoint
    from cpersona.stores.redis.connection import RedisClient

VICTIM = "victim"
_WAIT_SECS = 60.0  # a bound on a hung test, not a measure: every wait below is on an event

Write = tuple[str, ...]
_RAW = {
    "session_id": "s1",
    "source": "conversation",
    "speaker": "user",
    "visibility": "normal",
    "secrecy_level": "public",
}


async def _half_stored(engine: cpersona.Engine, agent: str) -> list[str]:
    """The refs of the agent's records in Redis that have neither a vector nor a pending mark."""
    assert engine.backends.vectors is not None
    pending = set(await engine.backends.records.pending_refs())
    half: list[str] = []
    for kind, tag in (("memory", "mem"), ("episode", "ep")):
        ids = await engine.backends.records.record_ids(kind, agent)  # type: ignore[arg-type]
        with_vector = await engine.backends.vectors.existing(ids)
        half += [f"{tag}:{i}" for i in ids if i not in with_vector and f"{tag}:{i}" not in pending]
    return half


async def _write(engine: cpersona.Engine, kind: str, text: str) -> Write:
    """One write of ``kind`` for the victim; the refs it stored."""
    if kind == "single":
        return ((await engine.store(text, agent_id=VICTIM)).ref,)
    if kind == "batch":
        batch = [{"content": f"{text}, part {n}", "agent_id": VICTIM} for n in range(3)]
        return tuple(r.ref for r in (await engine.store_batch(batch)).results)
    return ((await engine.archive_episode(text, agent_id=VICTIM)).ref,)


class _HeldAfter:
    """``upsert`` of the real store, held once after it wrote the victim's vectors until released."""

    def __init__(self, upsert: Callable[[Sequence[VectorPoint]], Awaitable[None]]) -> None:
        self._upsert = upsert
        self.reached = anyio.Event()
        self.release = anyio.Event()

    async def __call__(self, points: Sequence[VectorPoint]) -> None:
        await self._upsert(points)
        if not self.reached.is_set() and any(p.agent_id == VICTIM for p in points):
            self.reached.set()
            await self.release.wait()


class _HeldBefore:
    """``delete_where`` of the real store, held once before it deletes until released."""

    def __init__(self, delete_where: Callable[[VectorFilter], Awaitable[None]]) -> None:
        self._delete_where = delete_where
        self.reached = anyio.Event()
        self.release = anyio.Event()

    async def __call__(self, flt: VectorFilter) -> None:
        if not self.reached.is_set():
            self.reached.set()
            await self.release.wait()
        await self._delete_where(flt)


async def _outcome(write: Awaitable[Any]) -> Any:
    """What the write returned, or the library error it raised."""
    try:
        return await write
    except cpersona.CpersonaError as exc:
        return exc


async def _assert_lost_or_whole(engine: cpersona.Engine, outcome: object, refs: Sequence[str]) -> None:
    """Lost: refused as a write to an agent being deleted, nothing of it left. Whole: every ref it stored
    is in Redis with its vector, or gone with the agent (record and vector)."""
    assert engine.backends.vectors is not None
    ids = [ref.partition(":")[2] for ref in refs]
    if isinstance(outcome, Exception):
        assert isinstance(outcome, cpersona.AgentBeingDeleted), repr(outcome)
        assert outcome.status == 409
    for ref, record_id in zip(refs, ids, strict=True):
        found = await engine.backends.records.get(
            "memory" if ref.startswith("mem:") else "episode", record_id
        )
        vector = await engine.backends.vectors.existing([record_id])
        assert (found is None) == (not vector), (ref, found, vector)


@pytest.mark.parametrize("kind", ["single", "batch", "episode"])
async def test_a_write_held_after_its_vector_loses_to_the_delete(
    vector_engine: cpersona.Engine, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """The write's vector is in before the delete begins and its document would land after the delete
    ended: the delete removed the vector, so the document must not be written."""
    assert vector_engine.backends.vectors is not None
    await vector_engine.store("a note the victim had before", agent_id=VICTIM)
    held = _HeldAfter(vector_engine.backends.vectors.upsert)
    monkeypatch.setattr(vector_engine.backends.vectors, "upsert", held)
    outcome: list[object] = []

    async def write() -> None:
        outcome.append(await _outcome(_write(vector_engine, kind, "written while the agent was deleted")))

    with anyio.fail_after(_WAIT_SECS):
        async with anyio.create_task_group() as tg:
            tg.start_soon(write)
            await held.reached.wait()
            await vector_engine.delete_agent_data(VICTIM)
            held.release.set()
    monkeypatch.undo()
    assert await _half_stored(vector_engine, VICTIM) == []
    assert isinstance(outcome[0], cpersona.AgentBeingDeleted), outcome
    stats = await vector_engine.stats(VICTIM)
    assert (stats["memories"], stats["episodes"], stats["vectors"]) == (0, 0, 0)
    # Its claims went with it: the same write is stored afresh.
    refs = await _write(vector_engine, kind, "written while the agent was deleted")
    assert await _half_stored(vector_engine, VICTIM) == []
    assert (await vector_engine.stats(VICTIM))["vectors"] == len(refs)


@pytest.mark.parametrize("kind", ["single", "batch", "episode"])
async def test_a_write_while_the_delete_runs_is_refused(
    vector_engine: cpersona.Engine, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """The delete has swept Redis and not yet deleted the vectors: a whole write meanwhile would leave a
    document whose vector the delete then removes."""
    assert vector_engine.backends.vectors is not None
    await vector_engine.store("a note the victim had before", agent_id=VICTIM)
    held = _HeldBefore(vector_engine.backends.vectors.delete_where)
    monkeypatch.setattr(vector_engine.backends.vectors, "delete_where", held)
    outcome: list[object] = []

    with anyio.fail_after(_WAIT_SECS):
        async with anyio.create_task_group() as tg:
            tg.start_soon(vector_engine.delete_agent_data, VICTIM)
            await held.reached.wait()
            outcome.append(await _outcome(_write(vector_engine, kind, "written while the agent was deleted")))
            held.release.set()
    monkeypatch.undo()
    assert await _half_stored(vector_engine, VICTIM) == []
    assert isinstance(outcome[0], cpersona.AgentBeingDeleted), outcome
    assert outcome[0].code == "AGENT_BEING_DELETED"
    assert (await vector_engine.stats(VICTIM))["vectors"] == 0
    # The fence is down once the delete has returned.
    assert (await vector_engine.store("after the delete", agent_id=VICTIM)).result == "stored"


async def test_an_update_held_after_its_vector_does_not_bring_the_record_back(
    vector_engine: cpersona.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert vector_engine.backends.vectors is not None
    stored = await vector_engine.store("the text before the update", agent_id=VICTIM)
    held = _HeldAfter(vector_engine.backends.vectors.upsert)
    monkeypatch.setattr(vector_engine.backends.vectors, "upsert", held)
    outcome: list[object] = []

    async def update() -> None:
        outcome.append(
            await _outcome(vector_engine.update(stored.ref, agent_id=VICTIM, content="the new text"))
        )

    with anyio.fail_after(_WAIT_SECS):
        async with anyio.create_task_group() as tg:
            tg.start_soon(update)
            await held.reached.wait()
            await vector_engine.delete_agent_data(VICTIM)
            held.release.set()
    monkeypatch.undo()
    assert await _half_stored(vector_engine, VICTIM) == []
    assert isinstance(outcome[0], cpersona.AgentBeingDeleted), outcome
    assert await vector_engine.backends.records.get("memory", stored.id) is None
    assert await vector_engine.backends.vectors.existing([stored.id]) == set()


async def test_writers_racing_deletes_leave_no_record_half_stored(vector_engine: cpersona.Engine) -> None:
    """Single, batch and episode writers store for the victim while its data is deleted, round after
    round. Every record of the agent has its vector or a pending mark; every write that failed failed
    as one to an agent being deleted, and left nothing; every one that succeeded is whole or gone."""
    for round_ in range(5):
        race = _Race(vector_engine, round_)
        with anyio.fail_after(_WAIT_SECS * 4):
            await race.run()
        assert await _half_stored(vector_engine, VICTIM) == [], f"round {round_}"
        for outcome, refs in race.results:
            await _assert_lost_or_whole(vector_engine, outcome, refs)


class _Race:
    """One round: six writers each store until it has had a write answered, the agent's data is
    deleted, and each writer stores twice more after the delete returned."""

    WRITERS = ("single", "single", "single", "batch", "batch", "episode")

    def __init__(self, engine: cpersona.Engine, round_: int) -> None:
        self.engine = engine
        self.round = round_
        self.results: list[tuple[object, Write]] = []
        self.answered = [0] * len(self.WRITERS)
        self.started = anyio.Event()
        self.deleted = anyio.Event()

    async def run(self) -> None:
        async with anyio.create_task_group() as tg:
            for n, kind in enumerate(self.WRITERS):
                tg.start_soon(self._writer, n, kind)
            await self.started.wait()
            await self.engine.delete_agent_data(VICTIM)
            self.deleted.set()

    async def _writer(self, n: int, kind: str) -> None:
        after = step = 0
        while after < 2:
            step += 1
            text = f"round {self.round} writer {n} write {step}"
            outcome = await _outcome(_write(self.engine, kind, text))
            self.results.append((outcome, () if isinstance(outcome, Exception) else outcome))
            self.answered[n] += 1
            if all(self.answered):
                self.started.set()
            after += self.deleted.is_set()


async def test_http_answers_409_while_the_agent_is_being_deleted(
    settings: Settings,
    redis: RedisClient,
    serve_asgi: Callable[[Starlette], AbstractAsyncContextManager[httpx.AsyncClient]],
) -> None:
    """Every record write of the agent is refused while its fence is up; another agent's is not."""
    keys = Keys(settings.key_prefix)
    app = create_app(settings.with_(qdrant_url=":memory:", embedding_mode="none"), background=False)
    async with serve_asgi(app) as client:
        await redis.set(keys.agent_fence(VICTIM), 1, px=60_000)
        for path, body in (
            ("/v1/encode", {"content": "a note", "agent_id": VICTIM}),
            ("/v1/encode/batch", {"records": [{"content": "a note", "agent_id": VICTIM}]}),
            ("/v1/episodes", {"summary": "a session", "agent_id": VICTIM}),
            ("/v1/encode/raw", {"content": "a turn", "agent_id": VICTIM, **_RAW}),
        ):
            refused = await client.post(path, json=body)
            assert refused.status_code == 409, (path, refused.text)
            assert refused.json()["error"]["code"] == "AGENT_BEING_DELETED"
        profile = await client.put(f"/v1/profile/{VICTIM}", json={"profile": "terse"})
        assert profile.status_code == 409, profile.text
        other = await client.post("/v1/encode", json={"content": "a note", "agent_id": "bystander"})
        assert other.status_code == 200, other.text
        await redis.delete(keys.agent_fence(VICTIM))
        after = await client.post("/v1/encode", json={"content": "a note", "agent_id": VICTIM})
        assert after.status_code == 200, after.text


async def test_a_fence_left_by_a_delete_that_died_lapses(vector_engine: cpersona.Engine) -> None:
    """A delete killed with its fence up cannot lower it: the fence has a lifetime of its own."""
    fence = vector_engine.keys.agent_fence(VICTIM)
    await vector_engine.backends.records.raise_fence(VICTIM, fence_secs=FENCE_SECS, bound_secs=60.0)
    assert 0 < await vector_engine.backends.stores.redis.pttl(fence) <= FENCE_SECS * 1000
    assert (
        0
        < await vector_engine.backends.stores.redis.pttl(vector_engine.keys.agent_fence_seq(VICTIM))
        <= 60_000
    )
    with pytest.raises(cpersona.AgentBeingDeleted):
        await vector_engine.store("refused while the fence stands", agent_id=VICTIM)
    await vector_engine.backends.stores.redis.delete(fence)  # as Redis does once its lifetime has run out
    assert (await vector_engine.store("stored once it lapsed", agent_id=VICTIM)).result == "stored"


async def test_a_delete_that_fails_lowers_its_fence(
    vector_engine: cpersona.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def refused(*args: object, **kwargs: object) -> None:
        raise cpersona.VectorStoreUnavailable("the vector store is down")

    assert vector_engine.backends.vectors is not None
    await vector_engine.store("stored before the delete", agent_id=VICTIM)
    monkeypatch.setattr(vector_engine.backends.vectors, "delete_where", refused)
    with pytest.raises(cpersona.VectorStoreUnavailable):
        await vector_engine.delete_agent_data(VICTIM)
    monkeypatch.undo()
    assert not await vector_engine.backends.stores.redis.exists(vector_engine.keys.agent_fence(VICTIM))
    assert (await vector_engine.store("stored after the failed delete", agent_id=VICTIM)).result == "stored"
