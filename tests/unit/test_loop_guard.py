"""The guard conftest puts around the async tests: a blocking call the package makes on the event loop's
thread fails the test; the same call in a worker thread does not, nor does a test's own file I/O."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from blockbuster import BlockingError

from cpersona.stores.redis.shutdown import pid_gone

HERE = Path(__file__)


async def test_a_file_read_by_the_package_on_the_loop_raises() -> None:
    # pid_gone reads /proc/<pid>/stat: a blocking call, harmless only in a worker thread.
    with pytest.raises(BlockingError, match=r"BufferedReader\.read"):
        pid_gone(os.getpid())


async def test_the_same_call_in_a_worker_thread_passes() -> None:
    assert not await anyio.to_thread.run_sync(pid_gone, os.getpid())


async def test_a_tests_own_file_read_is_not_the_packages() -> None:
    assert HERE.read_bytes().startswith(b'"""The guard')  # noqa: ASYNC240 - the test's own setup
