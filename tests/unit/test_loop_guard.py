"""The guard conftest puts around the async tests: a blocking call on the event loop's thread fails the
test, the same call in a worker thread does not."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest
from blockbuster import BlockingError

HERE = Path(__file__)


async def test_a_sleep_on_the_loop_raises() -> None:
    with pytest.raises(BlockingError, match=r"time\.sleep"):
        time.sleep(0)  # noqa: ASYNC251 - the blocking call the guard must catch


async def test_a_file_read_on_the_loop_raises() -> None:
    with pytest.raises(BlockingError, match=r"BufferedReader\.read"):
        HERE.read_bytes()  # noqa: ASYNC240 - as above


async def test_the_same_calls_in_a_worker_thread_pass() -> None:
    await anyio.to_thread.run_sync(time.sleep, 0)
    assert (await anyio.to_thread.run_sync(HERE.read_bytes)).startswith(b'"""The guard')
