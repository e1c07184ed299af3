"""``cpersona import``'s progress bar: it reaches a batch's lines only once their blocks are built.

In-process, a one-shot command has no block worker, so the import builds the blocks itself; the bar
used to reach 100 % before that phase started (which, with an embedder, is most of the time).
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

import anyio
from tqdm import tqdm

from cpersona.edges.cli.importing import _Importer
from cpersona.settings import Settings

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from cpersona.edges.cli.service import Validated


class _Recorder:
    """A service that notes, at each call, how far the bar had got."""

    where: str | None = None

    def __init__(self, bar: tqdm[Any]) -> None:
        self.settings = Settings()
        self.bar = bar
        self.calls: list[tuple[str, float]] = []

    async def store_batch(self, batch: Sequence[Validated]) -> dict[str, Any]:
        self.calls.append(("store", self.bar.n))
        return {"ok": True, "stored": len(batch), "skipped": 0, "results": []}

    async def drain_blocks(self) -> int | None:
        self.calls.append(("blocks", self.bar.n))
        return 2


async def test_the_bar_covers_the_block_building(tmp_path: Path) -> None:
    path = tmp_path / "four.jsonl"
    path.write_text("".join(f'{{"content": "memory {n}"}}\n' for n in range(4)))
    bar = tqdm(total=4, file=io.StringIO())
    service = _Recorder(bar)
    importer = _Importer(service, bar, "agent", 2, stop_on_error=True)  # type: ignore[arg-type]
    assert await importer.run(anyio.Path(path)) is None
    # Each batch's blocks are built before the bar moves past the batch.
    assert service.calls == [("store", 0), ("blocks", 0), ("store", 2), ("blocks", 2)]
    assert bar.n == 4
    assert (importer.stored, importer.built) == (4, 4)
