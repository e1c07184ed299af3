"""The server the command line runs freezes its heap once the engine is open (``cpersona.edges.heap``);
an app built for a test or an embedding application does not touch the collector. Each case runs in a
child process: freezing this test process's heap would outlive the test."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pathlib import Path

_CHILD = textwrap.dedent(
    """
    import gc, sys
    from pathlib import Path
    import anyio
    from cpersona import Settings
    from cpersona.edges.http.app import create_app

    async def main() -> None:
        settings = Settings(data_dir=Path(sys.argv[1]), embedding_mode="none")
        app = create_app(settings, owns_process=sys.argv[2] == "owns")
        before = gc.get_freeze_count()
        async with app.router.lifespan_context(app):
            print(before, gc.get_freeze_count())

    anyio.run(main)
    """
)


@pytest.mark.parametrize(("owns", "frozen"), [("owns", True), ("library", False)])
def test_only_a_server_that_owns_its_process_freezes_the_heap(
    tmp_path: Path, owns: str, frozen: bool
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(tmp_path / "data"), owns],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    before, during = map(int, done.stdout.split())
    assert before == 0
    assert (during > 0) is frozen
