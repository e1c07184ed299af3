"""The free-space floor: under CPERSONA_MIN_FREE_MB every write is refused (507), reads go on serving.

No disk is filled: the floor is set above the free space of the test's own data dir, or the reading of
the disk is replaced by one that reports it full.
"""

from __future__ import annotations

import logging
import shutil
from typing import TYPE_CHECKING

import pytest

import cpersona
from cpersona.edges.cli import service
from cpersona.edges.http.app import create_app
from cpersona.engine import disk, lifecycle
from cpersona.settings import Settings
from cpersona.stores.protocols import VectorFilter

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from contextlib import AbstractAsyncContextManager
    from pathlib import Path

    import httpx
    from starlette.applications import Starlette

AGENT = "disk-agent"
RAW = {
    "agent_id": AGENT, "content": "a raw entry", "session_id": "s1", "source": "conversation",
    "speaker": "user", "visibility": "normal", "secrecy_level": "public",
}  # fmt: skip


def _over_free_space(path: Path) -> int:
    """A floor well above the free space of ``path``'s disk (margin for other writers freeing space)."""
    return shutil.disk_usage(path).free // (1024 * 1024) + 1024


async def _stored_ref(data_dir: Path) -> str:
    async with cpersona.open(data_dir=data_dir, embedding_mode="none", background=False) as memory:
        return (await memory.store("the office moves to Leeds", agent_id=AGENT)).ref


async def test_every_write_is_refused_under_the_floor_and_reads_still_answer(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ref = await _stored_ref(tmp_path)
    floor = _over_free_space(tmp_path)
    writes: tuple[Callable[[cpersona.Engine], Awaitable[object]], ...] = (
        lambda m: m.store("another memory", agent_id=AGENT),
        lambda m: m.store_batch([{"agent_id": AGENT, "content": "a batch"}]),
        lambda m: m.store_raw_batch([RAW]),
        lambda m: m.archive_episode("a session", agent_id=AGENT),
        lambda m: m.update(ref, agent_id=AGENT, content="the office moves to York"),
        lambda m: m.update_profile(AGENT, "likes tea"),
        lambda m: m.declare_associations(AGENT, {"entities": [{"name": "Ann"}]}),
    )
    caplog.set_level(logging.ERROR, logger="cpersona.disk")
    async with cpersona.open(
        data_dir=tmp_path, embedding_mode="none", background=False, min_free_mb=floor
    ) as memory:
        for write in writes:
            with pytest.raises(cpersona.InsufficientStorage) as refused:
                await write(memory)
            assert refused.value.status == 507
            assert refused.value.floor_mb == floor
            assert str(tmp_path) not in str(refused.value)
            assert isinstance(refused.value, cpersona.BackendUnavailable)
        kept = await memory.get(ref, agent_id=AGENT)
        assert isinstance(kept, cpersona.MemoryRecord)
        assert kept.content == "the office moves to Leeds"
        rows = (await memory.recall("office", agent_id=AGENT)).rows
        assert [row.ref for row in rows] == [ref]
    # One log line for the seven refusals: a burst does not flood the log.
    assert len([r for r in caplog.records if r.name == "cpersona.disk"]) == 1


async def test_http_answers_507_for_a_write_and_serves_reads(
    tmp_path: Path,
    serve_asgi: Callable[[Starlette], AbstractAsyncContextManager[httpx.AsyncClient]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    ref = await _stored_ref(tmp_path)
    caplog.set_level(logging.WARNING)
    settings = Settings(data_dir=tmp_path, embedding_mode="none", min_free_mb=_over_free_space(tmp_path))
    async with serve_asgi(create_app(settings, background=False)) as client:
        refused = await client.post("/v1/encode", json={"agent_id": AGENT, "content": "more"})
        assert refused.status_code == 507
        error = refused.json()["error"]
        assert error["code"] == "INSUFFICIENT_STORAGE"
        assert "MB free" in error["message"]
        assert str(tmp_path) not in error["message"]
        got = await client.get(f"/v1/records/{ref}", params={"agent_id": AGENT})
        assert got.status_code == 200
        recalled = await client.post("/v1/recall/query", json={"agent_id": AGENT, "query": "office"})
        assert recalled.status_code == 200
        assert [row["ref"] for row in recalled.json()["rows"]] == [ref]
        again = await client.post("/v1/encode", json={"agent_id": AGENT, "content": "still more"})
        assert again.status_code == 507
    # The floor's own line and the start-up's put-off repairs, not one per refused request from the edge.
    logged = [r.name for r in caplog.records if r.levelno >= logging.WARNING]
    assert logged == ["cpersona.disk", "cpersona.engine"]


async def test_a_floor_of_zero_turns_the_check_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with cpersona.open(data_dir=tmp_path, embedding_mode="none", background=False, min_free_mb=0) as m:
        # The disk fills under an engine that started with room (one that starts on a full disk is
        # read-only at any floor: tests/integration/test_tight_disk_start.py).
        monkeypatch.setattr(disk, "_measure", lambda directory: 0)
        disk._readings.clear()
        assert (await m.store("on a full disk", agent_id=AGENT)).result == "stored"
    full = Settings(data_dir=tmp_path, embedding_mode="none", min_free_mb=1)
    with pytest.raises(cpersona.InsufficientStorage):
        await disk.check_free_space(full)


def test_only_embedded_stores_are_watched(tmp_path: Path) -> None:
    both = Settings(data_dir=tmp_path)
    assert [d for _, d in disk.watched_stores(both)] == [tmp_path / "redis", tmp_path / "qdrant"]
    remote = both.with_(redis_url="redis://db:6379", qdrant_url="http://qdrant:6333")
    assert disk.watched_stores(remote) == []
    assert Settings().min_free_mb == 256


async def test_a_reading_is_reused_within_its_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[Path] = []

    def measure(directory: Path) -> int:
        calls.append(directory)
        return 10**12

    monkeypatch.setattr(disk, "_measure", measure)
    settings = Settings(data_dir=tmp_path, embedding_mode="none", min_free_mb=1)
    for _ in range(50):
        await disk.check_free_space(settings)
    assert calls == [tmp_path / "redis"]


async def test_the_block_builder_holds_its_batch_under_the_floor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    free = {"bytes": 10**12}
    monkeypatch.setattr(disk, "_measure", lambda directory: free["bytes"])
    async with cpersona.open(data_dir=tmp_path, background=False, min_free_mb=1) as memory:
        assert memory.backends.blocks is not None
        blocks = VectorFilter(agent_id=AGENT, kinds=("block",))
        await memory.store("the office moves to Leeds in March", agent_id=AGENT)
        free["bytes"] = 0
        disk._readings.clear()
        with pytest.raises(cpersona.InsufficientStorage):
            await memory.drain_blocks()
        assert await memory.backends.blocks.count(blocks) == 0
        free["bytes"] = 10**12
        disk._readings.clear()
        # The refused batch stayed queued: it is built once the disk has room again.
        assert await memory.drain_blocks() == 1
        assert await memory.backends.blocks.count(blocks) == 1


async def test_start_up_repairs_wait_while_the_disk_is_under_the_floor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    ref = await _stored_ref(tmp_path)
    repairs: list[str] = []

    async def finish_pending(backends: object) -> int:
        repairs.append("finish")
        return 0

    async def sweep_abandoned(backends: object, older_than_secs: float) -> int:
        repairs.append("sweep")
        return 0

    monkeypatch.setattr(lifecycle, "finish_pending", finish_pending)
    monkeypatch.setattr(lifecycle, "sweep_abandoned", sweep_abandoned)
    caplog.set_level(logging.ERROR, logger="cpersona.engine")
    tight = _over_free_space(tmp_path)
    async with cpersona.open(
        data_dir=tmp_path, embedding_mode="none", background=False, min_free_mb=tight
    ) as memory:
        assert repairs == []
        assert (await memory.get(ref, agent_id=AGENT)).ref == ref
    assert any("waits for the next start" in r.getMessage() for r in caplog.records)
    async with cpersona.open(data_dir=tmp_path, embedding_mode="none", background=False, min_free_mb=0):
        assert repairs == ["sweep", "finish"]


def test_the_cli_reads_a_507_as_a_backend_to_retry_later() -> None:
    body = {"error": {"code": "INSUFFICIENT_STORAGE", "message": "writes are refused: 3 MB free"}}
    refused = service._error(507, body)
    assert isinstance(refused, cpersona.BackendUnavailable)
    assert "3 MB free" in str(refused)
