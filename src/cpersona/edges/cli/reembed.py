"""``cpersona reembed``: make every stored vector again with the configured model, with a progress bar.

In-process only, like ``optimize``: it needs the store to itself (no server may be serving it), and an
engine of another model than the store's refuses to open it for anything else.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from cpersona.edges.cli.outcomes import EXIT_FAILED, EXIT_OK
from cpersona.edges.cli.service import ServerRefused, server_url
from cpersona.engine.reembed import reembed

if TYPE_CHECKING:
    import argparse

    from cpersona.settings import Settings

__all__ = ["reembed_command"]


async def reembed_command(settings: Settings, args: argparse.Namespace) -> int:
    url = server_url(settings)
    if url is not None:
        raise ServerRefused(
            f"the server at {url} holds the data dir, and reembed runs only in-process: stop the server, "
            "run reembed, start it again"
        )
    started = time.monotonic()
    # Shown on a pipe too (not only on a terminal), so a log of the run shows how far it got.
    bar: tqdm[Any] = tqdm(desc="reembed", unit="rec", file=sys.stderr, disable=args.no_progress)

    def progress(done: int, total: int) -> None:
        bar.total = total
        bar.update(done - bar.n)

    try:
        result = await reembed(settings, progress)
    finally:
        bar.close()
    print(
        f"re-embedded {result.records} record(s) with {result.model} and rebuilt {result.blocks} block "
        f"event(s) in {time.monotonic() - started:.1f} s"
    )
    if result.pending:
        print(
            f"{result.pending} record(s) are still pending (the embedder or the vector store failed for "
            "them); the next start, or reembed again, retries them",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return EXIT_OK
