"""mem0 (PyPI ``mem0ai``) with ``infer=False`` as a system of the quality harness.

The version is pinned (:data:`VERSION`, the one the package lists of this workplace name). ``pip install
--dry-run`` into our venv showed no version clash, but it would add a dozen packages (openai, posthog,
SQLAlchemy, protobuf ...) that only this benchmark uses; so mem0 gets its own venv under
``benchmarks/.cache/peers/mem0ai-<version>``, like CPersona 2.6.14, and runs in a worker subprocess
(``_mem0_worker.py``). mem0 is synchronous and its embedded Qdrant blocks, which a subprocess also keeps
off our event loop.

Configuration (all through mem0's own config and environment):

* ``infer=False``: each turn is stored verbatim as one memory, no LLM call;
* local Qdrant (``qdrant-client``'s embedded engine, in memory), one ``user_id`` per corpus key, so a
  question only searches its own conversation;
* embedder: mem0's stock ``openai`` provider with ``openai_base_url`` pointed at the benchmark's loopback
  server (its OpenAI-compatible route), which serves the run's MiniLM vectors: the same vectors as
  ``dense``; ``embedding_dims`` 384;
* telemetry off: ``MEM0_TELEMETRY=False``; ``MEM0_DIR`` inside the temporary folder;
* search: ``Memory.search(question, filters={"user_id": ...}, top_k=k)`` at mem0's defaults, which
  include a similarity threshold of 0.1 (rows under it are not returned).

mem0 2.x blends a BM25 score (fastembed) and an entity boost (spaCy) into its search when those optional
packages are installed; a plain ``pip install mem0ai`` has neither (and fastembed's BM25 model would come
from a model hub, unreachable here), so its ranking is the semantic one. The worker reports which of the
two it found, and :func:`honesty_check` verifies the ranking against a direct cosine.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Final

from benchmarks.peers._process import PeerError
from benchmarks.peers._system import PeerSystem, peer_environment
from benchmarks.peers._venv import PeerVenv

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from benchmarks.peers.embed_server import EmbedServer, Source
    from benchmarks.quality.systems import Unit

__all__ = ["DEFAULT_THRESHOLD", "VERSION", "Mem0", "expected_ranking"]

VERSION: Final = "2.2.1"
DEFAULT_THRESHOLD: Final = 0.1
"""``Memory.search``'s default ``threshold``: rows whose cosine is below it are left out."""


class Mem0(PeerSystem):
    """mem0 with ``infer=False`` in its own interpreter (see the module docstring)."""

    venv = PeerVenv(f"mem0ai-{VERSION}", (f"mem0ai=={VERSION}",))
    script = "_mem0_worker.py"

    def __init__(self, source: Source, *, name: str = "mem0") -> None:
        super().__init__(source, name=name)
        self.recall_ms: list[float] = []
        self.scores: dict[tuple[str, str], list[float]] = {}
        """(corpus key, question) -> the scores mem0 returned, in its order (for the honesty check)."""

    def environment(self, server: EmbedServer, work_dir: Path) -> dict[str, str]:
        return peer_environment({"MEM0_TELEMETRY": "False", "MEM0_DIR": str(work_dir / "mem0")})

    def arguments(self, server: EmbedServer, work_dir: Path) -> list[str]:
        return [server.openai_base_url]

    def check_hello(self, hello: dict[str, Any]) -> None:
        if hello.get("version") != VERSION:
            raise PeerError(f"{self.name}: mem0ai {hello.get('version')!r} answered, wanted {VERSION}")
        if hello.get("telemetry") is not False:
            raise PeerError(
                f"{self.name}: telemetry is {hello.get('telemetry')!r} despite MEM0_TELEMETRY=False"
            )

    def describe(self) -> list[str]:
        hello = self.hello
        hybrid = [name for name in ("fastembed", "spacy") if hello.get(name)]
        served = f"{self.server.texts} texts in {self.server.requests} requests" if self.server else "nothing"
        return [
            f"PyPI `mem0ai=={hello.get('version')}` (qdrant-client {hello.get('qdrant_client')}) in its own "
            f"venv (Python {hello.get('python')}), `infer=False`, local Qdrant, telemetry off; hybrid extras "
            f"installed: {', '.join(hybrid) or 'none (semantic search only)'}; search threshold "
            f"{DEFAULT_THRESHOLD} (mem0's default); the loopback OpenAI-compatible route served {served}",
        ]

    async def index(self, conv_id: str, units: Sequence[Unit]) -> None:
        records = [
            {"content": unit.content, "msg_id": unit.unit_id, "metadata": unit.metadata} for unit in units
        ]
        replies = await self.store_chunks(conv_id, records)
        stored = sum(len(reply["ids"]) for reply in replies)
        if stored != len(units):
            raise PeerError(f"{self.name}: {stored} memories added for {len(units)} units of {conv_id}")

    async def search(self, conv_id: str, question: str, k: int) -> list[str]:
        reply = await self.call("recall", agent=conv_id, query=question, limit=k)
        self.recall_ms.append(float(reply["elapsed_ms"]))
        self.scores[(conv_id, question)] = [float(row["score"]) for row in reply["rows"]]
        ids: list[str] = []
        for row in reply["rows"]:
            if row["msg_id"] and row["msg_id"] not in ids:
                ids.append(row["msg_id"])
        return ids[:k]


def expected_ranking(cosines: Sequence[float], k: int, threshold: float = DEFAULT_THRESHOLD) -> list[int]:
    """Positions mem0 should return: the top ``k`` by cosine, best first (ties by position), at or above
    ``threshold``. This is the whole of its ranking when neither hybrid extra is installed."""
    order = sorted(range(len(cosines)), key=lambda i: (-cosines[i], i))
    return [i for i in order[:k] if not math.isnan(cosines[i]) and cosines[i] >= threshold]
