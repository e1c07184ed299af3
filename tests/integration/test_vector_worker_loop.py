"""The child's request loop itself (``edge_worker.serve``), driven over pipes in this process: every
request answered once, ``close`` answered after all the others, and a broken input still closing the
shard."""

from __future__ import annotations

import os
import pickle
import threading
import uuid
from typing import IO, TYPE_CHECKING, Any

import numpy as np
import pytest

from cpersona.stores.vectors.edge_worker import read_frame, serve, write_frame

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    import numpy.typing as npt

DIM = 4


class _Child:
    """``serve`` in a thread, with this side's ends of its two pipes."""

    def __init__(self) -> None:
        to_child, self._requests = os.pipe()
        self._replies, from_child = os.pipe()
        self.requests: IO[bytes] = os.fdopen(self._requests, "wb")
        self.replies: IO[bytes] = os.fdopen(self._replies, "rb")
        self._source = os.fdopen(to_child, "rb")
        self._sink = os.fdopen(from_child, "wb")
        self.failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run)
        self._thread.start()

    def _run(self) -> None:
        try:
            serve(self._source, self._sink)
        except BaseException as exc:
            self.failure = exc
        finally:
            self._sink.close()

    def send(self, *requests: tuple[Any, ...]) -> None:
        self.requests.write(b"".join(write_frame(r) for r in requests))
        self.requests.flush()

    def all_replies(self) -> list[tuple[Any, ...]]:
        out = []
        while (reply := read_frame(self.replies)) is not None:
            out.append(reply)
        return out

    def join(self) -> None:
        self.requests.close()
        # No time bound of its own: a loop that never ends is caught by the suite's per-test timeout.
        self._thread.join()
        self.replies.close()
        self._source.close()


@pytest.fixture
def child() -> Iterator[_Child]:
    running = _Child()
    yield running
    running.join()


def _open(path: Path) -> tuple[Any, ...]:
    return (0, "open", (str(path), DIM, None, None, {"agent_id": "tenant"}, "test shard"))


def _point(k: int) -> tuple[list[str], npt.NDArray[np.float32], list[dict[str, Any]]]:
    """The arguments of an ``upsert`` of one point (the columns the parent sends)."""
    payload = {"kind": "memory", "parent": f"p{k}", "seq": k, "timestamp": float(k), "agent_id": "a"}
    return [str(uuid.UUID(int=k + 1))], np.array([[1.0, float(k), 0.5, -1.0]], dtype=np.float32), [payload]


def test_every_request_is_answered_once_and_close_after_all_others(child: _Child, tmp_path: Path) -> None:
    child.send(_open(tmp_path / "shard"))
    first = read_frame(child.replies)
    assert first is not None
    assert first[:2] == (0, True)
    scope = [("match", "agent_id", ("a",))]
    writes = [(k, "upsert", _point(k)) for k in range(1, 31)]
    reads = [(100 + k, "search", ([1.0, 0.0, 0.0, 0.0], scope, 5)) for k in range(30)]
    # Sent in one go, interleaved, so the threads pick them up while others still run.
    child.send(*(r for pair in zip(writes, reads, strict=True) for r in pair))
    child.send((999, "count", (None,)), (1000, "close", ()))
    replies = child.all_replies()
    ids = [reply[0] for reply in replies]
    assert sorted(ids) == sorted([r[0] for r in writes + reads] + [999, 1000])
    assert ids[-1] == 1000
    assert all(ok for _, ok, _ in replies), [value for _, ok, value in replies if not ok]
    by_id = {reply[0]: reply[2] for reply in replies}
    # The count was read after every upsert had been read, but may run beside the last of them.
    assert 0 <= by_id[999] <= 30
    assert all(len(by_id[100 + k]) <= 5 for k in range(30))
    assert child.failure is None


def test_the_shard_closes_when_the_input_ends_and_reopens_with_its_points(tmp_path: Path) -> None:
    path = tmp_path / "shard"
    first = _Child()
    first.send(_open(path), *((k, "upsert", _point(k)) for k in range(1, 6)))
    first.requests.close()  # no close request: the parent went away
    replies = first.all_replies()
    first.join()
    assert [r[0] for r in replies[:1]] == [0]
    assert sorted(r[0] for r in replies[1:]) == [1, 2, 3, 4, 5]
    assert first.failure is None
    # Closed in order: the write-ahead log is free again and the writes are there.
    second = _Child()
    second.send(_open(path), (7, "count", (None,)), (8, "close", ()))
    again = second.all_replies()
    second.join()
    assert again[0][:2] == (0, True)
    assert (7, True, 5) in again


def test_an_unreadable_frame_ends_the_loop_with_its_error_and_closes_the_shard(tmp_path: Path) -> None:
    path = tmp_path / "shard"
    broken = _Child()
    broken.send(_open(path), (1, "upsert", _point(1)))
    assert read_frame(broken.replies) is not None  # open
    garbage = b"\x05\x00\x00\x00not a pickle"[:9]
    broken.requests.write(garbage)
    broken.requests.flush()
    replies = broken.all_replies()
    broken.join()
    assert [r[0] for r in replies] == [1]
    assert isinstance(broken.failure, pickle.UnpicklingError | EOFError | ValueError)
    reopened = _Child()
    reopened.send(_open(path), (2, "count", (None,)), (3, "close", ()))
    counted = reopened.all_replies()
    reopened.join()
    assert (2, True, 1) in counted
